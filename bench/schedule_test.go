package bench

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestOpenLoopDoesNotSlowDown: when every worker is stuck, the due times do
// not move. The slots that came due meanwhile run late, back to back, and
// the run still ends when the schedule does, not later by the stall.
func TestOpenLoopDoesNotSlowDown(t *testing.T) {
	const n, stall = 500, 300 * time.Millisecond
	s := Schedule{Start: time.Now().Add(10 * time.Millisecond), Interval: time.Millisecond, N: n}
	var mu sync.Mutex
	seen := make([]int, n)
	dues := make([]time.Time, n)
	lags, err := RunOpenLoop(context.Background(), s, 2, func(_ context.Context, _ int, slot Slot) error {
		if slot.Index < 2 {
			time.Sleep(stall) // both workers stall at the start
		}
		mu.Lock()
		seen[slot.Index]++
		dues[slot.Index] = slot.Due
		mu.Unlock()
		return nil
	})
	end := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if seen[i] != 1 {
			t.Fatalf("slot %d ran %d times, want once", i, seen[i])
		}
		if !dues[i].Equal(s.Start.Add(time.Duration(i) * time.Millisecond)) {
			t.Fatalf("slot %d due %v, want Start+%dms: the schedule moved", i, dues[i].Sub(s.Start), i)
		}
	}
	// Slot 100 was due at 100 ms but no worker was free until 300 ms.
	if lags[100] < 150*time.Millisecond {
		t.Errorf("slot 100 started %v late; the stall should show as lag", lags[100])
	}
	// After the stall the workers catch up: the last slot is on time.
	if lags[n-1] > 100*time.Millisecond {
		t.Errorf("last slot started %v late; the workers should have caught up", lags[n-1])
	}
	// A closed loop would end at stall + (n-2) intervals = 798 ms; the
	// open loop ends with its schedule, at about n intervals = 500 ms.
	if took := end.Sub(s.Start); took > 700*time.Millisecond {
		t.Errorf("run took %v; the stall pushed the schedule back", took)
	}
}

func TestOpenLoopStopsOnError(t *testing.T) {
	s := Schedule{Start: time.Now(), Interval: time.Millisecond, N: 1000}
	boom := errors.New("boom")
	_, err := RunOpenLoop(context.Background(), s, 3, func(_ context.Context, _ int, slot Slot) error {
		if slot.Index == 10 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
}

func TestNewSchedule(t *testing.T) {
	start := time.Now()
	s := NewSchedule(start, 2000, 30*time.Second)
	if s.Interval != 500*time.Microsecond || s.N != 60000 {
		t.Errorf("2000/s for 30s: interval %v, n %d; want 500µs, 60000", s.Interval, s.N)
	}
	if !s.End().Equal(start.Add(30 * time.Second)) {
		t.Errorf("End = %v after start, want 30s", s.End().Sub(start))
	}
}
