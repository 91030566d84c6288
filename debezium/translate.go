package debezium

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/transform"
)

// EventRouterClass is Debezium's Outbox Event Router, after which
// pgoutbox runs Kafka Connect's transforms.
const EventRouterClass = transform.RouterClass

// dbOptions are the database.* options, which make one --database-url.
type dbOptions struct {
	host, port, user, password, name, sslmode string
	// TLS files and the key's password, as pgjdbc reads them (dbtls.go).
	rootCert, cert, key, keyPassword string
	// keyOption is database.sslkey's key as written; pemAlgorithm is
	// database.pemKeyAlgorithm.
	keyOption, pemAlgorithm string
	// nonValidating is database.sslfactory's key as written when it names
	// pgjdbc's NonValidatingFactory.
	nonValidating string
}

// reading is one configuration's translation under way.
type reading struct {
	server   bool
	out      []Setting
	ignored  []string
	refused  []string
	warnings []string
	// dbMissing are the database's options Debezium requires and the
	// file lacks: a database URL given otherwise stands in for them.
	dbMissing []string
	db        dbOptions
	tables    []outbox.Table // table.include.list, when it names tables
	router    string         // the Outbox Event Router's name in transforms
	dropSlot  string         // slot.drop.on.stop's key, as written, when true
	// actionQuery is heartbeat.action.query's key, as written, and value.
	actionQuery [2]string
	decode      bool                // DecodeLogicalDecodingMessageContent before the router
	producer    map[string]keyValue // Kafka producer settings, by name (producer.go)
}

func (r *reading) set(flag, value string) { r.out = append(r.out, Setting{Flag: flag, Value: value}) }
func (r *reading) ignore(k string)        { r.ignored = append(r.ignored, k) }
func (r *reading) refuse(k, why string)   { r.refused = append(r.refused, k+": "+why) }

// src is a connector option's key as the file writes it.
func (r *reading) src(k string) string {
	switch {
	case r.server && strings.HasPrefix(k, "predicates"):
		return "debezium." + k
	case r.server:
		return "debezium.source." + k
	}
	return k
}

// full is a router option's key as the file writes it.
func (r *reading) full(opt string) string {
	if r.server {
		return "debezium.transforms." + r.router + "." + opt
	}
	return "transforms." + r.router + "." + opt
}

// translate maps the configuration to pgoutbox settings, naming what it
// ignores and what it refuses.
func (c config) translate() *reading {
	r := &reading{server: c.server}
	routerOpts := c.transforms(r)
	c.connectorOptions(r)
	c.routerOptions(r, routerOpts)
	c.columnFilters(r, routerOpts)
	c.topicCreation(r)
	c.redisFormats(r)
	c.rabbitStreamSettings(r)
	c.httpSettings(r)
	kinesisSettings(c, r)
	sqsSettings(c, r)
	pubsubSettings(c, r)
	pulsarSettings(c, r)
	rocketmqSettings(c, r)
	c.sinkStores(r)
	c.converters(r)
	for _, k := range sortedKeys(c.other) {
		if storeKey(k) {
			continue // sinkStores read it
		}
		if o, ok := lookup(Server, k); ok {
			o.read(r, k, c.other[k])
		} else {
			r.ignore(k)
		}
	}
	r.finishProducer()
	sort.Strings(r.ignored)
	return r
}

// transforms reads the transforms and predicates. It returns the Outbox
// Event Router's options (without their transforms.<name>. prefix); the
// transforms after the router and the predicates are package transform's,
// which refuses what Kafka Connect refuses and names what it leaves
// unused, and reach run as --transforms. It removes these keys from the
// connector options.
func (c config) transforms(r *reading) map[string]string {
	unwrapped := "" // an ExtractNewRecordState before the router
	for _, name := range strings.Split(c.connector["transforms"], ",") {
		name = strings.TrimSpace(name)
		if c.connector["transforms."+name+".type"] == transform.NewStateClass && c.connector["transforms."+name+".predicate"] == "" && unwrapped == "" {
			unwrapped = name
		}
		if c.connector["transforms."+name+".type"] == EventRouterClass {
			r.router = name
			break
		}
	}
	if r.router != "" && unwrapped != "" {
		c.inertRouter(r, unwrapped)
	}
	routerOpts := map[string]string{}
	chain := map[string]string{} // as the file writes them
	for k, v := range c.connector {
		if k != "transforms" && k != "predicates" && !strings.HasPrefix(k, "transforms.") && !strings.HasPrefix(k, "predicates.") {
			continue
		}
		if opt, ok := strings.CutPrefix(k, "transforms."+r.router+"."); ok && r.router != "" && opt != "type" {
			routerOpts[opt] = v
		}
		if c.server {
			chain["debezium."+k] = v
		} else {
			chain[k] = v
		}
		delete(c.connector, k)
	}
	if len(chain) == 0 {
		return routerOpts
	}
	ch, unused, err := transform.Parse(transform.Config{Props: chain})
	var ce *transform.ConfigError
	if errors.As(err, &ce) {
		r.refused = append(r.refused, ce.Problems...)
	} else if err != nil {
		r.refuse(r.src("transforms"), err.Error())
	}
	r.ignored = append(r.ignored, unused...)
	r.decode = ch.MessageDecode() != nil
	if ch != nil {
		js, _ := json.Marshal(chain) // a map of strings
		r.set("transforms", string(js))
	}
	return routerOpts
}

// inertRouter takes the Outbox Event Router out of the transforms where an
// ExtractNewRecordState (unwrapped) runs before it on every record: the
// router then sees no change event, and passes each record unchanged, as
// Debezium's does (EventRouterDelegate passes a record that is not an
// envelope). What is published is the flattened change events, to
// <topic.prefix>.<schema>.<table>.
func (c config) inertRouter(r *reading, unwrapped string) {
	var rest []string
	for _, name := range strings.Split(c.connector["transforms"], ",") {
		if strings.TrimSpace(name) != r.router {
			rest = append(rest, name)
		}
	}
	c.connector["transforms"] = strings.Join(rest, ",")
	// The router's columns still say which are the outbox's, which
	// pgoutbox's own bookkeeping reads (the rows' ids and aggregates);
	// nothing of them reaches the records.
	for opt, flag := range map[string]string{"table.field.event.id": "column-id", "table.field.event.key": "column-aggregate-id",
		"route.by.field": "column-aggregate-type", "table.field.event.payload": "column-payload"} {
		if v := strings.TrimSpace(c.connector["transforms."+r.router+"."+opt]); v != "" {
			r.set(flag, v)
		}
	}
	var opts []string
	for k := range c.connector {
		if strings.HasPrefix(k, "transforms."+r.router+".") {
			if k != "transforms."+r.router+".type" {
				opts = append(opts, r.src(k))
			}
			delete(c.connector, k)
		}
	}
	sort.Strings(opts)
	listed := ""
	if len(opts) > 0 {
		listed = " (" + strings.Join(opts, ", ") + ")"
	}
	r.warnings = append(r.warnings, fmt.Sprintf("%s: the Outbox Event Router after %s (ExtractNewRecordState) receives no change event and passes every record unchanged, as Debezium's does: "+
		"the flattened rows go to <topic.prefix>.<schema>.<table>, and its options do nothing%s; list the router first to route the outbox",
		r.src("transforms."+r.router+".type"), r.src("transforms."+unwrapped+".type"), listed))
	r.router = ""
}

// connectorOptions reads the connector's options, row by row, then what
// they say together.
func (c config) connectorOptions(r *reading) {
	for _, k := range sortedKeys(c.connector) {
		if o, ok := lookup(Connector, k); ok {
			o.read(r, r.src(k), c.connector[k])
		} else {
			r.ignore(r.src(k))
		}
	}
	if _, ok := c.connector["snapshot.mode"]; !ok {
		r.set("snapshot-mode", "initial") // Debezium's default
	}
	snapshots := c.configuredSnapshot(r)
	// A snapshot SELECT of the table's own (often WHERE id > the last id a
	// poller sent) restricts what the snapshot sends; run without it, the
	// snapshot would send every row again.
	switch strings.ToLower(strings.TrimSpace(c.connector["snapshot.mode"])) {
	case "", "initial", "when_needed", "always", "initial_only":
		snapshots = true
	}
	if snapshots {
		for _, k := range sortedKeys(c.connector) {
			if strings.HasPrefix(k, "snapshot.select.statement.overrides.") {
				r.refuse(r.src(k), "pgoutbox runs no snapshot SELECT of a configuration's own; to publish only the rows above an id, use --snapshot-after <id> with --column-order <that id column>")
			}
		}
	}
	// The transaction topic is <topic.prefix>.<topic.transaction>.
	if v := strings.TrimSpace(c.connector["topic.transaction"]); v != "" {
		prefix := c.connector["topic.prefix"]
		if prefix == "" {
			prefix = c.connector["database.server.name"]
		}
		if prefix == "" {
			prefix = "pgoutbox" // --topic-prefix's default
		}
		r.set("transaction-topic", prefix+"."+v)
	}
	c.heartbeatTopic(r) // heartbeat.go
	// Debezium's connectors add context headers to every record unless
	// told not to.
	r.set("debezium-context-headers", strconv.FormatBool(!strings.EqualFold(strings.TrimSpace(c.connector["extended.headers.enabled"]), "false")))
	// Debezium's own defaults, so that a configuration that relied on them
	// takes over the slot and publication Debezium was using.
	if _, ok := c.connector["slot.name"]; !ok {
		r.set("slot", "debezium")
	}
	if _, ok := c.connector["publication.name"]; !ok {
		r.set("publication", "dbz_publication")
	}
	// Debezium's snapshot reads every row: a published_at the table has
	// (a team's poller's) marks none as sent.
	r.set("snapshot-all", "true")
	if r.dropSlot != "" {
		slot := c.connector["slot.name"]
		if slot == "" {
			slot = "debezium"
		}
		r.warnings = append(r.warnings, fmt.Sprintf("%s=true: pgoutbox keeps the slot %s when it stops (a slot dropped at a stop loses what is written until the next start); to drop it: pgoutbox slot drop --config <this file> --keep-publication", r.dropSlot, slot))
	}
	if k, q := r.actionQuery[0], strings.TrimSpace(r.actionQuery[1]); q != "" {
		// Debezium runs it with its heartbeat, which an interval of 0
		// (the default) turns off.
		if ms, err := strconv.Atoi(strings.TrimSpace(c.connector["heartbeat.interval.ms"])); err == nil && ms > 0 {
			r.set("heartbeat-action-query", q)
		} else {
			r.warnings = append(r.warnings, k+" is ignored without "+r.src("heartbeat.interval.ms")+" above 0, as Debezium runs it only with its heartbeat")
		}
	}
	if _, inc := c.connector["message.prefix.include.list"]; inc {
		if _, exc := c.connector["message.prefix.exclude.list"]; exc {
			r.refuse(r.src("message.prefix.exclude.list"), "given with "+r.src("message.prefix.include.list")+": Debezium refuses the two together")
		}
	}
	c.tableFilters(r)
	c.columnMappings(r)
	r.db.checkTLS(r)
	if r.db.host != "" && r.db.name == "" {
		r.dbMissing = append(r.dbMissing, r.src("database.dbname")+": not given, and Debezium requires it")
	} else if u := r.db.url(); u != "" {
		r.set("database-url", u)
	}
}

// tableFilters reads the schema and table include and exclude lists
// beside table.include.list, as Debezium combines them (a table must pass
// the schema filter and the table filter; a list and its exclude list
// together are refused, as Debezium refuses them). Without
// table.include.list the tables are those the schema lists and the
// exclude lists leave (--table-include-list, --table-exclude-list, each
// schema pattern S as S\..*); with it, the tables it names must pass the
// schema lists.
func (c config) tableFilters(r *reading) {
	get := func(keys ...string) (string, string) {
		for _, k := range keys {
			if v, ok := c.connector[k]; ok {
				return k, strings.TrimSpace(v)
			}
		}
		return "", ""
	}
	tableIncKey, _ := get("table.include.list", "table.whitelist")
	tableExcKey, tableExc := get("table.exclude.list", "table.blacklist")
	schemaIncKey, schemaInc := get("schema.include.list", "schema.whitelist")
	schemaExcKey, schemaExc := get("schema.exclude.list", "schema.blacklist")
	if tableIncKey != "" && tableExcKey != "" {
		r.refuse(r.src(tableExcKey), fmt.Sprintf("given with %s: Debezium refuses an include list and an exclude list together", tableIncKey))
	}
	if schemaIncKey != "" && schemaExcKey != "" {
		r.refuse(r.src(schemaExcKey), fmt.Sprintf("given with %s: Debezium refuses an include list and an exclude list together", schemaIncKey))
	}
	schemaPatterns := func(list string) []string {
		var out []string
		for _, p := range strings.Split(list, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, "(?:"+p+`)\..*`)
			}
		}
		return out
	}
	if tableIncKey == "" {
		include := schemaPatterns(schemaInc)
		exclude := schemaPatterns(schemaExc)
		if tableExc != "" {
			exclude = append(exclude, tableExc)
		}
		if len(include) == 0 && (len(exclude) > 0 || r.router == "") {
			// Every table but those excluded; without the router, with
			// no list at all, every table: Debezium's connector captures
			// each, where its router reads the one outbox table.
			include = []string{".*"}
		}
		if len(include) > 0 {
			r.set("table-include-list", strings.Join(include, ","))
		}
		if len(exclude) > 0 {
			r.set("table-exclude-list", strings.Join(exclude, ","))
		}
		return
	}
	// The tables table.include.list names must pass the schema lists.
	for _, l := range []struct {
		key, list string
		in        bool
	}{{schemaIncKey, schemaInc, true}, {schemaExcKey, schemaExc, false}} {
		if l.key == "" {
			continue
		}
		ps, err := schema.ParsePatterns(l.list)
		if err != nil {
			r.refuse(r.src(l.key), err.Error())
			continue
		}
		for _, table := range r.tables {
			if ps.Match(table.Schema) != l.in {
				r.refuse(r.src(l.key), fmt.Sprintf("%q leaves out the table %s", l.list, table))
			}
		}
	}
}

// columnMappings reads column.truncate.to.<N>.chars and
// column.mask.with.<N>.chars into --column-mappings: the truncations
// first, then the masks, as Debezium's ColumnMappers tries them on a
// column, each kind in key order.
func (c config) columnMappings(r *reading) {
	var items []string
	for _, kind := range []struct{ name, re string }{{"truncate", `^column\.truncate\.to\.(\d+)\.chars$`}, {"mask", `^column\.mask\.with\.(\d+)\.chars$`}} {
		re := regexp.MustCompile(kind.re)
		for _, k := range sortedKeys(c.connector) {
			m := re.FindStringSubmatch(k)
			if m == nil {
				continue
			}
			if n, _ := strconv.Atoi(m[1]); n == 0 {
				r.refuse(r.src(k), "zero characters is not implemented")
				continue
			}
			items = append(items, kind.name+":"+m[1]+":"+c.connector[k])
		}
	}
	// The columns and the types whose source type is propagated, after
	// the masks, as ColumnMappers adds them.
	for _, kind := range []struct{ key, name string }{{"column.propagate.source.type", "propagate"}, {"datatype.propagate.source.type", "propagate-type"}} {
		if v, ok := c.connector[kind.key]; ok && strings.TrimSpace(v) != "" {
			items = append(items, kind.name+":"+v)
		}
	}
	// The hashes, after the masks, as ColumnMappers adds them: v1 keys,
	// then v2 keys. An algorithm holds no dot; the salt is the rest.
	for _, kind := range []struct{ name, re string }{{"hash", `^column\.mask\.hash\.([^.]+)\.with\.salt\.(.+)$`}, {"hash-v2", `^column\.mask\.hash\.v2\.([^.]+)\.with\.salt\.(.+)$`}} {
		re := regexp.MustCompile(kind.re)
		for _, k := range sortedKeys(c.connector) {
			m := re.FindStringSubmatch(k)
			if m == nil {
				continue
			}
			if err := schema.CheckHashAlgorithm(m[1]); err != nil {
				r.refuse(r.src(k), err.Error())
				continue
			}
			if strings.ContainsAny(m[2], ":;") {
				r.refuse(r.src(k), "a salt with ':' or ';' is not implemented")
				continue
			}
			items = append(items, kind.name+":"+m[1]+":"+m[2]+":"+c.connector[k])
		}
	}
	// Keys of neither form (column.mask.hash.hashing.strategy, which 3.6.1
	// does not have) are ignored by Debezium, and named here.
	hashKey := regexp.MustCompile(`^column\.mask\.hash\.(v2\.)?[^.]+\.with\.salt\..+$`)
	for _, k := range sortedKeys(c.connector) {
		if strings.HasPrefix(k, "column.mask.hash.") && !hashKey.MatchString(k) {
			r.ignore(k + " (Debezium 3.6.1 reads only column.mask.hash.<algorithm>.with.salt.<salt> and column.mask.hash.v2.<algorithm>.with.salt.<salt>)")
		}
	}
	if len(items) == 0 {
		return
	}
	v := strings.Join(items, ";")
	if _, err := schema.ParseColumnMappings(v); err != nil {
		r.refuse(r.src("column.mask.with"), err.Error())
		return
	}
	r.set("column-mappings", v)
}

// columnFilters reads column.include.list and column.exclude.list
// (fully qualified schema.table.column patterns, matched whole in any
// case). Without the router they leave columns out of the change events'
// before and after (--column-exclude-list, --column-include-list). The
// Outbox Event Router's records carry only the columns it reads, so with
// the router a filter changes nothing, unless it leaves out one of those:
// then Debezium's task fails at the first record, and the configuration
// is refused.
func (c config) columnFilters(r *reading, routerOpts map[string]string) {
	key, list, include := "", "", false
	// Debezium 3.6.1 reads neither 1.x name (column.whitelist,
	// column.blacklist): they are ignored, as it ignores them.
	for _, k := range []string{"column.include.list", "column.exclude.list"} {
		v, ok := c.connector[k]
		if !ok {
			continue
		}
		if key != "" {
			r.refuse(r.src(k), fmt.Sprintf("given with %s: Debezium refuses an include list and an exclude list together", key))
			return
		}
		key, list, include = k, v, k == "column.include.list"
	}
	if key == "" {
		return
	}
	patterns, err := schema.ParsePatterns(list)
	if err != nil {
		r.refuse(r.src(key), err.Error())
		return
	}
	if r.router == "" {
		switch {
		case strings.TrimSpace(list) == "" && include:
			// Debezium's filter then matches no column.
			r.refuse(r.src(key), "an empty list leaves out every column, the key's too: not implemented")
			return
		case strings.TrimSpace(list) == "":
			return
		}
		if include {
			r.set("column-include-list", list)
		} else {
			r.set("column-exclude-list", list)
		}
		return
	}
	opt := func(k, def string) string {
		if v := strings.TrimSpace(routerOpts[k]); v != "" {
			return v
		}
		return def
	}
	read := []string{opt("table.field.event.id", "id"), opt("table.field.event.key", "aggregateid"),
		opt("route.by.field", "aggregatetype"), opt("table.field.event.payload", "payload"),
		opt("table.field.event.timestamp", ""), opt("table.field.event.schema.version", "")}
	if fields, err := schema.ParseAdditionalFields(routerOpts["table.fields.additional.placement"]); err == nil {
		for _, f := range fields {
			read = append(read, f.Column)
		}
	}
	for _, t := range r.tables {
		for _, col := range read {
			if col == "" {
				continue
			}
			name := t.Schema + "." + t.Name + "." + col
			if patterns.Match(name) != include {
				r.refuse(r.src(key), fmt.Sprintf("leaves out %s, which the Outbox Event Router reads: Debezium's task fails at the first record", name))
			}
		}
	}
}

// url is the connection URL of the database.* options, "" without a host
// or a database name.
func (d dbOptions) url() string {
	if d.host == "" && d.name == "" {
		return ""
	}
	u := url.URL{Scheme: "postgres", Host: d.host, Path: "/" + d.name}
	if d.port != "" {
		u.Host += ":" + d.port
	}
	if d.user != "" {
		u.User = url.User(d.user)
		if d.password != "" {
			u.User = url.UserPassword(d.user, d.password)
		}
	}
	if q := d.tlsParams(); len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// routerOptions reads the Outbox Event Router's options: it selects the
// debezium-outbox format, and its routing is Debezium's
// (route.topic.regex/replacement). Without it, the connector's change
// events.
func (c config) routerOptions(r *reading, opts map[string]string) {
	if r.router == "" {
		r.set("format", "debezium")
		return
	}
	r.set("format", "debezium-outbox")
	r.set("route-topic-replacement", "outbox.event.${routedByValue}")
	for _, k := range sortedKeys(opts) {
		if o, ok := lookup(Router, k); ok {
			o.read(r, r.full(k), opts[k])
		} else {
			r.ignore(r.full(k))
		}
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

// configuredSnapshot reads snapshot.mode configuration_based's options
// into the mode pgoutbox runs, and tells whether it snapshots. Debezium's
// snapshotter then answers from them alone, offsets or not: a snapshot at
// every start where snapshot.data is true.
func (c config) configuredSnapshot(r *reading) bool {
	if strings.ToLower(strings.TrimSpace(c.connector["snapshot.mode"])) != "configuration_based" {
		return false
	}
	const prefix = "snapshot.mode.configuration.based."
	flag := func(name string) (bool, bool) {
		v, ok := c.connector[prefix+name]
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			return true, true
		case "false":
			return false, true
		}
		if ok {
			r.refuse(r.src(prefix+name), fmt.Sprintf("%q: want true or false", v))
			return false, false
		}
		return false, true // Debezium's default
	}
	data, okData := flag("snapshot.data")
	stream, okStream := flag("start.stream")
	flag("snapshot.schema")
	flag("snapshot.on.data.error")
	if onSchema, _ := flag("snapshot.on.schema.error"); onSchema {
		r.refuse(r.src(prefix+"snapshot.on.schema.error"), "true: Debezium's task fails on a first start with it (it recovers a schema history at stored offsets, and there are none); "+
			"PostgreSQL's connector keeps no schema history to recover")
	}
	if !okData || !okStream {
		return data
	}
	switch {
	case data && stream:
		r.set("snapshot-mode", "always")
	case stream:
		r.set("snapshot-mode", "no_data")
	case data:
		r.set("snapshot-mode", "always_only")
	default:
		r.refuse(r.src(prefix+"start.stream"), "false with snapshot.data false: Debezium neither snapshots nor streams, and nothing would be published")
	}
	return data
}
