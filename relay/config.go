package relay

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/registry"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/router"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/transform"
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
	// Sink opens the broker the relay publishes to (relay/sink.go): cmd/
	// chooses Kafka's or another's.
	Sink    Opener
	Router  router.Config
	Encoder schema.EncoderConfig
	Columns schema.Columns
	// Transforms are Kafka Connect's transforms after the Outbox Event
	// Router (format debezium-outbox), from a configuration's
	// transforms.* and predicates.* keys; none by default.
	Transforms transform.Config
	// Registries are the schema registries of the avro converters.
	Registries Registries
	// TransactionTopic, set, writes Debezium's transaction metadata
	// (provide.transaction.metadata) to it: a BEGIN and an END record per
	// transaction, and a transaction block in each change event
	// (txmeta.go). Only the WAL knows transactions: it needs ModeWAL.
	TransactionTopic string
	// HeartbeatTopic, set, writes Debezium's heartbeat record to it for
	// each heartbeat read back from the WAL (heartbeat.go).
	HeartbeatTopic string
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
	// SkippedOperations are the change events not published, Debezium's
	// skipped.operations: any of c (inserts), u (updates), d (deletes)
	// and t (truncates, which pgoutbox publishes none of), comma-separated,
	// or none. Default t.
	SkippedOperations string
	// NoTombstones leaves out the tombstone (the key, a null value) that
	// follows a delete's change event: tombstones.on.delete=false.
	NoTombstones bool
	// UnavailablePlaceholder stands for a TOAST value an update left
	// unchanged, in a change event (unavailable.value.placeholder); nil
	// for Debezium's default, schema.UnavailablePlaceholder.
	UnavailablePlaceholder []byte
	// SkipUnchanged leaves out the change event of an update that changed
	// none of the columns it carries, known only under REPLICA IDENTITY
	// FULL (skip.messages.without.change).
	SkipUnchanged bool
	// Shape reads the key, NOT NULL columns and defaults of a table the
	// stream captured since start (Replication.Captures) from the
	// catalog, before its first change event is encoded; nil where no
	// table is captured so.
	Shape func(ctx context.Context, t outbox.Table) (schema.TableShape, error)

	// Delivery is AtLeastOnce (default) or ExactlyOnce (exactlyonce.go).
	Delivery Delivery
	// Transactions are the Kafka transactions of exactly-once delivery.
	Transactions TransactionConfig
	// Lease is the pipeline's lease, which one relay holds (lease.go).
	Lease LeaseConfig
	// Operations are the monitor's and the housekeeping's settings
	// (monitor.go, housekeeping.go).
	Operations OperationsConfig
	// Hooks are told what the relay does (hooks.go), besides its
	// Prometheus metrics (Relay.Metrics), which always are.
	Hooks []Hook
}

// Registries are the schema registries of the avro key and value
// converters (Encoder.Debezium.Key, .Value): required for an avro part,
// nil otherwise.
type Registries struct {
	Key, Value *registry.Config
}

// TransactionConfig configures the Kafka transactions of exactly-once
// delivery.
type TransactionConfig struct {
	// PositionTopic keeps the position each Kafka transaction reached
	// (default "<slot>.position"; created compacted, one partition, when
	// missing).
	PositionTopic string
	// MaxAge and MaxRecords bound a Kafka transaction (defaults 100ms and
	// 10,000): it is committed at the first Postgres commit past either,
	// or as soon as nothing more waits to be read.
	MaxAge     time.Duration
	MaxRecords int
	// Interval is the least time between the end of one Kafka commit and
	// the next from the WAL (0: none). A Postgres transaction that
	// commits sooner after the last Kafka commit waits for it, together
	// with those that come meanwhile: under load several go into one
	// Kafka transaction, whose commit (position record, EndTxn) costs
	// more CPU than its events; a transaction after a quieter spell is
	// committed at once.
	Interval time.Duration
	// Settle is how long the first record of a Kafka transaction from the
	// WAL waits after the last commit (0: none). Apache Kafka 4.x adds a
	// partition to a transaction itself when a record comes, and while
	// the last commit's markers are still being written its coordinator
	// refuses, which the broker retries only after
	// add.partitions.to.txn.retry.backoff.ms (20 ms by default): a record
	// sent at once after a commit is acked about 20 ms later, one sent a
	// few milliseconds later within a millisecond or two
	// (docs/benchmarks.md).
	Settle time.Duration
	// SettleAsk: instead of Settle, the first record waits until the
	// coordinator says the last commit is complete (DescribeTransactions),
	// asked again while it is not, up to settleLimit; where it cannot
	// tell, Settle applies. It lets a short Interval commit more often
	// without the broker's hold.
	SettleAsk bool
}

// Defaults fills unset fields; the position topic is named after slot.
func (t *TransactionConfig) Defaults(slot string) {
	if t.PositionTopic == "" {
		t.PositionTopic = slot + ".position"
	}
	if t.MaxAge == 0 {
		t.MaxAge = 100 * time.Millisecond
	}
	if t.MaxRecords == 0 {
		t.MaxRecords = 10_000
	}
}

// Validate reports the first invalid setting.
func (t TransactionConfig) Validate() error {
	if err := (router.Config{Topic: t.PositionTopic}).Validate(); err != nil || strings.ContainsAny(t.PositionTopic, "{}") {
		return fmt.Errorf("position topic %q is not a valid topic name", t.PositionTopic)
	}
	if t.MaxAge <= 0 || t.MaxRecords <= 0 {
		return errors.New("transaction bounds must be positive")
	}
	if t.Interval < 0 || t.Interval > t.MaxAge {
		return fmt.Errorf("transaction interval %s: must be between 0 and the transaction's maximum age (%s)", t.Interval, t.MaxAge)
	}
	if t.Settle < 0 || t.Settle > t.MaxAge {
		return fmt.Errorf("transaction settle %s: must be between 0 and the transaction's maximum age (%s)", t.Settle, t.MaxAge)
	}
	return nil
}

// LeaseConfig configures the pipeline's lease.
type LeaseConfig struct {
	// TTL is how long the lease lasts without a renewal: a relay waiting
	// for the pipeline takes it over at most this long after its holder
	// died without giving it up (default 5s).
	TTL time.Duration
	// Renew is how often the holder renews it and a waiting relay tries
	// to take it (default 1s); TTL is at least three times it.
	Renew time.Duration
}

// Defaults fills unset fields.
func (l *LeaseConfig) Defaults() {
	if l.TTL == 0 {
		l.TTL = DefaultLeaseTTL
	}
	if l.Renew == 0 {
		l.Renew = DefaultLeaseRenew
	}
}

// Validate reports an invalid setting.
func (l LeaseConfig) Validate() error {
	if l.Renew <= 0 || l.TTL < 3*l.Renew {
		return fmt.Errorf("lease TTL %s and renewal interval %s: the renewal interval must be positive and the TTL at least three times it, so that a missed renewal does not lose the lease",
			l.TTL, l.Renew)
	}
	return nil
}

// OperationsConfig configures what the relay does beside relaying: the
// monitor and the retention of published rows.
type OperationsConfig struct {
	// MonitorInterval is how often slot lag and unpublished rows are read
	// for the hooks (HookSample) and both ends are checked for readiness
	// (0: never).
	MonitorInterval time.Duration
	// Retention deletes published rows older than this (0: never);
	// RetentionInterval is how often it runs (default 5m).
	Retention, RetentionInterval time.Duration
}

// Defaults fills unset fields.
func (o *OperationsConfig) Defaults() {
	if o.RetentionInterval == 0 {
		o.RetentionInterval = 5 * time.Minute
	}
}

// Validate reports an invalid setting.
func (o OperationsConfig) Validate() error {
	if o.Retention < 0 || o.RetentionInterval < 0 || o.MonitorInterval < 0 {
		return errors.New("retention, retention interval and monitor interval must not be negative")
	}
	return nil
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
	if c.SkippedOperations == "" {
		c.SkippedOperations = "t"
	}
	if c.Encoder.Format == schema.DebeziumOutbox || c.Encoder.Format == schema.Debezium {
		c.Columns.PassThrough = true // as Debezium's router takes rows
	}
	if c.Encoder.Format == schema.Debezium {
		c.Columns.AnyShape = true // a change event carries the row whole
	}
	if c.DLQTopic == "" {
		c.DLQTopic = c.Replication.Slot + ".dlq"
	}
	if c.Delivery == "" {
		c.Delivery = AtLeastOnce
	}
	c.Transactions.Defaults(c.Replication.Slot)
	c.Lease.Defaults()
	c.Operations.Defaults()
}

// parseSkipped reads skipped.operations as Debezium's
// CommonConnectorConfig does: c, u, d, t (any case, spaces around them
// trimmed), or none alone.
func parseSkipped(list string) (skipped map[schema.Op]bool, err error) {
	skipped = map[schema.Op]bool{}
	if strings.TrimSpace(strings.ToLower(list)) == "none" || list == "" {
		return skipped, nil
	}
	for _, op := range strings.Split(list, ",") {
		switch strings.ToLower(strings.TrimSpace(op)) {
		case "c":
			skipped[schema.OpInsert] = true
		case "u":
			skipped[schema.OpUpdate] = true
		case "d":
			skipped[schema.OpDelete] = true
		case "t":
			skipped[schema.OpTruncate] = true
		default:
			return nil, fmt.Errorf("skipped operations %q: %q is none of c, u, d, t, or none", list, strings.TrimSpace(op))
		}
	}
	return skipped, nil
}

// skipped are the operations whose change events are not published
// (SkippedOperations): none but under the Debezium formats, where the
// Outbox Event Router's records are the table's inserts.
func (c *Config) skipped() map[schema.Op]bool {
	if c.Encoder.Format != schema.Debezium && c.Encoder.Format != schema.DebeziumOutbox {
		return nil
	}
	skipped, _ := parseSkipped(c.SkippedOperations) // Validate refused a bad list
	return skipped
}

// ChangeEvents tells whether the pipeline publishes the updates and
// deletes of its tables: Debezium's change events, unless
// SkippedOperations skips both.
func (c *Config) ChangeEvents() bool {
	s := c.skipped()
	return c.Encoder.Format == schema.Debezium && !(s[schema.OpUpdate] && s[schema.OpDelete])
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
	if c.Replication.Messages != nil && c.Mode == ModePoll {
		return errors.New("mode poll: logical decoding messages (--message-prefix, Debezium's message.prefix.include.list with DecodeLogicalDecodingMessageContent) are in the WAL only, not in a table polling could read; run with --mode wal or auto")
	}
	if c.PollInterval <= 0 || c.ProbeInterval <= 0 {
		return errors.New("poll and probe intervals must be positive")
	}
	if err := c.Lease.Validate(); err != nil {
		return err
	}
	for _, err := range []error{
		c.Replication.Validate(), c.Poll.Validate(), c.sinkValidate(), c.Router.Validate(),
		c.Encoder.Validate(), c.Columns.Validate(), c.Operations.Validate(),
	} {
		if err != nil {
			return err
		}
	}
	if len(c.Replication.Tables) > 1 {
		if c.Operations.Retention > 0 && c.Mode != ModePoll {
			// A row the WAL published is known by the pipeline's bounds,
			// which say nothing of a table added to the pipeline later.
			return errors.New("--retention with several outbox tables runs in --mode poll only (it deletes the rows polling marked published); " +
				"in --mode wal or auto run it in a pipeline of one table")
		}
	}
	if err := c.registriesValidate(); err != nil {
		return err
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
	if c.Snapshot.EveryStart() && c.Snapshot.Streams() && c.Mode == ModePoll {
		return fmt.Errorf("snapshot mode %s publishes the rows in the table again at every start, from a snapshot the WAL's slot streams on from; polling marks rows published and sends none twice: use --mode wal or auto", c.Snapshot)
	}
	if (c.Snapshot.EveryStart() || !c.Snapshot.Streams()) && c.Delivery == ExactlyOnce {
		return ErrSnapshotExactlyOnce
	}
	if c.Snapshot.ReadsTable() && c.Poll.OwnMark() {
		return errors.New("snapshot mode initial with a status or published column of the table's own: that column already says which rows to publish (the pending ones, on the first start too)")
	}
	switch c.OnUpdate {
	case "", UpdateWarn, UpdateError, UpdateFatal:
	default:
		return fmt.Errorf("on-update %q: use warn, error or fatal", c.OnUpdate)
	}
	if _, err := parseSkipped(c.SkippedOperations); err != nil {
		return err
	}
	if c.Mode == ModePoll && c.ChangeEvents() {
		return errors.New("--mode poll reads the tables' inserts only, and change events (--format debezium) carry their updates and deletes too, which only the WAL holds: use --mode wal or auto, or leave them out with --skipped-operations u,d")
	}
	if chain, err := transform.New(c.Transforms); err != nil {
		return err
	} else if chain.AfterRouter() && c.Encoder.Format != schema.DebeziumOutbox {
		return fmt.Errorf("Kafka Connect's transforms after the Outbox Event Router run with format %s, not %s", schema.DebeziumOutbox, c.Encoder.Format)
	} else if chain != nil && !chain.AfterRouter() && c.Encoder.Format != schema.Debezium {
		return fmt.Errorf("Kafka Connect's transforms without the Outbox Event Router run on the connector's change events, format %s, not %s", schema.Debezium, c.Encoder.Format)
	} else if chain.Flattens() && c.Encoder.Debezium.Value.IsCloudEvents() {
		return errors.New("Debezium's CloudEventsConverter makes events of change events, and ExtractNewRecordState makes each its row: Debezium writes every value as a null")
	} else if c.Encoder.Debezium.CloudEventsMetadata.Headers && !chain.CopiesBeforeRouter("source", "op") {
		return errors.New("Debezium's CloudEventsConverter with its metadata from headers reads the source and op headers, which a HeaderFrom$Value before the Outbox Event Router copies from the change event (fields and headers source,op): without them Debezium writes every value as a null")
	}
	if err := c.txMetaValidate(); err != nil {
		return err
	}
	if err := c.heartbeatValidate(); err != nil {
		return err
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
		// The dead-letter topic is valid by now: one equal to it is too.
		if c.Transactions.PositionTopic == c.DLQTopic {
			return errors.New("the position topic and the dead-letter topic must differ")
		}
		if err := c.Transactions.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// sinkValidate checks that there is a broker and that it can give the
// delivery asked for.
func (c Config) sinkValidate() error {
	if c.Sink == nil {
		return errors.New("no sink: set Config.Sink")
	}
	return c.Sink.Validate(c.Delivery)
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

// usesRegistry tells a converter that registers schemas: avro, itself
// or a binary converter's delegate, or Apicurio's JSON converter.
func usesRegistry(c schema.Converter) bool {
	return strings.HasSuffix(string(c), string(schema.ConvAvro)) || c == schema.ConvApicurioJSON
}

// registriesValidate checks that each avro part has a registry, and each
// registry an avro part.
func (c Config) registriesValidate() error {
	d := c.Encoder.Debezium
	for _, p := range []struct {
		name string
		conv schema.Converter
		reg  *registry.Config
	}{{"key", d.Key, c.Registries.Key}, {"value", d.Value, c.Registries.Value}} {
		reg := usesRegistry(p.conv)
		switch {
		case reg && p.reg == nil:
			return fmt.Errorf("the %s converter is %s: it needs a schema registry", p.name, p.conv)
		case !reg && p.reg != nil:
			return fmt.Errorf("a schema registry for the %s converter, which is neither avro nor %s", p.name, schema.ConvApicurioJSON)
		case p.reg != nil:
			r := *p.reg
			r.JSON = p.conv == schema.ConvApicurioJSON
			r.Defaults()
			if err := r.Validate(); err != nil {
				return fmt.Errorf("%s converter: %w", p.name, err)
			}
		}
	}
	if d.Header == schema.ConvAvro {
		return errors.New("the header converter cannot be avro")
	}
	return nil
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
