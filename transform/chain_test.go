package transform

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/schema"
)

// envelope is the router's struct value of envelope placements: its
// payload and an event type, named as Debezium names it.
func envelope(payload any, eventType string) (*Schema, any) {
	v1 := int32(1)
	s := &Schema{Type: StructT, Name: "shop.public.outbox.Order.Value", Fields: []Field{
		{Name: "payload", Schema: &Schema{Type: String, Optional: true, Name: "io.debezium.data.Json", Version: &v1}},
		{Name: "eventType", Schema: &Schema{Type: String}},
		{Name: "tenant", Schema: &Schema{Type: String, Optional: true, HasDefault: true, Default: "none"}},
	}}
	return s, &Struct{Schema: s, Values: []any{payload, eventType, nil}}
}

// testRecord is a record as the router makes it: topic, string key, a
// struct value, the id header.
func testRecord() Record {
	vs, v := envelope(`{"n":1}`, "OrderCreated")
	return Record{
		Topic: "outbox.event.Order", KeySchema: &Schema{Type: String}, Key: "o-1", ValueSchema: vs, Value: v,
		Timestamp: time.Date(2021, 3, 4, 5, 6, 7, 89e6, time.UTC).UnixMilli(),
		Headers:   []Header{{Key: "id", Schema: &Schema{Type: String}, Value: "e-1"}, {Key: "x", Schema: &Schema{Type: Int32}, Value: int64(5)}},
	}
}

// dump writes a record with every part under JsonConverter with schemas,
// for comparing.
func dump(t *testing.T, r Record) string {
	t.Helper()
	c := Converters{Key: schema.ConvJSONSchemas, Value: schema.ConvJSONSchemas, Header: schema.ConvJSON}
	msg, err := r.Message(c)
	if err != nil {
		t.Fatalf("writing %+v: %v", r, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "topic=%s", r.Topic)
	if r.HasPartition {
		fmt.Fprintf(&b, " partition=%d", r.Partition)
	}
	fmt.Fprintf(&b, "\nkey=%s\nvalue=%s\n", msg.Key, msg.Value)
	for _, h := range msg.Headers {
		fmt.Fprintf(&b, "%s=%s\n", h.Key, h.Value)
	}
	return b.String()
}

func chainOf(t *testing.T, props map[string]string) *Chain {
	t.Helper()
	all := map[string]string{"transforms": "outbox," + props["transforms"], "transforms.outbox.type": RouterClass}
	for k, v := range props {
		if k != "transforms" {
			all[k] = v
		}
	}
	ch, _, err := Parse(Config{Props: all})
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

const base = `topic=outbox.event.Order
key={"schema":{"type":"string","optional":false},"payload":"o-1"}
value={"schema":{"type":"struct","fields":[{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"},{"type":"string","optional":false,"field":"eventType"},{"type":"string","optional":true,"default":"none","field":"tenant"}],"optional":false,"name":"shop.public.outbox.Order.Value"},"payload":{"payload":"{\"n\":1}","eventType":"OrderCreated","tenant":"none"}}
id="e-1"
x=5
`

// Each transform on the router's record, as Kafka Connect 4.3 applies it.
// want is the record afterwards; "" for dropped; an error's text.
func TestTransforms(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props map[string]string
		edit  func(r *Record)
		want  string // the changes, old=>new, separated by |||; "dropped"; "error: ..."
	}{
		{"RegexRouter", map[string]string{"transforms": "r", "transforms.r.type": kt + "RegexRouter",
			"transforms.r.regex": `outbox\.event\.(?<agg>.*)`, "transforms.r.replacement": `${agg}s\$`}, nil,
			"topic=outbox.event.Order=>topic=Orders$"},
		{"RegexRouter, no full match", map[string]string{"transforms": "r", "transforms.r.type": kt + "RegexRouter",
			"transforms.r.regex": `outbox`, "transforms.r.replacement": `x`}, nil, ""},
		{"RegexRouter replaces the first match", map[string]string{"transforms": "r", "transforms.r.type": kt + "RegexRouter",
			"transforms.r.regex": `o|outbox\.event\.Order`, "transforms.r.replacement": `0`}, nil,
			"topic=outbox.event.Order=>topic=0utbox.event.Order"},
		{"TimestampRouter", map[string]string{"transforms": "r", "transforms.r.type": kt + "TimestampRouter"}, nil,
			"topic=outbox.event.Order=>topic=outbox.event.Order-20210304"},
		{"TimestampRouter's patterns", map[string]string{"transforms": "r", "transforms.r.type": kt + "TimestampRouter",
			"transforms.r.topic.format": "${timestamp}/${topic}", "transforms.r.timestamp.format": "EEE EEEE MMM MMMM d D yy y 'at' h:mm:ss.SSS a k K Z X z G u ''"}, nil,
			"topic=outbox.event.Order=>topic=Thu Thursday Mar March 4 63 21 2021 at 5:06:07.089 AM 5 5 +0000 Z UTC AD 4 '/outbox.event.Order"},
		{"InsertHeader", map[string]string{"transforms": "h", "transforms.h.type": kt + "InsertHeader",
			"transforms.h.header": "n", "transforms.h.value.literal": "300"}, nil, "x=5=>x=5\nn=300"},
		{"DropHeaders", map[string]string{"transforms": "h", "transforms.h.type": kt + "DropHeaders", "transforms.h.headers": "x,none"},
			func(r *Record) {
				r.Headers = append(r.Headers, Header{Key: "x", Value: "again", Schema: &Schema{Type: String}})
			},
			"x=5\n=>|||x=\"again\"\n=>"},
		{"HeaderFrom move", map[string]string{"transforms": "h", "transforms.h.type": kt + "HeaderFrom$Value",
			"transforms.h.fields": "eventType,tenant", "transforms.h.headers": "type,tenant", "transforms.h.operation": "move"}, nil,
			`,{"type":"string","optional":false,"field":"eventType"},{"type":"string","optional":true,"default":"none","field":"tenant"}=>` +
				"|||" + `,"eventType":"OrderCreated","tenant":"none"}}=>}}` + "|||x=5=>x=5\ntype=\"OrderCreated\"\ntenant=\"none\""},
		{"HeaderFrom copy without defaults", map[string]string{"transforms": "h", "transforms.h.type": kt + "HeaderFrom$Value",
			"transforms.h.fields": "tenant", "transforms.h.headers": "tenant", "transforms.h.operation": "copy",
			"transforms.h.replace.null.with.default": "false"}, nil, "x=5=>x=5\ntenant=\"none\""},
		{"HeaderFrom of a missing field", map[string]string{"transforms": "h", "transforms.h.type": kt + "HeaderFrom$Value",
			"transforms.h.fields": "nope", "transforms.h.headers": "n", "transforms.h.operation": "copy"}, nil,
			`error: transform h: field "nope" is not in the schema`},
		{"HeaderFrom of a string", map[string]string{"transforms": "h", "transforms.h.type": kt + "HeaderFrom$Value",
			"transforms.h.fields": "a", "transforms.h.headers": "a", "transforms.h.operation": "copy"},
			func(r *Record) { r.ValueSchema, r.Value = &Schema{Type: String}, "x" },
			"error: transform h: Only Struct objects supported for [header copy], found: java.lang.String"},
		{"HeaderFrom of a tombstone", map[string]string{"transforms": "h", "transforms.h.type": kt + "HeaderFrom$Value",
			"transforms.h.fields": "a", "transforms.h.headers": "a", "transforms.h.operation": "move"},
			func(r *Record) { r.ValueSchema, r.Value = nil, nil },
			"error: transform h: Only Map objects supported in absence of schema for [header move], found: null"},
		{"InsertField", map[string]string{"transforms": "i", "transforms.i.type": kt + "InsertField$Value",
			"transforms.i.topic.field": "t!", "transforms.i.partition.field": "p", "transforms.i.timestamp.field": "ts",
			"transforms.i.static.field": "s?", "transforms.i.static.value": "v"}, func(r *Record) { r.Partition, r.HasPartition = 2, true },
			`"field":"tenant"}],"optional":false=>"field":"tenant"},{"type":"string","optional":false,"field":"t"},{"type":"int32","optional":true,"field":"p"},{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","version":1,"field":"ts"},{"type":"string","optional":true,"field":"s"}],"optional":false` +
				"|||" + `"tenant":"none"}}=>"tenant":"none","t":"outbox.event.Order","p":2,"ts":1614834367089,"s":"v"}}`},
		{"InsertField without a partition", map[string]string{"transforms": "i", "transforms.i.type": kt + "InsertField$Value",
			"transforms.i.partition.field": "p"}, nil,
			`"field":"tenant"}],"optional":false=>"field":"tenant"},{"type":"int32","optional":true,"field":"p"}],"optional":false` +
				"|||" + `"tenant":"none"}}=>"tenant":"none","p":null}}`},
		{"InsertField of a name the struct has", map[string]string{"transforms": "i", "transforms.i.type": kt + "InsertField$Value",
			"transforms.i.topic.field": "payload"}, nil, `error: transform i: cannot create field "payload"`},
		{"InsertField on a null value", map[string]string{"transforms": "i", "transforms.i.type": kt + "InsertField$Value",
			"transforms.i.topic.field": "t"}, func(r *Record) { r.ValueSchema.Optional, r.Value = true, nil }, ""},
		{"ReplaceField", map[string]string{"transforms": "r", "transforms.r.type": kt + "ReplaceField$Value",
			"transforms.r.include": "payload,eventType,tenant", "transforms.r.exclude": "tenant", "transforms.r.renames": "eventType:type,nope:x"}, nil,
			`{"type":"string","optional":false,"field":"eventType"},{"type":"string","optional":true,"default":"none","field":"tenant"}=>{"type":"string","optional":false,"field":"type"}` +
				"|||" + `"eventType":"OrderCreated","tenant":"none"}}=>"type":"OrderCreated"}}`},
		{"ReplaceField into a name taken", map[string]string{"transforms": "r", "transforms.r.type": kt + "ReplaceField$Value",
			"transforms.r.renames": "eventType:payload"}, nil, `error: transform r: cannot create field "payload"`},
		{"SetSchemaMetadata", map[string]string{"transforms": "m", "transforms.m.type": kt + "SetSchemaMetadata$Value",
			"transforms.m.schema.name": "x.Y", "transforms.m.schema.version": "4"}, nil,
			`"name":"shop.public.outbox.Order.Value"}=>"name":"x.Y","version":4}`},
		{"SetSchemaMetadata of a string", map[string]string{"transforms": "m", "transforms.m.type": kt + "SetSchemaMetadata$Value",
			"transforms.m.schema.version": "4"}, func(r *Record) { r.ValueSchema, r.Value = &Schema{Type: String, Optional: true}, nil },
			"error: transform m: Cannot list fields on non-struct type"},
		{"SetSchemaMetadata of a tombstone", map[string]string{"transforms": "m", "transforms.m.type": kt + "SetSchemaMetadata$Value",
			"transforms.m.schema.version": "4"}, func(r *Record) { r.ValueSchema, r.Value = nil, nil },
			""},
		{"Filter", map[string]string{"transforms": "f", "transforms.f.type": kt + "Filter"}, nil, "dropped"},
		{"TopicNameMatches", map[string]string{"transforms": "f,g", "transforms.f.type": kt + "Filter", "transforms.f.predicate": "p",
			"transforms.g.type": kt + "Filter", "transforms.g.predicate": "q",
			"predicates": "p,q", "predicates.p.type": "TopicNameMatches", "predicates.p.pattern": "outbox",
			"predicates.q.type": "TopicNameMatches", "predicates.q.pattern": `outbox\.event\..*`}, nil, "dropped"},
		{"negate", map[string]string{"transforms": "f", "transforms.f.type": kt + "Filter", "transforms.f.predicate": "p", "transforms.f.negate": "true",
			"predicates": "p", "predicates.p.type": "TopicNameMatches", "predicates.p.pattern": `outbox\.event\..*`}, nil, ""},
		{"HasHeaderKey", map[string]string{"transforms": "f,g", "transforms.f.type": kt + "Filter", "transforms.f.predicate": "p",
			"transforms.g.type": kt + "Filter", "transforms.g.predicate": "q",
			"predicates": "p,q", "predicates.p.type": "HasHeaderKey", "predicates.p.name": "i",
			"predicates.q.type": "HasHeaderKey", "predicates.q.name": "x"}, nil, "dropped"},
		{"RecordIsTombstone of a null with a schema", map[string]string{"transforms": "f", "transforms.f.type": kt + "Filter",
			"transforms.f.predicate": "p", "predicates": "p", "predicates.p.type": "RecordIsTombstone"},
			func(r *Record) { r.ValueSchema, r.Value = &Schema{Type: String, Optional: true}, nil }, "dropped"},
		{"RecordIsTombstone of a value", map[string]string{"transforms": "f", "transforms.f.type": kt + "Filter",
			"transforms.f.predicate": "p", "predicates": "p", "predicates.p.type": "RecordIsTombstone"}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testRecord()
			if tc.edit != nil {
				tc.edit(&r)
			}
			before := dump(t, r)
			orig := r
			keep, err := chainOf(t, tc.props).Apply(&r)
			switch {
			case strings.HasPrefix(tc.want, "error: "):
				var de *DataError
				if !errors.As(err, &de) || !strings.Contains(err.Error(), strings.TrimPrefix(tc.want, "error: ")) {
					t.Fatalf("err %v, want a DataError with %q", err, tc.want)
				}
				return
			case err != nil:
				t.Fatal(err)
			case tc.want == "dropped":
				if keep {
					t.Fatal("kept")
				}
				return
			case !keep:
				t.Fatal("dropped")
			}
			want := before
			if tc.want != "" {
				for _, change := range strings.Split(tc.want, "|||") {
					old, repl, ok := strings.Cut(change, "=>")
					if !ok {
						old, repl = change, ""
					}
					if !strings.Contains(want, old) {
						t.Fatalf("test's change %q does not apply to\n%s", old, want)
					}
					want = strings.Replace(want, old, repl, 1)
				}
			}
			if got := dump(t, r); got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
			if dump(t, orig) != before {
				t.Error("the transform changed the values it was given, which other records may share")
			}
		})
	}
}

// HeaderFrom$Value before the router runs on the change event, behind
// its predicate, and adds the headers the router's record then carries
// (the documented way to CloudEventsConverter's metadata from headers).
func TestBeforeRouter(t *testing.T) {
	ch, _, err := Parse(Config{Props: map[string]string{
		"transforms": "meta,outbox", "transforms.outbox.type": RouterClass,
		"transforms.meta.type": "org.apache.kafka.connect.transforms.HeaderFrom$Value", "transforms.meta.fields": "source,op",
		"transforms.meta.headers": "source,op", "transforms.meta.operation": "copy",
		"transforms.meta.predicate": "hb", "transforms.meta.negate": "true",
		"predicates": "hb", "predicates.hb.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
		"predicates.hb.pattern": "__debezium-heartbeat.*",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !ch.BeforeRouter() || !ch.AfterRouter() || ch.Len() != 0 {
		t.Fatalf("BeforeRouter %v AfterRouter %v Len %d", ch.BeforeRouter(), ch.AfterRouter(), ch.Len())
	}
	if !ch.CopiesBeforeRouter("source", "op") || ch.CopiesBeforeRouter("source", "op", "transaction") {
		t.Error("CopiesBeforeRouter does not say which fields are copied")
	}
	r := changeEvent("n")
	if err := ch.ApplyBefore(&r); err != nil {
		t.Fatal(err)
	}
	if len(r.Headers) != 2 || r.Headers[0].Key != "source" || r.Headers[1].Key != "op" || r.Headers[1].Value != "c" {
		t.Errorf("headers %+v, want source and op", r.Headers)
	}
	if _, ok := r.Headers[0].Value.(*Struct); !ok || r.Headers[0].Schema.Name != "io.debezium.connector.postgresql.Source" {
		t.Errorf("source header %+v", r.Headers[0])
	}
	hb := changeEvent("n")
	hb.Topic = "__debezium-heartbeat.shop"
	if err := ch.ApplyBefore(&hb); err != nil || len(hb.Headers) != 0 {
		t.Errorf("a heartbeat's headers %+v, %v: the predicate skips it", hb.Headers, err)
	}
	var none *Chain
	if none.BeforeRouter() || none.CopiesBeforeRouter("op") || none.ApplyBefore(&r) != nil {
		t.Error("a nil chain has transforms before the router")
	}
}
