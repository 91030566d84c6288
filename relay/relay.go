// Package relay is the pipeline: it reads outbox rows from the replication
// stream, encodes and routes them, produces them to Kafka, and confirms a
// transaction's commit LSN to Postgres only once that transaction and every
// one before it are acknowledged. It reconnects with backoff when Postgres
// or Kafka go away and shuts down at a transaction boundary.
//
// Where to read:
//   - relay.go: Run, the loop of sessions, and the WAL session.
//   - modes.go: the poll session, switching between the modes, the lock.
//   - publisher.go: one row from the source to the confirm, the same for
//     both modes; they differ only in their ledger (an LSN confirmed by the
//     watermark, or the acked rows marked published). Kafka is behind Sink.
//   - watermark.go: the confirmable position over out-of-order acks.
//   - deadletter.go, refused.go: poison rows, held aggregates, refusals.
//   - errors.go: how errors are judged (Permanent, Unavailable, Poison).
//   - kafkahealth.go, metrics.go: readiness and Prometheus metrics.
//   - state.go, cluster.go, retention.go, replay.go, vanish.go: pgoutbox's
//     own tables, housekeeping and admin functions.
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/errgroup"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/relay/internal/vanish"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/router"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/sink"
	"github.com/pgoutbox/pgoutbox/store"
)

// Config configures the relay and, through its parts, every component.
type Config struct {
	// Mode is auto (WAL when available, polling when not), wal or poll.
	Mode        Mode
	Replication replication.Config
	Poll        poll.Config
	// PollInterval is the wait after a poll that found less than a full
	// batch (default 500ms).
	PollInterval time.Duration
	// ProbeInterval is how often auto mode, while polling, checks whether
	// it can return to the WAL (default 30s).
	ProbeInterval time.Duration
	Sink          sink.Config
	Router        router.Config
	Encoder       schema.EncoderConfig
	Columns       schema.Columns
	// CreateSlot lets the relay create the publication and the slot when
	// they are missing and the role may. Off in the zero value, so that a
	// program using the package creates nothing it did not ask for; pgoutbox
	// run sets it from --create-slot, whose default is true.
	CreateSlot bool
	// Snapshot is what the pipeline's first start does with the rows
	// already in the table: SnapshotNoData (default) or SnapshotInitial
	// (snapshot.go).
	Snapshot SnapshotMode
	// ShutdownTimeout bounds how long a shutdown waits for the current
	// transaction to be read and for Kafka to ack what is in flight
	// (default 30s).
	ShutdownTimeout time.Duration
	// MaxBackoff caps the wait between reconnection attempts (default 30s).
	MaxBackoff time.Duration
	// OnPoison is what happens to a row that cannot be published:
	// PoisonDeadLetter (default) or PoisonHalt.
	OnPoison string
	// DLQTopic receives dead letters (default "<slot>.dlq").
	DLQTopic string
	// OnUpdate is what an UPDATE of the outbox table in the stream does,
	// as Debezium's table.op.invalid.behavior: UpdateWarn (default) or
	// UpdateError log it and go on, UpdateFatal stops the relay before
	// it. pgoutbox's own publication carries inserts only; an existing
	// publication of every operation (Debezium's) carries updates.
	OnUpdate string

	// Delivery is AtLeastOnce (default) or ExactlyOnce (exactlyonce.go).
	Delivery Delivery
	// PositionTopic keeps, under exactly-once delivery, the position each
	// Kafka transaction reached (default "<slot>.position"; created
	// compacted, one partition, when missing).
	PositionTopic string
	// TransactionMaxAge and TransactionMaxRecords bound a Kafka
	// transaction under exactly-once delivery (defaults 100ms and
	// 10,000): it is committed at the first Postgres commit past either,
	// or as soon as nothing more waits to be read.
	TransactionMaxAge     time.Duration
	TransactionMaxRecords int

	// LeaseTTL is how long the pipeline's lease lasts without a renewal:
	// a relay waiting for the pipeline takes it over at most this long
	// after its holder died without giving it up (default 5s; lease.go).
	// LeaseRenew is how often the holder renews it and a waiting relay
	// tries to take it (default 1s); LeaseTTL is at least three times it.
	LeaseTTL, LeaseRenew time.Duration

	// Operations (metrics.go, retention.go).
	// MonitorInterval is how often slot lag and unpublished rows are read
	// into Metrics and both ends are checked for readiness (0: never).
	MonitorInterval time.Duration
	// Retention deletes published rows older than this (0: never);
	// RetentionInterval is how often it runs (default 5m).
	Retention, RetentionInterval time.Duration
}

// Defaults fills unset fields, in the components too.
func (c *Config) Defaults() {
	if c.Mode == "" {
		c.Mode = ModeAuto
	}
	c.Replication.Defaults()
	if c.Poll.Table == "" {
		c.Poll.Table = c.Replication.Table
	}
	c.Poll.Defaults()
	if c.PollInterval == 0 {
		c.PollInterval = 500 * time.Millisecond
	}
	if c.ProbeInterval == 0 {
		c.ProbeInterval = 30 * time.Second
	}
	c.Sink.Defaults()
	if c.Router.Topic == "" {
		c.Router.Topic = router.DefaultTopic
	}
	if c.Encoder.Format == "" {
		c.Encoder.Format = schema.CloudEvents
	}
	if c.Encoder.Source == "" {
		// A URI path segment: a quoted name's quotes and spaces escaped.
		c.Encoder.Source = "/pgoutbox/" + url.PathEscape(c.Replication.Table)
		if len(c.Replication.Tables) > 1 {
			c.Encoder.Source = "/pgoutbox/" + c.Replication.Slot // the pipeline's, for all its tables
		}
	}
	if c.Snapshot == "" {
		c.Snapshot = SnapshotNoData
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.OnPoison == "" {
		c.OnPoison = PoisonDeadLetter
	}
	if c.OnUpdate == "" {
		c.OnUpdate = UpdateWarn
	}
	if c.Encoder.Format == schema.DebeziumOutbox || c.Encoder.Format == schema.Debezium {
		c.Columns.PassThrough = true // as Debezium's router takes rows
	}
	if c.DLQTopic == "" {
		c.DLQTopic = c.Replication.Slot + ".dlq"
	}
	if c.Delivery == "" {
		c.Delivery = AtLeastOnce
	}
	if c.PositionTopic == "" {
		c.PositionTopic = c.Replication.Slot + ".position"
	}
	if c.TransactionMaxAge == 0 {
		c.TransactionMaxAge = 100 * time.Millisecond
	}
	if c.TransactionMaxRecords == 0 {
		c.TransactionMaxRecords = 10_000
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.LeaseRenew == 0 {
		c.LeaseRenew = DefaultLeaseRenew
	}
	c.opsDefaults()
}

// The OnUpdate policies.
const (
	UpdateWarn  = "warn"
	UpdateError = "error"
	UpdateFatal = "fatal"
)

// UpdateStopError is an UPDATE of the outbox table under UpdateFatal.
type UpdateStopError struct {
	Table string
	LSN   string
}

func (e *UpdateStopError) Error() string {
	return fmt.Sprintf("an UPDATE of the outbox table %s at %s: the outbox takes inserts only, and table.op.invalid.behavior=fatal (--on-update fatal) stops here, as Debezium's router does; "+
		"to go on past it, run with --on-update warn, or use a publication that carries inserts only (publish = 'insert')", e.Table, e.LSN)
}

// Permanent: the update stays in the slot's stream.
func (e *UpdateStopError) Permanent() bool { return true }

// Validate reports the first invalid setting.
func (c Config) Validate() error {
	switch c.Mode {
	case ModeAuto, ModeWAL, ModePoll:
	default:
		return fmt.Errorf("mode %q: use auto, wal or poll", c.Mode)
	}
	if c.PollInterval <= 0 || c.ProbeInterval <= 0 {
		return errors.New("poll and probe intervals must be positive")
	}
	if c.LeaseRenew <= 0 || c.LeaseTTL < 3*c.LeaseRenew {
		return fmt.Errorf("lease TTL %s and renewal interval %s: the renewal interval must be positive and the TTL at least three times it, so that a missed renewal does not lose the lease",
			c.LeaseTTL, c.LeaseRenew)
	}
	for _, err := range []error{
		c.Replication.Validate(), c.Poll.Validate(), c.Sink.Validate(), c.Router.Validate(),
		c.Encoder.Validate(), c.Columns.Validate(), c.opsValidate(),
	} {
		if err != nil {
			return err
		}
	}
	if len(c.Replication.Tables) > 1 {
		if c.Retention > 0 && c.Mode != ModePoll {
			// A row the WAL published is known by the pipeline's bounds,
			// which say nothing of a table added to the pipeline later.
			return errors.New("--retention with several outbox tables runs in --mode poll only (it deletes the rows polling marked published); " +
				"in --mode wal or auto run it in a pipeline of one table")
		}
	}
	if _, err := ParseSnapshotMode(string(c.Snapshot)); err != nil {
		return err
	}
	if c.Snapshot == SnapshotInitial && c.Poll.Status != "" {
		return errors.New("snapshot mode initial with a status column: the status column already says which rows to publish (the pending ones, on the first start too)")
	}
	switch c.OnUpdate {
	case "", UpdateWarn, UpdateError, UpdateFatal:
	default:
		return fmt.Errorf("on-update %q: use warn, error or fatal", c.OnUpdate)
	}
	if c.OnPoison != PoisonDeadLetter && c.OnPoison != PoisonHalt {
		return fmt.Errorf("on-poison %q: use dlq or halt", c.OnPoison)
	}
	if err := (router.Config{Topic: c.DLQTopic}).Validate(); err != nil || strings.ContainsAny(c.DLQTopic, "{}") {
		return fmt.Errorf("dead-letter topic %q is not a valid topic name", c.DLQTopic)
	}
	if c.ShutdownTimeout <= 0 {
		return errors.New("shutdown timeout must be positive")
	}
	if _, err := ParseDelivery(string(c.Delivery)); err != nil {
		return err
	}
	if c.Delivery == ExactlyOnce {
		// Neither path produces in Kafka transactions with a position
		// record yet: the table relays would share one transactional
		// producer, and the snapshot produces outside any transaction.
		if len(c.Replication.Tables) > 1 {
			return errors.New("exactly-once delivery with several outbox tables is not supported yet: run one pipeline (its own --slot) per table, or at-least-once")
		}
		if c.Snapshot == SnapshotInitial {
			return errors.New("exactly-once delivery with snapshot mode initial is not supported yet: publish the existing rows with at-least-once first, then restart with exactly-once")
		}
		if err := (router.Config{Topic: c.PositionTopic}).Validate(); err != nil || strings.ContainsAny(c.PositionTopic, "{}") {
			return fmt.Errorf("position topic %q is not a valid topic name", c.PositionTopic)
		}
		if c.PositionTopic == c.DLQTopic {
			return errors.New("the position topic and the dead-letter topic must differ")
		}
		if c.TransactionMaxAge <= 0 || c.TransactionMaxRecords <= 0 {
			return errors.New("transaction bounds must be positive")
		}
		s := c.Sink
		s.TransactionalID = transactionalID(c.Replication.Slot)
		if err := s.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// ErrSlotLost means the slot this pipeline streamed from is gone. Rows
// committed since its last confirmed position are only in the table; the
// relay does not create a new slot silently over that gap.
var ErrSlotLost = errors.New("replication slot was lost")

// ErrShutdownIncomplete means a requested stop could not flush or confirm
// everything before ShutdownTimeout; what was not confirmed is sent again
// on the next start.
var ErrShutdownIncomplete = errors.New("shutdown incomplete")

// queryTimeout bounds the relay's own queries, so that a dead connection
// fails a session instead of hanging it.
func (r *Relay) queryTimeout() time.Duration {
	if t := r.cfg.Replication.ReceiveTimeout; t > 0 {
		return t
	}
	return 30 * time.Second
}

// Mode returns the mode the relay is in now: wal or poll.
func (r *Relay) Mode() Mode {
	m, _ := r.mode.Load().(string)
	return Mode(m)
}

// Stats are the relay's running totals.
type Stats struct {
	Published   atomic.Int64 // records acked by Kafka
	Sessions    atomic.Int64 // replication sessions started
	LastPublish atomic.Int64 // unix nanoseconds of the last ack
	// SkippedPolled counts rows the WAL replayed after a poll phase had
	// already published them, and were not sent again.
	SkippedPolled atomic.Int64
	// SkippedCommitted counts rows, under exactly-once delivery, that the
	// stream sent again although a committed Kafka transaction had them.
	SkippedCommitted atomic.Int64
}

// Relay moves outbox rows from one slot to Kafka.
type Relay struct {
	cfg Config
	log *slog.Logger
	// table is the outbox table; tables are all of them (table first).
	table  outbox.Table
	tables []outbox.Table
	// units poll the tables of a pipeline of several, one each (tables.go);
	// parent is, in such a unit, the pipeline's relay, and stateName its
	// state row (empty: the slot's).
	units     []*Relay
	parent    *Relay
	stateName string
	enc       *schema.Encoder
	router    *router.Router
	// database is the database name, for envelopes that carry it.
	database string
	// Stats are updated as the relay runs.
	Stats Stats
	// stream is the current session's stream, for tests and status.
	stream atomic.Pointer[replication.Stream]
	// mode is the mode of the current session.
	mode atomic.Value
	// stateReady is set once pgoutbox's own tables are known to be at this
	// binary's version (state.go).
	stateReady atomic.Bool
	// clusterID is the system identifier of the cluster the current
	// session is on (0: unknown), saved with each floor (cluster.go).
	clusterID int64
	// walFloor is, under exactly-once delivery, the transaction id below
	// which every transaction is in Kafka, as the WAL session's saveState
	// last found it (0: none yet this session; exactlyonce.go).
	walFloor atomic.Uint64
	// Metrics are the Prometheus metrics and readiness (metrics.go).
	Metrics *Metrics
	hk      housekeeper
	// refused remembers what Kafka refused, across sessions (refused.go).
	refused *refusals
	// probeWait lengthens auto mode's probe interval after WAL sessions
	// that failed right after a probe said the WAL was available; 0 when
	// none did. Only Run's goroutine uses it.
	probeWait time.Duration
	// vanish counts rows deleted before the current poll phase published
	// them (internal/vanish); nil outside polling or where it cannot.
	vanish          *vanish.Detector
	vanishOffLogged bool
	// holder names this relay in the pipeline's lease; lease is the one
	// its current session holds (lease.go), nil before the first.
	holder string
	lease  *leaseKeeper
	// pooled: the current session's connection goes through a
	// connection pooler (replication.Pooled).
	pooled       bool
	pooledLogged bool
}

// New validates cfg and builds a relay.
func New(cfg Config, log *slog.Logger) (*Relay, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tables, err := cfg.Replication.AllTables()
	if err != nil {
		return nil, err
	}
	table := tables[0]
	enc, err := schema.NewEncoder(cfg.Encoder)
	if err != nil {
		return nil, err
	}
	rt, err := router.New(cfg.Router)
	if err != nil {
		return nil, err
	}
	var database string
	if pc, err := pgconn.ParseConfig(cfg.Replication.DatabaseURL); err == nil {
		database = pc.Database
	}
	r := &Relay{cfg: cfg, log: log, table: table, tables: tables, enc: enc, router: rt, database: database, holder: leaseHolder()}
	r.cfg.Replication.OnUpdate = r.onUpdate
	r.refused = newRefusals(log, cfg.DLQTopic)
	r.Metrics = NewMetrics(&r.Stats.LastPublish)
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.String()
	}
	r.Metrics.tables(names)
	if len(tables) > 1 {
		r.units = r.tableRelays()
	}
	return r, nil
}

// onUpdate handles an UPDATE of an outbox table in the stream, as
// Debezium's router handles one (EventRouterDelegate.handleUnexpectedOperation).
func (r *Relay) onUpdate(t outbox.Table, lsn pglogrepl.LSN) error {
	switch r.cfg.OnUpdate {
	case UpdateFatal:
		return &UpdateStopError{Table: t.String(), LSN: lsn.String()}
	case UpdateError:
		r.log.Error("an UPDATE of the outbox table was ignored", "table", t.String(), "lsn", lsn.String())
	default:
		r.log.Warn("an UPDATE of the outbox table was ignored", "table", t.String(), "lsn", lsn.String())
	}
	return nil
}

// Run relays until ctx ends, then stops reading at a transaction boundary,
// waits for Kafka to ack what is in flight, confirms it and returns nil.
// It returns an error only for what retrying cannot fix.
func (r *Relay) Run(ctx context.Context) error {
	scfg := r.cfg.Sink
	if r.cfg.Delivery == ExactlyOnce {
		scfg.TransactionalID = r.transactionalID()
	}
	k, err := sink.New(scfg, r.log)
	if err != nil {
		return err
	}
	defer k.Close()
	defer r.releaseLease()
	// Credentials or TLS settings that can never work stop the relay here
	// with the reason; a broker that is only unreachable is retried, and
	// records wait for it.
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err = k.Ping(pctx)
	cancel()
	switch {
	case errors.Is(err, sink.ErrAuth):
		return err
	case err != nil && ctx.Err() == nil:
		r.Metrics.readiness().kafkaPing(err)
		r.log.Warn("kafka is not reachable yet; records wait for it", "brokers", strings.Join(r.cfg.Sink.Brokers, ","), "err", err)
	}
	defer r.startMonitor(ctx, k)() // metrics.go

	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 250 * time.Millisecond
	bo.MaxInterval = r.cfg.MaxBackoff
	bo.MaxElapsedTime = 0
	mode := ModeWAL
	if r.cfg.Mode == ModePoll {
		mode = ModePoll
	}
	var (
		handoff    *handoffError
		reason     = store.Started(r.cfg.Mode)
		waitLogged bool
		// fromProbe: the WAL session was started because the probe said
		// the WAL is available again, and sessions counted then.
		fromProbe     bool
		probeSessions int64
		// polled hands the rows a poll phase published to the WAL
		// session after it.
		polled polledRows
	)
	for {
		started := time.Now()
		var err error
		if mode == ModeWAL {
			err = r.walSession(ctx, k, reason, &polled)
		} else if len(r.units) > 0 {
			err = r.pollTables(ctx, k, handoff, reason, &polled) // tables.go
		} else {
			err = r.pollSession(ctx, k, handoff, reason, &polled)
		}
		refused, renew := r.refused.endSession()
		if ctx.Err() != nil {
			// Stopping: only a shutdown that could not finish is an error;
			// a session cut short by the stop itself is not.
			if errors.Is(err, ErrShutdownIncomplete) {
				return err
			}
			return nil
		}
		if renew {
			if err := k.Renew(); err != nil {
				return err
			}
		} else if refused {
			k.Resume()
		}
		if refused && !permanent(err) {
			// Not a connection problem: the next session dead-letters the
			// refused event before it produces anything, at once.
			r.log.Warn("restarting the session after kafka refused a record", "reason", err)
			continue
		}
		var h *handoffError
		switch {
		case errors.As(err, &h):
			mode, handoff, reason = ModePoll, h, store.Reason{Code: store.ReasonHandoff, Detail: h.Error()}
			if h.replaced {
				r.log.Warn("switching to polling", "reason", reason.Detail)
			} else {
				r.log.Info("polling before streaming the new slot", "reason", reason.Detail)
			}
			continue
		case errors.Is(err, errBackToWAL), errors.Is(err, errHandoffDone):
			mode, handoff, reason = ModeWAL, nil, store.Reason{Code: store.ReasonWALAvailable, Detail: err.Error()}
			if errors.Is(err, errHandoffDone) {
				reason.Code = store.ReasonHandoffDone
			}
			fromProbe, probeSessions = errors.Is(err, errBackToWAL), r.Stats.Sessions.Load()
			r.log.Info("switching to WAL", "reason", reason.Detail)
			continue
		case mode == ModeWAL && r.cfg.Mode == ModeAuto && replicationUnavailable(err):
			mode, handoff, reason = ModePoll, nil, store.Reason{Code: store.ReasonWALUnavailable, Detail: err.Error()}
			attrs := []any{"reason", reason.Detail}
			if fromProbe && r.Stats.Sessions.Load() == probeSessions {
				// The probe found nothing wrong, yet the session failed
				// before it streamed: probe less often, so that this does
				// not become a switch back and forth every probe interval.
				r.probeWait = min(2*r.probeInterval(), max(r.cfg.ProbeInterval, maxProbeWait))
				attrs = append(attrs, "next_probe_in", r.probeWait)
			} else {
				r.probeWait = 0
			}
			fromProbe = false
			r.log.Warn("switching to polling", attrs...)
			continue
		case errors.Is(err, errLocked), errors.Is(err, store.ErrLeaseLost):
			if errors.Is(err, store.ErrLeaseLost) {
				r.log.Warn("another relay took over this pipeline; this one stopped publishing and waits", "pipeline", r.cfg.Replication.Slot)
				waitLogged = true
			} else if !waitLogged {
				r.log.Info("another relay holds this pipeline; waiting to take over", "pipeline", r.cfg.Replication.Slot, "reason", err)
				waitLogged = true
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(retryIn(err, r.cfg.LeaseRenew)): // lease.go
			}
			continue
		case permanent(err):
			r.saveStopped(err)
			return err
		}
		waitLogged, fromProbe = false, false
		if time.Since(started) > time.Minute {
			bo.Reset()
		}
		wait := bo.NextBackOff()
		r.Metrics.reconnected()
		r.log.Warn("reconnecting", "reason", err, "in", wait.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// walSession runs one replication connection from the slot's confirmed
// position until ctx ends or something fails.
func (r *Relay) walSession(ctx context.Context, k *sink.Kafka, reason store.Reason, polled *polledRows) error {
	conn, err := r.lockedConn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if r.pooled {
		// Before anything else: PgBouncer before 1.23 refuses replication
		// connections, and nothing here should be set up for a stream
		// that cannot start.
		if err := replication.TryReplication(ctx, conn, r.cfg.Replication.DatabaseURL); err != nil {
			return replication.PoolerRefusedReplication(err)
		}
	}
	hasSeq, err := r.cfg.Poll.HasColumns(ctx, conn)
	if err != nil {
		return err
	}
	if hasSeq && len(r.units) > 0 {
		hasSeq, err = r.tablesHaveColumns(ctx, conn) // tables.go
		if err != nil {
			return err
		}
	}
	// Auto mode with the polling columns can poll what positions from
	// another cluster leave unpublished; other modes stop there.
	canPoll := r.cfg.Mode == ModeAuto && hasSeq
	if r.clusterID, err = r.clusterCheck().run(ctx, conn, canPoll); err != nil { // cluster.go
		return err
	}
	if err := r.walSnapshot(ctx, conn, k); err != nil { // snapshot.go
		return err
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := r.prepare(ctx, conn, canPoll); err != nil {
		return err
	}
	if err := r.setMode(ctx, conn, ModeWAL, reason); err != nil {
		return err
	}
	r.markWALStart(ctx, conn) // retention.go
	r.saveKafkaChange(ctx, conn)
	// Everything that can fail comes before the stream is open, so that no
	// early return leaves a replication connection holding the slot.
	dl, err := openDeadLetters(ctx, r.cfg, r.Metrics, r.log)
	if err != nil {
		return err
	}
	defer dl.close()
	var txn *txnSession
	if k.Transactional() {
		if txn, err = r.openWALTransactions(ctx, k, conn, hasSeq); err != nil { // exactlyonce.go
			return err
		}
	}
	stream, err := replication.Open(ctx, r.cfg.Replication, r.log)
	if err != nil {
		return err
	}
	r.stream.Store(stream)
	r.Stats.Sessions.Add(1)
	defer r.Metrics.sessionUp(ModeWAL)()
	r.log.Info("streaming", "slot", r.cfg.Replication.Slot, "tables", r.tableNames(), "start_lsn", stream.Start().String())

	wm := newWatermark(stream.Start(), stream.Confirm)
	// Shutdown is soft first: stop reading at the next transaction
	// boundary and drain. The hard context ends whatever is left after
	// ShutdownTimeout.
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	var hardTimer atomic.Pointer[time.Timer]
	stopWatch := context.AfterFunc(ctx, func() {
		stream.Stop()
		hardTimer.Store(time.AfterFunc(r.cfg.ShutdownTimeout, cancelHard))
	})
	defer func() {
		stopWatch()
		if t := hardTimer.Load(); t != nil {
			t.Stop()
		}
	}()

	changes := make(chan *replication.Batch, 4) // up to 4*MaxBatch changes
	readDone := make(chan struct{})
	g, gctx := errgroup.WithContext(hard)
	g.Go(func() error {
		defer close(readDone)
		defer close(changes)
		return stream.Run(gctx, changes)
	})
	pub := r.newPublisher(k, dl, ModeWAL)
	pub.recordCtx, pub.historic = hard, true
	if txn != nil {
		txn.ledger.confirm = stream.Confirm
		pub.ledger = txn.ledger
		g.Go(func() error { return pub.streamTxn(gctx, changes, txn) })
	} else {
		pub.ledger = &walLedger{wm: wm, polled: polled, order: r.cfg.Poll.Order, stats: &r.Stats}
		g.Go(func() error { return pub.stream(gctx, changes, wm) })
	}
	g.Go(func() error { return r.saveState(gctx, readDone, conn, stream, hasSeq) })
	runErr := g.Wait()

	// Whatever was produced gets its ack before the last confirm, so a
	// clean stop leaves nothing to send twice.
	flushCtx, cancel := context.WithTimeout(hard, r.cfg.ShutdownTimeout)
	flushErr := k.Flush(flushCtx)
	cancel()
	if txn != nil && runErr != nil {
		if err := r.closeTxn(hard, txn); err != nil {
			runErr = err
		}
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	closeErr := stream.Close(closeCtx)
	if c := stream.Confirmed(); ctx.Err() != nil && closeErr == nil && c > stream.Start() {
		// A clean stop sends nothing twice, but its last status update
		// can be lost with the connection: check it, and make it good.
		ensureCtx, cancelEnsure := context.WithTimeout(context.Background(), 3*time.Second)
		if advanced, err := replication.EnsureConfirmed(ensureCtx, conn, r.cfg.Replication.Slot, c); err != nil {
			r.log.Warn("could not check the slot's confirmed position", "lsn", c.String(), "err", err)
		} else if advanced {
			r.log.Info("the slot missed the last status update; advanced it", "lsn", c.String())
		}
		cancelEnsure()
	}
	if err := r.writeState(closeCtx, conn, stream.Confirmed()); err != nil && runErr == nil {
		r.log.Warn("saving state failed", "err", err)
	}
	cancel()
	acked, waiting := wm.position()
	if txn != nil {
		acked, waiting = stream.Confirmed(), 0
	}
	attrs := []any{"confirmed_lsn", acked.String(), "unconfirmed_transactions", waiting}
	if err := wm.failed(); err != nil {
		attrs = append(attrs, "delivery_err", err)
	}
	if flushErr != nil {
		r.log.Warn("stream stopped", append(attrs, "flush_err", flushErr)...)
	} else {
		r.log.Info("stream stopped", attrs...)
	}

	if ctx.Err() != nil && (runErr == nil || errors.Is(runErr, context.Canceled)) {
		// A requested shutdown: report only what kept it from finishing.
		if flushErr != nil {
			return fmt.Errorf("%w: kafka did not ack everything in time: %w", ErrShutdownIncomplete, flushErr)
		}
		if closeErr != nil {
			return fmt.Errorf("%w: final confirm: %w", ErrShutdownIncomplete, closeErr)
		}
		return nil
	}
	if runErr == nil {
		runErr = errors.New("replication stream ended")
	}
	var ue *replication.UnrecognisedError
	if errors.As(runErr, &ue) {
		runErr = r.unrecognised(ue)
	}
	return runErr
}

// unrecognised says what to do about a row the stream stopped at.
func (r *Relay) unrecognised(e *replication.UnrecognisedError) error {
	pub := r.cfg.Replication.Publication
	return fmt.Errorf("pgoutbox stopped: %w, and it came through publication %s, which should publish only the pipeline's tables (%s). "+
		"Nothing from this row on was confirmed. If %s holds events, add it to the pipeline (--table %s,%s); "+
		"if it does not, take it out of the publication: ALTER PUBLICATION %s DROP TABLE %s; then start pgoutbox again, "+
		"which skips its rows still in the slot (and says so)",
		e, pub, r.tableNames(), e.Relation, r.tableNames(), e.Relation, pub, e.Relation.Quoted())
}

// saveStopped records why the relay stops, for status, as well as it can:
// the database may be what failed.
func (r *Relay) saveStopped(stop error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := replication.Connect(ctx, r.cfg.Replication.DatabaseURL)
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	if err := r.own().SaveStopped(ctx, conn, stop.Error()); err != nil && !store.IsMissing(err) {
		r.log.Warn("saving why the relay stopped failed", "err", err)
	}
}

// seqOf reads a row's order column (seq, or the table's own id), the
// insertion order polling marks rows by.
func seqOf(rel *outbox.Relation, values [][]byte, order string) (int64, bool) {
	for i, col := range rel.Columns {
		if col.Name == order && i < len(values) && values[i] != nil {
			n, err := strconv.ParseInt(string(values[i]), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// tableNames names the pipeline's outbox tables, comma-separated, as the
// state table's outbox_table keeps them: one table reads as before.
func (r *Relay) tableNames() string {
	if r.parent != nil && r.stateName == "" {
		return r.parent.tableNames() // the pipeline's row names them all
	}
	return tablesOf(r.tables)
}

func tableNames(tables []outbox.Table) string { return tablesOf(tables) }
