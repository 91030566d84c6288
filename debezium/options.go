package debezium

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pgoutbox/pgoutbox/schema"
)

// Part is where in a configuration an option is written.
type Part int

// The parts.
const (
	// Connector options: the connector's config in a Kafka Connect
	// JSON, debezium.source.* in Debezium Server.
	Connector Part = iota
	// Router options: the Outbox Event Router's, after
	// transforms.<name>. (debezium.transforms.<name>. in Debezium
	// Server).
	Router
	// Converter options: key.converter, value.converter and
	// header.converter with their options (Kafka Connect).
	Converter
	// Server options: Debezium Server's own, debezium.sink.* and
	// debezium.format.*.
	Server
)

// Option is one row of the table: a Debezium option and what pgoutbox
// makes of it.
type Option struct {
	Part Part
	// Key is the option's name within its part. A key ending in "." is
	// every option under it.
	Key string
	// Default is Debezium's default value, "" for none.
	Default string
	// Setting is the run flag the option sets, "" for none; Ignored for
	// an option pgoutbox does not use.
	Setting string
	// Takes says what pgoutbox makes of the values it takes.
	Takes string
	// Refuses says which values pgoutbox refuses and why, "" when it
	// refuses none.
	Refuses string
	// read handles one value; key is the option's name as written.
	read func(r *reading, key, v string)
}

// Ignored is the Setting of the options pgoutbox does not use.
const Ignored = "ignored"

// Options returns the table, in the order docs/debezium.md lists it.
func Options() []Option { return options }

// lookup finds the row of key in part: an exact key, else the longest
// key ending in "." that key starts with.
func lookup(part Part, key string) (Option, bool) {
	var best Option
	found := false
	for _, o := range options {
		switch {
		case o.Part != part:
		case o.Key == key:
			return o, true
		case strings.HasSuffix(o.Key, ".") && strings.HasPrefix(key, o.Key) && len(o.Key) > len(best.Key):
			best, found = o, true
		}
	}
	return best, found
}

// Helpers for rows: what the read function does with a value.

// toFlag passes the value to the flag as it is.
func toFlag(flag string) func(*reading, string, string) {
	return func(r *reading, _, v string) { r.set(flag, v) }
}

// accept takes the option without a setting.
func accept(*reading, string, string) {}

// ignore names the option in the warning, with why.
func ignore(why string) func(*reading, string, string) {
	return func(r *reading, k, _ string) {
		if why == "" {
			r.ignore(k)
			return
		}
		r.ignore(k + " (" + why + ")")
	}
}

// oneOf maps the values it knows to the flag's (no flag: taken as they
// are) and refuses the others with refusal, a format with the value's %q.
func oneOf(flag string, values map[string]string, refusal string) func(*reading, string, string) {
	return func(r *reading, k, v string) {
		out, ok := values[v]
		switch {
		case !ok:
			r.refuse(k, fmt.Sprintf(refusal, v))
		case flag != "" && out != "":
			r.set(flag, out)
		}
	}
}

// refuseValue refuses the one value that the option cannot take.
func refuseValue(bad, why string) func(*reading, string, string) {
	return func(r *reading, k, v string) {
		if v == bad {
			r.refuse(k, why)
		}
	}
}

// database collects a database.* option into the connection URL.
func database(field func(*dbOptions) *string) func(*reading, string, string) {
	return func(r *reading, _, v string) { *field(&r.db) = v }
}

var options = []Option{
	// The connector.
	{Part: Connector, Key: "connector.class", Takes: "`io.debezium.connector.postgresql.PostgresConnector`",
		Refuses: "another connector: pgoutbox replaces the PostgreSQL connector only",
		read: func(r *reading, k, v string) {
			if !strings.HasSuffix(v, "PostgresConnector") {
				r.refuse(k, fmt.Sprintf("%q: pgoutbox replaces the PostgreSQL connector only", v))
			}
		}},
	{Part: Connector, Key: "name", Takes: "any: not used", read: accept},
	{Part: Connector, Key: "tasks.max", Takes: "any: one task", read: accept},
	{Part: Connector, Key: "database.hostname", Setting: "database-url", Takes: "the host of `--database-url`",
		read: database(func(d *dbOptions) *string { return &d.host })},
	{Part: Connector, Key: "database.port", Setting: "database-url", Takes: "its port",
		read: database(func(d *dbOptions) *string { return &d.port })},
	{Part: Connector, Key: "database.user", Setting: "database-url", Takes: "its user",
		read: database(func(d *dbOptions) *string { return &d.user })},
	{Part: Connector, Key: "database.password", Setting: "database-url", Takes: "its password",
		read: database(func(d *dbOptions) *string { return &d.password })},
	{Part: Connector, Key: "database.dbname", Setting: "database-url", Takes: "its database",
		read: database(func(d *dbOptions) *string { return &d.name })},
	{Part: Connector, Key: "database.sslmode", Setting: "database-url", Takes: "its `sslmode`",
		read: database(func(d *dbOptions) *string { return &d.sslmode })},
	{Part: Connector, Key: "topic.prefix", Setting: "topic-prefix", Takes: "any", read: toFlag("topic-prefix")},
	{Part: Connector, Key: "database.server.name", Setting: "topic-prefix", Takes: "any (the 1.x name of `topic.prefix`)",
		read: toFlag("topic-prefix")},
	{Part: Connector, Key: "plugin.name", Default: "decoderbufs", Takes: "`pgoutput`; another is ignored: pgoutbox always decodes with pgoutput",
		read: func(r *reading, k, v string) {
			if v != "pgoutput" {
				r.ignore(k + "=" + v + " (pgoutbox always decodes with pgoutput)")
			}
		}},
	{Part: Connector, Key: "slot.name", Default: "debezium", Setting: "slot", Takes: "any", read: toFlag("slot")},
	{Part: Connector, Key: "publication.name", Default: "dbz_publication", Setting: "publication", Takes: "any",
		read: toFlag("publication")},
	{Part: Connector, Key: "publication.autocreate.mode", Default: "all_tables",
		Takes:   "`all_tables`, `filtered`, `disabled`: an existing publication is used, a missing one is created for the outbox tables only",
		Refuses: "`no_tables`: pgoutbox needs the outbox table in the publication",
		read: oneOf("", map[string]string{"all_tables": "", "filtered": "", "disabled": ""},
			"%q: pgoutbox needs the outbox table in the publication")},
	{Part: Connector, Key: "table.include.list", Setting: "table",
		Takes: "one table, several, or regular expressions matched whole against `schema.table` at start (`--table-include-list`)",
		read:  includeList},
	{Part: Connector, Key: "table.whitelist", Setting: "table", Takes: "as `table.include.list` (its 1.x name)", read: includeList},
	{Part: Connector, Key: "schema.include.list", Takes: "a list that includes every table named",
		Refuses: "a list that excludes a table of `table.include.list`", read: accept},
	{Part: Connector, Key: "schema.whitelist", Takes: "as `schema.include.list` (its 1.x name)", read: accept},
	{Part: Connector, Key: "heartbeat.interval.ms", Default: "0", Setting: "heartbeat-interval",
		Takes:   "> 0 sets the interval; 0 keeps pgoutbox's heartbeat, which produces nothing",
		Refuses: "anything but a non-negative number", read: heartbeat},
	{Part: Connector, Key: "snapshot.mode", Default: "initial", Setting: "snapshot-mode",
		Takes:   "`initial` (also when unset, Debezium's default); `when_needed`, as `initial` with a lost slot filled by polling; `no_data`, `never`",
		Refuses: "the others (`always`, `initial_only`, `configuration_based`, ...)",
		read: oneOf("snapshot-mode", map[string]string{"no_data": "no_data", "never": "no_data", "initial": "initial", "when_needed": "when_needed"},
			"%q: pgoutbox snapshots on the first start only; use initial, when_needed or no_data")},
	{Part: Connector, Key: "snapshot.select.statement.overrides.",
		Takes:   "without a snapshot (`snapshot.mode` `no_data`)",
		Refuses: "with a snapshot (`snapshot.mode` `initial`, `when_needed` or unset): pgoutbox runs no SELECT of a configuration's own; `--snapshot-after <id>` with `--column-order` publishes only the rows above an id",
		read:    accept}, // checked with snapshot.mode (translate.go)
	{Part: Connector, Key: "snapshot.select.statement.overrides", Setting: Ignored, Takes: "the list of the tables above", read: ignore("")},
	{Part: Connector, Key: "slot.drop.on.stop", Default: "false", Takes: "`false`",
		Refuses: "`true`: dropping the slot on stop loses events; `pgoutbox slot drop` drops it",
		read:    refuseValue("true", "pgoutbox never drops its slot on stop (that loses events); use `pgoutbox slot drop`")},
	{Part: Connector, Key: "provide.transaction.metadata", Default: "false", Takes: "`false`",
		Refuses: "`true`: transaction metadata topics are not written",
		read:    refuseValue("true", "transaction metadata topics are not supported")},
	{Part: Connector, Key: "extended.headers.enabled", Default: "true", Setting: "debezium-context-headers",
		Takes: "`__debezium.context.*` headers first, unless `false`", read: accept}, // read in translate.go
	{Part: Connector, Key: "decimal.handling.mode", Default: "precise", Takes: "`precise`",
		Refuses: "the others: not rendered yet", read: onlyDefault("precise")},
	{Part: Connector, Key: "time.precision.mode", Default: "adaptive", Takes: "`adaptive`",
		Refuses: "the others: not rendered yet", read: onlyDefault("adaptive")},
	{Part: Connector, Key: "binary.handling.mode", Default: "bytes", Takes: "`bytes`",
		Refuses: "the others: not rendered yet", read: onlyDefault("bytes")},
	{Part: Connector, Key: "transforms", Setting: "format",
		Takes:   "one `io.debezium.transforms.outbox.EventRouter`: `--format debezium-outbox`; none: `--format debezium`, the change events",
		Refuses: "other transforms (for example `ExtractNewRecordState`), two routers",
		read:    accept}, // read first (translate.go)
	{Part: Connector, Key: "key.converter.schemas.enable", Takes: "any: read with the converters", read: accept},

	// The Outbox Event Router.
	{Part: Router, Key: "table.field.event.id", Default: "id", Setting: "column-id",
		Takes: "header `id` with the column's schema; NULL passes", read: toFlag("column-id")},
	{Part: Router, Key: "table.field.event.key", Default: "aggregateid", Setting: "column-aggregate-id",
		Takes: "the key, with the column's schema; NULL is a null key (string, bytes converters) or JSON `null`",
		read:  toFlag("column-aggregate-id")},
	{Part: Router, Key: "table.field.event.type", Default: "type", Setting: "column-type",
		Takes: "not read by Debezium's router since 1.2; names CloudEvents' type column", read: toFlag("column-type")},
	{Part: Router, Key: "table.field.event.payload", Default: "payload", Setting: "column-payload",
		Takes: "any type, unchecked", read: toFlag("column-payload")},
	{Part: Router, Key: "table.field.event.timestamp", Setting: "column-time",
		Takes: "the record timestamp, truncated to ms; `timestamptz` accepted", read: toFlag("column-time")},
	{Part: Router, Key: "table.field.event.schema.version", Setting: "column-schema-version",
		Takes: "an integer column", read: toFlag("column-schema-version")},
	{Part: Router, Key: "route.by.field", Default: "aggregatetype", Setting: "column-aggregate-type",
		Takes: "a text column; NULL dead-lettered", read: toFlag("column-aggregate-type")},
	{Part: Router, Key: "route.topic.regex", Default: "(?<routedByValue>.*)", Setting: "route-topic-regex",
		Takes: "RE2: no lookaround or backreferences", read: toFlag("route-topic-regex")},
	{Part: Router, Key: "route.topic.replacement", Default: "outbox.event.${routedByValue}", Setting: "route-topic-replacement",
		Takes: "any", read: toFlag("route-topic-replacement")},
	{Part: Router, Key: "table.fields.additional.placement", Setting: "column-additional",
		Takes:   "header, envelope, partition, any case",
		Refuses: "`\"\"` or an item without a placement, as Debezium refuses them", read: placements},
	{Part: Router, Key: "table.field.additional.missing", Default: "error", Setting: "column-additional-missing",
		Takes: "`error`, `ignore`, any case", Refuses: "other values, as Debezium does", read: additionalMissing},
	{Part: Router, Key: "table.fields.additional.error.on.missing", Setting: "column-additional-missing",
		Takes: "`true`, `false` (Debezium 2.5-3.5)", Refuses: "other values", read: additionalMissing},
	{Part: Router, Key: "table.expand.json.payload", Default: "false", Setting: "expand-json-payload",
		Takes: "`true`, `false`", read: toFlag("expand-json-payload")},
	{Part: Router, Key: "route.tombstone.on.empty.payload", Default: "false", Setting: "tombstone-on-empty-payload",
		Takes: "NULL or blank text payload gives a tombstone, key and headers kept", read: toFlag("tombstone-on-empty-payload")},
	{Part: Router, Key: "table.op.invalid.behavior", Default: "warn", Setting: "on-update",
		Takes: "`warn`, `error`, `fatal`, any case; deletes skipped", Refuses: "other values, as Debezium does",
		read: func(r *reading, k, v string) {
			switch b := strings.ToLower(strings.TrimSpace(v)); b {
			case "warn", "error", "fatal":
				r.set("on-update", b)
			default:
				r.refuse(k, fmt.Sprintf("%q: want warn, error or fatal", v))
			}
		}},
	{Part: Router, Key: "tracing.span.context.field", Default: "tracingspancontext", Setting: "column-trace",
		Takes: "`traceparent`/`tracestate` headers", read: toFlag("column-trace")},
	{Part: Router, Key: "tracing.operation.name", Setting: Ignored, Takes: "pgoutbox opens no spans",
		read: ignore("pgoutbox passes the row's trace context on; it opens no spans")},
	{Part: Router, Key: "tracing.with.context.field.only", Setting: Ignored, Takes: "pgoutbox opens no spans",
		read: ignore("pgoutbox passes the row's trace context on; it opens no spans")},
	{Part: Router, Key: "table.json.payload.null.behavior", Default: "ignore", Takes: "`ignore`",
		Refuses: "the others: not implemented", read: onlyIgnore},
	{Part: Router, Key: "table.json.payload.empty.array.behavior", Default: "ignore", Takes: "`ignore`",
		Refuses: "the others: not implemented", read: onlyIgnore},

	// The converters (converters.go), by part.
	{Part: Converter, Key: "key.converter", Default: "JsonConverter", Setting: "key-converter",
		Takes: "a class of the converter table below; unset, the worker's (Kafka's default)", Refuses: "the others", read: accept},
	{Part: Converter, Key: "value.converter", Default: "JsonConverter", Setting: "value-converter",
		Takes: "a class of the converter table below; unset, the worker's (Kafka's default)", Refuses: "the others", read: accept},
	{Part: Converter, Key: "header.converter", Default: "SimpleHeaderConverter", Setting: "header-converter",
		Takes: "a class of the converter table below; unset, the worker's (Kafka's default)", Refuses: "the others", read: accept},
	{Part: Converter, Key: "<part>.converter.schemas.enable", Default: "true",
		Takes: "JsonConverter: `false` writes without schemas (`json`), else `json-schemas`", read: accept},
	{Part: Converter, Key: "<part>.converter.delegate.converter.type",
		Takes:   "BinaryDataConverter's delegate for what is not bytes: StringConverter, JsonConverter (with its `.schemas.enable`), ByteArrayConverter; a header converter has none",
		Refuses: "another delegate", read: accept},

	// Debezium Server's own.
	{Part: Server, Key: "debezium.sink.type", Takes: "`kafka`", Refuses: "another sink: pgoutbox produces to Kafka only",
		read: func(r *reading, k, v string) {
			if v != "kafka" {
				r.refuse(k, fmt.Sprintf("%q: pgoutbox produces to Kafka only", v))
			}
		}},
	{Part: Server, Key: "debezium.sink.kafka.producer.bootstrap.servers", Setting: "kafka-brokers", Takes: "any",
		read: toFlag("kafka-brokers")},
	{Part: Server, Key: "debezium.format.key", Default: "json", Setting: "key-converter",
		Takes:   "`json`, `jsonbytearray` (JsonConverter), `simplestring` (StringConverter), `binary` (BinaryDataConverter)",
		Refuses: "the others", read: accept},
	{Part: Server, Key: "debezium.format.value", Default: "json", Setting: "value-converter",
		Takes: "as `debezium.format.key`", Refuses: "the others", read: accept},
	{Part: Server, Key: "debezium.format.header", Default: "json", Setting: "header-converter",
		Takes: "`json`, `jsonbytearray`", Refuses: "the others, which Debezium Server refuses too", read: accept},
	{Part: Server, Key: "debezium.format.<part>.", Takes: "the part's converter options, as `<part>.converter.*` above", read: accept},
	{Part: Server, Key: "debezium.format.", Takes: "every part's converter options (`debezium.format.schemas.enable`)", read: accept},
	{Part: Server, Key: "debezium.sink.kafka.producer.key.serializer", Takes: "any: the converter makes the bytes", read: accept},
	{Part: Server, Key: "debezium.sink.kafka.producer.value.serializer", Takes: "any: the converter makes the bytes", read: accept},
}

// onlyDefault refuses a value other than def.
func onlyDefault(def string) func(*reading, string, string) {
	return func(r *reading, k, v string) {
		if v != def {
			r.refuse(k, fmt.Sprintf("%q: pgoutbox renders Debezium's default (%s) only", v, def))
		}
	}
}

func onlyIgnore(r *reading, k, v string) {
	if v != "ignore" {
		r.refuse(k, fmt.Sprintf("%q: only the default (ignore) is implemented", v))
	}
}

func heartbeat(r *reading, k, v string) {
	ms, err := strconv.Atoi(v)
	switch {
	case err != nil || ms < 0:
		r.refuse(k, "not a non-negative number of milliseconds")
	case ms > 0:
		r.set("heartbeat-interval", strconv.Itoa(ms)+"ms")
	}
	// 0 (Debezium's "off") keeps pgoutbox's heartbeat: it emits no Kafka
	// record, it only lets the slot advance.
}

func includeList(r *reading, _, v string) {
	ts, ok := plainTables(v)
	if !ok {
		// Patterns: matched against the database's tables at start.
		r.set("table-include-list", v)
		return
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.String()
	}
	r.tables = ts
	r.set("table", strings.Join(names, ","))
}

func placements(r *reading, k, v string) {
	// Debezium refuses an empty list or an item without a placement when
	// it starts (ConfigException).
	if _, err := schema.ParseAdditionalFields(v); err != nil {
		r.refuse(k, err.Error())
		return
	}
	r.set("column-additional", v)
}

// additionalMissing reads the 3.6 option and its 2.5-3.5 predecessor (a
// boolean).
func additionalMissing(r *reading, k, v string) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "error", "true":
		r.set("column-additional-missing", "error")
	case "ignore", "false":
		r.set("column-additional-missing", "ignore")
	default:
		r.refuse(k, fmt.Sprintf("%q: want error or ignore", v))
	}
}
