package transform

import (
	"slices"
	"strings"
	"testing"
)

// shardEvent is a change event of table shard_<n>.orders under topic
// prefix shop, keyed by its id, as pgoutbox's encoder writes it with
// schemas.
func shardEvent(n, id string) Record {
	r := changeEvent("x")
	table := "shop.shard_" + n + ".orders"
	v1 := int32(1)
	row := *r.ValueSchema.Fields[0].Schema
	row.Name = table + ".Value"
	env := *r.ValueSchema
	env.Name = table + ".Envelope"
	env.Fields = slices.Clone(env.Fields)
	env.Fields[0].Schema, env.Fields[1].Schema = &row, &row
	old := r.Value.(*Struct)
	vals := slices.Clone(old.Values)
	vals[1] = &Struct{Schema: &row, Values: []any{id, "x"}}
	ks := &Schema{Type: StructT, Name: table + ".Key", Version: &v1, Fields: []Field{{"id", &Schema{Type: String}}}}
	return Record{Topic: table, KeySchema: ks, Key: &Struct{Schema: ks, Values: []any{id}},
		ValueSchema: &env, Value: &Struct{Schema: &env, Values: vals}}
}

func logicalTableOf(t *testing.T, props map[string]string) (*logicalTable, []string) {
	t.Helper()
	p := &parser{props: map[string]string{}, used: map[string]bool{}}
	for k, v := range props {
		p.props["transforms.l."+k] = v
	}
	tr := newLogicalTable(p.options("transforms.l."))
	if tr == nil {
		return nil, p.problems
	}
	return tr.(*logicalTable), p.problems
}

// ByLogicalTableRouter as Debezium 3.6.1 applies it to change events: the
// topic, the key's schema name and physical table field, the envelope's
// and rows' schema names.
func TestLogicalTable(t *testing.T) {
	shards := map[string]string{"topic.regex": `(.*)\.shard_(\d+)\.orders`, "topic.replacement": "$1.all.orders"}
	for _, tc := range []struct {
		name    string
		props   map[string]string
		n       string
		topic   string
		keyName string
		keyVals []any
		envName string
	}{
		{"defaults", nil, "1", "shop.all.orders", "shop.all.orders.Key",
			[]any{"k", "shop.shard_1.orders"}, "shop.all.orders.Envelope"},
		{"key.field.regex", map[string]string{"key.field.name": "shard", "key.field.regex": `.*\.shard_(\d+)\..*`, "key.field.replacement": "s$1"},
			"2", "shop.all.orders", "shop.all.orders.Key", []any{"k", "s2"}, "shop.all.orders.Envelope"},
		{"key.field.regex no match", map[string]string{"key.field.regex": `nomatch`, "key.field.replacement": "x"},
			"2", "shop.all.orders", "shop.all.orders.Key", []any{"k", "shop.shard_2.orders"}, "shop.all.orders.Envelope"},
		{"no uniqueness", map[string]string{"key.enforce.uniqueness": " FALSE "}, "3", "shop.all.orders",
			"shop.all.orders.Key", []any{"k"}, "shop.all.orders.Envelope"},
		{"avro", map[string]string{"topic.replacement": "$1.all-orders", "schema.name.adjustment.mode": "Avro"}, "1",
			"shop.all-orders", "shop.all_orders.Key", []any{"k", "shop.shard_1.orders"}, "shop.all_orders.Envelope"},
		{"avro_unicode", map[string]string{"topic.replacement": "9$1.all-orders", "schema.name.adjustment.mode": "avro_unicode"}, "1",
			"9shop.all-orders", "_u0039shop.all_u002dorders.Key", []any{"k", "shop.shard_1.orders"}, "_u0039shop.all_u002dorders.Envelope"},
		{"first replacement", map[string]string{"topic.regex": `s|shop\.shard_1\.orders`, "topic.replacement": "x"}, "1",
			"xhop.shard_1.orders", "xhop.shard_1.orders.Key", []any{"k", "shop.shard_1.orders"}, "xhop.shard_1.orders.Envelope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props := map[string]string{}
			for k, v := range shards {
				props[k] = v
			}
			for k, v := range tc.props {
				props[k] = v
			}
			tr, problems := logicalTableOf(t, props)
			if tr == nil {
				t.Fatal(problems)
			}
			r := shardEvent(tc.n, "k")
			oldRow := r.ValueSchema.Fields[0].Schema
			if keep, err := tr.apply(&r); !keep || err != nil {
				t.Fatal(keep, err)
			}
			if r.Topic != tc.topic {
				t.Errorf("topic %q, want %q", r.Topic, tc.topic)
			}
			if r.KeySchema.Name != tc.keyName || r.KeySchema.Version == nil || *r.KeySchema.Version != 1 {
				t.Errorf("key schema %+v", r.KeySchema)
			}
			if k := r.Key.(*Struct); k.Schema != r.KeySchema || !slices.Equal(k.Values, tc.keyVals) {
				t.Errorf("key %v, want %v", k.Values, tc.keyVals)
			}
			if len(tc.keyVals) == 2 {
				f := r.KeySchema.Fields[1]
				if f.Schema.Type != String || f.Schema.Optional || f.Name != cmp(tc.props["key.field.name"], "__dbz__physicalTableIdentifier") {
					t.Errorf("key field %+v", f)
				}
			}
			if r.ValueSchema.Name != tc.envName {
				t.Errorf("envelope %q, want %q", r.ValueSchema.Name, tc.envName)
			}
			row := r.ValueSchema.Fields[0].Schema
			if r.ValueSchema.Fields[1].Schema != row || row.Name != strings.TrimSuffix(tc.envName, "Envelope")+"Value" ||
				!row.Optional || len(row.Fields) != len(oldRow.Fields) {
				t.Errorf("row schema %+v", row)
			}
			env := r.Value.(*Struct)
			if env.Schema != r.ValueSchema || env.Values[0] != nil {
				t.Error("envelope struct")
			}
			if after := env.Values[1].(*Struct); after.Schema != row || !slices.Equal(after.Values, []any{"k", "x"}) {
				t.Errorf("after %+v", after)
			}
			if env.Values[2] == nil || env.Values[4] != "c" {
				t.Error("source or op lost")
			}
		})
	}
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Records the transform leaves alone, or changes in part.
func TestLogicalTablePassThrough(t *testing.T) {
	tr, problems := logicalTableOf(t, map[string]string{"topic.regex": `(.*)\.shard_(\d+)\.orders`, "topic.replacement": "$1.all.orders"})
	if tr == nil {
		t.Fatal(problems)
	}
	// A topic the regex does not match in full.
	r := shardEvent("1", "k")
	r.Topic = "shop.shard_1.orders.x"
	ks := r.KeySchema
	if keep, err := tr.apply(&r); !keep || err != nil || r.Topic != "shop.shard_1.orders.x" || r.KeySchema != ks {
		t.Error("a topic the regex does not match changed")
	}
	// A table without a primary key: null key, no key schema.
	r = shardEvent("1", "k")
	r.Key = nil
	if keep, err := tr.apply(&r); !keep || err != nil || r.Topic != "shop.all.orders" || r.KeySchema != nil || r.ValueSchema.Name != "shop.all.orders.Envelope" {
		t.Errorf("null key: %v %+v", err, r)
	}
	// A value that is not a change event (after ExtractNewRecordState).
	r = shardEvent("1", "k")
	row := r.Value.(*Struct).Values[1].(*Struct)
	r.ValueSchema, r.Value = row.Schema, row
	if keep, err := tr.apply(&r); !keep || err != nil || r.Value != row || r.ValueSchema.Name != "shop.shard_1.orders.Value" || r.KeySchema.Name != "shop.all.orders.Key" {
		t.Errorf("row value: %v %+v", err, r.ValueSchema)
	}
	// An empty new topic: the record as it is.
	empty, _ := logicalTableOf(t, map[string]string{"topic.regex": `shop\.shard_1\.orders()`, "topic.replacement": "$1"})
	r = shardEvent("1", "k")
	if keep, err := empty.apply(&r); !keep || err != nil || r.Topic != "shop.shard_1.orders" || r.KeySchema.Name != "shop.shard_1.orders.Key" {
		t.Error("an empty new topic changed the record")
	}
	// A key that is not a struct (the router's aggregate id) fails.
	r = shardEvent("1", "k")
	r.KeySchema, r.Key = &Schema{Type: String}, "k"
	if _, err := tr.apply(&r); err == nil || !strings.Contains(err.Error(), "Only Struct objects supported for [Updating schema], found: java.lang.String") {
		t.Errorf("string key: %v", err)
	}
	// A key that has the physical table's field already.
	dup, _ := logicalTableOf(t, map[string]string{"topic.regex": `.*`, "topic.replacement": "all", "key.field.name": "id"})
	r = shardEvent("1", "k")
	if _, err := dup.apply(&r); err == nil || !strings.Contains(err.Error(), "field name duplication id") {
		t.Errorf("duplicate field: %v", err)
	}
	// Two names the avro adjuster makes one.
	av, _ := logicalTableOf(t, map[string]string{"topic.regex": `(.*)`, "topic.replacement": "$1", "schema.name.adjustment.mode": "avro"})
	r = shardEvent("1", "k")
	r.Topic = "a-1"
	if _, err := av.apply(&r); err != nil {
		t.Fatal(err)
	}
	r = shardEvent("2", "k")
	r.Topic = "a+1"
	if _, err := av.apply(&r); err == nil || !strings.Contains(err.Error(), "'a+1.Key' is not a valid Avro schema name and its replacement 'a_1.Key' conflicts with another different schema 'a-1.Key'") {
		t.Errorf("conflict: %v", err)
	}
}

// The options as Debezium validates them.
func TestLogicalTableOptions(t *testing.T) {
	ok := map[string]string{"topic.regex": `a(.*)`, "topic.replacement": "b$1"}
	for _, tc := range []struct {
		set    map[string]string
		option string // refused; "" accepted
	}{
		{nil, ""},
		{map[string]string{"topic.regex": ""}, "topic.regex"},
		{map[string]string{"topic.regex": "  "}, "topic.regex"},
		{map[string]string{"topic.replacement": " "}, "topic.replacement"},
		{map[string]string{"topic.regex": "a(?=b)"}, "topic.regex"},
		{map[string]string{"topic.replacement": "$2"}, "topic.replacement"},
		{map[string]string{"key.enforce.uniqueness": "yes"}, "key.enforce.uniqueness"},
		{map[string]string{"key.field.name": ""}, "key.field.name"},
		{map[string]string{"key.field.name": "", "key.enforce.uniqueness": "false"}, ""},
		{map[string]string{"key.field.regex": "x(.*)"}, "key.field.replacement"},
		{map[string]string{"key.field.regex": "x(.*)", "key.field.replacement": " "}, "key.field.replacement"},
		{map[string]string{"key.field.regex": " ", "key.field.replacement": ""}, ""},
		{map[string]string{"key.field.replacement": "y"}, ""},
		{map[string]string{"key.field.regex": "x(", "key.field.replacement": "y"}, "key.field.regex"},
		{map[string]string{"key.field.regex": "x", "key.field.replacement": "$1"}, "key.field.replacement"},
		{map[string]string{"schema.name.adjustment.mode": " AVRO_Unicode "}, ""},
		{map[string]string{"schema.name.adjustment.mode": "avro2"}, "schema.name.adjustment.mode"},
		{map[string]string{"schema.name.adjustment.mode": ""}, "schema.name.adjustment.mode"},
		{map[string]string{"logical.table.cache.size": "-1"}, ""},
		{map[string]string{"logical.table.cache.size": " 16"}, "logical.table.cache.size"},
		{map[string]string{"logical.table.cache.size": "many"}, "logical.table.cache.size"},
	} {
		props := map[string]string{}
		for k, v := range ok {
			props[k] = v
		}
		for k, v := range tc.set {
			props[k] = v
		}
		tr, problems := logicalTableOf(t, props)
		switch {
		case tc.option == "" && tr == nil:
			t.Errorf("%v refused: %v", tc.set, problems)
		case tc.option != "" && (tr != nil || len(problems) == 0 || !strings.HasPrefix(problems[0], "transforms.l."+tc.option+":")):
			t.Errorf("%v: want %s refused, got %v", tc.set, tc.option, problems)
		}
	}
	if _, problems := logicalTableOf(t, map[string]string{}); len(problems) != 2 {
		t.Errorf("missing options: %v", problems)
	}
}

// In a chain: after the Outbox Event Router the key is a string, on which
// Debezium's task fails, so the configuration is refused; on the change
// events it runs.
func TestLogicalTableChain(t *testing.T) {
	base := map[string]string{
		"transforms.l.type":              LogicalTableClass,
		"transforms.l.topic.regex":       `.*`,
		"transforms.l.topic.replacement": "all",
	}
	props := map[string]string{"transforms": "outbox,l", "transforms.outbox.type": RouterClass}
	for k, v := range base {
		props[k] = v
	}
	if _, err := New(Config{Props: props}); err == nil || !strings.Contains(err.Error(), "transforms.l.type") {
		t.Errorf("after the router: %v", err)
	}
	props["transforms"] = "outbox,hoist,l"
	props["transforms.hoist.type"] = "org.apache.kafka.connect.transforms.HoistField$Key"
	props["transforms.hoist.field"] = "id"
	if _, err := New(Config{Props: props}); err != nil {
		t.Errorf("after HoistField$Key: %v", err)
	}
	base["transforms"] = "l"
	base["transforms.l.logical.table.cache.size"] = "32"
	ch, ignored, err := Parse(Config{Props: base})
	if err != nil || len(ignored) != 0 {
		t.Fatal(err, ignored)
	}
	r := shardEvent("1", "k")
	if keep, err := ch.Apply(&r); !keep || err != nil || r.Topic != "all" || r.KeySchema.Name != "all.Key" {
		t.Errorf("%v %v %+v", keep, err, r)
	}
}

func TestAvroAdjuster(t *testing.T) {
	for _, tc := range []struct {
		in, avro, unicode string
	}{
		{"shop.orders.Key", "shop.orders.Key", "shop.orders.Key"},
		{"1a.b", "_1a.b", "_u0031a.b"},
		{"_a_b", "_a_b", "_u005fa_u005fb"},
		{".a-b", "_a_b", "_u002ea_u002db"},
		{"a\u00e9", "a_", "a_u00e9"},
		{"a\u03b1", "a_", "a_u3b1"},
		{"a\U0001F600", "a__", "a_ud83d_ude00"},
		{"", "", ""},
	} {
		if got, _ := (&avroAdjuster{}).adjust(tc.in); got != tc.avro {
			t.Errorf("avro %q: %q, want %q", tc.in, got, tc.avro)
		}
		if got, _ := (&avroAdjuster{unicode: true}).adjust(tc.in); got != tc.unicode {
			t.Errorf("avro_unicode %q: %q, want %q", tc.in, got, tc.unicode)
		}
	}
}
