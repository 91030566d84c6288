package nemesis

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// monitor samples what the pipeline has confirmed, every period, from a
// connection of its own (reconnecting through restarts and the failover).
type monitor struct {
	url, slot string
	period    time.Duration

	mu      sync.Mutex
	samples []Confirmation

	cancel context.CancelFunc
	done   chan struct{}
}

func startMonitor(url, slot string, period time.Duration) *monitor {
	ctx, cancel := context.WithCancel(context.Background())
	m := &monitor{url: url, slot: slot, period: period, cancel: cancel, done: make(chan struct{})}
	go m.run(ctx)
	return m
}

func (m *monitor) run(ctx context.Context) {
	defer close(m.done)
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	tick := time.NewTicker(m.period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if conn == nil || conn.IsClosed() {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			c, err := pgx.Connect(cctx, m.url)
			cancel()
			if err != nil {
				continue
			}
			conn = c
		}
		c, err := sample(ctx, conn, m.slot)
		if err != nil {
			conn.Close(context.Background())
			conn = nil
			continue
		}
		m.mu.Lock()
		m.samples = append(m.samples, c)
		m.mu.Unlock()
	}
}

// sample reads the slot's confirmed position and the saved floor.
func sample(ctx context.Context, conn *pgx.Conn, slot string) (Confirmation, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var c Confirmation
	var lsn, floor *string
	err := conn.QueryRow(ctx, `SELECT (SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1),
  (SELECT floor_xid::text FROM pgoutbox_state WHERE pipeline = $1)`, slot).Scan(&lsn, &floor)
	if err != nil {
		return c, err
	}
	// Stamped once the answer is in: the pipeline had confirmed at least
	// this much by then.
	c.Time = time.Now()
	if lsn != nil {
		if l, err := pglogrepl.ParseLSN(*lsn); err == nil {
			c.SlotLSN = uint64(l)
		}
	}
	if floor != nil {
		c.FloorXID, _ = strconv.ParseUint(*floor, 10, 64)
	}
	return c, nil
}

func (m *monitor) stop() []Confirmation {
	m.cancel()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Confirmation(nil), m.samples...)
}
