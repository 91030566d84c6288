package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/migrations"
	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/schema"
)

// mappingFlags are run's column-mapping and Debezium-format flags.
type mappingFlags struct {
	// unmapped names, per table, the columns apply found of types the
	// change events leave out, for run to say so.
	unmapped                   []string
	additional                 string
	additionalMissing          string
	key, value, header         string
	expand                     bool
	tombstone                  bool
	contextHeaders             bool
	topicPrefix                string
	routeRegex, routeReplaced  string
	timePrecision              string
	decimalHandling            string
	intervalHandling           string
	cloudEventsMetadata        string
	nullBehavior               string
	columnMappings             string
	columnExclude              string
	columnInclude              string
	messageKeyColumns          string
	binaryHandling             string
	transforms                 string
	txMeta                     bool
	tombstonesOnDelete         bool
	unavailablePlaceholder     string
	txTopic                    string
	keyRegistry, valueRegistry *registryFlags
}

// registerMappingFlags registers the column-mapping flags into
// cfg.Columns and the Debezium format flags.
func registerMappingFlags(fs *flag.FlagSet, cfg *relay.Config) *mappingFlags {
	m := &mappingFlags{}
	d := schema.DefaultColumns()
	fs.StringVar(&cfg.Columns.ID, "column-id", d.ID, "column holding the event id (any type: uuid, bigint, text); Debezium table.field.event.id")
	fs.StringVar(&cfg.Columns.AggregateType, "column-aggregate-type", d.AggregateType, "column holding the aggregate type, which routes the topic; Debezium route.by.field")
	fs.StringVar(&cfg.Columns.AggregateID, "column-aggregate-id", d.AggregateID, "column holding the aggregate id, the Kafka key; Debezium table.field.event.key")
	fs.StringVar(&cfg.Columns.Type, "column-type", d.Type, "column holding the event type (CloudEvents type; the Debezium formats need none)")
	fs.StringVar(&cfg.Columns.Payload, "column-payload", d.Payload, "column holding the JSON payload; Debezium table.field.event.payload")
	fs.StringVar(&cfg.Columns.Headers, "column-headers", d.Headers, "optional column holding a JSON object of CloudEvents extensions (by default headers, read only when it is json or jsonb; '' reads none)")
	fs.StringVar(&cfg.Columns.Time, "column-time", d.Time, "optional column holding the event time (else the commit time); debezium-outbox: the Kafka timestamp, a timestamp column, none by default (Debezium table.field.event.timestamp)")
	fs.StringVar(&cfg.Columns.SchemaVersion, "column-schema-version", "", "debezium-outbox: an integer column, the value schema's version (Debezium table.field.event.schema.version)")
	fs.StringVar(&cfg.Columns.Trace, "column-trace", schema.DefaultTraceColumn, "optional column holding the writer's trace context, a W3C traceparent or Properties text with traceparent=... (Debezium tracing.span.context.field); sent as traceparent and tracestate headers")
	fs.StringVar(&cfg.OnUpdate, "on-update", relay.UpdateWarn, "an UPDATE of the outbox table in the stream (an existing publication of every operation): warn or error log it, fatal stops (Debezium table.op.invalid.behavior)")
	fs.StringVar(&cfg.SkippedOperations, "skipped-operations", "t", "--format debezium: the change events not published, any of c (inserts), u (updates), d (deletes), t (truncates), comma-separated, or none (Debezium skipped.operations)")
	fs.StringVar(&m.unavailablePlaceholder, "unavailable-value-placeholder", schema.UnavailablePlaceholder, "--format debezium: what stands for a TOAST value an update left unchanged, which PostgreSQL does not send; hex:HEX for bytes (Debezium unavailable.value.placeholder)")
	fs.BoolVar(&cfg.SkipUnchanged, "skip-messages-without-change", false, "--format debezium: leave out an update that changed none of the columns its change event carries (REPLICA IDENTITY FULL tells; Debezium skip.messages.without.change)")
	fs.BoolVar(&m.tombstonesOnDelete, "tombstones-on-delete", true, "--format debezium: a delete's change event is followed by a tombstone, its key with a null value (Debezium tombstones.on.delete)")
	registerPollFlags(fs, &cfg.Poll)
	fs.StringVar(&m.additional, "column-additional", "", "more columns to carry, column:header|envelope|partition[:alias],... (Debezium table.fields.additional.placement)")
	fs.StringVar(&m.additionalMissing, "column-additional-missing", "error", "an additional column the table lacks: error, or ignore it (Debezium table.field.additional.missing)")
	const convs = "string (StringConverter), json (JsonConverter, schemas off), json-schemas, bytearray (ByteArrayConverter), avro (a schema registry's AvroConverter: --key-registry-url, --value-registry-url and their siblings), apicurio-json (Apicurio's ExtJsonConverter: JSON, its schema in the registry), binary[:DELEGATE] (Debezium's BinaryDataConverter) or a number converter: long, integer, short, float, double, boolean (Kafka's LongConverter and its siblings)"
	fs.StringVar(&m.key, "key-converter", "", "debezium formats: key as "+convs+"; default string for debezium-outbox, json for debezium")
	fs.StringVar(&m.cloudEventsMetadata, "cloudevents-metadata-source", "", "--value-converter cloudevents: Debezium's metadata.source, value (default: a change event's own source, op and transaction, the id and type generated) or header (after the router: from the source, op and transaction headers a HeaderFrom$Value before it copies, the id and type from the id and type headers), with id:generate or type:generate to generate either")
	fs.StringVar(&m.value, "value-converter", "", "debezium formats: value as "+convs+", or for change events cloudevents[:json] (Debezium's CloudEventsConverter, data with schemas unless :json), cloudevents:avro (the data in Avro through --value-registry-url) or cloudevents:avro:avro (the event too); default json")
	fs.StringVar(&m.header, "header-converter", "", "debezium-outbox: headers as "+convs+"; default string")
	m.keyRegistry = registerRegistryFlags(fs, "key")
	m.valueRegistry = registerRegistryFlags(fs, "value")
	fs.BoolVar(&m.expand, "expand-json-payload", false, "debezium-outbox: expand the payload into JSON (Debezium table.expand.json.payload)")
	fs.StringVar(&m.messageKeyColumns, "message-key-columns", "", "debezium: the change events' key columns instead of the primary key, as Debezium's message.key.columns: TABLE:COLUMN,…, several separated by ';', each a regular expression matched whole, in any case, against schema.table and schema.table.column")
	fs.StringVar(&m.columnMappings, "column-mappings", "", "debezium formats: string columns masked, hashed or truncated, as Debezium's column.mask.with.N.chars, column.mask.hash.ALGORITHM.with.salt.SALT (hash:, hex of the salt and the Java-serialized value), column.mask.hash.v2.ALGORITHM.with.salt.SALT (hash-v2:, of the salt and the value's UTF-8) and column.truncate.to.N.chars: truncate:N:PATTERN,…, mask:N:PATTERN,…, hash:ALGORITHM:SALT:PATTERN,… or hash-v2:ALGORITHM:SALT:PATTERN,…; the source type, length, scale and name in the field schema's parameters, as column.propagate.source.type (propagate:PATTERN,…) and datatype.propagate.source.type (propagate-type:PATTERN,…, matched against schema.table.type); several separated by ';', the first that matches a column applying, each PATTERN a regular expression matched whole, in any case, against schema.table.column")
	fs.StringVar(&m.columnExclude, "column-exclude-list", "", "debezium: regular expressions, matched whole in any case against schema.table.column, of the columns to leave out of the change events' before and after (Debezium column.exclude.list); a key column stays in the key, its type's placeholder in snapshot reads, as Debezium's")
	fs.StringVar(&m.columnInclude, "column-include-list", "", "debezium: as --column-exclude-list, the columns to keep, every other left out (Debezium column.include.list)")
	fs.StringVar(&m.nullBehavior, "json-payload-null-behavior", "ignore", "debezium-outbox with --expand-json-payload: an expanded payload's null fields left out of its schema (ignore) or in it as optional bytes (optional_bytes) (Debezium table.json.payload.null.behavior)")
	fs.BoolVar(&m.contextHeaders, "debezium-context-headers", false, "debezium formats: add the __debezium.context.* headers Debezium's connectors add (Debezium extended.headers.enabled)")
	fs.BoolVar(&m.tombstone, "tombstone-on-empty-payload", false, "debezium-outbox: a NULL or blank payload gives a tombstone, key and headers kept (Debezium route.tombstone.on.empty.payload)")
	fs.StringVar(&m.topicPrefix, "topic-prefix", "pgoutbox", "Debezium topic.prefix: debezium's topics <prefix>.<schema>.<table>, source.name, schema names")
	fs.BoolVar(&m.txMeta, "transaction-metadata", false, "debezium formats: write Debezium's transaction metadata (provide.transaction.metadata): a BEGIN and an END record per transaction that has events to --transaction-topic, and a transaction block in each change event; WAL only (--mode auto becomes wal, --mode poll is refused)")
	fs.StringVar(&m.txTopic, "transaction-topic", "", "with --transaction-metadata: the transaction topic (default <topic-prefix>.transaction; Debezium <topic.prefix>.<topic.transaction>)")
	fs.StringVar(&m.routeRegex, "route-topic-regex", "", "Debezium route.topic.regex, matched against the aggregate type (default "+`(?<routedByValue>.*)`+")")
	fs.StringVar(&m.routeReplaced, "route-topic-replacement", "", "Debezium route.topic.replacement, e.g. outbox.event.${routedByValue}; replaces --topic")
	fs.StringVar(&m.timePrecision, "time-precision-mode", string(schema.TimeAdaptive), "debezium formats: date, time and timestamp columns as Debezium's time.precision.mode types them: adaptive, adaptive_time_microseconds, connect, isostring, microseconds or nanoseconds")
	fs.StringVar(&m.intervalHandling, "interval-handling-mode", string(schema.IntervalNumeric), "debezium formats: interval columns as Debezium's interval.handling.mode types them: numeric (microseconds) or string (ISO-8601)")
	fs.StringVar(&m.decimalHandling, "decimal-handling-mode", string(schema.DecimalPrecise), "debezium formats: numeric and money columns as Debezium's decimal.handling.mode types them: precise, string or double")
	fs.StringVar(&m.binaryHandling, "binary-handling-mode", string(schema.BinaryBytes), "debezium formats: bytea columns as Debezium's binary.handling.mode types them: bytes, base64, base64-url-safe or hex")
	fs.StringVar(&m.transforms, "transforms", "", "debezium-outbox: Kafka Connect's transforms after the Outbox Event Router; debezium: Kafka Connect's transforms and ExtractNewRecordState on the change events; as a JSON object of a connector configuration's transforms and predicates keys (--config reads them from a Debezium configuration)")
	return m
}

// registerPollFlags registers the columns polling orders and marks rows by;
// run and status share them.
func registerPollFlags(fs *flag.FlagSet, c *poll.Config) {
	fs.StringVar(&c.Order, "column-order", outbox.SeqColumn, "polling: the column giving insertion order, an integer set at insert that only grows (seq, or the table's own bigserial or identity id)")
	fs.StringVar(&c.Status, "column-status", "", "polling: the table's own status column; rows with --status-pending are published and set to --status-published (instead of published_at)")
	fs.StringVar(&c.StatusPending, "status-pending", "", "polling: the status value of a row not yet published, e.g. PENDING, or several, comma-separated: PENDING,FAILED")
	fs.StringVar(&c.StatusPublished, "status-published", "", "polling: the status value polling sets once Kafka acknowledged a row, e.g. PUBLISHED")
	fs.StringVar(&c.Published, "column-published", outbox.PublishedColumn, "polling, without a status column: the timestamp column that marks a row published, null until then (a team's own processed_at); rows from before the polling columns are polled while it is null")
	fs.StringVar(&c.ProcessedAt, "column-processed-at", "", "polling: a timestamp column set to now() with --status-published, e.g. processed_at")
	fs.BoolVar(&c.SnapshotAll, "snapshot-all", false, "a snapshot publishes every row, also those --column-published marks published, as Debezium's does (the default with a Debezium configuration); otherwise only the rows it leaves null")
}

// ownPublished notes a --column-published that was given (on the command
// line, in the environment or in a file): the column is the table's own,
// under pgoutbox's name too.
func ownPublished(fs *flag.FlagSet, c *poll.Config) {
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "column-published" {
			c.OwnPublished = true
		}
	})
}

// apply completes cfg once flags are parsed and cfg.Encoder.Format is set.
// For the Debezium formats it reads the table's NOT NULL columns and
// primary key from the catalog, which schemas and change-event keys need.
func (m *mappingFlags) apply(ctx context.Context, fs *flag.FlagSet, cfg *relay.Config, c *common, tables []string) error {
	if err := m.build(fs, cfg); err != nil {
		return err
	}
	format := cfg.Encoder.Format
	if format != schema.Debezium && format != schema.DebeziumOutbox {
		return nil
	}
	// Each table's shape: change events take their own table's (the
	// first's in the fields, the others' in Tables where they differ);
	// the router's records one mapping, so its tables must agree.
	var first schema.TableShape
	for i, table := range tables {
		t, err := outbox.ParseTable(table)
		if err != nil {
			return err
		}
		sh, unmapped, err := m.shapeAndUnmapped(ctx, c, t)
		if err != nil {
			return err
		}
		if format == schema.Debezium && len(unmapped) > 0 {
			m.unmapped = append(m.unmapped, t.String()+": "+strings.Join(unmapped, ", "))
		}
		switch {
		case i == 0:
			first = sh
			d := &cfg.Encoder.Debezium
			d.NotNull, d.Defaults, d.KeyColumns, d.NullKey = sh.NotNull, sh.Defaults, sh.KeyColumns, sh.NullKey
		case sameShape(sh, first):
		case format == schema.DebeziumOutbox:
			return fmt.Errorf("--format %s with several tables needs them of one shape (columns, NOT NULL, primary key, defaults); %s and %s differ: run a pipeline per table", format, tables[0], table)
		default:
			if cfg.Encoder.Debezium.Tables == nil {
				cfg.Encoder.Debezium.Tables = map[string]schema.TableShape{}
			}
			cfg.Encoder.Debezium.Tables[t.Schema+"."+t.Name] = sh
		}
	}
	return nil
}

// shape is what table t's change events take from the catalog: its NOT
// NULL columns, defaults and key (message.key.columns' where it names
// columns of t, else the primary key's).
func (m *mappingFlags) shape(ctx context.Context, c *common, t outbox.Table) (schema.TableShape, error) {
	sh, _, err := m.shapeAndUnmapped(ctx, c, t)
	return sh, err
}

// shapeAndUnmapped is shape, with the columns of types a change event
// leaves out (tableShape.unmapped).
func (m *mappingFlags) shapeAndUnmapped(ctx context.Context, c *common, t outbox.Table) (schema.TableShape, []string, error) {
	shape, err := tableInfo(ctx, c, t)
	if err != nil {
		return schema.TableShape{}, nil, err
	}
	key := shape.key
	if m.messageKeyColumns != "" {
		mk, err := messageKey(m.messageKeyColumns, t, shape.columns)
		if err != nil {
			return schema.TableShape{}, nil, err
		}
		if mk != nil {
			key = mk
		}
	}
	// Debezium writes a table without a key with a null Kafka key, not
	// the id column's.
	return schema.TableShape{NotNull: shape.notNull, Defaults: shape.defaults, KeyColumns: key, NullKey: len(key) == 0}, shape.unmapped, nil
}

// sameShape tells whether two tables have one shape.
func sameShape(a, b schema.TableShape) bool {
	return maps.Equal(a.NotNull, b.NotNull) && maps.Equal(a.Defaults, b.Defaults) && slices.Equal(a.KeyColumns, b.KeyColumns) && a.NullKey == b.NullKey
}

// messageKey is the key Debezium's message.key.columns (CustomKeyMapper)
// gives table: for each table:column pattern, in the order given, the
// table's columns whose schema.table.column it matches whole, in any
// case; nil (the primary key) when none does.
func messageKey(spec string, t outbox.Table, columns []string) ([]string, error) {
	var key []string
	for _, item := range strings.Split(spec, ";") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		table, cols, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok || strings.TrimSpace(cols) == "" {
			return nil, fmt.Errorf("--message-key-columns: %q: want table:column[,column…]", item)
		}
		for _, c := range strings.Split(cols, ",") {
			ps, err := schema.ParsePatterns(table + "." + strings.TrimSpace(c))
			if err != nil {
				return nil, fmt.Errorf("--message-key-columns: %q: %w", item, err)
			}
			for _, col := range columns {
				if ps.Match(t.Schema + "." + t.Name + "." + col) {
					key = append(key, col)
				}
			}
		}
	}
	return key, nil
}

// build fills cfg's mapping, format options and converters from the
// parsed flags, without reading the database.
func (m *mappingFlags) build(fs *flag.FlagSet, cfg *relay.Config) error {
	if m.additional != "" {
		add, err := schema.ParseAdditionalFields(m.additional)
		if err != nil {
			return fmt.Errorf("--column-additional: %w", err)
		}
		cfg.Columns.Additional = add
	}
	if m.txMeta {
		cfg.TransactionTopic = m.txTopic
		if cfg.TransactionTopic == "" {
			cfg.TransactionTopic = m.topicPrefix + ".transaction"
		}
	}
	switch m.additionalMissing {
	case "error":
	case "ignore":
		cfg.Columns.IgnoreMissingAdditional = true
	default:
		return fmt.Errorf("--column-additional-missing %q: use error or ignore", m.additionalMissing)
	}
	for _, f := range []struct {
		name string
		v    string
		dst  *schema.Converter
	}{{"key-converter", m.key, &cfg.Encoder.Debezium.Key}, {"value-converter", m.value, &cfg.Encoder.Debezium.Value}, {"header-converter", m.header, &cfg.Encoder.Debezium.Header}} {
		c, err := schema.ParseConverter(f.v)
		if err != nil {
			return fmt.Errorf("--%s: %w", f.name, err)
		}
		*f.dst = c
	}
	var err error
	if cfg.Registries.Key, err = m.keyRegistry.config(); err != nil {
		return err
	}
	if cfg.Registries.Value, err = m.valueRegistry.config(); err != nil {
		return err
	}
	d := &cfg.Encoder.Debezium
	if d.TimePrecision, err = schema.ParseTimePrecision(m.timePrecision); err != nil {
		return fmt.Errorf("--time-precision-mode: %w", err)
	}
	if d.DecimalHandling, err = schema.ParseDecimalHandling(m.decimalHandling); err != nil {
		return fmt.Errorf("--decimal-handling-mode: %w", err)
	}
	if d.IntervalHandling, err = schema.ParseIntervalHandling(m.intervalHandling); err != nil {
		return fmt.Errorf("--interval-handling-mode: %w", err)
	}
	if d.ColumnMappings, err = schema.ParseColumnMappings(m.columnMappings); err != nil {
		return fmt.Errorf("--column-mappings: %w", err)
	}
	if d.ColumnFilter, err = columnFilter(m.columnExclude, m.columnInclude); err != nil {
		return err
	}
	if d.CloudEventsMetadata, err = schema.ParseCloudEventsMetadata(m.cloudEventsMetadata); err != nil {
		return fmt.Errorf("--cloudevents-metadata-source: %w", err)
	}
	if d.BinaryHandling, err = schema.ParseBinaryHandling(m.binaryHandling); err != nil {
		return fmt.Errorf("--binary-handling-mode: %w", err)
	}
	cfg.Encoder.Debezium.ExpandJSONPayload = m.expand
	switch m.nullBehavior {
	case "ignore":
	case "optional_bytes":
		cfg.Encoder.Debezium.JSONPayloadNullBytes = true
	default:
		return fmt.Errorf("--json-payload-null-behavior %q: use ignore or optional_bytes", m.nullBehavior)
	}
	cfg.Encoder.Debezium.TombstoneOnEmpty = m.tombstone
	cfg.NoTombstones = !m.tombstonesOnDelete
	if h, ok := strings.CutPrefix(m.unavailablePlaceholder, "hex:"); ok {
		b, err := hex.DecodeString(h)
		if err != nil {
			return fmt.Errorf("--unavailable-value-placeholder %q: not hex after hex: (%v)", m.unavailablePlaceholder, err)
		}
		cfg.UnavailablePlaceholder = b
	} else if m.unavailablePlaceholder != schema.UnavailablePlaceholder {
		cfg.UnavailablePlaceholder = []byte(m.unavailablePlaceholder)
	}
	cfg.Encoder.Debezium.ContextHeaders = m.contextHeaders
	cfg.Encoder.Debezium.TopicPrefix = m.topicPrefix
	cfg.Encoder.Debezium.Version = "pgoutbox-" + version
	cfg.Router.RouteRegex = m.routeRegex
	cfg.Router.RouteReplacement = m.routeReplaced
	if m.transforms != "" {
		if err := json.Unmarshal([]byte(m.transforms), &cfg.Transforms.Props); err != nil {
			return fmt.Errorf("--transforms: not a JSON object of strings: %w", err)
		}
		if err := cfg.Transforms.Validate(); err != nil {
			return fmt.Errorf("--transforms: %w", err)
		}
	}

	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	ownPublished(fs, &cfg.Poll)
	// Given empty, no headers column is read, not even one of the default
	// name: a team's own headers column may hold something else.
	cfg.Columns.NoHeaders = given["column-headers"] && cfg.Columns.Headers == ""
	topicSet := given["topic"]
	format := cfg.Encoder.Format
	if format == schema.Debezium || format == schema.DebeziumOutbox {
		// Debezium reads no headers column, and takes the Kafka timestamp
		// from a column only when told to.
		if !given["column-headers"] {
			cfg.Columns.Headers = ""
		}
		if !given["column-time"] {
			cfg.Columns.Time = ""
		}
	}
	if (format == schema.CloudEvents || format == schema.CloudEventsBinary) && !given["column-time"] {
		// The default: created_at when it is a timestamp (schema.Columns).
		cfg.Columns.Time = ""
	}
	if (format == schema.CloudEvents || format == schema.CloudEventsBinary) && !given["column-headers"] {
		// The default: headers when it is json or jsonb (schema.Columns).
		cfg.Columns.Headers = ""
	}
	if format == schema.Debezium && !topicSet && m.routeReplaced == "" {
		cfg.Router.Topic = m.topicPrefix + ".{schema}.{table}"
	}
	if format == schema.CloudEvents || format == schema.CloudEventsBinary {
		for _, a := range cfg.Columns.Additional {
			alias := a.Alias
			if alias == "" {
				alias = a.Column
			}
			if a.Placement != schema.PlaceEnvelope {
				continue
			}
			if err := schema.ValidateExtensionName(alias); err != nil {
				return fmt.Errorf("--column-additional %s: with --format %s an envelope field is a CloudEvents extension, and %w; give an alias", a.Column, format, err)
			}
		}
	}
	return nil
}

// mappingCheck is what migrate and slot create take of run's settings to
// check, before they create anything, that run could relay the table:
// the format and the column mapping. Given the same configuration as run,
// they refuse a mapping run would refuse.
type mappingCheck struct {
	cfg    relay.Config
	format string
	m      *mappingFlags
}

func (mc *mappingCheck) register(fs *flag.FlagSet) {
	fs.StringVar(&mc.format, "format", "cloudevents", formatUsage+" (checked against the table as run would use it)")
	mc.m = registerMappingFlags(fs, &mc.cfg)
}

// check checks the mapping against each table's columns; a table that
// does not exist is checked against the outbox table migrate creates when
// missingOK, and is an error otherwise. Only a mapping that was given (a
// format or a column mapping, on the command line, in the environment or
// in the configuration file; a Debezium configuration always gives one)
// is checked: `migrate --table t` alone prepares a table for polling
// whatever will relay it.
func (mc *mappingCheck) check(ctx context.Context, fs *flag.FlagSet, conn *pgx.Conn, tables []string, missingOK bool) error {
	given := false
	pollFlags := flag.NewFlagSet("", flag.ContinueOnError)
	registerPollFlags(pollFlags, &poll.Config{})
	fs.Visit(func(f *flag.Flag) {
		if pollFlags.Lookup(f.Name) == nil && (f.Name == "format" || isMappingFlag(f.Name)) {
			given = true
		}
	})
	if !given {
		return nil
	}
	f, err := schema.ParseFormat(mc.format)
	if err != nil {
		return fmt.Errorf("--format: %w", err)
	}
	cfg := mc.cfg
	cfg.Encoder.Format = f
	if err := mc.m.build(fs, &cfg); err != nil {
		return err
	}
	for _, name := range tables {
		t, err := outbox.ParseTable(name)
		if err != nil {
			return err
		}
		cols, err := replication.TableColumns(ctx, conn, t)
		if errors.Is(err, replication.ErrNoTable) && missingOK {
			cols = migrations.OutboxColumns()
		} else if err != nil {
			return err
		}
		c := cfg
		c.Replication.Table, c.Poll.Table = name, name
		if err := relay.CheckColumns(t, cols, c); err != nil {
			return err
		}
	}
	return nil
}

// changeEvents tells whether run, given the same flags, publishes change
// events of the tables (relay.Config.ChangeEvents), whose updates and
// deletes the publication slot create makes must carry.
func (mc *mappingCheck) changeEvents() bool {
	f, err := schema.ParseFormat(mc.format)
	if err != nil {
		return false
	}
	cfg := mc.cfg
	cfg.Encoder.Format = f
	return cfg.ChangeEvents()
}

// isMappingFlag tells whether a flag is one of registerMappingFlags'.
func isMappingFlag(name string) bool {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	registerMappingFlags(fs, &relay.Config{})
	return fs.Lookup(name) != nil
}

// tableShape is what the Debezium formats read of a table from the
// catalog: its NOT NULL columns, its primary key columns in key order and
// its columns' default expressions.
type tableShape struct {
	notNull  map[string]bool
	key      []string
	defaults map[string]string
	columns  []string // in the table's order
	// unmapped are the columns of types the change events leave out
	// (schema.MapsType), "name (type)".
	unmapped []string
}

// tableInfo reads the table's shape. indkey is an int2vector, whose
// subscripts start at 0: the key's first column is at array_lower; the
// columns after indnkeyatts are a primary key's INCLUDE columns, which
// the JDBC driver leaves out of getPrimaryKeys. A default is pg_get_expr's
// text, as the JDBC driver gives Debezium it; a generated column's
// expression is no default. Without a primary key the key is the table's
// first unique index (uniqueIndex), as Debezium reads it.
func tableInfo(ctx context.Context, c *common, t outbox.Table) (tableShape, error) {
	conn, err := c.connectUser(ctx)
	if err != nil {
		return tableShape{}, fmt.Errorf("reading the outbox table's columns: %w", err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `
SELECT a.attname, a.attnotnull,
       coalesce(CASE WHEN array_position(i.indkey::int2[], a.attnum) - array_lower(i.indkey::int2[], 1) < i.indnkeyatts
         THEN array_position(i.indkey::int2[], a.attnum) - array_lower(i.indkey::int2[], 1) + 1 END, 0) AS keypos,
       CASE WHEN a.attgenerated = '' THEN pg_get_expr(d.adbin, d.adrelid) END,
       a.atttypid::bigint, format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`, t.Schema, t.Name)
	if err != nil {
		return tableShape{}, fmt.Errorf("reading the outbox table's columns: %w", err)
	}
	defer rows.Close()
	shape := tableShape{notNull: map[string]bool{}, defaults: map[string]string{}}
	keyPos := map[int]string{}
	n := 0
	for rows.Next() {
		var (
			col     string
			nn      bool
			pos     int
			def     *string
			typ     int64
			typName string
		)
		if err := rows.Scan(&col, &nn, &pos, &def, &typ, &typName); err != nil {
			return tableShape{}, err
		}
		if !schema.MapsType(uint32(typ)) {
			shape.unmapped = append(shape.unmapped, col+" ("+typName+")")
		}
		n++
		shape.columns = append(shape.columns, col)
		shape.notNull[col] = nn
		if pos > 0 {
			keyPos[pos] = col
		}
		if def != nil {
			shape.defaults[col] = *def
		}
	}
	if err := rows.Err(); err != nil {
		return tableShape{}, err
	}
	if n == 0 {
		return tableShape{}, fmt.Errorf("table %s: %w", t, errNoTable)
	}
	for i := 1; i <= len(keyPos); i++ {
		shape.key = append(shape.key, keyPos[i])
	}
	rows.Close()
	if len(shape.key) == 0 {
		if shape.key, err = uniqueIndex(ctx, conn, t, shape.columns); err != nil {
			return tableShape{}, err
		}
	}
	return shape, nil
}

// uniqueIndex is the key Debezium gives a table without a primary key
// (JdbcConnection.readTableUniqueIndices): the columns of its first
// unique index in the JDBC driver's getIndexInfo order (a clustered one
// first, then by name), INCLUDE columns too, partial and invalid indexes
// not left out; none without one. Debezium fails to read a table whose
// first unique index has an expression (no column of that name), so
// pgoutbox refuses it.
func uniqueIndex(ctx context.Context, conn *pgx.Conn, t outbox.Table, columns []string) ([]string, error) {
	rows, err := conn.Query(ctx, `
SELECT ci.relname, trim(both '"' from pg_get_indexdef(ci.oid, k.n::int, false))
FROM pg_index i
JOIN pg_class ct ON ct.oid = i.indrelid
JOIN pg_namespace n ON n.oid = ct.relnamespace
JOIN pg_class ci ON ci.oid = i.indexrelid
CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
WHERE n.nspname = $1 AND ct.relname = $2 AND i.indisunique
ORDER BY NOT i.indisclustered, ci.relname, k.n`, t.Schema, t.Name)
	if err != nil {
		return nil, fmt.Errorf("reading the outbox table's unique indexes: %w", err)
	}
	var key []string
	var first string
	for rows.Next() {
		var index, col string
		if err := rows.Scan(&index, &col); err != nil {
			return nil, err
		}
		if first == "" {
			first = index
		}
		if index == first {
			key = append(key, col)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, col := range key {
		if !slices.Contains(columns, col) {
			return nil, fmt.Errorf("table %s has no primary key, and its first unique index %s (which Debezium takes as the key) holds %s, not a column: Debezium fails to read the table; add a primary key", t, first, col)
		}
	}
	return key, nil
}

// columnFilter reads --column-exclude-list or --column-include-list, of
// which Debezium takes one.
func columnFilter(exclude, include string) (schema.ColumnFilter, error) {
	switch {
	case exclude != "" && include != "":
		return schema.ColumnFilter{}, errors.New("--column-exclude-list and --column-include-list: give one, as Debezium refuses column.include.list with column.exclude.list")
	case include != "":
		ps, err := schema.ParsePatterns(include)
		if err != nil {
			return schema.ColumnFilter{}, fmt.Errorf("--column-include-list: %w", err)
		}
		return schema.ColumnFilter{Patterns: ps, Include: true}, nil
	case exclude != "":
		ps, err := schema.ParsePatterns(exclude)
		if err != nil {
			return schema.ColumnFilter{}, fmt.Errorf("--column-exclude-list: %w", err)
		}
		return schema.ColumnFilter{Patterns: ps}, nil
	}
	return schema.ColumnFilter{}, nil
}
