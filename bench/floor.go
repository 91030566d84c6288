package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/proc"
	"github.com/pgoutbox/pgoutbox/replication"
)

// floorMethod describes the floor reader in the report.
const floorMethod = "pgoutbox bench floor: its own process and slot, the relay's receive loop (replication.Open, Stream.Run, decode), no Kafka"

// floorFlushEvery is how often the floor reader writes out what it
// received. Each event carries the time it was decoded, so this delays
// only when the bench learns of it, not the latency measured.
const floorFlushEvery = 10 * time.Millisecond

// RunFloor is the floor: it streams cfg's slot, which must exist, through
// the same receive loop and decoder as the relay (replication.Open and
// Stream.Run, with the relay's channel of batches between the reader and
// its consumer), and does nothing with a change but write the inserted
// row's id and the time its batch was handed over, as "ID UNIXNANO\n"
// lines, to out. It confirms every commit at once: it keeps nothing. It
// stops at the next transaction boundary once ctx ends.
//
// The relay does all of this and then encodes, produces to Kafka, waits for
// the ack and tracks the watermark, so it can approach the floor but not
// pass it.
func RunFloor(ctx context.Context, cfg replication.Config, out io.Writer, log *slog.Logger) error {
	s, err := replication.Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	stopWatch := context.AfterFunc(ctx, s.Stop)
	defer stopWatch()
	changes := make(chan *replication.Batch, 4) // as the relay's
	runErr := make(chan error, 1)
	go func() {
		defer close(changes)
		runErr <- s.Run(context.WithoutCancel(ctx), changes)
	}()

	bw := bufio.NewWriterSize(out, 64<<10)
	// Armed when a line is buffered, so that an idle floor never wakes.
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var (
		rel    *outbox.Relation
		idCol  = -1
		num    []byte
		werr   error
		flushC <-chan time.Time
	)
	for {
		select {
		case b, ok := <-changes:
			if !ok {
				err := <-runErr
				if werr == nil {
					werr = bw.Flush()
				}
				closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				return errors.Join(err, werr, s.Close(closeCtx))
			}
			at := time.Now()
			for i := range b.Changes {
				c := &b.Changes[i]
				if c.Kind != outbox.KindRow {
					s.Confirm(c.LSN)
					continue
				}
				if c.Relation != rel {
					rel, idCol = c.Relation, -1
					for i, col := range rel.Columns {
						if col.Name == "id" {
							idCol = i
						}
					}
				}
				if idCol < 0 || idCol >= len(c.Values) || werr != nil {
					continue
				}
				bw.Write(c.Values[idCol])
				bw.WriteByte(' ')
				num = strconv.AppendInt(num[:0], at.UnixNano(), 10)
				bw.Write(num)
				bw.WriteByte('\n')
			}
			b.Release()
			if flushC == nil {
				timer.Reset(floorFlushEvery)
				flushC = timer.C
			}
		case <-flushC:
			flushC = nil
			if werr == nil {
				// A reader that cannot report is useless, but it keeps
				// draining so the stream stops cleanly.
				werr = bw.Flush()
			}
		}
	}
}

// floorLines parses the floor process's output, "ID UNIXNANO" lines, and
// hands each event to fn. It is the floor process's stdout.
type floorLines struct {
	mu   sync.Mutex
	fn   func(id string, at time.Time)
	line []byte
	bad  int
}

func (w *floorLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.line = append(w.line, p...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			break
		}
		id, ns, ok := bytes.Cut(w.line[:i], []byte{' '})
		n, err := strconv.ParseInt(string(ns), 10, 64)
		if ok && err == nil && len(id) > 0 {
			w.fn(string(id), time.Unix(0, n))
		} else {
			w.bad++
		}
		w.line = w.line[i+1:]
	}
	// Keep the unfinished line only.
	w.line = append(w.line[:0:0], w.line...)
	return len(p), nil
}

// startFloor starts `pgoutbox bench floor` on slot, which must exist,
// handing every event it reads to fn. The database URL goes through the
// environment, not the command line.
func (b *bencher) startFloor(slot string, fn func(id string, at time.Time)) (*proc.Process, error) {
	args := []string{"bench", "floor", "--table", b.cfg.Table, "--slot", slot, "--publication", publication}
	env := []string{"PGOUTBOX_DATABASE_URL=" + b.cfg.DatabaseURL}
	p, err := proc.Start("pgoutbox bench floor", b.cfg.RelayBin, args, env, &floorLines{fn: fn})
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	return p, nil
}
