package schema

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// defaultTable is the DESIGN.md outbox table, as pgoutput's Relation message
// describes it.
var defaultTable = []Column{
	{Name: "id", TypeOID: 2950, TypMod: -1}, // uuid
	{Name: "aggregatetype", TypeOID: oidText, TypMod: -1},
	{Name: "aggregateid", TypeOID: oidText, TypMod: -1},
	{Name: "type", TypeOID: oidText, TypMod: -1},
	{Name: "payload", TypeOID: oidJSONB, TypMod: -1},
	{Name: "headers", TypeOID: oidJSONB, TypMod: -1},
	{Name: "created_at", TypeOID: oidTimestamptz, TypMod: -1},
	{Name: "seq", TypeOID: 20, TypMod: -1},
	{Name: "txid", TypeOID: 5069, TypMod: -1},
	{Name: "published_at", TypeOID: oidTimestamptz, TypMod: -1},
}

// row returns a values slice for defaultTable.
func row(id, aggType, aggID, typ, payload, headers, created string) [][]byte {
	v := func(s string) []byte {
		if s == "<null>" {
			return nil
		}
		return []byte(s)
	}
	return [][]byte{v(id), v(aggType), v(aggID), v(typ), v(payload), v(headers), v(created), []byte("1"), []byte("742"), nil}
}

func mustBind(t testing.TB, c Columns, cols []Column) *Binding {
	t.Helper()
	b, err := c.Bind(cols)
	if err != nil {
		t.Fatalf("Bind: %v", err)
	}
	return b
}

func TestColumnsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Columns
		ok   bool
	}{
		{"zero value takes defaults", Columns{}, true},
		{"defaults", DefaultColumns(), true},
		{"custom", Columns{ID: "event_id", Type: "event_type"}, true},
		{"63 bytes", Columns{Payload: strings.Repeat("p", 63)}, true},
		{"64 bytes", Columns{Payload: strings.Repeat("p", 64)}, false},
		{"NUL", Columns{Time: "created\x00at"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.c.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestBind(t *testing.T) {
	transferEvents := []Column{ // seed 004: a table of another shape
		{Name: "event_id", TypeOID: 20, TypMod: -1}, {Name: "aggregate_type", TypeOID: oidVarchar, TypMod: -1}, {Name: "aggregate_id", TypeOID: oidVarchar, TypMod: -1},
		{Name: "event_type", TypeOID: oidVarchar, TypMod: -1}, {Name: "payload", TypeOID: oidText, TypMod: -1}, {Name: "headers", TypeOID: oidText, TypMod: -1},
		{Name: "status", TypeOID: oidVarchar, TypMod: -1}, {Name: "created_at", TypeOID: oidTimestamp, TypMod: -1},
	}
	transferColumns := Columns{ID: "event_id", AggregateType: "aggregate_type", AggregateID: "aggregate_id", Type: "event_type"}

	for _, tc := range []struct {
		name    string
		c       Columns
		cols    []Column
		missing string // "" when Bind succeeds; else the names the error must list
		err     bool   // another error
		want    [numFields]int
	}{
		{name: "default table", cols: defaultTable, want: [numFields]int{0, 1, 2, 3, 4, 5, 6}},
		// Its headers column is text of its own: read only when named.
		{name: "custom names", c: transferColumns, cols: transferEvents, want: [numFields]int{0, 1, 2, 3, 4, -1, 7}},
		{name: "custom names, headers named", c: func() Columns { c := transferColumns; c.Headers = "headers"; return c }(), cols: transferEvents, want: [numFields]int{0, 1, 2, 3, 4, 5, 7}},
		{
			name: "order independent",
			cols: []Column{{Name: "created_at", TypeOID: oidTimestamptz, TypMod: -1}, {Name: "payload", TypeOID: oidJSONB, TypMod: -1}, {Name: "type", TypeOID: oidText, TypMod: -1}, {Name: "x", TypeOID: 23, TypMod: -1}, {Name: "aggregateid", TypeOID: oidText, TypMod: -1}, {Name: "id", TypeOID: 2950, TypMod: -1}, {Name: "aggregatetype", TypeOID: oidText, TypMod: -1}},
			want: [numFields]int{5, 6, 4, 2, 1, -1, 0},
		},
		{
			name: "headers and time optional",
			cols: []Column{{Name: "id", TypeOID: 2950, TypMod: -1}, {Name: "aggregatetype", TypeOID: oidText, TypMod: -1}, {Name: "aggregateid", TypeOID: oidText, TypMod: -1}, {Name: "type", TypeOID: oidText, TypMod: -1}, {Name: "payload", TypeOID: oidJSONB, TypMod: -1}},
			want: [numFields]int{0, 1, 2, 3, 4, -1, -1},
		},
		{name: "custom names against default table", c: transferColumns, cols: defaultTable, missing: "event_id, aggregate_type, aggregate_id, event_type"},
		{name: "no payload", cols: defaultTable[:4], missing: "payload"},
		{name: "empty table", cols: nil, missing: "id, aggregatetype, aggregateid, type, payload"},
		{name: "case-sensitive", cols: []Column{{Name: "ID", TypeOID: 2950, TypMod: -1}, {Name: "aggregatetype", TypeOID: oidText, TypMod: -1}, {Name: "aggregateid", TypeOID: oidText, TypMod: -1}, {Name: "type", TypeOID: oidText, TypMod: -1}, {Name: "payload", TypeOID: oidJSONB, TypMod: -1}}, missing: "id"},
		{name: "duplicate column", cols: append(append([]Column{}, defaultTable...), Column{Name: "type", TypeOID: oidText, TypMod: -1}), err: true},
		{name: "invalid columns", c: Columns{ID: strings.Repeat("x", 64)}, cols: defaultTable, err: true},
		// A created_at of the table's own that is not a timestamp is not
		// the event time unless named; named, it must be one.
		{name: "default time of another type", cols: append(append([]Column{}, defaultTable[:6]...), Column{Name: "created_at", TypeOID: 20, TypMod: -1}), want: [numFields]int{0, 1, 2, 3, 4, 5, -1}},
		{name: "default time without zone", cols: append(append([]Column{}, defaultTable[:6]...), Column{Name: "created_at", TypeOID: oidTimestamp, TypMod: -1}), want: [numFields]int{0, 1, 2, 3, 4, 5, 6}},
		{name: "named time of another type", c: Columns{Time: "created_at"}, cols: append(append([]Column{}, defaultTable[:6]...), Column{Name: "created_at", TypeOID: 20, TypMod: -1}), err: true},
		{name: "named time as text", c: Columns{Time: "created_at"}, cols: append(append([]Column{}, defaultTable[:6]...), Column{Name: "created_at", TypeOID: oidText, TypMod: -1}), want: [numFields]int{0, 1, 2, 3, 4, 5, 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.c.Bind(tc.cols)
			switch {
			case tc.missing != "":
				if !errors.Is(err, ErrMissingColumn) {
					t.Fatalf("Bind error = %v, want ErrMissingColumn", err)
				}
				if !strings.HasSuffix(err.Error(), ": "+tc.missing) {
					t.Fatalf("Bind error = %q, want it to name %q", err, tc.missing)
				}
				return
			case tc.err:
				if err == nil || errors.Is(err, ErrMissingColumn) {
					t.Fatalf("Bind error = %v, want a non-ErrMissingColumn error", err)
				}
				return
			case err != nil:
				t.Fatalf("Bind: %v", err)
			}
			if b.idx != tc.want {
				t.Fatalf("indexes = %v, want %v", b.idx, tc.want)
			}
			if b.ncols != len(tc.cols) {
				t.Fatalf("ncols = %d, want %d", b.ncols, len(tc.cols))
			}
		})
	}
}

func TestBindRecordCustomTable(t *testing.T) {
	cols := []Column{
		{Name: "status", TypeOID: oidVarchar, TypMod: -1}, {Name: "created_at", TypeOID: oidTimestamp, TypMod: -1}, {Name: "payload", TypeOID: oidText, TypMod: -1},
		{Name: "event_type", TypeOID: oidVarchar, TypMod: -1}, {Name: "aggregate_id", TypeOID: oidVarchar, TypMod: -1}, {Name: "aggregate_type", TypeOID: oidVarchar, TypMod: -1}, {Name: "event_id", TypeOID: 20, TypMod: -1},
	}
	b := mustBind(t, Columns{ID: "event_id", AggregateType: "aggregate_type", AggregateID: "aggregate_id", Type: "event_type"}, cols)
	rec, err := b.Record([][]byte{
		[]byte("PENDING"), []byte("2026-11-21 18:37:59.5"), []byte(" {\"amount\": 10}\n"),
		[]byte("TransferCompleted"), []byte("tx-9"), []byte("Transfer"), []byte("1001"),
	}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want := Record{
		ID: "1001", AggregateType: "Transfer", AggregateID: "tx-9", Type: "TransferCompleted",
		Payload: []byte(`{"amount": 10}`), Time: time.Date(2026, 11, 21, 18, 37, 59, 5e8, time.UTC),
	}
	assertRecord(t, rec, want)

	// A missing value in a custom table names the table's column.
	_, err = b.Record([][]byte{nil, nil, []byte("{}"), []byte("t"), []byte(""), []byte("Transfer"), []byte("1")}, time.Time{})
	var re *RowError
	if !errors.As(err, &re) || re.Column != "aggregate_id" || re.Error() != "column aggregate_id: empty aggregate id" {
		t.Fatalf("err = %v, want column aggregate_id: empty aggregate id", err)
	}

	// So does a value the CloudEvents encoding refuses.
	rec, err = b.Record([][]byte{nil, nil, []byte("{}"), []byte(" "), []byte("tx-9"), []byte("Transfer"), []byte("1")}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []Format{CloudEvents, CloudEventsBinary} {
		_, err = mustEncoder(t, format, testSource).Encode(&rec)
		if !errors.As(err, &re) || re.Error() != "column event_type: blank type (only white space)" {
			t.Fatalf("%s: err = %v, want column event_type: blank type (only white space)", format, err)
		}
	}
}

func assertRecord(t *testing.T, got, want Record) {
	t.Helper()
	if got.ID != want.ID || got.AggregateType != want.AggregateType || got.AggregateID != want.AggregateID || got.Type != want.Type {
		t.Errorf("strings = %q %q %q %q, want %q %q %q %q", got.ID, got.AggregateType, got.AggregateID, got.Type,
			want.ID, want.AggregateType, want.AggregateID, want.Type)
	}
	if !bytes.Equal(got.Payload, want.Payload) {
		t.Errorf("Payload = %q, want %q", got.Payload, want.Payload)
	}
	if !bytes.Equal(got.Headers, want.Headers) || (got.Headers == nil) != (want.Headers == nil) {
		t.Errorf("Headers = %q, want %q", got.Headers, want.Headers)
	}
	if !got.Time.Equal(want.Time) {
		t.Errorf("Time = %v, want %v", got.Time, want.Time)
	}
}

func TestRecord(t *testing.T) {
	commit := time.Date(2026, 11, 21, 18, 0, 0, 123456000, time.UTC)
	const (
		id      = "0b7e4c1e-6c3f-4a53-9f0e-2b8c2f1d9a10"
		payload = `{"orderId":42,"total":"19.90"}`
		created = "2026-11-21 18:37:59.123456+00"
	)
	createdAt := time.Date(2026, 11, 21, 18, 37, 59, 123456000, time.UTC)
	base := Record{ID: id, AggregateType: "Order", AggregateID: "42", Type: "OrderCreated", Payload: []byte(payload), Time: createdAt}
	with := func(f func(*Record)) Record { r := base; f(&r); return r }

	defaultBinding := mustBind(t, Columns{}, defaultTable)
	textTable := append([]Column{}, defaultTable...)
	textTable[4].TypeOID, textTable[5].TypeOID, textTable[6].TypeOID = oidText, oidJSON, oidTimestamp
	textBinding := mustBind(t, Columns{}, textTable)
	varcharTable := append([]Column{}, defaultTable...)
	varcharTable[4].TypeOID, varcharTable[5].TypeOID = oidVarchar, oidVarchar
	varcharBinding := mustBind(t, Columns{Headers: "headers"}, varcharTable)
	// Left to its default name, a headers column that is not json or
	// jsonb is the table's own metadata: not read.
	varcharDefault := mustBind(t, Columns{}, varcharTable)
	if got := varcharDefault.UnreadHeaders(); got != "headers" {
		t.Errorf("UnreadHeaders() = %q for a varchar headers column left to its default name, want headers", got)
	}
	if got := varcharBinding.UnreadHeaders(); got != "" {
		t.Errorf("UnreadHeaders() = %q for a varchar headers column named, want none", got)
	}
	// A json headers column is read for its name alone unless no
	// headers column is to be read.
	if got := defaultBinding.DefaultHeaders(); got != "headers" {
		t.Errorf("DefaultHeaders() = %q for a jsonb headers column left to its default name, want headers", got)
	}
	if got := mustBind(t, Columns{Headers: "headers"}, defaultTable).DefaultHeaders(); got != "" {
		t.Errorf("DefaultHeaders() = %q for a headers column named, want none", got)
	}
	noHeaders := mustBind(t, Columns{NoHeaders: true}, defaultTable)
	if got := noHeaders.DefaultHeaders() + noHeaders.UnreadHeaders(); got != "" {
		t.Errorf("DefaultHeaders() + UnreadHeaders() = %q with NoHeaders, want none", got)
	}
	if _, err := (Columns{NoHeaders: true, Headers: "meta"}).Bind(defaultTable); err == nil {
		t.Error("NoHeaders with a headers column named bound, want an error")
	}
	noOptional := mustBind(t, Columns{}, defaultTable[:5])

	for _, tc := range []struct {
		name   string
		b      *Binding
		values [][]byte
		want   Record
		column string // RowError column; "" for success
		reason string
	}{
		{"valid", defaultBinding, row(id, "Order", "42", "OrderCreated", payload, "<null>", created), base, "", ""},
		{"no headers or time column", noOptional, row(id, "Order", "42", "OrderCreated", payload, "", "")[:5], with(func(r *Record) { r.Time = commit }), "", ""},
		{"null time takes commit time", defaultBinding, row(id, "Order", "42", "OrderCreated", payload, "<null>", "<null>"), with(func(r *Record) { r.Time = commit }), "", ""},
		{"headers object", defaultBinding, row(id, "Order", "42", "OrderCreated", payload, `{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`, created),
			with(func(r *Record) {
				r.Headers = []byte(`{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`)
			}), "", ""},
		{"empty headers object", defaultBinding, row(id, "Order", "42", "OrderCreated", payload, `{}`, created), with(func(r *Record) { r.Headers = []byte(`{}`) }), "", ""},
		{"case kept and unicode", defaultBinding, row(id, "ÖrderAggregate", "Kunde/ü", "order.created", payload, "<null>", created),
			with(func(r *Record) {
				r.AggregateType, r.AggregateID, r.Type = "ÖrderAggregate", "Kunde/ü", "order.created"
			}), "", ""},
		{"text payload trimmed", textBinding, row(id, "Order", "42", "OrderCreated", "\n "+payload+"\t\r\n", " {} ", "2026-11-21 18:37:59.123456"),
			with(func(r *Record) { r.Headers = []byte(`{}`) }), "", ""},
		{"text payload scalar", textBinding, row(id, "Order", "42", "OrderCreated", `"just a string"`, "<null>", created), with(func(r *Record) { r.Payload = []byte(`"just a string"`) }), "", ""},
		{"text payload JSON null", textBinding, row(id, "Order", "42", "OrderCreated", `null`, "<null>", created), with(func(r *Record) { r.Payload = []byte(`null`) }), "", ""},
		{"jsonb payload trusted", defaultBinding, row(id, "Order", "42", "OrderCreated", `[1,2]`, "<null>", created), with(func(r *Record) { r.Payload = []byte(`[1,2]`) }), "", ""},

		{"null id", defaultBinding, row("<null>", "Order", "42", "OrderCreated", payload, "<null>", created), Record{}, "id", "null id"},
		{"empty id", defaultBinding, row("", "Order", "42", "OrderCreated", payload, "<null>", created), Record{}, "id", "empty id"},
		{"null aggregatetype", defaultBinding, row(id, "<null>", "42", "OrderCreated", payload, "<null>", created), Record{}, "aggregatetype", "null aggregate type"},
		{"empty aggregatetype", defaultBinding, row(id, "", "42", "OrderCreated", payload, "<null>", created), Record{}, "aggregatetype", "empty aggregate type"},
		{"null aggregateid", defaultBinding, row(id, "Order", "<null>", "OrderCreated", payload, "<null>", created), Record{}, "aggregateid", "null aggregate id"},
		{"empty aggregateid", defaultBinding, row(id, "Order", "", "OrderCreated", payload, "<null>", created), Record{}, "aggregateid", "empty aggregate id"},
		{"null type", defaultBinding, row(id, "Order", "42", "<null>", payload, "<null>", created), Record{}, "type", "null type"},
		{"empty type", defaultBinding, row(id, "Order", "42", "", payload, "<null>", created), Record{}, "type", "empty type"},
		{"null payload", defaultBinding, row(id, "Order", "42", "OrderCreated", "<null>", "<null>", created), Record{}, "payload", "null payload"},
		{"empty jsonb payload", defaultBinding, row(id, "Order", "42", "OrderCreated", "", "<null>", created), Record{}, "payload", "empty payload"},
		{"invalid text payload", textBinding, row(id, "Order", "42", "OrderCreated", `{"a":`, "<null>", created), Record{}, "payload", "payload is not valid JSON"},
		{"blank text payload", textBinding, row(id, "Order", "42", "OrderCreated", "  ", "<null>", created), Record{}, "payload", "payload is not valid JSON"},
		{"invalid varchar payload", varcharBinding, row(id, "Order", "42", "OrderCreated", `not json`, "<null>", created), Record{}, "payload", "payload is not valid JSON"},
		{"two JSON values", varcharBinding, row(id, "Order", "42", "OrderCreated", `{} {}`, "<null>", created), Record{}, "payload", "payload is not valid JSON"},
		{"invalid text headers", textBinding, row(id, "Order", "42", "OrderCreated", payload, `{"a"}`, created), Record{}, "headers", "headers is not valid JSON"},
		{"array headers", textBinding, row(id, "Order", "42", "OrderCreated", payload, `["a"]`, created), Record{}, "headers", "headers is not a JSON object"},
		{"jsonb array headers", defaultBinding, row(id, "Order", "42", "OrderCreated", payload, `[1]`, created), Record{}, "headers", "headers is not a JSON object"},
		{"JSON null headers", defaultBinding, row(id, "Order", "42", "OrderCreated", payload, `null`, created), Record{}, "headers", "headers is not a JSON object"},
		{"string headers", varcharBinding, row(id, "Order", "42", "OrderCreated", payload, `"x"`, created), Record{}, "headers", "headers is not a JSON object"},
		{"jsonb headers left out", noHeaders, row(id, "Order", "42", "OrderCreated", payload, `{"Content-Type":"text/plain"}`, created), base, "", ""},
		{"varchar headers by default name", varcharDefault, row(id, "Order", "42", "OrderCreated", payload, `{"traceId":"x"}`, created), base, "", ""},
		{"infinity", defaultBinding, row(id, "Order", "42", "OrderCreated", payload, "<null>", "infinity"), Record{}, "created_at", "infinite timestamp infinity"},
		{"-infinity", defaultBinding, row(id, "Order", "42", "OrderCreated", payload, "<null>", "-infinity"), Record{}, "created_at", "infinite timestamp -infinity"},
		{"garbage time", defaultBinding, row(id, "Order", "42", "OrderCreated", payload, "<null>", "yesterday"), Record{}, "created_at", "malformed timestamp (ISO DateStyle expected)"},
		{"empty time", defaultBinding, row(id, "Order", "42", "OrderCreated", payload, "<null>", ""), Record{}, "created_at", "malformed timestamp (ISO DateStyle expected)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.b.Record(tc.values, commit)
			if tc.column == "" {
				if err != nil {
					t.Fatalf("Record: %v", err)
				}
				assertRecord(t, got, tc.want)
				return
			}
			var re *RowError
			if !errors.As(err, &re) {
				t.Fatalf("Record error = %v, want a *RowError", err)
			}
			if re.Column != tc.column || re.Reason != tc.reason {
				t.Fatalf("RowError = {%q, %q}, want {%q, %q}", re.Column, re.Reason, tc.column, tc.reason)
			}
			if want := "column " + tc.column + ": " + tc.reason; re.Error() != want {
				t.Fatalf("Error() = %q, want %q", re.Error(), want)
			}
		})
	}
}

func TestRecordWrongWidth(t *testing.T) {
	b := mustBind(t, Columns{}, defaultTable)
	_, err := b.Record(make([][]byte, 3), time.Time{})
	var re *RowError
	if err == nil || errors.As(err, &re) {
		t.Fatalf("err = %v, want a plain error (not a RowError)", err)
	}
}

// TestRecordAliasing pins the documented ownership: Payload and Headers alias
// the caller's values, the strings do not.
func TestRecordAliasing(t *testing.T) {
	b := mustBind(t, Columns{}, defaultTable)
	values := row("id-1", "Order", "42", "OrderCreated", `{"a":1}`, `{"x":"y"}`, "<null>")
	rec, err := b.Record(values, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if &rec.Payload[0] != &values[4][0] || &rec.Headers[0] != &values[5][0] {
		t.Error("Payload/Headers are copies; the documented contract is that they alias values")
	}
	for _, v := range values[:4] {
		for i := range v {
			v[i] = 'X'
		}
	}
	if rec.ID != "id-1" || rec.AggregateType != "Order" || rec.AggregateID != "42" || rec.Type != "OrderCreated" {
		t.Errorf("strings changed with the caller's buffers: %+v", rec)
	}
}

func TestParseTimestamp(t *testing.T) {
	utc := func(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
	}
	for _, tc := range []struct {
		in     string
		want   time.Time
		reason string // "" for success
	}{
		// timestamptz, ISO DateStyle
		{"2026-11-21 18:37:59.123456+00", utc(2026, 11, 21, 18, 37, 59, 123456000), ""},
		{"2026-11-21 18:37:59+00", utc(2026, 11, 21, 18, 37, 59, 0), ""},
		{"2026-11-21 18:37:59.1+00", utc(2026, 11, 21, 18, 37, 59, 100000000), ""},
		{"2026-11-21 18:37:59.12+00", utc(2026, 11, 21, 18, 37, 59, 120000000), ""},
		{"2026-11-21 18:37:59.123+00", utc(2026, 11, 21, 18, 37, 59, 123000000), ""},
		{"2026-11-21 18:37:59.1234+00", utc(2026, 11, 21, 18, 37, 59, 123400000), ""},
		{"2026-11-21 18:37:59.12345+00", utc(2026, 11, 21, 18, 37, 59, 123450000), ""},
		{"2026-11-21 18:37:59.000001+00", utc(2026, 11, 21, 18, 37, 59, 1000), ""},
		{"2026-11-21 18:37:59.123456+05:30", utc(2026, 11, 21, 13, 7, 59, 123456000), ""},
		{"2026-11-21 18:37:59+05", utc(2026, 11, 21, 13, 37, 59, 0), ""},
		{"2026-11-21 18:37:59-03:30:15", utc(2026, 11, 21, 22, 8, 14, 0), ""},
		{"2026-11-21 02:00:00+14", utc(2026, 11, 20, 12, 0, 0, 0), ""},
		{"2026-12-31 23:59:59.999999-12", utc(2027, 1, 1, 11, 59, 59, 999999000), ""},
		{"1969-12-31 23:59:59.5+00", utc(1969, 12, 31, 23, 59, 59, 500000000), ""},
		{"0001-01-01 00:00:00+00", utc(1, 1, 1, 0, 0, 0, 0), ""},
		{"9999-12-31 23:59:59.999999+00", utc(9999, 12, 31, 23, 59, 59, 999999000), ""},
		{"2024-02-29 12:00:00+00", utc(2024, 2, 29, 12, 0, 0, 0), ""},
		{"2000-02-29 12:00:00+00", utc(2000, 2, 29, 12, 0, 0, 0), ""},
		// timestamp without time zone: UTC
		{"2026-11-21 18:37:59.123456", utc(2026, 11, 21, 18, 37, 59, 123456000), ""},
		{"2026-11-21 18:37:59", utc(2026, 11, 21, 18, 37, 59, 0), ""},
		// RFC 3339 from text columns
		{"2026-11-21T18:37:59Z", utc(2026, 11, 21, 18, 37, 59, 0), ""},
		{"2026-11-21t18:37:59.123456789z", utc(2026, 11, 21, 18, 37, 59, 123456789), ""},
		{"2026-11-21T18:37:59.5-0330", utc(2026, 11, 21, 22, 7, 59, 500000000), ""},
		{"2026-11-21", utc(2026, 11, 21, 0, 0, 0, 0), ""},

		{"infinity", time.Time{}, "infinite timestamp infinity"},
		{"-infinity", time.Time{}, "infinite timestamp -infinity"},
		{"0044-03-15 12:00:00+00 BC", time.Time{}, "timestamp before year 1 (BC) is out of range for RFC 3339"},
		{"10000-01-01 00:00:00+00", time.Time{}, "timestamp year out of range 0001-9999 for RFC 3339"},
		{"0000-01-01 00:00:00+00", time.Time{}, "timestamp year out of range 0001-9999 for RFC 3339"},
		{"0001-01-01 00:00:00+01", time.Time{}, "timestamp year out of range 0001-9999 for RFC 3339"},
		{"9999-12-31 23:00:00-01", time.Time{}, "timestamp year out of range 0001-9999 for RFC 3339"},
		{"0001-01-01 00:59:59.999999+01", time.Time{}, "timestamp year out of range 0001-9999 for RFC 3339"},
		{"0001-01-01 01:00:00+01", utc(1, 1, 1, 0, 0, 0, 0), ""},
		{"9999-12-31 22:59:59.999999-01", utc(9999, 12, 31, 23, 59, 59, 999999000), ""},
		{"2023-02-29 12:00:00+00", time.Time{}, "invalid date in timestamp"},
		{"1900-02-29 12:00:00+00", time.Time{}, "invalid date in timestamp"},
		{"2026-13-01 12:00:00+00", time.Time{}, "invalid date in timestamp"},
		{"2026-04-31 12:00:00+00", time.Time{}, "invalid date in timestamp"},
		{"2026-11-21 24:00:00+00", time.Time{}, "invalid time of day in timestamp"},
		{"2026-11-21 23:59:60+00", time.Time{}, "invalid time of day in timestamp"},
		{"2026-11-21 23:00:00+24", time.Time{}, "invalid zone offset in timestamp"},
		{"2026-11-21 18:37:59.1234567890+00", time.Time{}, "malformed timestamp (ISO DateStyle expected)"},
		{"2026-11-21 18:37:59.+00", time.Time{}, "malformed timestamp (ISO DateStyle expected)"},
		{"2026-11-21 18:37+00", time.Time{}, "malformed timestamp (ISO DateStyle expected)"},
		{"2026-11-21 18:37:59+5", time.Time{}, "malformed timestamp (ISO DateStyle expected)"},
		{"2026-11-21 18:37:59+05:3", time.Time{}, "malformed timestamp (ISO DateStyle expected)"},
		{"2026-11-21 18:37:59+05:30:1", time.Time{}, "malformed timestamp (ISO DateStyle expected)"},
		{"2026-11-21 18:37:59+05:3015", time.Time{}, "malformed timestamp (ISO DateStyle expected)"},
		{"2026-11-21 18:37:59 +00", time.Time{}, "malformed timestamp (ISO DateStyle expected)"},
		{"2026-11-21 18:37:59+00 ", time.Time{}, "malformed timestamp (ISO DateStyle expected)"},
		{"2026-11-21 18:37:59 PST", time.Time{}, "malformed timestamp (ISO DateStyle expected)"},
		{"Sat Nov 21 18:37:59 2026 UTC", time.Time{}, "malformed timestamp (ISO DateStyle expected)"}, // Postgres DateStyle
		{"11/21/2026 18:37:59.12 UTC", time.Time{}, "malformed timestamp (ISO DateStyle expected)"},   // SQL DateStyle
		{"2026-1-21 18:37:59", time.Time{}, "malformed timestamp (ISO DateStyle expected)"},
		{"2026-011-21 18:37:59", time.Time{}, "malformed timestamp (ISO DateStyle expected)"},
		{"2026-11-21_18:37:59", time.Time{}, "malformed timestamp (ISO DateStyle expected)"},
		{"", time.Time{}, "malformed timestamp (ISO DateStyle expected)"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, reason := parseTimestamp([]byte(tc.in))
			if reason != tc.reason {
				t.Fatalf("reason = %q, want %q", reason, tc.reason)
			}
			if tc.reason == "" && (!got.Equal(tc.want) || got.Location() != time.UTC) {
				t.Fatalf("got %v (%v), want %v in UTC", got, got.Location(), tc.want)
			}
		})
	}
}

// referenceTimestamp parses the forms parseTimestamp accepts with time.Parse,
// as an independent oracle.
func referenceTimestamp(s string) (time.Time, bool) {
	s = strings.ToUpper(s)
	for _, sep := range []string{" ", "T"} {
		for _, zone := range []string{"", "Z07", "Z07:00", "Z07:00:00", "Z0700", "Z070000"} {
			layout := "2006-01-02" + sep + "15:04:05.999999999" + zone
			if t, err := time.Parse(layout, s); err == nil {
				if zone == "" {
					t = t.UTC()
				}
				return t, true
			}
		}
	}
	t, err := time.Parse("2006-01-02", s)
	return t, err == nil
}

func FuzzParseTimestamp(f *testing.F) {
	for _, s := range []string{
		"2026-11-21 18:37:59.123456+00", "2026-11-21 18:37:59+05:30", "2026-11-21 18:37:59-03:30:15",
		"2026-11-21 18:37:59.5", "2026-11-21T18:37:59Z", "2026-11-21", "infinity", "0044-03-15 12:00:00+00 BC",
		"10000-01-01 00:00:00+00", "2024-02-29 23:59:59.999999999-0130",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, reason := parseTimestamp([]byte(s))
		if reason != "" {
			return
		}
		want, ok := referenceTimestamp(s)
		if !ok {
			t.Fatalf("parseTimestamp(%q) = %v, but time.Parse rejects it", s, got)
		}
		if !got.Equal(want) {
			t.Fatalf("parseTimestamp(%q) = %v, time.Parse = %v", s, got, want)
		}
		if y := got.Year(); y < 1 || y > 9999 {
			t.Fatalf("parseTimestamp(%q) = %v: year out of range", s, got)
		}
	})
}

// A row whose table lacks a mapped column still gives its id and aggregate
// id, for its dead letter; it never becomes a record.
func TestBindAny(t *testing.T) {
	cols := []Column{{Name: "id", TypeOID: 2950}, {Name: "aggregateid", TypeOID: 25}, {Name: "kind", TypeOID: 25}}
	if _, err := DefaultColumns().Bind(cols); !errors.Is(err, ErrMissingColumn) {
		t.Fatalf("Bind: %v", err)
	}
	b := DefaultColumns().BindAny(cols)
	values := [][]byte{[]byte("e-1"), []byte("a-1"), []byte("Placed")}
	if b.RawID(values) != "e-1" || b.RawAggregateID(values) != "a-1" {
		t.Errorf("raw id %q, aggregate id %q", b.RawID(values), b.RawAggregateID(values))
	}
	if _, err := b.Record(values, time.Now()); !errors.Is(err, ErrMissingColumn) {
		t.Errorf("Record of a partial binding: %v", err)
	}
}

// A timestamp without time zone is wall time in Columns.Zone (the
// server's TimeZone, in which DEFAULT now() wrote it); a timestamptz, a
// table without Zone, and the Debezium rules (which read it as UTC, as
// Debezium does) are unchanged.
func TestBindTimestampZone(t *testing.T) {
	seoul, err := time.LoadLocation("Asia/Seoul")
	if err != nil {
		t.Fatal(err)
	}
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	plain := append([]Column{}, defaultTable...)
	plain[6].TypeOID = oidTimestamp
	values := func(created string) [][]byte {
		return row("0b7e4c1e-6c3f-4a53-9f0e-2b8c2f1d9a10", "Order", "42", "OrderCreated", `{}`, "", created)
	}
	for _, tc := range []struct {
		name    string
		cols    Columns
		table   []Column
		created string
		want    time.Time
	}{
		{"timestamp, no zone", Columns{}, plain, "2026-11-21 18:37:59.5", time.Date(2026, 11, 21, 18, 37, 59, 5e8, time.UTC)},
		{"timestamp in Seoul", Columns{Zone: seoul}, plain, "2026-11-21 18:37:59.5", time.Date(2026, 11, 21, 9, 37, 59, 5e8, time.UTC)},
		{"timestamp in New York, summer", Columns{Zone: newYork}, plain, "2026-07-01 12:00:00", time.Date(2026, 7, 1, 16, 0, 0, 0, time.UTC)},
		{"timestamp in New York, winter", Columns{Zone: newYork}, plain, "2026-12-01 12:00:00", time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)},
		{"timestamptz in Seoul", Columns{Zone: seoul}, defaultTable, "2026-11-21 18:37:59.5+00", time.Date(2026, 11, 21, 18, 37, 59, 5e8, time.UTC)},
		{"timestamp in Seoul under Debezium's rules", Columns{Zone: seoul, PassThrough: true, Time: "created_at"}, plain, "2026-11-21 18:37:59.5", time.Date(2026, 11, 21, 18, 37, 59, 5e8, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBind(t, tc.cols, tc.table)
			v := values(tc.created)
			v[5] = nil // no headers
			rec, err := b.Record(v, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if !rec.Time.Equal(tc.want) {
				t.Errorf("Time = %s, want %s", rec.Time.UTC(), tc.want)
			}
		})
	}
}
