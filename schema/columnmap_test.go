package schema

import (
	"strings"
	"testing"
)

// Column truncations and masks as Debezium's TruncateColumn and
// MaskStrings apply them: the first mapping that matches a column, the
// values of string columns only, a masked NULL masked too, the schema
// parameter where Debezium sets it.
func TestColumnMappings(t *testing.T) {
	ms, err := ParseColumnMappings(`truncate:4:public\.t\.(note|short|code);mask:3:public\.t\.(email|note|doc)`)
	if err != nil {
		t.Fatal(err)
	}
	c := DebeziumConfig{ColumnMappings: ms}
	cols := c.MapColumns("PUBLIC", "T", []Column{
		{Name: "note", TypeOID: oidText, TypMod: -1},
		{Name: "short", TypeOID: oidVarchar, TypMod: 2 + 4},
		{Name: "email", TypeOID: oidVarchar, TypMod: 100 + 4},
		{Name: "doc", TypeOID: oidJSONB, TypMod: -1},
		{Name: "id", TypeOID: oidUUID, TypMod: -1},
	})
	want := []ColumnMapper{{Truncate: 4}, {Truncate: 4}, {Mask: 3}, {Mask: 3}, {}}
	for i, col := range cols {
		if col.Mapper != want[i] {
			t.Errorf("%s: mapper %+v, want %+v", col.Name, col.Mapper, want[i])
		}
	}
	for i, wantParams := range []string{`{"truncateLength":"4"}`, ``, `{"masked":"true"}`, `{"masked":"true"}`, ``} {
		ct, _ := connectTypeOf(cols[i].typ(), valueModes{})
		if cols[i].Name == "doc" {
			wantParams = `{"masked":"true"}` // Json carries no parameters of its own
		}
		if ct.params != wantParams {
			t.Errorf("%s: parameters %q, want %q", cols[i].Name, ct.params, wantParams)
		}
	}
	b := &Binding{cols: cols}
	e := Encoder{dbz: c}
	got := e.MapValues(b, [][]byte{[]byte("a long note"), []byte("ab"), nil, []byte(`{"a":1}`), []byte("u")})
	for i, w := range []string{"a lo", "ab", "***", `{"a":1}`, "u"} {
		if string(got[i]) != w {
			t.Errorf("%s: %q, want %q", cols[i].Name, got[i], w)
		}
	}
	if c, _ := truncateUTF16([]byte("ab😀cd"), 3); string(c) != "ab" {
		t.Errorf("a cut through a surrogate pair: %q, want the text before it", c)
	}
	if c, _ := truncateUTF16([]byte("ab😀cd"), 4); string(c) != "ab😀" {
		t.Errorf("a cut after a surrogate pair: %q", c)
	}
	for _, bad := range []string{"mask:0:x", "cut:3:x", "truncate:x:y", "mask:3:("} {
		if _, err := ParseColumnMappings(bad); err == nil || !strings.Contains(err.Error(), "column mapping") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// The source types column.propagate.source.type and
// datatype.propagate.source.type add: by column name or by type name, in
// any case, after the truncations and masks (the first matching mapper
// wins, as in Debezium's ColumnMappers), with the JDBC driver's length and
// scale of the type and its modifier; a type that is not built in gets
// none.
func TestPropagateSourceType(t *testing.T) {
	ms, err := ParseColumnMappings(`truncate:4:public\.t\.code;propagate:public\.t\.(code|amount|at|free);propagate-type:.+\.INT8`)
	if err != nil {
		t.Fatal(err)
	}
	c := DebeziumConfig{ColumnMappings: ms}
	cols := c.MapColumns("public", "t", []Column{
		{Name: "code", TypeOID: oidVarchar, TypMod: 10 + 4},
		{Name: "amount", TypeOID: oidNumeric, TypMod: (12<<16 | 2) + 4},
		{Name: "at", TypeOID: oidTimestamptz, TypMod: 3},
		{Name: "free", TypeOID: oidVarchar, TypMod: -1},
		{Name: "big", TypeOID: oidInt8, TypMod: -1},
		{Name: "small", TypeOID: oidInt2, TypMod: -1},
		{Name: "mood", TypeOID: 90000, TypMod: -1},
	})
	for i, want := range []string{
		`{"truncateLength":"4"}`,
		`{"scale":"2","connect.decimal.precision":"12","__debezium.source.column.type":"NUMERIC","__debezium.source.column.length":"12","__debezium.source.column.scale":"2","__debezium.source.column.name":"amount"}`,
		`{"__debezium.source.column.type":"TIMESTAMPTZ","__debezium.source.column.length":"32","__debezium.source.column.scale":"3","__debezium.source.column.name":"at"}`,
		`{"__debezium.source.column.type":"VARCHAR","__debezium.source.column.length":"2147483647","__debezium.source.column.scale":"0","__debezium.source.column.name":"free"}`,
		`{"__debezium.source.column.type":"INT8","__debezium.source.column.length":"19","__debezium.source.column.scale":"0","__debezium.source.column.name":"big"}`,
		``,
	} {
		ct, _ := connectTypeOf(cols[i].typ(), valueModes{})
		if ct.params != want {
			t.Errorf("%s: parameters %s, want %s", cols[i].Name, ct.params, want)
		}
	}
	if p := sourceParams(cols[6].typ(), "mood"); p != "" {
		t.Errorf("a type not built in: %s", p)
	}
}
