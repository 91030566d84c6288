package relay

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/router"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/sink"
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
	// already in the table: SnapshotNoData (default), SnapshotInitial or
	// SnapshotWhenNeeded (snapshot.go).
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
	// TransactionInterval is the least time between the end of one Kafka
	// commit and the next under exactly-once delivery from the WAL (0:
	// none). A Postgres transaction that commits sooner after the last
	// Kafka commit waits for it, together with those that come meanwhile:
	// under load several go into one Kafka transaction, whose commit
	// (position record, EndTxn) costs more CPU than its events; a
	// transaction after a quieter spell is committed at once.
	TransactionInterval time.Duration
	// TransactionSettle is how long the first record of a Kafka
	// transaction from the WAL waits after the last commit (0: none).
	// Apache Kafka 4.x adds a partition to a transaction itself when a
	// record comes, and while the last commit's markers are still being
	// written its coordinator refuses, which the broker retries only after
	// add.partitions.to.txn.retry.backoff.ms (20 ms by default): a record
	// sent at once after a commit is acked about 20 ms later, one sent a
	// few milliseconds later within a millisecond or two
	// (docs/benchmarks.md).
	TransactionSettle time.Duration

	// LeaseTTL is how long the pipeline's lease lasts without a renewal:
	// a relay waiting for the pipeline takes it over at most this long
	// after its holder died without giving it up (default 5s; lease.go).
	// LeaseRenew is how often the holder renews it and a waiting relay
	// tries to take it (default 1s); LeaseTTL is at least three times it.
	LeaseTTL, LeaseRenew time.Duration

	// Operations (monitor.go, housekeeping.go).
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
	if c.Poll.HistoryAfter != nil {
		if !c.Snapshot.ReadsTable() {
			return errors.New("--snapshot-after bounds the rows already in the table that --snapshot-mode initial publishes; without it they are not published at all")
		}
		if c.Poll.Order == "" || c.Poll.Order == outbox.SeqColumn {
			return errors.New("--snapshot-after is a value of the table's own insertion order, named with --column-order (a bigserial or identity id): the rows already in the table have no seq")
		}
	}
	if c.Snapshot.ReadsTable() && c.Poll.OwnMark() {
		return errors.New("snapshot mode initial with a status or published column of the table's own: that column already says which rows to publish (the pending ones, on the first start too)")
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
		// The tables' poll sessions would share one transactional producer,
		// which produces with no position record yet. (A snapshot, which
		// produces outside any transaction, is refused where it would run:
		// ErrSnapshotExactlyOnce.)
		if len(c.Replication.Tables) > 1 {
			return errors.New("exactly-once delivery with several outbox tables is not supported yet: run one pipeline (its own --slot) per table, or at-least-once")
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
		if c.TransactionInterval < 0 || c.TransactionInterval > c.TransactionMaxAge {
			return fmt.Errorf("transaction interval %s: must be between 0 and the transaction's maximum age (%s)", c.TransactionInterval, c.TransactionMaxAge)
		}
		if c.TransactionSettle < 0 || c.TransactionSettle > c.TransactionMaxAge {
			return fmt.Errorf("transaction settle %s: must be between 0 and the transaction's maximum age (%s)", c.TransactionSettle, c.TransactionMaxAge)
		}
		s := c.Sink
		s.TransactionalID = transactionalID(c.Replication.Slot)
		if err := s.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// opsDefaults fills the operations settings of Config.
func (c *Config) opsDefaults() {
	if c.RetentionInterval == 0 {
		c.RetentionInterval = 5 * time.Minute
	}
}

func (c Config) opsValidate() error {
	if c.Retention < 0 || c.RetentionInterval < 0 || c.MonitorInterval < 0 {
		return errors.New("retention, retention interval and monitor interval must not be negative")
	}
	return nil
}

// queryTimeout bounds the relay's own queries, so that a dead connection
// fails a session instead of hanging it.
func (c Config) queryTimeout() time.Duration {
	if t := c.Replication.ReceiveTimeout; t > 0 {
		return t
	}
	return 30 * time.Second
}

// transactionalID is the pipeline's transactional id: a relay started
// later for the same pipeline fences the one before.
func (c Config) transactionalID() string { return transactionalID(c.Replication.Slot) }

func transactionalID(slot string) string { return "pgoutbox." + slot }

// timeColumn is the column that holds a row's time, for retention and
// the age of unpublished rows.
func (c Config) timeColumn() string {
	if c.Columns.Time != "" {
		return c.Columns.Time
	}
	return "created_at"
}

// snapshotTimeColumn is the column of the event time a snapshot reads the
// rows without an insertion order by (poll.Order), when the table has it
// as a timestamp: the one named, or created_at where the format reads it
// by default (schema.Columns); "" for none.
func (c Config) snapshotTimeColumn() string {
	if c.Columns.Time != "" || c.Columns.PassThrough {
		return c.Columns.Time
	}
	return schema.DefaultColumns().Time
}
