package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/schema"
)

// readAnyConfig reads a --config file: pgoutbox's own "flag = value" lines,
// a Debezium Server application.properties (keys under debezium.), or a
// Kafka Connect connector JSON ({"name": …, "config": {…}}). Debezium
// options become pgoutbox settings; those pgoutbox ignores are named in one
// warning on stderr, and those it cannot honour make it fail. Settings for
// flags that fs does not have (a Debezium file given to migrate or slot)
// are dropped.
func readAnyConfig(path string, fs *flag.FlagSet, stderr io.Writer) ([]setting, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var (
		conf debeziumConf
		kind string
	)
	switch {
	case len(bytes.TrimSpace(data)) > 0 && bytes.TrimSpace(data)[0] == '{':
		kind = "Kafka Connect connector configuration"
		props, err := parseConnectJSON(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if err := resolveConnect(props); err != nil { // placeholders.go
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		conf = fromConnect(props)
	default:
		props, err := schema.ParseProperties(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if !hasDebeziumKeys(props) {
			return readConfigFile(path)
		}
		kind = "Debezium Server configuration"
		if err := resolveServer(props); err != nil { // placeholders.go
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		conf = fromServer(props)
	}
	settings, ignored, err := conf.settings()
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", path, kind, err)
	}
	if len(ignored) > 0 {
		fmt.Fprintf(stderr, "pgoutbox: warning: %s: ignoring Debezium options pgoutbox does not use: %s (see docs/debezium.md)\n",
			path, strings.Join(ignored, ", "))
	}
	var out []setting
	for _, s := range settings {
		if fs.Lookup(s.key) != nil {
			out = append(out, s)
		}
	}
	return out, nil
}

// parseConnectJSON reads {"name": …, "config": {…}} or a bare config
// object; values may be strings, numbers or booleans.
func parseConnectJSON(data []byte) (map[string]string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("not a connector JSON: %w", err)
	}
	obj := top
	if raw, ok := top["config"]; ok {
		obj = nil
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, fmt.Errorf("\"config\" is not an object: %w", err)
		}
	}
	props := make(map[string]string, len(obj))
	for k, raw := range obj {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		switch v := v.(type) {
		case string:
			props[k] = v
		case float64, bool:
			props[k] = strings.TrimSpace(string(raw))
		case nil:
		default:
			return nil, fmt.Errorf("%s: want a string, number or boolean", k)
		}
	}
	return props, nil
}

func hasDebeziumKeys(props map[string]string) bool {
	for k := range props {
		if strings.HasPrefix(k, "debezium.") {
			return true
		}
	}
	return false
}

// debeziumConf is a Debezium configuration split by role.
type debeziumConf struct {
	connector map[string]string // connector options (debezium.source.* for the Server)
	other     map[string]string // runtime options: converters, sink, offsets, …
	server    bool
}

func fromConnect(props map[string]string) debeziumConf {
	c := debeziumConf{connector: map[string]string{}, other: map[string]string{}}
	for k, v := range props {
		switch {
		case strings.HasPrefix(k, "key.converter"), strings.HasPrefix(k, "value.converter"), strings.HasPrefix(k, "header.converter"):
			c.other[k] = v
		default:
			c.connector[k] = v
		}
	}
	return c
}

func fromServer(props map[string]string) debeziumConf {
	c := debeziumConf{connector: map[string]string{}, other: map[string]string{}, server: true}
	for k, v := range props {
		switch {
		case strings.HasPrefix(k, "debezium.source."):
			c.connector[strings.TrimPrefix(k, "debezium.source.")] = v
		case strings.HasPrefix(k, "debezium.transforms"), strings.HasPrefix(k, "debezium.predicates"):
			c.connector[strings.TrimPrefix(k, "debezium.")] = v
		default:
			c.other[k] = v
		}
	}
	return c
}

// The transform class pgoutbox implements.
const eventRouterClass = "io.debezium.transforms.outbox.EventRouter"

// settings maps the configuration to pgoutbox flags. ignored lists the
// options pgoutbox does not use (sorted); err names every option it
// cannot honour.
func (c debeziumConf) settings() (out []setting, ignored []string, err error) {
	var refused []string
	set := func(flag, value string) { out = append(out, setting{key: flag, value: value}) }
	ignore := func(k string) { ignored = append(ignored, k) }
	refuse := func(k, why string) { refused = append(refused, k+": "+why) }

	// The transforms: only the Outbox Event Router.
	router := ""
	routerOpts := map[string]string{}
	transformOf := map[string]string{} // option key -> transform name
	if list := strings.TrimSpace(c.connector["transforms"]); list != "" {
		for _, name := range strings.Split(list, ",") {
			name = strings.TrimSpace(name)
			typ := c.connector["transforms."+name+".type"]
			switch {
			case typ == eventRouterClass && router == "":
				router = name
			case typ == eventRouterClass:
				refuse("transforms", "more than one Outbox Event Router")
			default:
				refuse("transforms."+name+".type", fmt.Sprintf("transform %q is not supported (pgoutbox implements only %s)", typ, eventRouterClass))
			}
			transformOf["transforms."+name+"."] = name
		}
	}
	for k, v := range c.connector {
		for prefix, name := range transformOf {
			if strings.HasPrefix(k, prefix) {
				if name == router && k != prefix+"type" {
					routerOpts[strings.TrimPrefix(k, prefix)] = v
				}
				delete(c.connector, k)
			}
		}
	}
	delete(c.connector, "transforms")
	full := func(opt string) string {
		if c.server {
			return "debezium.transforms." + router + "." + opt
		}
		return "transforms." + router + "." + opt
	}
	src := func(k string) string {
		if c.server && !strings.HasPrefix(k, "predicates") {
			return "debezium.source." + k
		}
		if c.server {
			return "debezium." + k
		}
		return k
	}

	// Connector options.
	var db struct{ host, port, user, password, name, sslmode string }
	var tables []outbox.Table
	for _, k := range sortedKeys(c.connector) {
		v := c.connector[k]
		switch k {
		case "connector.class":
			if !strings.HasSuffix(v, "PostgresConnector") {
				refuse(src(k), fmt.Sprintf("%q: pgoutbox replaces the PostgreSQL connector only", v))
			}
		case "name", "tasks.max", "key.converter.schemas.enable":
		case "database.hostname":
			db.host = v
		case "database.port":
			db.port = v
		case "database.user":
			db.user = v
		case "database.password":
			db.password = v
		case "database.dbname":
			db.name = v
		case "database.sslmode":
			db.sslmode = v
		case "topic.prefix", "database.server.name":
			set("topic-prefix", v)
		case "plugin.name":
			if v != "pgoutput" {
				ignore(src(k) + "=" + v + " (pgoutbox always decodes with pgoutput)")
			}
		case "slot.name":
			set("slot", v)
		case "publication.name":
			set("publication", v)
		case "publication.autocreate.mode":
			switch v {
			case "all_tables", "filtered", "disabled":
				// pgoutbox uses an existing publication and creates a
				// missing one for the outbox table only (filtered).
			default:
				refuse(src(k), fmt.Sprintf("%q: pgoutbox needs the outbox table in the publication", v))
			}
		case "table.include.list", "table.whitelist":
			ts, ok := plainTables(v)
			if !ok {
				// Patterns: matched against the database's tables at start.
				set("table-include-list", v)
				continue
			}
			names := make([]string, len(ts))
			for i, t := range ts {
				names[i] = t.String()
			}
			tables = ts
			set("table", strings.Join(names, ","))
		case "schema.include.list", "schema.whitelist":
			// Checked against the table below.
		case "heartbeat.interval.ms":
			ms, err := strconv.Atoi(v)
			if err != nil || ms < 0 {
				refuse(src(k), "not a non-negative number of milliseconds")
			} else if ms > 0 {
				set("heartbeat-interval", strconv.Itoa(ms)+"ms")
			}
			// 0 (Debezium's "off") keeps pgoutbox's heartbeat: it emits no
			// Kafka record, it only lets the slot advance.
		case "snapshot.mode":
			switch v {
			case "no_data", "never":
				set("snapshot-mode", "no_data")
			case "initial":
				set("snapshot-mode", "initial")
			default:
				refuse(src(k), fmt.Sprintf("%q: pgoutbox snapshots on the first start only; use initial or no_data", v))
			}
		case "slot.drop.on.stop":
			if v == "true" {
				refuse(src(k), "pgoutbox never drops its slot on stop (that loses events); use `pgoutbox slot drop`")
			}
		case "provide.transaction.metadata":
			if v == "true" {
				refuse(src(k), "transaction metadata topics are not supported")
			}
		case "extended.headers.enabled":
			// Read below: on unless set to false.
		case "decimal.handling.mode", "time.precision.mode", "binary.handling.mode":
			def := map[string]string{"decimal.handling.mode": "precise", "time.precision.mode": "adaptive", "binary.handling.mode": "bytes"}[k]
			if v != def {
				refuse(src(k), fmt.Sprintf("%q: pgoutbox renders Debezium's default (%s) only", v, def))
			}
		default:
			ignore(src(k))
		}
	}
	// A snapshot SELECT of the table's own (often WHERE id > the last id a
	// poller sent) restricts what the snapshot sends; run without it, the
	// snapshot would send every row again.
	if strings.TrimSpace(c.connector["snapshot.mode"]) == "initial" {
		for _, k := range sortedKeys(c.connector) {
			if strings.HasPrefix(k, "snapshot.select.statement.overrides.") {
				refuse(src(k), "pgoutbox runs no snapshot SELECT of a configuration's own; to publish only the rows above an id, use --snapshot-after <id> with --column-order <that id column>")
			}
		}
	}
	// Debezium's connectors add context headers to every record unless
	// told not to.
	set("debezium-context-headers", strconv.FormatBool(!strings.EqualFold(strings.TrimSpace(c.connector["extended.headers.enabled"]), "false")))
	// Debezium's own defaults, so that a configuration that relied on them
	// takes over the slot and publication Debezium was using.
	if _, ok := c.connector["slot.name"]; !ok {
		set("slot", "debezium")
	}
	if _, ok := c.connector["publication.name"]; !ok {
		set("publication", "dbz_publication")
	}
	if s, ok := c.connector["schema.include.list"]; ok {
		for _, table := range tables {
			if schema := table.Schema; s != schema && s != regexp.QuoteMeta(schema) {
				refuse(src("schema.include.list"), fmt.Sprintf("%q does not include the table %s", s, table))
			}
		}
	}
	if db.host != "" || db.name != "" {
		u := url.URL{Scheme: "postgres", Host: db.host, Path: "/" + db.name}
		if db.port != "" {
			u.Host += ":" + db.port
		}
		if db.user != "" {
			u.User = url.User(db.user)
			if db.password != "" {
				u.User = url.UserPassword(db.user, db.password)
			}
		}
		if db.sslmode != "" {
			u.RawQuery = "sslmode=" + url.QueryEscape(db.sslmode)
		}
		set("database-url", u.String())
	}

	// The Outbox Event Router: it selects the debezium-outbox format, and
	// its routing is Debezium's (route.topic.regex/replacement).
	if router != "" {
		set("format", "debezium-outbox")
		set("route-topic-replacement", "outbox.event.${routedByValue}")
		for _, k := range sortedKeys(routerOpts) {
			v := routerOpts[k]
			switch k {
			case "table.field.event.id":
				set("column-id", v)
			case "table.field.event.key":
				set("column-aggregate-id", v)
			case "table.field.event.payload":
				set("column-payload", v)
			case "table.field.event.type":
				// Debezium has not read it since 1.2: the type reaches a
				// message only through a placement. It names the column
				// CloudEvents would take its type from.
				set("column-type", v)
			case "table.field.event.timestamp":
				set("column-time", v)
			case "table.field.event.schema.version":
				set("column-schema-version", v)
			case "route.by.field":
				set("column-aggregate-type", v)
			case "route.topic.regex":
				set("route-topic-regex", v)
			case "route.topic.replacement":
				set("route-topic-replacement", v)
			case "table.fields.additional.placement":
				// Debezium refuses an empty list or an item without a
				// placement when it starts (ConfigException).
				if _, err := schema.ParseAdditionalFields(v); err != nil {
					refuse(full(k), err.Error())
				} else {
					set("column-additional", v)
				}
			case "table.field.additional.missing", "table.fields.additional.error.on.missing":
				// The 3.6 option and its 2.5-3.5 predecessor (a boolean).
				switch strings.ToLower(strings.TrimSpace(v)) {
				case "error", "true":
					set("column-additional-missing", "error")
				case "ignore", "false":
					set("column-additional-missing", "ignore")
				default:
					refuse(full(k), fmt.Sprintf("%q: want error or ignore", v))
				}
			case "table.expand.json.payload":
				set("expand-json-payload", v)
			case "route.tombstone.on.empty.payload":
				set("tombstone-on-empty-payload", v)
			case "table.op.invalid.behavior":
				switch b := strings.ToLower(strings.TrimSpace(v)); b {
				case "warn", "error", "fatal":
					set("on-update", b)
				default:
					refuse(full(k), fmt.Sprintf("%q: want warn, error or fatal", v))
				}
			case "tracing.span.context.field":
				set("column-trace", v)
			case "tracing.operation.name", "tracing.with.context.field.only":
				// pgoutbox opens no spans: it passes the row's trace
				// context on as the traceparent header.
				ignore(full(k) + " (pgoutbox passes the row's trace context on; it opens no spans)")
			case "table.json.payload.null.behavior", "table.json.payload.empty.array.behavior":
				if v != "ignore" {
					refuse(full(k), fmt.Sprintf("%q: only the default (ignore) is implemented", v))
				}
			default:
				ignore(full(k))
			}
		}
	} else {
		set("format", "debezium")
	}

	// Converters.
	if c.server {
		// debezium.format.key|value|header picks a part's converter;
		// debezium.format.<part>.* configures it, and
		// debezium.format.* all three (Debezium Server passes them
		// on as key.converter.* and so on).
		formats := map[string]string{}
		opts := map[string]map[string]string{"key": {}, "value": {}, "header": {}}
		shared := map[string]string{}
		for k, v := range c.other {
			rest, ok := strings.CutPrefix(k, "debezium.format.")
			if !ok {
				continue
			}
			delete(c.other, k)
			part, opt, _ := strings.Cut(rest, ".")
			switch {
			case opts[part] != nil && opt == "":
				formats[part] = v
			case opts[part] != nil:
				opts[part][opt] = v
			default:
				shared[rest] = v
			}
		}
		for _, part := range []string{"key", "value", "header"} {
			class, why := serverFormat(part, formats[part])
			if why != "" {
				refuse("debezium.format."+part, why)
				continue
			}
			o := maps.Clone(shared)
			maps.Copy(o, opts[part])
			conv, ok, why := connectConverter(part, class, o)
			if !ok {
				refuse("debezium.format."+part, why)
			}
			set(part+"-converter", conv)
		}
	} else {
		for _, part := range []string{"key", "value", "header"} {
			prefix := part + ".converter."
			opts := map[string]string{}
			for k, v := range c.other {
				if rest, ok := strings.CutPrefix(k, prefix); ok {
					opts[rest] = v
					delete(c.other, k)
				}
			}
			conv, ok, why := connectConverter(part, c.other[part+".converter"], opts)
			if !ok {
				refuse(part+".converter", why)
			}
			set(part+"-converter", conv)
			delete(c.other, part+".converter")
		}
	}
	for _, k := range sortedKeys(c.other) {
		v := c.other[k]
		switch {
		case k == "debezium.sink.type":
			switch v {
			case sinkKafka:
			case sinkNATS:
				set("sink", sinkNATS)
			default:
				refuse(k, fmt.Sprintf("%q: pgoutbox publishes to Kafka (kafka) and NATS JetStream (nats-jetstream)", v))
			}
		case strings.HasPrefix(k, natsPrefix):
			natsOption(k, v, set, ignore, refuse)
		case k == "debezium.sink.kafka.producer.bootstrap.servers":
			set("kafka-brokers", v)
		case k == "debezium.sink.kafka.producer.key.serializer", k == "debezium.sink.kafka.producer.value.serializer":
		default:
			ignore(k)
		}
	}
	sort.Strings(ignored)
	if len(refused) > 0 {
		sort.Strings(refused)
		return nil, nil, fmt.Errorf("options pgoutbox cannot honour:\n  %s", strings.Join(refused, "\n  "))
	}
	return out, ignored, nil
}

// natsPrefix starts Debezium Server's NATS JetStream sink options.
const natsPrefix = "debezium.sink.nats-jetstream."

// natsOption maps one of Debezium Server's NATS JetStream sink options
// (NatsJetStreamChangeConsumerConfig) to its --nats-* flag.
func natsOption(k, v string, set func(flag, value string), ignore func(string), refuse func(k, why string)) {
	flags := map[string]string{
		"url": "nats-url", "create-stream": "nats-create-stream", "stream-name": "nats-stream-name", "subjects": "nats-subjects",
		"auth.jwt": "nats-jwt", "auth.seed": "nats-seed", "auth.user": "nats-user", "auth.password": "nats-password",
	}
	opt := strings.TrimPrefix(k, natsPrefix)
	switch {
	case flags[opt] != "":
		set(flags[opt], v)
	case opt == "storage":
		// Debezium Server: file gives file storage, anything else memory.
		if strings.TrimSpace(v) == "file" {
			set("nats-storage", "file")
		} else {
			set("nats-storage", "memory")
		}
	case opt == "async.enabled":
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			refuse(k, fmt.Sprintf("%q: want true or false", v))
			return
		}
		set("nats-sync", strconv.FormatBool(!b))
	case opt == "async.timeout.ms":
		ms, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || ms <= 0 {
			refuse(k, "not a positive number of milliseconds")
			return
		}
		set("nats-ack-timeout", strconv.Itoa(ms)+"ms")
	case strings.HasPrefix(opt, "sync.retr"):
		ignore(k + " (pgoutbox sends again what was not acknowledged, from the last confirmed position, with backoff)")
	case strings.HasPrefix(opt, "auth.tls."):
		refuse(k, "a Java keystore: pgoutbox reads PEM files (--nats-tls-ca, --nats-tls-cert, --nats-tls-key)")
	default:
		ignore(k)
	}
}

// plainTables reads a table.include.list that names tables, each a
// schema-qualified name whose dots may be escaped (public\.outbox); ok is
// false when an entry is a pattern, which is matched at start instead.
func plainTables(v string) ([]outbox.Table, bool) {
	var out []outbox.Table
	for _, part := range strings.Split(v, ",") {
		s := strings.ReplaceAll(strings.TrimSpace(part), `\.`, ".")
		t, err := outbox.ParseTable(s)
		if err != nil || !strings.Contains(s, ".") {
			return nil, false
		}
		out = append(out, t)
	}
	return out, len(out) > 0
}

// connectConverter maps a Kafka Connect converter class. Unset converters
// are the worker's; Kafka's defaults are JsonConverter with schemas for
// keys and values and SimpleHeaderConverter for headers. opts are the
// converter's own options (key.converter.* without the prefix).
func connectConverter(part, class string, opts map[string]string) (string, bool, string) {
	if class == "" {
		if part == "header" {
			return "string", true, ""
		}
		class = "org.apache.kafka.connect.json.JsonConverter"
	}
	switch class {
	case "org.apache.kafka.connect.storage.StringConverter", "org.apache.kafka.connect.storage.SimpleHeaderConverter":
		return "string", true, ""
	case "org.apache.kafka.connect.json.JsonConverter":
		if opts["schemas.enable"] == "false" {
			return "json", true, ""
		}
		return "json-schemas", true, ""
	case "org.apache.kafka.connect.converters.ByteArrayConverter":
		return "bytearray", true, ""
	case "io.debezium.converters.BinaryDataConverter":
		d := opts["delegate.converter.type"]
		if d == "" || part == "header" {
			// As a header converter it is configured without its
			// delegate (BinaryDataConverter.configure(Map) ignores
			// the options): it writes bytes, and Debezium's task
			// fails at the first header of another type.
			return "binary", true, ""
		}
		sub := map[string]string{}
		for k, v := range opts {
			if rest, ok := strings.CutPrefix(k, "delegate.converter.type."); ok {
				sub[rest] = v
			}
		}
		conv, ok, why := connectConverter(part, d, sub)
		if !ok || strings.HasPrefix(conv, "binary") {
			return "", false, fmt.Sprintf("delegate.converter.type %q is not supported (use StringConverter, JsonConverter or ByteArrayConverter)", d)
		}
		return "binary:" + conv, ok, why
	}
	return "", false, fmt.Sprintf("%q is not supported (use StringConverter, JsonConverter, ByteArrayConverter or io.debezium.converters.BinaryDataConverter)", class)
}

// serverFormat maps debezium.format.key/value/header to the converter
// class Debezium Server's engine takes for it (ConverterBuilder): json (the
// default, with schemas unless schemas.enable=false) and jsonbytearray
// (the same JSON as bytes) are JsonConverter, simplestring is
// StringConverter and binary BinaryDataConverter, for keys and values
// only: headers are json or jsonbytearray.
func serverFormat(part, format string) (string, string) {
	switch {
	case format == "", format == "json", format == "jsonbytearray":
		return "org.apache.kafka.connect.json.JsonConverter", ""
	case format == "simplestring" && part != "header":
		return "org.apache.kafka.connect.storage.StringConverter", ""
	case format == "binary" && part != "header":
		return "io.debezium.converters.BinaryDataConverter", ""
	case part == "header":
		return "", fmt.Sprintf("%q is not a header format of Debezium Server (json or jsonbytearray), which does not start with it", format)
	}
	return "", fmt.Sprintf("%q is not supported (use json, jsonbytearray, simplestring or binary)", format)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var errNoTable = errors.New("no such table")
