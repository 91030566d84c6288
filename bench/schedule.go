package bench

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Schedule is an open-loop arrival schedule: N slots, slot i due at
// Start + i*Interval, whatever happens to the work they start.
type Schedule struct {
	Start    time.Time
	Interval time.Duration
	N        int
}

// NewSchedule returns the schedule of perSecond slots per second for d,
// starting at start.
func NewSchedule(start time.Time, perSecond float64, d time.Duration) Schedule {
	interval := time.Duration(float64(time.Second) / perSecond)
	if interval <= 0 {
		interval = 1
	}
	return Schedule{Start: start, Interval: interval, N: int(d / interval)}
}

// Due is when slot i is due.
func (s Schedule) Due(i int) time.Time { return s.Start.Add(time.Duration(i) * s.Interval) }

// End is when the last slot is due plus one interval.
func (s Schedule) End() time.Time { return s.Due(s.N) }

// Slot is one unit of scheduled work.
type Slot struct {
	Index   int
	Due     time.Time
	Started time.Time // when a worker began it; Started - Due is the lag
}

// RunOpenLoop runs fn once for every slot of s on workers goroutines. A free
// worker takes the next slot in order and waits until it is due; a slot
// that is already due starts at once. A slow fn delays only the slots that
// find no free worker, and they then run back to back until the workers
// catch up: the due times never move, so a slow system faces the load it
// was offered, not less. It returns how late each slot started, in slot
// order, and the first error of fn (which stops the run).
func RunOpenLoop(ctx context.Context, s Schedule, workers int, fn func(ctx context.Context, worker int, slot Slot) error) ([]time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lags := make([]time.Duration, s.N)
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		done     atomic.Int64
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			for {
				i := int(next.Add(1) - 1)
				if i >= s.N || ctx.Err() != nil {
					return
				}
				due := s.Due(i)
				if wait := time.Until(due); wait > 0 {
					timer.Reset(wait)
					select {
					case <-ctx.Done():
						return
					case <-timer.C:
					}
				}
				slot := Slot{Index: i, Due: due, Started: time.Now()}
				lags[i] = max(0, slot.Started.Sub(due))
				if err := fn(ctx, w, slot); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return lags[:0], firstErr
	}
	if err := ctx.Err(); err != nil && int(done.Load()) < s.N {
		return slices.Clone(lags[:0]), err
	}
	return lags, nil
}
