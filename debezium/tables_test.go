package debezium

import (
	"strings"
	"testing"
)

// The schema and table lists as Debezium combines them: without
// table.include.list, the tables of the schemas matched and not
// excluded (every table, without a list and the router); with it, the tables it names must pass the schema lists; a
// list and its exclude list together are refused, as Debezium refuses
// them.
func TestTableFilters(t *testing.T) {
	const base = `"connector.class": "io.debezium.connector.postgresql.PostgresConnector"`
	for _, tt := range []struct {
		name, conf         string
		include, exclude   string // --table-include-list, --table-exclude-list; "" for none
		table, refusedKeys string
	}{
		// Without the router, every table (its change events); with it,
		// the default table, public.outbox.
		{name: "no list", include: `.*`},
		{name: "no list, the router", conf: `"transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"`},
		{name: "schemas", conf: `"schema.include.list": "outbox, events_.*"`, include: `(?:outbox)\..*,(?:events_.*)\..*`},
		{name: "schemas, a table excluded", conf: `"schema.include.list": "outbox", "table.exclude.list": "outbox\\.archive"`,
			include: `(?:outbox)\..*`, exclude: `outbox\.archive`},
		{name: "tables excluded from all", conf: `"table.blacklist": "public\\.audit.*"`, include: `.*`, exclude: `public\.audit.*`},
		{name: "schemas excluded", conf: `"schema.exclude.list": "audit"`, include: `.*`, exclude: `(?:audit)\..*`},
		{name: "a table the schema list includes", conf: `"table.include.list": "outbox.events", "schema.include.list": "OUTBOX"`, table: "outbox.events"},
		{name: "a table the schema list leaves out", conf: `"table.include.list": "public.outbox", "schema.include.list": "outbox"`, refusedKeys: "schema.include.list"},
		{name: "a table the schema exclude list leaves out", conf: `"table.include.list": "public.outbox", "schema.exclude.list": "pub.*"`, refusedKeys: "schema.exclude.list"},
		{name: "table lists together", conf: `"table.include.list": "public.outbox", "table.exclude.list": "public.x"`, refusedKeys: "table.exclude.list"},
		{name: "schema lists together", conf: `"schema.include.list": "a", "schema.exclude.list": "b"`, refusedKeys: "schema.exclude.list"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conf := "{" + base
			if tt.conf != "" {
				conf += ", " + tt.conf
			}
			tr, err := translateConnect(t, conf+"}")
			if tt.refusedKeys != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refusedKeys+": ") {
					t.Fatalf("err %v, want %s refused", err, tt.refusedKeys)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for flag, want := range map[string]string{"table-include-list": tt.include, "table-exclude-list": tt.exclude, "table": tt.table} {
				if got, _ := settingOf(tr, flag); got != want {
					t.Errorf("--%s %q, want %q", flag, got, want)
				}
			}
		})
	}
}

// Column filters: with the router, one that leaves out a column the
// router reads is refused (Debezium's task fails), another changes
// nothing; without the router they leave columns out of the change
// events (TestColumnFilterFlags).
func TestColumnFilters(t *testing.T) {
	const router = `"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "table.include.list": "public.outbox",
  "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"`
	for _, tt := range []struct {
		name, conf, refused string
	}{
		{"a column the router does not read", router + `, "column.exclude.list": "public\\.outbox\\.created_at"`, ""},
		{"the payload", router + `, "column.exclude.list": "public\\.outbox\\.PAYLOAD"`, "leaves out public.outbox.payload"},
		{"a placed column", router + `, "transforms.outbox.table.fields.additional.placement": "type:header", "column.exclude.list": ".*\\.type"`, "leaves out public.outbox.type"},
		{"an include list with every column read", router + `, "column.include.list": "public\\.outbox\\.(id|aggregatetype|aggregateid|payload)"`, ""},
		{"an include list without the id", router + `, "column.include.list": "public\\.outbox\\.payload"`, "leaves out public.outbox.id"},
		{"both lists", router + `, "column.include.list": "a", "column.exclude.list": "b"`, "together"},
		{"change events", `"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "column.exclude.list": "public\\.outbox\\.email"`, ""},
		{"both lists on change events", `"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "column.include.list": "a", "column.exclude.list": "b"`, "together"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := translateConnect(t, "{"+tt.conf+"}")
			if tt.refused == "" && err != nil || tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)) {
				t.Errorf("err %v, want refused %q", err, tt.refused)
			}
		})
	}
}

// column.truncate.to.N.chars and column.mask.with.N.chars become
// --column-mappings, the truncations first, as Debezium tries them.
func TestColumnMappingOptions(t *testing.T) {
	tr, err := translateConnect(t, `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "column.mask.with.5.chars": "public\\.outbox\\.email", "column.truncate.to.20.chars": "public\\.outbox\\.note,public\\.outbox\\.memo"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := settingOf(tr, "column-mappings"); got != `truncate:20:public\.outbox\.note,public\.outbox\.memo;mask:5:public\.outbox\.email` {
		t.Errorf("--column-mappings %q", got)
	}
}
