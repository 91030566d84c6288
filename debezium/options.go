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

// refuse refuses the option, whatever its value, with why.
func refuse(why string) func(*reading, string, string) {
	return func(r *reading, k, _ string) { r.refuse(k, why) }
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

// snapshotMode reads snapshot.mode as Debezium parses it (trimmed, in any
// case); configuration_based is read with its options (translate.go).
func snapshotMode(r *reading, k, v string) {
	switch m := strings.ToLower(strings.TrimSpace(v)); m {
	case "initial", "when_needed", "no_data", "always", "initial_only":
		r.set("snapshot-mode", m)
	case "never":
		r.set("snapshot-mode", "no_data")
	case "configuration_based":
	case "custom":
		r.refuse(k, `"custom": a Snapshotter class of the configuration's own (snapshot.mode.custom.name) decides in Java when to snapshot and stream, and pgoutbox runs no Java; `+
			"use initial, when_needed, always, initial_only, no_data or configuration_based")
	default:
		r.refuse(k, fmt.Sprintf("%q: not a snapshot mode of Debezium's; use initial, when_needed, always, initial_only, no_data or configuration_based", v))
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

// nonValidatingFactory is pgjdbc's socket factory that trusts any server
// certificate.
const nonValidatingFactory = "org.postgresql.ssl.NonValidatingFactory"

// sslMode reads database.sslmode as Debezium's enum reads it (trimmed, any
// case).
func sslMode(r *reading, k, v string) {
	switch m := strings.ToLower(strings.TrimSpace(v)); m {
	case "disable", "allow", "prefer", "require", "verify-ca", "verify-full":
		r.db.sslmode = m
	default:
		r.refuse(k, fmt.Sprintf("%q: want disable, allow, prefer, require, verify-ca or verify-full", v))
	}
}

// postgresConnector is Debezium's PostgreSQL connector, which pgoutbox
// replaces.
const postgresConnector = "io.debezium.connector.postgresql.PostgresConnector"

var options = []Option{
	// The connector.
	{Part: Connector, Key: "connector.class", Takes: "`io.debezium.connector.postgresql.PostgresConnector`",
		Refuses: "another connector: pgoutbox replaces the PostgreSQL connector only; its aliases `PostgresConnector` and `Postgres`, which Kafka Connect takes and on which Debezium's task fails (`ClassNotFoundException`)",
		read: func(r *reading, k, v string) {
			switch v = strings.TrimSpace(v); v {
			case postgresConnector:
			case "PostgresConnector", "Postgres":
				r.refuse(k, fmt.Sprintf("%q: Debezium's task fails on Kafka Connect's alias (ClassNotFoundException); write %s", v, postgresConnector))
			default:
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
	{Part: Connector, Key: "database.sslmode", Default: "prefer", Setting: "database-url",
		Takes:   "its `sslmode`, any case: `disable`, `allow`, `prefer`, `require` (TLS, the server's certificate unchecked, as pgjdbc does even with `database.sslrootcert`), `verify-ca`, `verify-full`",
		Refuses: "other values, on which Debezium's validation fails",
		read:    sslMode},
	{Part: Connector, Key: "database.sslrootcert", Setting: "database-url",
		Takes: "with `verify-ca` or `verify-full`, its `sslrootcert`: the CA certificates, PEM or DER, as pgjdbc reads them; without it, `~/.postgresql/root.crt`, as pgjdbc (not the system's roots); a missing file stops pgoutbox at start. Other modes do not read it, as pgjdbc does not",
		read:  database(func(d *dbOptions) *string { return &d.rootCert })},
	{Part: Connector, Key: "database.sslcert", Setting: "database-url",
		Takes: "its `sslcert`: the client certificate, PEM or DER; with `database.sslkey` and no `database.sslcert`, `~/.postgresql/postgresql.crt`, as pgjdbc; not read with a PKCS-12 key, which holds the certificate",
		read:  database(func(d *dbOptions) *string { return &d.cert })},
	{Part: Connector, Key: "database.sslkey", Setting: "database-url",
		Takes:   "its `sslkey`, as pgjdbc reads it by its name: `.p12` or `.pfx`, PKCS-12 (key and certificate); `.key` or `.pem`, an unencrypted PKCS-8 PEM key (`BEGIN PRIVATE KEY`) of `database.pemKeyAlgorithm`; any other, a PKCS-8 DER key, unencrypted or encrypted as Java decrypts it (`openssl pkcs8 -topk8 -v1 PBE-SHA1-3DES` or `PBE-MD5-DES`); pgoutbox loads it at start",
		Refuses: "a key pgjdbc cannot read so (Debezium's connector fails): PEM of another form or algorithm, PEM under another name, a PKCS-8 key encrypted with PBES2 (openssl's default: `Cannot find any provider supporting PBES2`); a key that does not load or does not go with the certificate",
		read: func(r *reading, k, v string) {
			r.db.key, r.db.keyOption = v, k
		}},
	{Part: Connector, Key: "database.pemKeyAlgorithm", Default: "RSA",
		Takes:   "the algorithm of a PEM `database.sslkey` (`RSA`, `EC`, as Java's KeyFactory names them), which pgjdbc reads the key as",
		Refuses: "a PEM key of another algorithm, which pgjdbc cannot load (`Invalid RSA private key`)",
		read:    database(func(d *dbOptions) *string { return &d.pemAlgorithm })},
	{Part: Connector, Key: "database.sslpassword", Setting: "database-url",
		Takes: "the password of an encrypted `database.sslkey` (PKCS-12, PKCS-8 DER); never written in a log line or an error, and refused at start when it does not decrypt the key",
		read:  database(func(d *dbOptions) *string { return &d.keyPassword })},
	{Part: Connector, Key: "database.sslfactory", Default: "org.postgresql.ssl.LibPQFactory",
		Takes:   "`org.postgresql.ssl.LibPQFactory` (or `org.postgresql.ssl.jdbc4.LibPQFactory`), which reads the options above; `org.postgresql.ssl.NonValidatingFactory` with `disable`, `allow`, `prefer` or `require`: TLS without a check of the server's certificate and without a client certificate, as pgjdbc",
		Refuses: "`NonValidatingFactory` with `verify-ca` or `verify-full` (pgjdbc then checks the host name but not the certificate's CA, a check pgoutbox does not make); another class: a Java socket factory pgoutbox cannot run",
		read: func(r *reading, k, v string) {
			switch v = strings.TrimSpace(v); v {
			case "org.postgresql.ssl.LibPQFactory", "org.postgresql.ssl.jdbc4.LibPQFactory":
			case nonValidatingFactory:
				r.db.nonValidating = k
			default:
				r.refuse(k, fmt.Sprintf("%q: a Java socket factory pgoutbox cannot run; use org.postgresql.ssl.LibPQFactory (the default) with database.sslmode, database.sslrootcert, database.sslcert and database.sslkey", v))
			}
		}},
	{Part: Connector, Key: "database.tcpKeepAlive", Default: "true",
		Takes:   "`true`; `false` is ignored with a warning: pgoutbox's connections always send TCP keep-alives",
		Refuses: "anything but `true` or `false` (any case), as Debezium's validation",
		read: func(r *reading, k, v string) {
			if b, ok := connectorBool(r, k, v); ok && !b {
				r.ignore(k + "=false (pgoutbox's connections always send TCP keep-alives)")
			}
		}},
	{Part: Connector, Key: "database.initial.statements", Setting: "database-initial-statements",
		Takes: "statements separated by `;` (`;;` is a `;` within one), run in order, each on its own, when it opens, on each connection that reads the tables and catalog where Debezium's JDBC connections read them (not the replication connection, nor those of pgoutbox's own tables); an error the server gives stops pgoutbox, as it fails Debezium's task, unless of a class that passes (a lost connection, a deadlock, a lock timeout)",
		read:  toFlag("database-initial-statements")},
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
	{Part: Connector, Key: "publication.autocreate.mode", Default: "all_tables", Setting: "publication-all-tables",
		Takes:   "`all_tables`, `filtered`, `disabled`: an existing publication is used; a missing one is created for the tables matched at start, but for change events of a table list of regular expressions (or none) under `all_tables`: `FOR ALL TABLES`, as Debezium creates it, so that a table created later is captured from its first row (a superuser's; the matched tables only, with a warning, where a table has no replica identity, whose UPDATE and DELETE PostgreSQL would refuse); `filtered`: `--publication-all-tables=false`",
		Refuses: "`no_tables`: pgoutbox needs the outbox table in the publication",
		read: oneOf("publication-all-tables", map[string]string{"all_tables": "true", "filtered": "false", "disabled": "true"},
			"%q: pgoutbox needs the outbox table in the publication")},
	{Part: Connector, Key: "table.include.list", Setting: "table",
		Takes: "one table, several, or regular expressions matched whole against `schema.table` at start (`--table-include-list`)",
		read:  includeList},
	{Part: Connector, Key: "table.whitelist", Setting: "table", Takes: "as `table.include.list` (its 1.x name)", read: includeList},
	{Part: Connector, Key: "schema.include.list", Setting: "table-include-list",
		Takes:   "without `table.include.list`: every table of the schemas it matches (`--table-include-list 'S\\..*'`); with it, a list that includes every table named",
		Refuses: "a list that leaves out a table of `table.include.list`; given with `schema.exclude.list`, as Debezium does", read: accept},
	{Part: Connector, Key: "schema.whitelist", Takes: "as `schema.include.list` (its 1.x name)", read: accept},
	{Part: Connector, Key: "table.exclude.list", Setting: "table-exclude-list",
		Takes:   "without `table.include.list`: the tables to leave out (`--table-exclude-list`), of every table or of those `schema.include.list` matches",
		Refuses: "given with `table.include.list`, as Debezium does", read: accept},
	{Part: Connector, Key: "table.blacklist", Takes: "as `table.exclude.list` (its 1.x name)", read: accept},
	{Part: Connector, Key: "schema.exclude.list", Setting: "table-exclude-list",
		Takes:   "the schemas whose tables to leave out; with `table.include.list`, a list that leaves out none it names",
		Refuses: "a list that leaves out a table of `table.include.list`; given with `schema.include.list`, as Debezium does", read: accept},
	{Part: Connector, Key: "schema.blacklist", Takes: "as `schema.exclude.list` (its 1.x name)", read: accept},
	{Part: Connector, Key: "message.key.columns", Setting: "message-key-columns",
		Takes: "the change events' key columns, `table:column,…;…` as Debezium's CustomKeyMapper reads it (each `schema.table.column` pattern in the order given; the primary key for a table none matches, or its first unique index, or a null key); with the Outbox Event Router, which keys by the aggregate id, nothing",
		read:  toFlag("message-key-columns")},
	{Part: Connector, Key: "column.exclude.list",
		Takes:   "without the router, the columns (`schema.table.column` patterns) to leave out of the change events' `before` and `after` and their schema, in snapshot reads too (`--column-exclude-list`), a key column staying in the key: with its value in streamed events, and in snapshot reads, whose SELECT Debezium makes without it, with the placeholder its converter gives a missing value (the column's default, else its type's fallback, as in a delete's `before`, null for a nullable column), the key's schema marking it optional, without a default, in streamed events (Debezium's schema from pgoutput's relation message); with the Outbox Event Router, columns it does not read (its records carry none of the others)",
		Refuses: "a column the router reads (Debezium's task fails); given with `column.include.list`; a key column that follows every column left in (Debezium's snapshot reads fail its task), one of a type without a known fallback (a number, boolean, string, `uuid`, JSON, `bytea`, date, time or timestamp) that is NOT NULL without a default (not implemented: the placeholder its snapshot reads put in the key is known for those), or a nullable one with a default (not implemented)", read: accept},
	{Part: Connector, Key: "column.blacklist", Setting: Ignored, Takes: "nothing: Debezium 3.6.1 reads only `column.exclude.list` (its columns are all published, as Debezium publishes them)",
		read: ignore("Debezium 3.6.1 no longer reads it: use column.exclude.list")},
	{Part: Connector, Key: "column.include.list",
		Takes:   "without the router, the columns to keep in the change events' `before` and `after`, every other left out (`--column-include-list`); with the Outbox Event Router, a list that includes every column it reads",
		Refuses: "one that leaves out a column the router reads (Debezium's task fails); one that leaves out a key column as `column.exclude.list` refuses it", read: accept},
	{Part: Connector, Key: "column.whitelist", Setting: Ignored, Takes: "nothing: Debezium 3.6.1 reads only `column.include.list` (its columns are all published, as Debezium publishes them)",
		read: ignore("Debezium 3.6.1 no longer reads it: use column.include.list")},
	{Part: Connector, Key: "column.mask.with.", Setting: "column-mappings",
		Takes:   "`column.mask.with.<N>.chars`: the values of the string columns it matches (`schema.table.column` patterns) as N asterisks, NULL included, each matched column's schema marked `masked` (`--column-mappings 'mask:N:PATTERN,…'`); a key column of the change events is masked in `after` only, the key keeping its value and an unmarked schema, as Debezium builds the key without the mappers",
		Refuses: "zero characters", read: accept},
	{Part: Connector, Key: "column.mask.hash.", Setting: "column-mappings",
		Takes:   "`column.mask.hash.<algorithm>.with.salt.<salt>`: the values of the string columns it matches as the lower-case hex digest of the salt's bytes and the value as Java serializes a String, cut to a `varchar(n)`'s or `char(n)`'s n, NULL kept, each matched column's schema marked `masked` (`--column-mappings 'hash:ALGORITHM:SALT:PATTERN,…'`); `column.mask.hash.v2.<algorithm>.with.salt.<salt>` the same of the value's UTF-8 bytes (`hash-v2:`); applied after the truncations and masks, as Debezium does; a key column of the change events is hashed in `after` only, the key keeping its value and an unmarked schema",
		Refuses: "an algorithm Java's MessageDigest lacks (Debezium's task fails) and MD2 (not implemented); a salt with `:` or `;`; a nullable key column with a default (not implemented)", read: accept},
	{Part: Connector, Key: "column.propagate.source.type", Setting: "column-mappings",
		Takes: "the columns it matches (`schema.table.column` patterns): their field schemas in `before` and `after` carry `__debezium.source.column.type` (the type's name, upper case), `.length` and `.scale` (the JDBC driver's precision and scale of the type and its modifier) and `.name`, the key's fields none (`--column-mappings 'propagate:PATTERN,…'`); a column a truncation or mask matches first takes only that, as Debezium's first matching mapper; a type that is not built in (an enum, a domain, an extension's) gets none",
		read:  accept},
	{Part: Connector, Key: "datatype.propagate.source.type", Setting: "column-mappings",
		Takes: "as `column.propagate.source.type`, for the columns whose `schema.table.type` it matches, the type as PostgreSQL names it (`.+\\.NUMERIC`; `--column-mappings 'propagate-type:PATTERN,…'`)",
		read:  accept},
	{Part: Connector, Key: "column.truncate.to.", Setting: "column-mappings",
		Takes:   "`column.truncate.to.<N>.chars`: the values of the string columns it matches cut to N characters (UTF-16, as Java counts), their schemas marked `truncateLength` where a value can be longer (`--column-mappings 'truncate:N:PATTERN,…'`); applied before the masks, as Debezium does; a key column of the change events is cut in `after` only, the key keeping its value and an unmarked schema",
		Refuses: "zero characters; a column of another type (not implemented); a nullable key column with a default (not implemented)", read: accept},
	{Part: Connector, Key: "converters", Takes: "none (`\"\"`)", Refuses: "custom converters: they change the values Debezium writes, and pgoutbox runs none",
		read: func(r *reading, k, v string) {
			if strings.TrimSpace(v) != "" {
				r.refuse(k, fmt.Sprintf("%q: custom converters change the values Debezium writes, and pgoutbox runs none", v))
			}
		}},
	{Part: Connector, Key: "heartbeat.interval.ms", Default: "0", Setting: "heartbeat-interval",
		Takes:   "> 0 sets the interval and writes Debezium's heartbeat record to the heartbeat topic for each heartbeat read back from the WAL while streaming, through the transforms after the router and the converters (see [heartbeat records](#heartbeat-records)), on every sink (Debezium Server's Redis sink skips them by default: `skip.heartbeat.messages`); 0 keeps pgoutbox's heartbeat, which produces nothing",
		Refuses: "anything but a non-negative number; above 0, a transform before the router", read: heartbeat},
	{Part: Connector, Key: "topic.heartbeat.prefix", Default: "__debezium-heartbeat", Setting: "heartbeat-topic",
		Takes:   "the heartbeat topic's name before `.<topic.prefix>`",
		Refuses: "a name of other characters than letters, digits, `.`, `_` and `-`, as Debezium refuses it", read: accept}, // read with topic.prefix (heartbeat.go)
	{Part: Connector, Key: "topic.heartbeat.name", Setting: "heartbeat-topic",
		Takes:   "the heartbeat topic's whole name, instead of `<topic.heartbeat.prefix>.<topic.prefix>`",
		Refuses: "a name of other characters than letters, digits, `.`, `_` and `-`, as Debezium refuses it", read: accept}, // read with topic.prefix (heartbeat.go)
	{Part: Connector, Key: "heartbeat.action.query", Setting: "heartbeat-action-query",
		Takes: "SQL run at every heartbeat while streaming, on a connection of its own, as Debezium runs it; with `heartbeat.interval.ms` 0 or unset Debezium never runs it, and pgoutbox ignores it with a warning",
		read:  func(r *reading, k, v string) { r.actionQuery = [2]string{k, v} }}, // with heartbeat.interval.ms (translate.go)
	{Part: Connector, Key: "snapshot.mode", Default: "initial", Setting: "snapshot-mode",
		Takes: "`initial` (also when unset, Debezium's default); `when_needed`, as `initial` with a lost slot filled by polling; `no_data`, `never`; " +
			"`always`: the rows in the table at every start, then the slot streams from where it was confirmed (Debezium streams from the WAL's end at its snapshot, " +
			"skipping what committed while it was stopped; pgoutbox sends that too, so rows still in the table go out twice, none is lost); " +
			"`initial_only`: the rows in the table once, no slot, nothing streamed, and pgoutbox exits once they are acknowledged (at once at a later start; Debezium's task idles); " +
			"`configuration_based`, by its options below",
		Refuses: "`custom`: a Snapshotter class (`snapshot.mode.custom.name`) decides in Java, which pgoutbox does not run; exactly-once delivery with `always` or `initial_only`; `always` with `--mode poll`",
		read:    snapshotMode},
	{Part: Connector, Key: "snapshot.mode.configuration.based.", Default: "false",
		Takes: "with `snapshot.mode` `configuration_based`: `snapshot.data` and `start.stream` both `true` run as `always` (Debezium's snapshot then ignores its offsets, as `always`'s does), " +
			"`snapshot.data` `false` with `start.stream` `true` as `no_data`; `snapshot.data` `true` with `start.stream` `false` (its default) as `always_only`: the rows in the table at every start, no slot, nothing streamed, and pgoutbox exits once they are acknowledged (Debezium's task idles); `snapshot.schema` either way (PostgreSQL's connector keeps no schema history: it reads the tables' structure at every start); " +
			"`snapshot.on.data.error` either way (a lost slot is handled as in every mode: filled by polling, else pgoutbox stops); with another mode, ignored as Debezium ignores them",
		Refuses: "`start.stream` and `snapshot.data` both `false` (Debezium neither snapshots nor streams: nothing would be published); exactly-once delivery with `snapshot.data` `true`; " +
			"`snapshot.on.schema.error` `true` (Debezium's task fails on a first start with it: no offsets to recover a schema at); a value that is not a boolean",
		read: accept}, // checked with snapshot.mode (translate.go)
	{Part: Connector, Key: "snapshot.mode.custom.name", Takes: "ignored but with `snapshot.mode` `custom`, which is refused", read: accept},
	{Part: Connector, Key: "snapshot.select.statement.overrides.",
		Takes:   "without a snapshot (`snapshot.mode` `no_data`)",
		Refuses: "with a snapshot (`snapshot.mode` `initial`, `when_needed`, `always`, `initial_only`, `configuration_based` with `snapshot.data` `true`, or unset): pgoutbox runs no SELECT of a configuration's own; `--snapshot-after <id>` with `--column-order` publishes only the rows above an id",
		read:    accept}, // checked with snapshot.mode (translate.go)
	{Part: Connector, Key: "snapshot.select.statement.overrides", Setting: Ignored, Takes: "the list of the tables above", read: ignore("")},
	{Part: Connector, Key: "slot.failover", Default: "false", Setting: "slot-failover",
		Takes:   "`true`: `--slot-failover auto`, a failover slot where the server has them (PostgreSQL 17 and later) and a plain one before, with a warning, as Debezium creates none there; `false`",
		Refuses: "anything but `true` or `false` (any case), as Debezium's validation",
		read: func(r *reading, k, v string) {
			if b, ok := connectorBool(r, k, v); ok && b {
				r.set("slot-failover", "auto")
			} else if ok {
				r.set("slot-failover", "false")
			}
		}},
	{Part: Connector, Key: "slot.drop.on.stop", Default: "false",
		Takes:   "`false`; `true`, a development setting, is read as `false` with a warning: pgoutbox keeps the slot when it stops (a slot dropped at a stop loses what is written until the next start); `pgoutbox slot drop` drops it",
		Refuses: "anything but a boolean, as Debezium does",
		read: func(r *reading, k, v string) {
			if b, _ := connectorBool(r, k, v); b {
				r.dropSlot = k
			}
		}},
	{Part: Connector, Key: "skipped.operations", Default: "t", Setting: "skipped-operations",
		Takes:   "any of `c`, `u`, `d`, `t` (any case), comma-separated, or `none`: the change events not published: a truncate's, where `t` is not among them, is one per table the `TRUNCATE` names (op `t`, a null key, no row); the Outbox Event Router's records are inserts, which `c` skips",
		Refuses: "another operation, as Debezium does",
		read: func(r *reading, k, v string) {
			list := strings.TrimSpace(v)
			if !strings.EqualFold(list, "none") {
				for _, op := range strings.Split(list, ",") {
					switch strings.ToLower(strings.TrimSpace(op)) {
					case "c", "u", "d", "t":
					default:
						r.refuse(k, fmt.Sprintf("%q: want c, u, d, t, comma-separated, or none", v))
						return
					}
				}
			}
			r.set("skipped-operations", list)
		}},
	{Part: Connector, Key: "unavailable.value.placeholder", Default: "__debezium_unavailable_value", Setting: "unavailable-value-placeholder",
		Takes: "any text, or `hex:` and hex digits for bytes: what stands for a TOAST value an update left unchanged in a string, JSON or `bytea` column",
		read:  toFlag("unavailable-value-placeholder")},
	{Part: Connector, Key: "skip.messages.without.change", Default: "false", Setting: "skip-messages-without-change",
		Takes:   "`true` leaves out an update that changed none of the columns its change event carries (after the column filters), known under `REPLICA IDENTITY FULL` only",
		Refuses: "anything but a boolean",
		read:    boolFlag("skip-messages-without-change")},
	{Part: Connector, Key: "tombstones.on.delete", Default: "true", Setting: "tombstones-on-delete",
		Takes:   "`true`: a delete's change event is followed by a tombstone (its key, a null value); `false`: none. The Outbox Event Router's records are inserts: no tombstone follows them",
		Refuses: "anything but a boolean",
		read:    boolFlag("tombstones-on-delete")},
	{Part: Connector, Key: "provide.transaction.metadata", Default: "false", Setting: "transaction-metadata",
		Takes:   "`false`; `true` writes a BEGIN and an END record per transaction that has events to `<topic.prefix>.transaction`, and a `transaction` block (`id`, `total_order`, `data_collection_order`) in each change event, as Debezium does (see [transaction metadata](#transaction-metadata)); it keeps pgoutbox on the WAL",
		Refuses: "anything but a boolean; `true` with `--mode poll` (polling knows no transactions), or a transform before the router",
		read:    boolFlag("transaction-metadata")},
	{Part: Connector, Key: "message.prefix.include.list", Setting: "message-prefix",
		Takes: "with `DecodeLogicalDecodingMessageContent` before the Outbox Event Router: the prefixes of the logical decoding messages read as outbox rows (regular expressions matched whole, case-insensitively; unset, every prefix, as Debezium reads them); without it, ignored: pgoutbox does not publish the message records themselves",
		read:  messagePrefixes("message-prefix")},
	{Part: Connector, Key: "message.prefix.exclude.list", Setting: "message-prefix-exclude",
		Takes:   "as `message.prefix.include.list`: every prefix but these",
		Refuses: "given with `message.prefix.include.list`",
		read:    messagePrefixes("message-prefix-exclude")},
	{Part: Connector, Key: "topic.transaction", Default: "transaction", Setting: "transaction-topic",
		Takes: "the transaction topic's name after `<topic.prefix>.`", read: accept}, // read with topic.prefix (translate.go)
	{Part: Connector, Key: "topic.creation.", Setting: "topic-creation",
		Takes:   "Kafka Connect's topic creation (`groups`, `<group>.include`, `<group>.exclude`, `<group>.partitions`, `<group>.replication.factor`, any other `<group>.<topic config>`): each missing topic is created before its first record with the first listed group that includes and does not exclude it, else `default`, as Connect creates it (see [topic creation](#topic-creation)); under Debezium Server ignored, as its Kafka sink creates no topics",
		Refuses: "what Kafka Connect refuses: no `default.partitions` or `default.replication.factor`, a number that is not one, 0 or below -1, a group listed twice; and a pattern Go's regexp cannot compile",
		read:    readTopicCreation}, // read together in topiccreation.go
	{Part: Connector, Key: "extended.headers.enabled", Default: "true", Setting: "debezium-context-headers",
		Takes: "`__debezium.context.*` headers first, unless `false`", read: accept}, // read in translate.go
	{Part: Connector, Key: "decimal.handling.mode", Default: "precise", Setting: "decimal-handling-mode",
		Takes:   "`precise`, `string`, `double`, in any case: numeric and money columns as Debezium types them, wherever they reach a record",
		Refuses: "other values, as Debezium does",
		read:    valueMode("decimal-handling-mode", schema.ParseDecimalHandling)},
	{Part: Connector, Key: "time.precision.mode", Default: "adaptive", Setting: "time-precision-mode",
		Takes:   "`adaptive`, `adaptive_time_microseconds`, `connect`, `isostring`, `microseconds`, `nanoseconds`, in any case: date, time and timestamp columns as Debezium types them",
		Refuses: "other values, as Debezium does",
		read:    valueMode("time-precision-mode", schema.ParseTimePrecision)},
	{Part: Connector, Key: "interval.handling.mode", Default: "numeric", Setting: "interval-handling-mode",
		Takes:   "`numeric`, `string`, in any case: interval columns as Debezium types them",
		Refuses: "other values, as Debezium does",
		read:    valueMode("interval-handling-mode", schema.ParseIntervalHandling)},
	{Part: Connector, Key: "binary.handling.mode", Default: "bytes", Setting: "binary-handling-mode",
		Takes:   "`bytes`, `base64`, `base64-url-safe`, `hex`, in any case: bytea columns as Debezium types them",
		Refuses: "other values, as Debezium does",
		read:    valueMode("binary-handling-mode", schema.ParseBinaryHandling)},
	{Part: Connector, Key: "transforms", Setting: "format",
		Takes: "one `io.debezium.transforms.outbox.EventRouter`: `--format debezium-outbox`, then Kafka Connect's transforms after it: `--transforms` " +
			"(see [transforms after the router](#kafka-connects-transforms-after-the-router)); none: `--format debezium`, the change events, " +
			"with Kafka Connect's transforms and `ExtractNewRecordState` on them (see [transforms on the change events](#transforms-on-the-change-events-extractnewrecordstate))",
		Refuses: "other transforms, a transform before the router but `HeaderFrom$Value` copying the change event's fields into headers (see [CloudEvents after the router](#cloudevents-after-the-outbox-event-router)) and `DecodeLogicalDecodingMessageContent` (see [the outbox without a table](#the-outbox-without-a-table-logical-decoding-messages)), two routers",
		read:    accept}, // read first (translate.go)
	{Part: Connector, Key: "predicates", Setting: "transforms",
		Takes:   "Kafka Connect's `TopicNameMatches`, `HasHeaderKey`, `RecordIsTombstone`, for the transforms after the router",
		Refuses: "other predicates", read: accept}, // read with transforms (translate.go)
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
	{Part: Router, Key: "table.json.payload.null.behavior", Default: "ignore", Setting: "json-payload-null-behavior",
		Takes:   "`ignore` (an expanded payload's null fields left out of its schema), `optional_bytes` (in it as optional bytes), in any case",
		Refuses: "other values, as Debezium does", read: nullBehavior},
	{Part: Router, Key: "table.json.payload.empty.array.behavior", Setting: Ignored,
		Takes: "not an option of Debezium 3.6.1's router, which ignores it (an empty array is left out of the schema)", read: ignore("not an option of Debezium 3.6.1's router")},

	// The converters (converters.go), by part.
	{Part: Converter, Key: "key.converter", Default: "JsonConverter", Setting: "key-converter",
		Takes: "a class of the converter table below; unset, the worker's (Kafka's default)", Refuses: "the others", read: accept},
	{Part: Converter, Key: "value.converter", Default: "JsonConverter", Setting: "value-converter",
		Takes: "a class of the converter table below; unset, the worker's (Kafka's default)", Refuses: "the others", read: accept},
	{Part: Converter, Key: "header.converter", Default: "SimpleHeaderConverter", Setting: "header-converter",
		Takes: "a class of the converter table below; unset, the worker's (Kafka's default)", Refuses: "the others", read: accept},
	{Part: Converter, Key: "<part>.converter.schemas.enable", Default: "true",
		Takes: "JsonConverter: `false` writes without schemas (`json`), else `json-schemas`", read: accept},
	{Part: Converter, Key: "<part>.converter.apicurio.registry.url", Setting: "<part>-registry-url",
		Takes: "Apicurio's AvroConverter: the registry's API (`…/apis/registry/v2`)", Refuses: "none given", read: accept},
	{Part: Converter, Key: "<part>.converter.apicurio.registry.auto-register", Default: "false", Setting: "<part>-registry-auto-register",
		Takes: "`true` registers new schemas; `false` looks them up, and a record whose schema is not registered is dead-lettered", read: accept},
	{Part: Converter, Key: "<part>.converter.apicurio.registry.find-latest", Default: "false", Setting: "<part>-registry-find-latest",
		Takes: "without auto-registration: the subject's latest version", read: accept},
	{Part: Converter, Key: "<part>.converter.apicurio.registry.headers.enabled", Default: "true", Setting: "<part>-registry-headers",
		Takes: "`true`: the id in `apicurio.<part>.globalId` (or `contentId`) headers, the datum bare; `false`: a magic byte and the id first", read: accept},
	{Part: Converter, Key: "<part>.converter.apicurio.registry.as-confluent", Default: "false", Setting: "<part>-registry-id-size",
		Takes: "`true`: a 4-byte id after the magic byte (8 by default)", read: accept},
	{Part: Converter, Key: "<part>.converter.apicurio.registry.id-handler", Default: "DefaultIdHandler", Setting: "<part>-registry-id-size",
		Takes: "`DefaultIdHandler` (8 bytes), `Legacy4ByteIdHandler` (4)", Refuses: "another handler", read: accept},
	{Part: Converter, Key: "<part>.converter.apicurio.registry.use-id", Default: "globalId", Setting: "<part>-registry-use-id",
		Takes: "`globalId`, `contentId`", read: accept},
	{Part: Converter, Key: "<part>.converter.apicurio.auth.username", Setting: "<part>-registry-user",
		Takes: "HTTP basic auth (with `apicurio.auth.password`, `<part>-registry-password`)", read: accept},
	{Part: Converter, Key: "<part>.converter.apicurio.registry.artifact-resolver-strategy", Default: "TopicIdStrategy", Setting: "<part>-registry-strategy",
		Takes: "`TopicIdStrategy` (`<topic>-key`, `<topic>-value`), `SimpleTopicIdStrategy`, `RecordIdStrategy`, `TopicRecordIdStrategy`, `QualifiedRecordIdStrategy`", Refuses: "another class", read: accept},
	{Part: Converter, Key: "<part>.converter.apicurio.registry.avro.encoding", Default: "BINARY",
		Takes: "`BINARY`", Refuses: "`JSON`", read: accept},
	{Part: Converter, Key: "<part>.converter.schema.registry.url", Setting: "<part>-registry-url",
		Takes: "Confluent's AvroConverter: the registry (one URL; Apicurio's `…/apis/ccompat/v6` too)", Refuses: "several URLs", read: accept},
	{Part: Converter, Key: "<part>.converter.auto.register.schemas", Default: "true", Setting: "<part>-registry-auto-register",
		Takes: "as `apicurio.registry.auto-register`", read: accept},
	{Part: Converter, Key: "<part>.converter.basic.auth.user.info", Setting: "<part>-registry-user",
		Takes: "`user:password`, with `basic.auth.credentials.source=USER_INFO`", Refuses: "another credentials source", read: accept},
	{Part: Converter, Key: "<part>.converter.<part>.subject.name.strategy", Default: "TopicNameStrategy", Setting: "<part>-registry-strategy",
		Takes: "`TopicNameStrategy`, `RecordNameStrategy`, `TopicRecordNameStrategy`", Refuses: "another class", read: accept},
	{Part: Converter, Key: "value.converter.serializer.type", Default: "json",
		Takes: "CloudEventsConverter: `json`; `avro` with `data.serializer.type=avro`, the event an Avro record (`cloudevents:avro:avro`, [below](#avro-cloudevents))", Refuses: "`avro` with json data, as Debezium's converter does not start; another value", read: accept},
	{Part: Converter, Key: "value.converter.data.serializer.type", Default: "json",
		Takes: "CloudEventsConverter: `json`; `avro`, the data written by the registry's AvroConverter (`cloudevents:avro` in a JSON event)", Refuses: "another value", read: accept},
	{Part: Converter, Key: "value.converter.avro.", Setting: "value-registry-*",
		Takes: "CloudEventsConverter with Avro: its AvroConverter's options, as `<part>.converter.*` above: Apicurio's with `avro.apicurio.registry.url`, else Confluent's (`avro.schema.registry.url`); the id always before the datum", Refuses: "no registry URL; as above", read: accept},
	{Part: Converter, Key: "value.converter.json.schemas.enable", Default: "true",
		Takes: "CloudEventsConverter: `true` writes the data with its schema (`cloudevents:json-schemas`), `false` without (`cloudevents:json`)", read: accept},
	{Part: Converter, Key: "value.converter.extension.attributes.enable", Default: "true",
		Takes: "CloudEventsConverter: `true`", Refuses: "`false`: not implemented", read: accept},
	{Part: Converter, Key: "value.converter.opentelemetry.tracing.attributes.enable", Default: "false",
		Takes: "CloudEventsConverter: `false`", Refuses: "`true`: not implemented", read: accept},
	{Part: Converter, Key: "value.converter.metadata.source", Default: "value,id:generate,type:generate,traceparent:header,dataSchemaName:generate", Setting: "cloudevents-metadata-source",
		Takes: "CloudEventsConverter: `value` with `id` and `type` generated (change events); `header` with `id` and `type` from headers or generated (after the router, [below](#cloudevents-after-the-outbox-event-router))", Refuses: "`value` with `id` or `type` from a header: not implemented; `id` or `type` from `value`, as Debezium's task fails on the null it gives", read: accept},
	{Part: Converter, Key: "<part>.converter.delegate.converter.type",
		Takes:   "BinaryDataConverter's delegate for what is not bytes: StringConverter, JsonConverter (with its `.schemas.enable`), ByteArrayConverter; a header converter has none",
		Refuses: "another delegate", read: accept},

	// Debezium Server's own.
	{Part: Server, Key: "debezium.sink.type", Takes: "`kafka`; `nats-jetstream` (`--sink nats-jetstream`); `rabbitmq` (`--sink rabbitmq`); `rabbitmqstream` (`--sink rabbitmqstream`); `redis` (`--sink redis`); `http` (`--sink http`); `kinesis` (`--sink kinesis`); `sqs` (`--sink sqs`); `sns` (`--sink sns`); `pubsub` (`--sink pubsub`); `pulsar` (`--sink pulsar`); `rocketmq` (`--sink rocketmq`)",
		Refuses: "another sink (`eventhubs`, `pravega`, `infinispan`, …): pgoutbox publishes to Kafka, NATS JetStream, RabbitMQ (AMQP 0-9-1 and Streams), Redis Streams, HTTP endpoints, Amazon Kinesis, Amazon SQS, Amazon SNS, Google Cloud Pub/Sub, Apache Pulsar and Apache RocketMQ",
		read: func(r *reading, k, v string) {
			switch v {
			case "kafka":
			case "nats-jetstream", "rabbitmq", "rabbitmqstream", "redis", "http", "kinesis", "sqs", "sns", "pubsub", "pulsar", "rocketmq":
				r.set("sink", v)
			default:
				r.refuse(k, fmt.Sprintf("%q: pgoutbox publishes to Kafka (kafka), NATS JetStream (nats-jetstream), RabbitMQ (rabbitmq, rabbitmqstream), Redis Streams (redis), HTTP endpoints (http), Amazon Kinesis (kinesis), Amazon SQS (sqs), Amazon SNS (sns), Google Cloud Pub/Sub (pubsub), Apache Pulsar (pulsar) and Apache RocketMQ (rocketmq)", v))
			}
		}},
	{Part: Server, Key: "debezium.sink.kafka.producer.bootstrap.servers", Setting: "kafka-brokers", Takes: "any",
		read: toFlag("kafka-brokers")},
	{Part: Server, Key: "debezium.format.key", Default: "json", Setting: "key-converter",
		Takes:   "`json`, `jsonbytearray` (JsonConverter; with `apicurio.registry.url`, Apicurio's ExtJsonConverter), `simplestring` (StringConverter), `binary` (BinaryDataConverter); for values `cloudevents` (CloudEventsConverter); `clientprovided` with `debezium.format.key.class`",
		Refuses: "the others; `clientprovided` without a class, as Debezium Server refuses it", read: accept},
	{Part: Server, Key: "debezium.format.value", Default: "json", Setting: "value-converter",
		Takes: "as `debezium.format.key`", Refuses: "the others", read: accept},
	{Part: Server, Key: "debezium.format.header", Default: "json", Setting: "header-converter",
		Takes: "`json`, `jsonbytearray` (RabbitMQ: header values as byte arrays, `--rabbitmq-header-bytes`)", Refuses: "the others, which Debezium Server refuses too",
		read: accept},
	{Part: Server, Key: "debezium.format.<part>.class", Setting: "<part>-converter",
		Takes:   "a converter class, taken over the format's own converter, as Debezium Server's ConverterBuilder takes it (`debezium.format.header.class=org.apache.kafka.connect.storage.SimpleHeaderConverter` writes plain-text headers): the classes of `<part>.converter` above; `debezium.format.class` for every part",
		Refuses: "a class pgoutbox has no converter of, as `<part>.converter`", read: accept},
	{Part: Server, Key: "debezium.format.<part>.", Takes: "the part's converter options, as `<part>.converter.*` above", read: accept},
	{Part: Server, Key: "debezium.format.", Takes: "every part's converter options (`debezium.format.schemas.enable`)", read: accept},
	{Part: Server, Key: "debezium.sink.kafka.producer.key.serializer", Takes: "any: the converter makes the bytes", read: accept},
	{Part: Server, Key: "debezium.sink.kafka.producer.value.serializer", Takes: "any: the converter makes the bytes", read: accept},

	// Debezium Server's NATS JetStream sink (NatsJetStreamChangeConsumerConfig).
	{Part: Server, Key: natsSink + "url", Setting: "nats-url", Takes: "any", read: toFlag("nats-url")},
	{Part: Server, Key: natsSink + "create-stream", Default: "false", Setting: "nats-create-stream",
		Takes: "`true`, `false`; the stream created takes the dead-letter subject too", read: toFlag("nats-create-stream")},
	{Part: Server, Key: natsSink + "stream-name", Default: "DebeziumStream", Setting: "nats-stream-name", Takes: "any",
		read: toFlag("nats-stream-name")},
	{Part: Server, Key: natsSink + "subjects", Default: "*.*.*", Setting: "nats-subjects", Takes: "any",
		read: toFlag("nats-subjects")},
	{Part: Server, Key: natsSink + "storage", Default: "memory", Setting: "nats-storage",
		Takes: "`file`; anything else is `memory`, as Debezium Server reads it",
		read: func(r *reading, _, v string) {
			if strings.TrimSpace(v) == "file" {
				r.set("nats-storage", "file")
			} else {
				r.set("nats-storage", "memory")
			}
		}},
	{Part: Server, Key: natsSink + "auth.jwt", Setting: "nats-jwt", Takes: "any, with `auth.seed`", read: toFlag("nats-jwt")},
	{Part: Server, Key: natsSink + "auth.seed", Setting: "nats-seed", Takes: "any, with `auth.jwt`", read: toFlag("nats-seed")},
	{Part: Server, Key: natsSink + "auth.user", Setting: "nats-user", Takes: "any; used without a JWT", read: toFlag("nats-user")},
	{Part: Server, Key: natsSink + "auth.password", Setting: "nats-password", Takes: "any", read: toFlag("nats-password")},
	{Part: Server, Key: natsSink + "async.enabled", Default: "true", Setting: "nats-sync", Takes: "`true`, `false` (`--nats-sync`, its opposite)",
		Refuses: "another value",
		read: func(r *reading, k, v string) {
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				r.refuse(k, fmt.Sprintf("%q: want true or false", v))
				return
			}
			r.set("nats-sync", strconv.FormatBool(!b))
		}},
	{Part: Server, Key: natsSink + "async.timeout.ms", Default: "5000", Setting: "nats-ack-timeout", Takes: "milliseconds",
		Refuses: "a value that is not a positive number",
		read: func(r *reading, k, v string) {
			ms, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || ms <= 0 {
				r.refuse(k, "not a positive number of milliseconds")
				return
			}
			r.set("nats-ack-timeout", strconv.Itoa(ms)+"ms")
		}},
	{Part: Server, Key: natsSink + "sync.", Setting: Ignored,
		Takes: "ignored: pgoutbox sends again what was not acknowledged, from the last confirmed position, with backoff",
		read:  ignore("pgoutbox sends again what was not acknowledged, from the last confirmed position, with backoff")},
	{Part: Server, Key: natsSink + "auth.tls.keystore", Setting: "nats-tls-cert",
		Takes: "a JKS or PKCS12 store, one for both the client's key and the certificates it trusts (`--nats-tls-cert` and `--nats-tls-ca`), when neither `auth.jwt` nor `auth.user` is set, as Debezium Server uses it", read: accept},
	{Part: Server, Key: natsSink + "auth.tls.keystore.password", Setting: "nats-tls-cert-password", Takes: "the store's password", read: accept},
	{Part: Server, Key: natsSink + "auth.tls.password", Setting: "nats-tls-key-password", Takes: "the key's password", read: accept},
	{Part: Server, Key: natsSink + "auth.tls.", Refuses: "another key",
		read: func(r *reading, k, _ string) { r.refuse(k, "not a key of Debezium Server's NATS JetStream sink") }},

	// Debezium Server's RabbitMQ sink (RabbitMqStreamChangeConsumerConfig),
	// and the amqp-client keys under connection. it hands to
	// ConnectionFactoryConfigurator.
	{Part: Server, Key: rabbitSink + "connection.uri", Setting: "rabbitmq-url", Takes: "`amqp://` and `amqps://` URIs; the keys below override its parts",
		read: toFlag("rabbitmq-url")},
	{Part: Server, Key: rabbitSink + "connection.host", Default: "localhost", Setting: "rabbitmq-host", Takes: "any", read: toFlag("rabbitmq-host")},
	{Part: Server, Key: rabbitSink + "connection.port", Default: "5672", Setting: "rabbitmq-port", Takes: "a port",
		Refuses: "what is not a port", read: rabbitPort},
	{Part: Server, Key: rabbitSink + "connection.username", Default: "guest", Setting: "rabbitmq-user", Takes: "any", read: toFlag("rabbitmq-user")},
	{Part: Server, Key: rabbitSink + "connection.password", Default: "guest", Setting: "rabbitmq-password", Takes: "any", read: toFlag("rabbitmq-password")},
	{Part: Server, Key: rabbitSink + "connection.virtual.host", Default: "/", Setting: "rabbitmq-vhost", Takes: "any", read: toFlag("rabbitmq-vhost")},
	{Part: Server, Key: rabbitSink + "connection.ssl.enabled", Default: "false", Setting: "rabbitmq-tls",
		Takes:   "`true`, `false`; pgoutbox verifies the server's certificate against the system's roots or `--rabbitmq-tls-ca`, where amqp-client without a trust store trusts any",
		Refuses: "another value", read: boolFlag("rabbitmq-tls")},
	{Part: Server, Key: rabbitSink + "connection.ssl.verify.hostname", Takes: "any: pgoutbox always verifies the host name", read: accept},
	{Part: Server, Key: rabbitSink + "connection.ssl.key.store", Setting: "rabbitmq-tls-cert",
		Takes: "a JKS or PKCS12 key store (`.password`, `.type`: `PKCS12` by default), with `connection.ssl.enabled=true`", read: accept},
	{Part: Server, Key: rabbitSink + "connection.ssl.trust.store", Setting: "rabbitmq-tls-ca",
		Takes: "a JKS or PKCS12 trust store (`.password`, `.type`: `JKS` by default), with `connection.ssl.enabled=true`", read: accept},
	{Part: Server, Key: rabbitSink + "connection.ssl.", Refuses: "others (`ssl.algorithm`, `ssl.validate.server.certificate`, the stores' `.algorithm`): pgoutbox speaks TLS 1.2 or later and verifies the server's certificate",
		read: func(r *reading, k, _ string) {
			r.refuse(k, "pgoutbox speaks TLS 1.2 or later and always verifies the server's certificate")
		}},
	{Part: Server, Key: rabbitSink + "connection.", Setting: Ignored,
		Takes: "ignored (timeouts, heartbeat, recovery, client properties): pgoutbox connects again itself and sends again what was not confirmed",
		read:  ignore("pgoutbox connects again itself and sends again what was not confirmed")},
	{Part: Server, Key: rabbitSink + "exchange", Setting: "rabbitmq-exchange", Takes: "any; empty: the exchange named like the topic",
		read: toFlag("rabbitmq-exchange")},
	{Part: Server, Key: rabbitSink + "routingKey", Setting: "rabbitmq-routing-key", Takes: "any", read: toFlag("rabbitmq-routing-key")},
	{Part: Server, Key: rabbitSink + "routingKey.source", Default: "static", Setting: "rabbitmq-routing-key-source",
		Takes: "`static`, `topic`, `key`", Refuses: "another value, which Debezium Server routes with an empty routing key",
		read: oneOf("rabbitmq-routing-key-source", map[string]string{"static": "static", "topic": "topic", "key": "key"},
			"%q: use static, topic or key (Debezium Server routes any other value with an empty routing key)")},
	{Part: Server, Key: rabbitSink + "routingKeyFromTopicName", Setting: Ignored,
		Takes: "ignored, as Debezium Server 3.6 ignores it (it logs that it is deprecated): `routingKey.source=topic` routes by topic",
		read:  ignore("deprecated, and ignored by Debezium Server 3.6 too: routingKey.source=topic routes by topic")},
	{Part: Server, Key: rabbitSink + "autoCreateRoutingKey", Default: "false", Setting: "rabbitmq-auto-create-routing-key",
		Takes: "`true`, `false`; the dead-letter queue is declared too", Refuses: "another value", read: boolFlag("rabbitmq-auto-create-routing-key")},
	{Part: Server, Key: rabbitSink + "routingKeyDurable", Default: "true", Setting: "rabbitmq-routing-key-durable",
		Takes: "`true`, `false`", Refuses: "another value", read: boolFlag("rabbitmq-routing-key-durable")},
	{Part: Server, Key: rabbitSink + "deliveryMode", Default: "2", Setting: "rabbitmq-delivery-mode", Takes: "`2` (persistent), `1` (transient)",
		Refuses: "another value", read: oneOf("rabbitmq-delivery-mode", map[string]string{"1": "1", "2": "2"}, "%q: AMQP knows 1 (transient) and 2 (persistent)")},
	{Part: Server, Key: rabbitSink + "ackTimeout", Default: "30000", Setting: "rabbitmq-ack-timeout", Takes: "milliseconds, each message's",
		Refuses: "a value that is not a positive number", read: millis("rabbitmq-ack-timeout")},
	{Part: Server, Key: rabbitSink + "null.value", Default: "default", Setting: "rabbitmq-null-value", Takes: "any", read: toFlag("rabbitmq-null-value")},
}

func init() { options = append(options, redisOptions...) }

// natsSink starts the NATS JetStream sink's options.
const natsSink = "debezium.sink.nats-jetstream."

// rabbitSink starts the RabbitMQ sink's options.
const rabbitSink = "debezium.sink.rabbitmq."

// rabbitPort passes a port to --rabbitmq-port.
func rabbitPort(r *reading, k, v string) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > 65535 {
		r.refuse(k, fmt.Sprintf("%q is not a port", v))
		return
	}
	r.set("rabbitmq-port", strconv.Itoa(n))
}

// connectorBool reads a connector option's boolean as Debezium's
// validation does: true or false, any case; anything else is refused
// (ok false).
func connectorBool(r *reading, k, v string) (b, ok bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	r.refuse(k, fmt.Sprintf("%q: want true or false", v))
	return false, false
}

// boolFlag passes true or false to flag.
func boolFlag(flag string) func(*reading, string, string) {
	return func(r *reading, k, v string) {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			r.refuse(k, fmt.Sprintf("%q: want true or false", v))
			return
		}
		r.set(flag, strconv.FormatBool(b))
	}
}

// millis passes a positive number of milliseconds to flag as a duration.
func millis(flag string) func(*reading, string, string) {
	return func(r *reading, k, v string) {
		ms, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || ms <= 0 {
			r.refuse(k, "not a positive number of milliseconds")
			return
		}
		r.set(flag, strconv.Itoa(ms)+"ms")
	}
}

// valueMode reads one of Debezium's value options with parse, into flag;
// a value parse refuses, Debezium refuses too (its EnumRecommender).
func valueMode[T ~string](flag string, parse func(string) (T, error)) func(*reading, string, string) {
	return func(r *reading, k, v string) {
		mode, err := parse(v)
		if err != nil {
			r.refuse(k, fmt.Sprintf("%q is not a value Debezium takes either (%v)", v, err))
			return
		}
		r.set(flag, string(mode))
	}
}

// nullBehavior reads table.json.payload.null.behavior as
// JsonPayloadNullFieldBehavior.parse does: trimmed, in any case.
func nullBehavior(r *reading, k, v string) {
	switch b := strings.ToLower(strings.TrimSpace(v)); b {
	case "ignore", "optional_bytes":
		r.set("json-payload-null-behavior", b)
	default:
		r.refuse(k, fmt.Sprintf("%q: ignore or optional_bytes, as Debezium's router takes", v))
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

// messagePrefixes passes a message prefix list to flag when the
// configuration decodes messages into outbox rows
// (DecodeLogicalDecodingMessageContent); without it, Debezium publishes
// the message records themselves, which pgoutbox does not.
func messagePrefixes(flag string) func(*reading, string, string) {
	return func(r *reading, k, v string) {
		if !r.decode {
			r.ignore(k)
			return
		}
		r.set(flag, v)
	}
}
