package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/logs"

	"github.com/pgoutbox/pgoutbox/broker"
	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/router"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/sink"
	"github.com/pgoutbox/pgoutbox/transform"
)

// common are the flags every command that talks to Postgres shares.
type common struct {
	databaseURL  string
	table        string
	tableInclude string
	tableExclude string
	slot         string
	publication  string
	// publicationAllTables: --publication-all-tables.
	publicationAllTables bool
	logFormat            string
	logLevel             string
	config               string
	iamAuth              bool
	iamRegion            string
	tlsSecrets           []string // sslpassword, which applyDBTLS may take out of the URL
	// initialStatements (--database-initial-statements) run on the
	// connections that read the user's tables and catalog.
	initialStatements []string
	// templateParams (--template-param) fill an OpenShift Template's
	// parameters.
	templateParams map[string]string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.databaseURL, "database-url", "", "PostgreSQL connection URL or DSN (required)")
	fs.StringVar(&c.table, "table", "public.outbox", "the outbox table, schema.table; several, comma-separated, are streamed by one slot and each polled while polling")
	fs.StringVar(&c.tableInclude, "table-include-list", "", "instead of --table: comma-separated regular expressions matched whole, in any case, against schema.table of the tables that exist at start (Debezium table.include.list; schema.include.list S is S\\..*)")
	fs.StringVar(&c.tableExclude, "table-exclude-list", "", "with --table-include-list: regular expressions of the tables to leave out of those it matches (Debezium table.exclude.list, schema.exclude.list)")
	fs.Var(statementsFlag{&c.initialStatements}, "database-initial-statements", "SQL statements run in order, each on its own, when it opens, on each connection that reads the tables and catalog, as Debezium runs them on its JDBC connections; not on the replication connection nor on those of pgoutbox's own tables (Debezium's database.initial.statements): separated by ';', where ';;' is a ';' within a statement")
	fs.StringVar(&c.slot, "slot", "pgoutbox", "replication slot name; also names the pipeline")
	fs.StringVar(&c.publication, "publication", "pgoutbox", "publication name")
	fs.BoolVar(&c.publicationAllTables, "publication-all-tables", true, "change events of tables --table-include-list matches: a publication pgoutbox creates publishes all tables (FOR ALL TABLES, which only a superuser may create), so that a table created later is captured from its first row, as Debezium's publication.autocreate.mode=all_tables; false: the tables matched at start only (filtered)")
	fs.StringVar(&c.logFormat, "log-format", "auto", "log format: auto (pretty on a terminal, JSON otherwise), pretty, json or text")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.Var(paramsFlag{&c.templateParams}, "template-param", "NAME=value: a parameter of the OpenShift Template --config names, as oc process -p gives it (repeat the flag for each; the environment's PGOUTBOX_TEMPLATE_PARAM takes several, separated by newlines)")
	fs.StringVar(&c.config, "config", "", "file of 'flag = value' lines, or a Debezium configuration as it is: Debezium Server's application.properties or application.yaml, a Kafka Connect connector's JSON or properties, a Strimzi KafkaConnector YAML or an OpenShift Template of one, a Debezium Operator DebeziumServer YAML")
	fs.BoolVar(&c.iamAuth, "database-iam-auth", false, "authenticate to Amazon RDS or Aurora with an IAM token, made per connection from AWS's default credential chain, in place of a password; needs TLS")
	fs.StringVar(&c.iamRegion, "database-iam-region", "", "with --database-iam-auth: the region the token is signed for (default: the host name's, else AWS_REGION or the profile's)")
}

func (c *common) logger(stderr io.Writer, more ...string) (*slog.Logger, error) {
	return newLogger(stderr, c.logFormat, c.logLevel, append(append(secretsOf(c.databaseURL), c.tlsSecrets...), more...))
}

// requireURL checks the settings every database command needs, the log
// flags included, before anything connects.
func (c *common) requireURL() error {
	if c.databaseURL == "" {
		return errors.New("--database-url is required (or PGOUTBOX_DATABASE_URL)")
	}
	secrets, err := c.applyDBTLS()
	c.tlsSecrets = append(c.tlsSecrets, secrets...)
	if err != nil {
		return err
	}
	if err := c.applyIAM(); err != nil {
		return err
	}
	if _, err := newLogger(io.Discard, c.logFormat, c.logLevel, nil); err != nil {
		return err
	}
	return nil
}

// defaultSettle is --transaction-settle's default, and auto's wait where
// the coordinator cannot tell.
const defaultSettle = 3 * time.Millisecond

const formatUsage = "envelope: cloudevents (structured), cloudevents-binary, debezium-outbox or debezium"

// relayFlags are the flags that configure a relay: run takes them, and so
// does dlq replay, which must encode and route exactly as run does.
type relayFlags struct {
	c        common
	cfg      relay.Config
	kafka    sink.Config
	auth     kafkaAuth
	topics   topicFlags
	sink     string
	nats     natsFlags
	rabbitmq rabbitmqFlags
	rstream  rabbitstreamFlags
	http     webhookFlags
	kinesis  kinesisFlags
	sqs      sqsFlags
	sns      snsFlags
	pulsar   pulsarFlags
	rocketmq rocketmqFlags
	pubsub   pubsubFlags
	redis    redisFlags
	brokers  string
	mode     string
	delivery string
	snapshot string
	format   string
	ops      opsFlags
	mapping  *mappingFlags
	messages messageFlags
}

func (f *relayFlags) register(fs *flag.FlagSet) {
	cfg := &f.cfg
	f.c.register(fs)
	f.auth.register(fs)
	fs.StringVar(&f.sink, "sink", sinkKafka, "where events go: kafka, nats-jetstream (NATS JetStream), rabbitmq (RabbitMQ, AMQP 0-9-1), rabbitmqstream (RabbitMQ Streams, their own protocol), redis (Redis Streams), http (a POST per event), kinesis (Amazon Kinesis Data Streams), sqs (Amazon SQS), sns (Amazon SNS), pubsub (Google Cloud Pub/Sub), pulsar (Apache Pulsar) or rocketmq (Apache RocketMQ), as Debezium Server's sinks of those names")
	f.nats.register(fs)
	f.rabbitmq.register(fs)
	f.rstream.register(fs)
	f.http.register(fs)
	f.kinesis.register(fs)
	f.sqs.register(fs)
	f.sns.register(fs)
	f.pulsar.register(fs)
	f.rocketmq.register(fs)
	f.pubsub.register(fs)
	f.redis.register(fs)
	fs.StringVar(&f.brokers, "kafka-brokers", "", "Kafka seed brokers, host:port[,host:port...] (required with --sink kafka)")
	fs.StringVar(&f.mode, "mode", "auto", "auto (WAL when available, polling when not), wal or poll")
	fs.StringVar(&f.snapshot, "snapshot-mode", "no_data", "the first start: no_data publishes what commits from then on; initial publishes the rows already in the table first; when_needed is initial (a lost slot is filled by polling, never by sending the table again); always publishes them again at every start, then streams from the slot's confirmed position; initial_only publishes them once and streams nothing; always_only publishes them at every start and streams nothing (Debezium snapshot.mode)")
	fs.Func("snapshot-after", "with --snapshot-mode initial: publish only the rows already in the table whose --column-order value is above this one (a cursor poller's last processed id)", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		cfg.Poll.HistoryAfter = &n
		return nil
	})
	fs.DurationVar(&cfg.PollInterval, "poll-interval", 500*time.Millisecond, "polling: wait after a poll that found less than a full batch")
	fs.IntVar(&cfg.Poll.BatchSize, "batch-size", 500, "polling: rows read per poll")
	fs.DurationVar(&cfg.ProbeInterval, "probe-interval", 30*time.Second, "auto mode: how often polling checks whether the WAL is available again")
	fs.StringVar(&cfg.Router.Topic, "topic", router.DefaultTopic, "topic template; placeholders {aggregatetype}, {aggregateid}, {type}")
	fs.StringVar(&f.format, "format", "cloudevents", formatUsage)
	fs.StringVar(&cfg.Encoder.Source, "source", "", "CloudEvents source attribute (default /pgoutbox/<table>)")
	fs.BoolVar(&cfg.CreateSlot, "create-slot", true, "create the publication and slot when missing")
	fs.Var(failoverFlag{&cfg.Replication}, "slot-failover", "create the slot as a failover slot, which standbys with sync_replication_slots keep a copy of (PostgreSQL 17+); auto: a failover slot where the server has them, a plain one before")
	fs.DurationVar(&f.kafka.Linger, "linger", 0, "how long Kafka batches wait for more records; 0 sends at once")
	fs.IntVar(&f.kafka.MaxBufferedRecords, "max-buffered-records", sink.DefaultMaxBufferedRecords, "records awaiting a Kafka ack before reading pauses")
	fs.IntVar(&f.kafka.MaxBufferedBytes, "max-buffered-bytes", 0, "bytes of records awaiting a Kafka ack before reading pauses (default 8 MiB, or twice --max-message-bytes if that is more)")
	fs.IntVar(&f.kafka.MaxMessageBytes, "max-message-bytes", 1_000_012, "largest record; a lower limit the broker reports for a topic applies too")
	fs.BoolVar(&f.kafka.CreateTopics, "kafka-create-topics", true, "ask the broker to create missing topics")
	registerProducer(fs, &f.kafka) // --kafka-compression...: kafkaflags.go
	f.topics.register(fs)          // --topic-creation...: topicflags.go
	fs.DurationVar(&cfg.Replication.StatusInterval, "status-interval", time.Second, "how often the confirmed position is reported to Postgres")
	fs.DurationVar(&cfg.Replication.HeartbeatInterval, "heartbeat-interval", 10*time.Second, "how often a heartbeat lets the slot advance while the outbox is idle; negative disables")
	fs.StringVar(&cfg.HeartbeatTopic, "heartbeat-topic", "", "debezium formats: write Debezium's heartbeat record (key {serverName: --topic-prefix}, value {ts_ms}) to this topic for each heartbeat read back from the WAL (Debezium heartbeat.interval.ms above 0: __debezium-heartbeat.<topic.prefix>); unset, heartbeats write nothing")
	fs.StringVar(&cfg.Replication.HeartbeatActionQuery, "heartbeat-action-query", "", "SQL run at every heartbeat while streaming the WAL, on a connection of its own (Debezium's heartbeat.action.query); a table it names that does not exist stops pgoutbox")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long shutdown waits for Kafka acks")
	fs.DurationVar(&cfg.Lease.TTL, "lease-ttl", relay.DefaultLeaseTTL, "how long the pipeline's lease lasts unrenewed: another relay of the pipeline takes over at most this long after its holder died")
	fs.DurationVar(&cfg.Lease.Renew, "lease-renew", relay.DefaultLeaseRenew, "how often the relay renews the pipeline's lease, and a waiting relay tries to take it; --lease-ttl is at least three times it")
	fs.StringVar(&cfg.OnPoison, "on-poison", "dlq", "a row that cannot be published: dlq (dead-letter it, hold its aggregate, carry on) or halt")
	fs.StringVar(&cfg.DLQTopic, "dlq-topic", "", "topic for dead letters (default <slot>.dlq; <slot>_dlq with --sink rocketmq)")
	fs.StringVar(&f.delivery, "delivery", "at-least-once", "at-least-once, or exactly-once: Kafka transactions, for consumers with isolation.level=read_committed")
	fs.DurationVar(&f.kafka.TransactionTimeout, "transaction-timeout", time.Minute, "exactly-once: how long the broker lets a Kafka transaction stay open before it aborts it; the longest a read_committed consumer waits behind a relay that died with one open")
	fs.DurationVar(&cfg.Transactions.Interval, "transaction-interval", 5*time.Millisecond, "exactly-once: the least time between two Kafka commits; under load the Postgres transactions of that span share one Kafka transaction (0: commit each at once)")
	cfg.Transactions.Settle = defaultSettle
	fs.Func("transaction-settle", "exactly-once, from the WAL: how long a Kafka transaction's first record waits after the last commit, as Apache Kafka 4.x holds a record sent sooner for 20 ms (0: no wait); or auto: until the coordinator says that commit is complete, for a short --transaction-interval (default 3ms)", func(v string) error {
		if v == "auto" {
			cfg.Transactions.Settle, cfg.Transactions.SettleAsk = defaultSettle, true
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return errors.New("a duration, or auto")
		}
		cfg.Transactions.Settle, cfg.Transactions.SettleAsk = d, false
		return nil
	})
	fs.StringVar(&cfg.Transactions.PositionTopic, "position-topic", "", "exactly-once: the compacted topic that keeps the position each Kafka transaction reached (default <slot>.position)")
	f.ops = registerOpsFlags(fs, cfg) // --metrics-addr, --retention...: serve.go
	fs.DurationVar(&cfg.Replication.ReceiveTimeout, "receive-timeout", 0, "how long a silent replication connection is trusted before it is dropped and reconnected (default: twice the server's wal_sender_timeout, at least 30s)")
	f.mapping = registerMappingFlags(fs, cfg) // column mapping and Debezium formats: debezium_flags.go
	f.messages.register(fs)                   // messageflags.go
}

// build checks the parsed flags and returns the relay configuration and a
// logger that masks every secret given.
func (f *relayFlags) build(ctx context.Context, fs *flag.FlagSet, stderr io.Writer) (relay.Config, *slog.Logger, error) {
	c, cfg := &f.c, f.cfg
	if err := c.requireURL(); err != nil {
		return cfg, nil, err
	}
	if _, err := pgx.ParseConfig(c.databaseURL); err != nil {
		return cfg, nil, errors.New("--database-url is not a valid connection string")
	}
	switch {
	case !slices.Contains(sinks, f.sink):
		return cfg, nil, fmt.Errorf("--sink %q: use %s or %s", f.sink, strings.Join(sinks[:len(sinks)-1], ", "), sinks[len(sinks)-1])
	case f.sink == sinkKafka && f.brokers == "":
		return cfg, nil, errors.New("--kafka-brokers is required (or PGOUTBOX_KAFKA_BROKERS)")
	}
	if *f.ops.pprof && *f.ops.addr == "" {
		return cfg, nil, errors.New("--pprof needs --metrics-addr")
	}
	if _, err := f.topics.topicCreation(); err != nil {
		return cfg, nil, err
	}
	m, err := relay.ParseMode(f.mode)
	if err != nil {
		return cfg, nil, fmt.Errorf("--mode %q: use auto, wal or poll", f.mode)
	}
	cfg.Mode = m
	d, err := relay.ParseDelivery(f.delivery)
	if err != nil {
		return cfg, nil, fmt.Errorf("--delivery: %w", err)
	}
	cfg.Delivery = d
	if cfg.Snapshot, err = relay.ParseSnapshotMode(f.snapshot); err != nil {
		return cfg, nil, fmt.Errorf("--snapshot-mode %q: use no_data, initial, when_needed, always, initial_only or always_only", f.snapshot)
	}
	format, err := schema.ParseFormat(f.format)
	if err != nil {
		return cfg, nil, fmt.Errorf("--format: %w", err)
	}
	log, err := c.logger(stderr, slices.Concat(f.auth.secrets(), f.nats.secrets(), f.rabbitmq.secrets(), f.rstream.secrets(), f.redis.secrets(), f.http.secrets(), f.pulsar.secrets(), f.rocketmq.secrets())...)
	if err != nil {
		return cfg, nil, err
	}
	cfg.Encoder.Format = format
	if f.sink == sinkRocketMQ && cfg.DLQTopic == "" {
		// RocketMQ's topic names take no '.': <slot>_dlq, not <slot>.dlq.
		cfg.DLQTopic = c.slot + "_dlq"
		f.cfg.DLQTopic = cfg.DLQTopic
	}
	if cfg.Sink, err = f.opener(ctx, fs, c.slot); err != nil {
		return cfg, nil, err
	}
	switch f.sink {
	case sinkNATS:
		cfg.Encoder.Protocol = schema.ProtocolNATS
	case sinkRabbitMQ:
		cfg.Encoder.Protocol = schema.ProtocolAMQP
	case sinkRabbitStream:
		cfg.Encoder.Protocol = schema.ProtocolAMQP
		logs.SetLogger(streamClientLog{log})
	}
	cfg.Replication.DatabaseURL = c.databaseURL
	cfg.Replication.InitialStatements = c.initialStatements
	tables, matched, err := c.resolveTables(ctx)
	if err != nil {
		return cfg, nil, err
	}
	if matched != "" {
		log.Info("tables matched --table-include-list", "patterns", c.tableInclude, "tables", matched)
	}
	cfg.Replication.Table = tables[0]
	if len(tables) > 1 {
		cfg.Replication.Tables = tables
	}
	cfg.Replication.Slot = c.slot
	cfg.Replication.Publication = c.publication
	if err := f.mapping.apply(ctx, fs, &cfg, c, tables); err != nil {
		msg := redact(err.Error(), secretsOf(c.databaseURL))
		if errors.Is(err, errNoTable) && !flagSet(fs, "table") {
			msg += " (--table's default: name the outbox table with --table or --table-include-list; in a Debezium configuration, table.include.list or schema.include.list)"
		}
		return cfg, nil, errors.New(msg)
	}
	if cfg.ChangeEvents() && len(f.mapping.unmapped) > 0 {
		log.Warn("columns of types pgoutbox does not map are left out of the change events, as Debezium leaves out the types it does not know; "+
			"Debezium maps enums, arrays, domains and extensions' types (hstore, citext, ltree, PostGIS) that pgoutbox does not yet",
			"columns", strings.Join(f.mapping.unmapped, "; "))
	}
	if cfg.ChangeEvents() {
		if cfg.Replication.Captures, err = c.captures(); err != nil {
			return cfg, nil, err
		}
		if cfg.Replication.Captures != nil {
			cfg.Shape = func(ctx context.Context, t outbox.Table) (schema.TableShape, error) {
				sh, err := f.mapping.shape(ctx, c, t)
				if errors.Is(err, errNoTable) {
					err = fmt.Errorf("%w: %s", replication.ErrNoTable, t)
				}
				return sh, err
			}
			cfg.Replication.PublishAllTables = c.publicationAllTables
		}
	}
	if cfg.Mode == relay.ModeAuto && cfg.ChangeEvents() {
		// Polling reads inserts: the updates and deletes of change
		// events are the WAL's alone.
		log.Info("change events: streaming the WAL only (--mode wal): polling reads the tables' inserts, not their updates and deletes", "tables", strings.Join(tables, ","))
		cfg.Mode = relay.ModeWAL
	}
	if cfg.TransactionTopic != "" {
		// Only the WAL knows transactions.
		switch {
		case cfg.Mode == relay.ModePoll:
			return cfg, nil, errors.New("--transaction-metadata (provide.transaction.metadata) needs the WAL: polling reads rows, not transactions; run with --mode wal")
		case cfg.Mode == relay.ModeAuto:
			log.Info("transaction metadata: streaming the WAL only (--mode wal): polling knows no transactions", "transaction_topic", cfg.TransactionTopic)
			cfg.Mode = relay.ModeWAL
		}
	}
	if err := heartbeatRecords(&cfg, log); err != nil {
		return cfg, nil, err
	}
	if f.sink == sinkPubSub && !flagSet(fs, "tombstones-on-delete") {
		// Debezium Server's Pub/Sub sink takes no tombstone, and its
		// engine turns tombstones.on.delete off unless it is given.
		cfg.NoTombstones = true
	}
	if err := ownTopics(cfg, f.sink, f.sns.topicARNPrefix); err != nil {
		return cfg, nil, err
	}
	if err := f.messages.apply(&cfg, format, log); err != nil {
		return cfg, nil, err
	}
	if f.sink == sinkRocketMQ {
		if err := rocketmqTopics(cfg); err != nil {
			return cfg, nil, err
		}
	}
	if f.sink == sinkNATS {
		if err := natsAvro(cfg.Encoder.Debezium); err != nil {
			return cfg, nil, err
		}
		if b, ok := cfg.Sink.(*broker.NATS); ok {
			b.Config.RecordSubjects = natsRecordSubjects(cfg)
		}
	}
	if *f.ops.addr == "" {
		cfg.Operations.MonitorInterval = 0 // nothing would read what it samples
	}
	return cfg, log, nil
}

// opener is the sink --sink names, from its flags.
func (f *relayFlags) opener(ctx context.Context, fs *flag.FlagSet, slot string) (relay.Opener, error) {
	if f.sink == sinkRedis {
		format, _ := schema.ParseFormat(f.format)
		maxBytes := 0 // the server's limit, unless --max-message-bytes is given
		fs.Visit(func(fl *flag.Flag) {
			if fl.Name == "max-message-bytes" {
				maxBytes = f.kafka.MaxMessageBytes
			}
		})
		return f.redis.opener(format, maxBytes, f.kafka.MaxBufferedRecords)
	}
	dlq := ""
	if f.cfg.OnPoison != relay.PoisonHalt {
		if dlq = f.cfg.DLQTopic; dlq == "" {
			dlq = slot + ".dlq" // relay.Config's default
		}
	}
	switch f.sink {
	case sinkNATS:
		return f.nats.opener(dlq, f.cfg.DLQTopic != "", f.kafka.MaxMessageBytes, f.kafka.MaxBufferedRecords)
	case sinkRabbitMQ:
		fm, _ := schema.ParseFormat(f.format)
		ce := fm == schema.CloudEvents || fm == schema.CloudEventsBinary
		return f.rabbitmq.opener(dlq, f.cfg.DLQTopic != "", ce, f.kafka.MaxBufferedRecords)
	case sinkHTTP:
		fm, _ := schema.ParseFormat(f.format)
		return f.http.opener(dlq, fm == schema.CloudEvents, f.kafka.MaxBufferedRecords)
	case sinkKinesis:
		if fm, _ := schema.ParseFormat(f.format); fm == schema.CloudEventsBinary {
			return nil, errors.New("--format cloudevents-binary: a Kinesis record has no headers to carry the attributes; with --sink kinesis use --format cloudevents, the structured mode (the event as JSON is the record's data)")
		}
		return f.kinesis.opener(ctx, f.kafka.MaxBufferedRecords)
	case sinkSQS:
		if fm, _ := schema.ParseFormat(f.format); fm == schema.CloudEventsBinary {
			return nil, errors.New("--format cloudevents-binary: an SQS message from pgoutbox carries no attributes; with --sink sqs use --format cloudevents, the structured mode (the event as JSON is the message's body)")
		}
		return f.sqs.opener(ctx, dlq, f.kafka.MaxBufferedRecords)
	case sinkSNS:
		return f.sns.opener(ctx, dlq, f.kafka.MaxBufferedRecords)
	case sinkPulsar:
		return f.pulsar.opener(f.kafka.MaxBufferedRecords)
	case sinkRocketMQ:
		return f.rocketmq.opener(dlq, f.kafka.MaxBufferedRecords)
	case sinkPubSub:
		return f.pubsub.opener(f.kafka.MaxBufferedRecords), nil
	case sinkRabbitStream:
		fm, _ := schema.ParseFormat(f.format)
		return f.rstream.opener(dlq, fm == schema.CloudEvents || fm == schema.CloudEventsBinary, f.kafka.MaxBufferedRecords)
	}
	kc := f.kafka
	kc.Brokers = strings.Split(f.brokers, ",")
	tc, err := f.topics.topicCreation()
	if err != nil {
		return nil, err
	}
	kc.TopicCreation = tc
	if err := f.auth.apply(ctx, &kc); err != nil {
		return nil, err
	}
	return &broker.Kafka{Config: kc}, nil
}

// open checks the flags every database command shares and connects.
func (c *common) open(ctx context.Context) (*pgx.Conn, error) {
	if err := c.requireURL(); err != nil {
		return nil, err
	}
	if err := replication.ValidateName("slot", c.slot); err != nil {
		return nil, err
	}
	return c.connect(ctx)
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pgoutbox run", flag.ContinueOnError)
	var f relayFlags
	f.register(fs)
	procsFlag := fs.String("procs", "auto", procsUsage)
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	procs, err := parseProcs(*procsFlag)
	if err != nil {
		return err
	}
	cfg, log, err := f.build(ctx, fs, stderr)
	if err != nil {
		return err
	}
	setProcs(procs, log)
	c, mode, format := &f.c, string(cfg.Mode), f.format
	r, err := relay.New(cfg, log)
	if err != nil {
		return err
	}
	topic := cfg.Router.Topic
	if cfg.Router.RouteReplacement != "" {
		// Debezium's route.topic.replacement routes instead of the template.
		topic = cfg.Router.RouteReplacement
		if cfg.Router.RouteRegex != "" {
			topic += " (regex " + cfg.Router.RouteRegex + ")"
		}
	}
	attrs := []any{"version", version, "mode", mode, "sink", f.sink, "delivery", guarantee(f.sink, cfg.Delivery),
		"tables", tableList(cfg.Replication), "slot", c.slot, "topic", topic, "format", format, "snapshot", cfg.Snapshot.Meaning()}
	if cfg.Delivery == relay.ExactlyOnce {
		settle := cfg.Transactions.Settle.String()
		if cfg.Transactions.SettleAsk {
			settle = "auto"
		}
		attrs = append(attrs, "transaction_interval", cfg.Transactions.Interval.String(), "transaction_settle", settle)
	}
	if cfg.TransactionTopic != "" {
		attrs = append(attrs, "transaction_topic", cfg.TransactionTopic)
	}
	if chain, _ := transform.New(cfg.Transforms); chain != nil {
		// The topics are the transforms' too.
		attrs = append(attrs, "transforms", strings.Join(chain.Aliases(), ","))
	}
	log.Info("pgoutbox starting", attrs...)
	if *f.ops.addr != "" {
		stopOps, err := serveOps(*f.ops.addr, *f.ops.pprof, r.Handler(), log)
		if err != nil {
			return err
		}
		defer stopOps()
	}
	err = r.Run(ctx)
	stopped := []any{"published", r.Stats.Published.Load()}
	if n := r.Stats.Filtered.Load(); n > 0 {
		stopped = append(stopped, "filtered", n)
	}
	log.Info("pgoutbox stopped", stopped...)
	if err != nil {
		return errors.New(redact(err.Error(), secretsOf(c.databaseURL)))
	}
	return nil
}
