package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/faultproxy"
)

// Kafka is the broker a run uses, or the brokers of a cluster (Cluster):
// the harness can kill them and start them again on their data, and the
// relays reach each through a fault proxy.
type Kafka interface {
	// Brokers are the addresses the relays use, through Proxies.
	Brokers() []string
	// ReadBrokers are the addresses the checker reads from (the same
	// where the broker has no listener outside the proxy).
	ReadBrokers() []string
	// Proxies are in front of every broker.
	Proxies() []*faultproxy.Proxy
	// Kill sends SIGKILL to every broker and waits for the exits; Start
	// starts those that do not run again on their data, on the same
	// addresses, and waits until they serve (a cluster: until every
	// partition has all its replicas in sync again).
	Kill() error
	Start() error
}

// Env is the servers a run uses, set up by the test.
type Env struct {
	// Bin is the pgoutbox binary.
	Bin string
	// Primary and Standby (nil: no failover), a synchronous standby.
	Primary, Standby *pgcluster.Cluster
	// Major is the PostgreSQL major version.
	Major int
	// Links front the primary and the standby (in that order) for the
	// relays; the writers, the monitor and the faults connect directly.
	Links []*faultproxy.Proxy
	Kafka Kafka
}

// role is the relays' PostgreSQL role, which REPLICATION is taken from.
const role = "nemesis_relay"

// injector does and undoes the schedule's faults.
type injector struct {
	env    Env
	h      *History
	relays []*relay
	// slot is the pipeline's slot name; slotFailover waits for the
	// standby's copy before a failover (17 and later).
	slot         string
	slotFailover bool

	mu         sync.Mutex
	primary    *pgcluster.Cluster
	failedOver bool
	errs       []string
	locks      map[string]*sync.Mutex

	active  atomic.Int32
	lastEnd atomic.Int64 // unix nanoseconds of the last undo
	columns atomic.Int32
	wg      sync.WaitGroup
}

func newInjector(env Env, h *History, relays []*relay, slot string, slotFailover bool) *injector {
	return &injector{env: env, h: h, relays: relays, slot: slot, slotFailover: slotFailover,
		primary: env.Primary, locks: map[string]*sync.Mutex{}}
}

// run starts every fault at its offset from start; wait waits for them.
func (in *injector) run(ctx context.Context, start time.Time, s Schedule) {
	for i, f := range s.Faults {
		in.wg.Add(1)
		go func() {
			defer in.wg.Done()
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(f.At))):
			}
			in.inject(ctx, i, f)
		}()
	}
}

func (in *injector) wait() { in.wg.Wait() }

func (in *injector) lock(f Fault) *sync.Mutex {
	in.mu.Lock()
	defer in.mu.Unlock()
	r := f.Kind.resource(f.Relay)
	if in.locks[r] == nil {
		in.locks[r] = &sync.Mutex{}
	}
	return in.locks[r]
}

// inject does one fault, holds it for its duration and undoes it. A fault
// whose resource is still held by the one before (a slow restart) waits
// for it; the history has the times it really happened.
func (in *injector) inject(ctx context.Context, i int, f Fault) {
	l := in.lock(f)
	l.Lock()
	defer l.Unlock()
	in.active.Add(1)
	defer func() {
		in.lastEnd.Store(time.Now().UnixNano())
		in.active.Add(-1)
	}()
	in.h.Add(Event{Type: EventFaultStart, Fault: &f, Index: i})
	began := time.Now()
	undo, detail, err := in.do(ctx, f)
	if err != nil {
		in.failed(f, err)
	}
	if undo != nil {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(began.Add(f.Duration))):
		}
		if err := undo(); err != nil {
			in.failed(f, fmt.Errorf("undo: %w", err))
		}
	}
	in.h.Add(Event{Type: EventFaultEnd, Fault: &f, Index: i, Detail: detail})
}

func (in *injector) failed(f Fault, err error) {
	in.mu.Lock()
	in.errs = append(in.errs, fmt.Sprintf("%s: %v", f, err))
	in.mu.Unlock()
	in.h.Add(Event{Type: EventNote, Msg: "fault failed", Fault: &f, Detail: err.Error()})
}

// quiet tells whether no fault is active, and since when.
func (in *injector) quiet() (bool, time.Time) {
	return in.active.Load() == 0, time.Unix(0, in.lastEnd.Load())
}

func (in *injector) currentPrimary() *pgcluster.Cluster {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.primary
}

// do does f and returns what undoes it (nil: nothing to undo).
func (in *injector) do(ctx context.Context, f Fault) (undo func() error, detail string, err error) {
	switch f.Kind {
	case RelayKill:
		r := in.relays[f.Relay]
		pid := r.pid()
		r.kill()
		return r.start, fmt.Sprintf("pid %d", pid), nil
	case RelayTerm:
		r := in.relays[f.Relay]
		pid := r.pid()
		early, exit := r.term(30 * time.Second)
		detail := fmt.Sprintf("pid %d exit 0", pid)
		if early {
			detail = fmt.Sprintf("pid %d ended by the signal before it handled signals (started moments before)", pid)
		}
		if exit != nil {
			why := firstLine(exit.Error()) + ": " + exitReason(exit.Error())
			detail = fmt.Sprintf("pid %d: %s", pid, why)
			err = fmt.Errorf("SIGTERM: %s", why)
		}
		return r.start, detail, err
	case PostgresRestart:
		pg := in.currentPrimary()
		if err := pg.Stop(ctx, "immediate"); err != nil {
			return nil, "", err
		}
		return func() error { return pg.Restart(context.Background()) }, fmt.Sprintf("port %d", pg.Port), nil
	case Failover:
		return nil, "", in.failover(ctx)
	case KafkaKill:
		if err := in.env.Kafka.Kill(); err != nil {
			return nil, "", err
		}
		return in.env.Kafka.Start, "", nil
	case LeaderKill, TwoBrokersDown, RollingRestart, ControllerKill, DiskFull:
		c, ok := in.env.Kafka.(Cluster)
		if !ok {
			return nil, "", fmt.Errorf("nemesis: %s needs a Kafka cluster", f.Kind)
		}
		return in.clusterFault(ctx, c, f)
	case PartitionPostgres:
		for _, p := range in.env.Links {
			p.Blackhole()
		}
		return func() error {
			for _, p := range in.env.Links {
				p.Heal()
			}
			return nil
		}, "", nil
	case PartitionKafka:
		ps := in.env.Kafka.Proxies()
		for _, p := range ps {
			p.Blackhole()
		}
		return func() error {
			for _, p := range ps {
				p.Heal()
			}
			return nil
		}, "", nil
	case DelayPostgres:
		for _, p := range in.env.Links {
			p.Delay(f.Latency)
		}
		return func() error {
			for _, p := range in.env.Links {
				p.Delay(0)
			}
			return nil
		}, "", nil
	case DelayKafka:
		ps := in.env.Kafka.Proxies()
		for _, p := range ps {
			p.Delay(f.Latency)
		}
		return func() error {
			for _, p := range ps {
				p.Delay(0)
			}
			return nil
		}, "", nil
	case RevokeReplication:
		n, err := in.sql(ctx, 10*time.Second, func(ctx context.Context, c *pgx.Conn) (int64, error) {
			if _, err := c.Exec(ctx, "ALTER ROLE "+role+" NOREPLICATION"); err != nil {
				return 0, err
			}
			// Taking the attribute leaves open connections as they are.
			tag, err := c.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1 AND backend_type = 'walsender'", role)
			return tag.RowsAffected(), err
		})
		undo := func() error {
			_, err := in.sql(context.Background(), 60*time.Second, func(ctx context.Context, c *pgx.Conn) (int64, error) {
				_, err := c.Exec(ctx, "ALTER ROLE "+role+" REPLICATION")
				return 0, err
			})
			return err
		}
		return undo, fmt.Sprintf("%d replication connections ended", n), err
	case DropSlot:
		return nil, "", in.dropSlot(ctx)
	case AddColumn:
		col := fmt.Sprintf("nemesis_%d", in.columns.Add(1))
		_, err := in.sql(ctx, 20*time.Second, func(ctx context.Context, c *pgx.Conn) (int64, error) {
			_, err := c.Exec(ctx, "SET lock_timeout = '5s'; ALTER TABLE outbox ADD COLUMN IF NOT EXISTS "+col+" text")
			return 0, err
		})
		return nil, col, err
	}
	return nil, "", fmt.Errorf("nemesis: unknown fault %q", f.Kind)
}

// sql runs fn as the superuser on the current primary, retrying through
// restarts until timeout.
func (in *injector) sql(ctx context.Context, timeout time.Duration, fn func(context.Context, *pgx.Conn) (int64, error)) (int64, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		n, err := func() (int64, error) {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			c, err := pgx.Connect(cctx, in.currentPrimary().URL)
			if err != nil {
				return 0, err
			}
			defer c.Close(context.Background())
			return fn(cctx, c)
		}()
		if err == nil {
			return n, nil
		}
		last = err
		time.Sleep(250 * time.Millisecond)
	}
	return 0, errors.Join(last, ctx.Err())
}

// dropSlot ends the connection streaming the slot and drops it, again
// while the relay reconnects faster than the drop.
func (in *injector) dropSlot(ctx context.Context) error {
	_, err := in.sql(ctx, 15*time.Second, func(ctx context.Context, c *pgx.Conn) (int64, error) {
		for {
			var exists bool
			if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = $1)", in.slot).Scan(&exists); err != nil {
				return 0, err
			}
			if !exists {
				return 0, nil // nothing to drop (polling, or a handoff made none yet)
			}
			if _, err := c.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active", in.slot); err != nil {
				return 0, err
			}
			_, err := c.Exec(ctx, "SELECT pg_drop_replication_slot($1)", in.slot)
			if err == nil {
				return 0, nil
			}
			if ctx.Err() != nil {
				return 0, err
			}
			time.Sleep(20 * time.Millisecond) // still active: ended a moment ago, or taken again
		}
	})
	return err
}

// failover stops the primary as a crash and promotes the standby. On 17
// and later it first waits (up to 20 s) for the standby's copy of a
// failover slot to be synchronized, which the relay needs to continue from
// it.
func (in *injector) failover(ctx context.Context) error {
	in.mu.Lock()
	primary, standby, done := in.primary, in.env.Standby, in.failedOver
	in.mu.Unlock()
	if standby == nil || done {
		return errors.New("no standby to fail over to")
	}
	if in.slotFailover {
		if err := waitSynced(ctx, standby.URL, in.slot, 20*time.Second); err != nil {
			in.h.Add(Event{Type: EventNote, Msg: "failing over before the slot was synchronized to the standby", Detail: err.Error()})
		}
	}
	if err := primary.Stop(ctx, "immediate"); err != nil {
		return err
	}
	if err := standby.Promote(ctx); err != nil {
		return err
	}
	in.mu.Lock()
	in.primary, in.failedOver = standby, true
	in.mu.Unlock()
	return nil
}

// waitSynced waits until the standby holds a synchronized, persistent copy
// of slot, waking its synchronization worker now and then.
func waitSynced(ctx context.Context, url, slot string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	for {
		var synced, temporary bool
		err := c.QueryRow(ctx, "SELECT synced, temporary FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&synced, &temporary)
		if err == nil && synced && !temporary {
			return nil
		}
		if _, err := c.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("slot %s not synchronized to the standby: %w", slot, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// heal undoes whatever a fault left done, for the drain at the end:
// links healed and without delay, the brokers (and a cluster's
// controllers, its disk freed) and the primary running,
// REPLICATION granted, every relay running.
func (in *injector) heal(ctx context.Context) error {
	for _, p := range in.env.Links {
		p.Heal()
		p.Delay(0)
	}
	for _, p := range in.env.Kafka.Proxies() {
		p.Heal()
		p.Delay(0)
	}
	errs := []error{in.env.Kafka.Start()}
	if c, ok := in.env.Kafka.(Cluster); ok {
		errs = append(errs, healCluster(c))
	}
	pg := in.currentPrimary()
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	if c, err := pgx.Connect(cctx, pg.URL); err == nil {
		c.Close(context.Background())
	} else {
		errs = append(errs, pg.Restart(ctx))
	}
	cancel()
	_, err := in.sql(ctx, time.Minute, func(ctx context.Context, c *pgx.Conn) (int64, error) {
		_, err := c.Exec(ctx, "ALTER ROLE "+role+" REPLICATION")
		return 0, err
	})
	errs = append(errs, err)
	for _, r := range in.relays {
		errs = append(errs, r.start())
	}
	return errors.Join(errs...)
}

func (in *injector) errors() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.errs...)
}
