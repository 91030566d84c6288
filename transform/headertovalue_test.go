package transform

import (
	"fmt"
	"strings"
	"testing"
)

func headerToValueOf(t *testing.T, opts map[string]string) (transformation, []string) {
	t.Helper()
	p := &parser{props: map[string]string{}, used: map[string]bool{}}
	for k, v := range opts {
		p.props["transforms.h."+k] = v
	}
	return newHeaderToValue(p.options("transforms.h.")), p.problems
}

// HeaderToValue's options as Debezium 3.6.1 validates them: its own list
// splitting (an empty item at the end dropped, one elsewhere refused, no
// spaces), operation move or copy in any case, lists of equal length.
func TestHeaderToValueOptions(t *testing.T) {
	for _, tc := range []struct {
		headers, fields, op string
		refused             string // the problem's start; "" when accepted
	}{
		{"id,x", "eventId,n", "copy", ""},
		{" id , x ", "eventId,n", " MOVE ", ""},
		{"id,x,", "eventId,n", "copy", ""},
		{"id,,x", "eventId,a,n", "copy", `transforms.h.headers: "id,,x": an empty item`},
		{"id,x, ", "eventId,n", "copy", `transforms.h.headers: "id,x, ": an empty item`},
		{",id", "eventId", "copy", `transforms.h.headers: ",id": an empty item`},
		{"id", "event id", "copy", `transforms.h.fields: "event id": an item with a space`},
		{" ", "eventId", "copy", "transforms.h.headers: missing"},
		{"id", "eventId", "", "transforms.h.operation: missing"},
		{"id", "eventId", "delete", `transforms.h.operation: "delete": Debezium requires move or copy`},
		{"id,x", "eventId", "copy", "transforms.h.fields: 1 fields for 2 headers"},
	} {
		opts := map[string]string{"headers": tc.headers, "fields": tc.fields, "operation": tc.op}
		tr, problems := headerToValueOf(t, opts)
		switch {
		case tc.refused == "" && (tr == nil || len(problems) > 0):
			t.Errorf("%v: refused: %v", opts, problems)
		case tc.refused != "" && (tr != nil || len(problems) != 1 || !strings.HasPrefix(problems[0], tc.refused)):
			t.Errorf("%v: got %v, want %s", opts, problems, tc.refused)
		}
	}
	tr, _ := headerToValueOf(t, map[string]string{"headers": "id,x,", "fields": "eventId,n", "operation": "Move"})
	if h := tr.(*headerToValue); !h.move || len(h.headers) != 2 {
		t.Errorf("got %+v", h)
	}
}

// HeaderToValue on the router's envelope value and on a change event, as
// Debezium 3.6.1 applies it: each header's schema and value, in the
// headers' order; an existing field keeps its schema and takes the
// header's value; a dotted field goes into a struct, made when missing;
// a record without those headers, or with a null value, passes; a value
// that is not a struct, a value Struct.put refuses or a header without a
// schema is the record's error.
func TestHeaderToValue(t *testing.T) {
	envelopeSchema := `{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"},{"type":"string","optional":false,"field":"eventType"},{"type":"string","optional":true,"default":"none","field":"tenant"}`
	for _, tc := range []struct {
		name   string
		opts   map[string]string
		record func() Record
		want   string // value and headers as dump writes them, or "error: ..."
	}{
		{"copy", map[string]string{"headers": "x,id", "fields": "n,eventId", "operation": "copy"}, testRecord,
			`value={"schema":{"type":"struct","fields":[` + envelopeSchema + `,{"type":"string","optional":false,"field":"eventId"},{"type":"int32","optional":false,"field":"n"}],"optional":false,"name":"shop.public.outbox.Order.Value"},"payload":{"payload":"{\"n\":1}","eventType":"OrderCreated","tenant":"none","eventId":"e-1","n":5}}
id="e-1"
x=5
`},
		{"move, a header twice: the first's schema, the last's value", map[string]string{"headers": "id", "fields": "eventId", "operation": "move"},
			func() Record {
				r := testRecord()
				r.Headers = append(r.Headers, Header{Key: "id", Schema: &Schema{Type: String, Optional: true}, Value: "e-2"})
				return r
			},
			`value={"schema":{"type":"struct","fields":[` + envelopeSchema + `,{"type":"string","optional":false,"field":"eventId"}],"optional":false,"name":"shop.public.outbox.Order.Value"},"payload":{"payload":"{\"n\":1}","eventType":"OrderCreated","tenant":"none","eventId":"e-2"}}
x=5
`},
		{"a field the value has", map[string]string{"headers": "id", "fields": "eventType", "operation": "copy"}, testRecord,
			`value={"schema":{"type":"struct","fields":[` + envelopeSchema + `],"optional":false,"name":"shop.public.outbox.Order.Value"},"payload":{"payload":"{\"n\":1}","eventType":"e-1","tenant":"none"}}
id="e-1"
x=5
`},
		{"a field the value has, of another type", map[string]string{"headers": "x", "fields": "eventType", "operation": "copy"}, testRecord,
			`error: transform h: Invalid Java object for schema with type STRING: class java.lang.Integer for field: "eventType"`},
		{"a null header of an optional schema", map[string]string{"headers": "id", "fields": "eventId", "operation": "copy"},
			func() Record {
				r := testRecord()
				r.Headers[0] = Header{Key: "id", Schema: &Schema{Type: String, Optional: true}}
				return r
			},
			`value={"schema":{"type":"struct","fields":[` + envelopeSchema + `,{"type":"string","optional":true,"field":"eventId"}],"optional":false,"name":"shop.public.outbox.Order.Value"},"payload":{"payload":"{\"n\":1}","eventType":"OrderCreated","tenant":"none","eventId":null}}
id=null
x=5
`},
		{"a null header of a required schema", map[string]string{"headers": "id", "fields": "eventId", "operation": "copy"},
			func() Record {
				r := testRecord()
				r.Headers[0].Value = nil
				return r
			},
			`error: transform h: Invalid value: null used for required field: "eventId", schema type: STRING`},
		{"a header without a schema (InsertHeader's null)", map[string]string{"headers": "id", "fields": "eventId", "operation": "copy"},
			func() Record {
				r := testRecord()
				r.Headers[0] = Header{Key: "id"}
				return r
			},
			`error: transform h: fieldSchema for field eventId cannot be null.`},
		{"no such header: unchanged, even by move", map[string]string{"headers": "nope", "fields": "n", "operation": "move"}, testRecord,
			`value={"schema":{"type":"struct","fields":[` + envelopeSchema + `],"optional":false,"name":"shop.public.outbox.Order.Value"},"payload":{"payload":"{\"n\":1}","eventType":"OrderCreated","tenant":"none"}}
id="e-1"
x=5
`},
		{"the router's payload alone", map[string]string{"headers": "id", "fields": "eventId", "operation": "copy"},
			func() Record {
				r := testRecord()
				r.ValueSchema, r.Value = &Schema{Type: String, Optional: true}, `{"n":1}`
				return r
			},
			`error: transform h: Only Struct objects supported for [Header field insertion], found: java.lang.String`},
		{"a tombstone", map[string]string{"headers": "id", "fields": "eventId", "operation": "move"},
			func() Record {
				r := testRecord()
				r.ValueSchema, r.Value = nil, nil
				return r
			},
			`value=
id="e-1"
x=5
`},
		{"nested: into source and after, a struct made for meta; the first of a header's fields", map[string]string{"headers": "id,x,m,id", "fields": "source.eventId,after.n,meta.m,unused", "operation": "move"},
			func() Record {
				r := changeEvent("hi")
				r.Headers = append(testRecord().Headers, Header{Key: "m", Schema: &Schema{Type: String, Optional: true}, Value: "v"})
				return r
			},
			`value={"schema":{"type":"struct","fields":[{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"},{"type":"string","optional":true,"field":"note"}],"optional":true,"name":"shop.public.outbox.Value","field":"before"},{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"},{"type":"string","optional":true,"field":"note"},{"type":"int32","optional":false,"field":"n"}],"optional":false,"name":"shop.public.outbox.Value","field":"after"},{"type":"struct","fields":[{"type":"string","optional":false,"field":"table"},{"type":"int64","optional":true,"field":"lsn"},{"type":"int64","optional":false,"field":"ts_ms"},{"type":"string","optional":false,"field":"eventId"}],"optional":false,"name":"io.debezium.connector.postgresql.Source","version":1,"field":"source"},{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"}],"optional":true,"name":"event.block","version":1,"field":"transaction"},{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"},{"type":"struct","fields":[{"type":"string","optional":true,"field":"m"}],"optional":true,"field":"meta"}],"optional":false,"name":"shop.public.outbox.Envelope","version":2},"payload":{"before":null,"after":{"id":"k-1","note":"hi","n":5},"source":{"table":"outbox","lsn":42,"ts_ms":7,"eventId":"e-1"},"transaction":null,"op":"c","ts_ms":9,"meta":{"m":"v"}}}
`},
		{"a path through a field that is not a struct", map[string]string{"headers": "id", "fields": "op.id", "operation": "copy"},
			func() Record { r := changeEvent("hi"); r.Headers = testRecord().Headers; return r },
			`error: transform h: Field 'op' is a primitive type, not a struct. Cannot add nested field 'op.id'.`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, problems := headerToValueOf(t, tc.opts)
			if tr == nil {
				t.Fatal(problems)
			}
			r := tc.record()
			orig := r
			snap := func() string {
				b, _ := appendJSONValue(nil, orig.ValueSchema, orig.Value)
				return fmt.Sprintf("%s %v", b, orig.Headers)
			}
			before := snap()
			_, err := tr.apply(&r)
			got := ""
			if err != nil {
				got = "error: " + (&DataError{Transform: "h", Reason: err.(*DataError).Reason}).Error()
			} else {
				d := dump(t, r)
				got = d[strings.Index(d, "value="):]
			}
			if got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
			if snap() != before {
				t.Error("changed the values it was given")
			}
		})
	}
}

// Debezium keeps the schema the first record of a value schema made: a
// later record of an equal schema carrying a header the first lacked
// fails (Struct.put of a field the schema does not have), and one
// lacking a header the first had leaves its field null.
func TestHeaderToValueSchemaPerValueSchema(t *testing.T) {
	tr, problems := headerToValueOf(t, map[string]string{"headers": "id,x", "fields": "eventId,n", "operation": "copy"})
	if tr == nil {
		t.Fatal(problems)
	}
	first := testRecord()
	first.Headers = first.Headers[:1]
	if _, err := tr.apply(&first); err != nil {
		t.Fatal(err)
	}
	second := testRecord()
	if _, err := tr.apply(&second); err == nil || !strings.Contains(err.Error(), "n is not a valid field name") {
		t.Errorf("got %v", err)
	}

	tr, _ = headerToValueOf(t, map[string]string{"headers": "id,x", "fields": "eventId,n", "operation": "copy"})
	first = testRecord()
	if _, err := tr.apply(&first); err != nil {
		t.Fatal(err)
	}
	second = testRecord()
	second.Headers = second.Headers[:1]
	if _, err := tr.apply(&second); err != nil {
		t.Fatal(err)
	}
	if st := second.Value.(*Struct); len(st.Values) != 5 || st.Values[3] != "e-1" || st.Values[4] != nil {
		t.Errorf("got %v", st.Values)
	}
}

// The class is a transform of the chain, on the change events or after
// the router; its refusals name the key as the user wrote it.
func TestHeaderToValueParse(t *testing.T) {
	props := map[string]string{
		"transforms": "tovalue", "transforms.tovalue.type": headerToValueClass,
		"transforms.tovalue.headers": "id", "transforms.tovalue.fields": "eventId", "transforms.tovalue.operation": "copy",
	}
	ch, _, err := Parse(Config{Props: props})
	if err != nil || ch.Len() != 1 {
		t.Fatalf("got %v, %v", ch, err)
	}
	server := map[string]string{}
	for k, v := range props {
		server["debezium."+k] = v
	}
	props = server
	props["debezium.transforms.tovalue.fields"] = "eventId,n"
	_, _, err = Parse(Config{Props: props})
	if err == nil || !strings.Contains(err.Error(), "debezium.transforms.tovalue.fields: 2 fields for 1 headers") {
		t.Errorf("got %v", err)
	}
}
