package schema

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// keyTable is an outbox table with an extra key column and a note, each
// column as given.
func keyTable(id, code uint32) []Column {
	return []Column{{Name: "id", TypeOID: id, TypMod: -1},
		{Name: "aggregatetype", TypeOID: oidText, TypMod: -1}, {Name: "aggregateid", TypeOID: oidText, TypMod: -1},
		{Name: "type", TypeOID: oidText, TypMod: -1}, {Name: "payload", TypeOID: oidText, TypMod: -1},
		{Name: "code", TypeOID: code, TypMod: -1}, {Name: "note", TypeOID: oidText, TypMod: -1}}
}

// encodeKeyRow maps, binds and encodes one row of keyTable as the relay
// does, a snapshot read where snapshot is set; it returns key and value.
func encodeKeyRow(t *testing.T, d DebeziumConfig, cols []Column, row []string, snapshot SnapshotMark) (string, string) {
	t.Helper()
	enc, err := NewEncoder(EncoderConfig{Format: Debezium, Debezium: d})
	if err != nil {
		t.Fatal(err)
	}
	cols = enc.MapColumns("public", "t", cols)
	if err := (Columns{}).Check(cols, EncoderConfig{Format: Debezium, Debezium: d}); err != nil {
		t.Fatal(err)
	}
	b, err := Columns{}.Bind(cols)
	if err != nil {
		t.Fatal(err)
	}
	values := make([][]byte, len(row))
	for i, v := range row {
		if v != "NULL" {
			values[i] = []byte(v)
		}
	}
	rec, err := b.Record(enc.FillDefaults(b, enc.MapValues(b, values)), time.UnixMilli(0))
	if err != nil {
		t.Fatal(err)
	}
	rec.Origin = Origin{Schema: "public", Table: "t", Snapshot: snapshot}
	msg, err := enc.Encode(&rec)
	if err != nil {
		t.Fatal(err)
	}
	return string(msg.Key), string(msg.Value)
}

// Debezium builds the key without the column mappers: a hashed, masked or
// truncated key column keeps its value and an unmarked schema in the key,
// while after holds the mapped value under a marked schema.
func TestKeyColumnsUnmapped(t *testing.T) {
	maps, err := ParseColumnMappings(`truncate:3:public\.t\.note;mask:4:public\.t\.code;hash:SHA-256:CzQMA0cB5K:public\.t\.id`)
	if err != nil {
		t.Fatal(err)
	}
	d := DebeziumConfig{ColumnMappings: maps, KeyColumns: []string{"id", "code"}, Key: ConvJSONSchemas, Value: ConvJSON,
		NotNull: map[string]bool{"id": true, "code": true}}
	row := []string{"order-1", "Order", "o-1", "Created", "{}", "c-77", "a long note"}
	key, value := encodeKeyRow(t, d, keyTable(oidText, oidText), row, 0)
	wantKey := `{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"},{"type":"string","optional":false,"field":"code"}],` +
		`"optional":false,"name":"pgoutbox.public.t.Key"},"payload":{"id":"order-1","code":"c-77"}}`
	if key != wantKey {
		t.Errorf("key\n%s\nwant\n%s", key, wantKey)
	}
	// The SHA-256 of the salt and the Java-serialized "order-1".
	hashed := string(ColumnMapper{Hash: "SHA-256", Salt: "CzQMA0cB5K"}.hashString([]byte("order-1"), -1))
	if !strings.Contains(value, `"after":{"id":"`+hashed+`","aggregatetype":"Order"`) || !strings.Contains(value, `"code":"****","note":"a l"}`) {
		t.Errorf("after not mapped: %s", value)
	}
	// Without a mapper on the key, nothing changes.
	key, _ = encodeKeyRow(t, DebeziumConfig{KeyColumns: []string{"id", "code"}, NotNull: d.NotNull}, keyTable(oidText, oidText), row, 0)
	if key != `{"id":"order-1","code":"c-77"}` {
		t.Errorf("unmapped key %s", key)
	}
}

// A key column the filter leaves out stays in the key: with the row's
// value in streamed events; in snapshot reads, whose SELECT does not read
// it, with its default, else its type's fallback (0, ""), or null for a
// nullable column; its value again when the filter leaves out every
// column (Debezium's snapshot then reads them all).
func TestKeyColumnExcluded(t *testing.T) {
	filter := func(re string) ColumnFilter {
		p, err := ParsePatterns(re)
		if err != nil {
			t.Fatal(err)
		}
		return ColumnFilter{Patterns: p}
	}
	row := []string{"42", "Order", "o-1", "Created", "{}", "c-77", "n"}
	for _, tc := range []struct {
		name     string
		id, code uint32
		d        DebeziumConfig
		snapshot SnapshotMark
		want     string
	}{
		{"streamed", oidInt8, oidText, DebeziumConfig{ColumnFilter: filter(`public\.t\.(id|note)`), NotNull: map[string]bool{"id": true}}, 0, `{"id":42}`},
		{"snapshot bigint", oidInt8, oidText, DebeziumConfig{ColumnFilter: filter(`public\.t\.(id|note)`), NotNull: map[string]bool{"id": true}}, SnapshotFirst, `{"id":0}`},
		{"snapshot int", oidInt4, oidText, DebeziumConfig{ColumnFilter: filter(`public\.t\.id`), NotNull: map[string]bool{"id": true}}, SnapshotRow, `{"id":0}`},
		{"snapshot default", oidInt4, oidText, DebeziumConfig{ColumnFilter: filter(`public\.t\.id`), NotNull: map[string]bool{"id": true},
			Defaults: map[string]string{"id": "7"}}, SnapshotRow, `{"id":7}`},
		{"snapshot text", oidText, oidText, DebeziumConfig{ColumnFilter: filter(`public\.t\.code`), KeyColumns: []string{"code", "id"},
			NotNull: map[string]bool{"code": true}}, SnapshotLast, `{"code":"","id":"42"}`},
		{"snapshot nullable", oidText, oidText, DebeziumConfig{ColumnFilter: filter(`public\.t\.code`), KeyColumns: []string{"code"}}, SnapshotRow, `{"code":null}`},
		{"snapshot uuid", oidUUID, oidText, DebeziumConfig{ColumnFilter: filter(`public\.t\.id`), NotNull: map[string]bool{"id": true}}, SnapshotRow, `{"id":""}`},
		{"every column left out", oidInt8, oidText, DebeziumConfig{ColumnFilter: ColumnFilter{Include: true}, NotNull: map[string]bool{"id": true}}, SnapshotRow, `{"id":42}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := row
			if tc.id == oidUUID {
				r = append([]string{"00000000-0000-0000-0000-000000000042"}, row[1:]...)
			}
			key, value := encodeKeyRow(t, tc.d, keyTable(tc.id, tc.code), r, tc.snapshot)
			if key != tc.want {
				t.Errorf("key %s, want %s", key, tc.want)
			}
			if tc.d.ColumnFilter.Include {
				return
			}
			for _, name := range []string{"id", "code"} {
				if tc.d.ColumnFilter.Excludes("public", "t", name) && strings.Contains(value, `"`+name+`":`) {
					t.Errorf("%s left in after: %s", name, value)
				}
			}
		})
	}
}

// What the key cannot take is refused before any row, naming the column:
// a key column left out after every column the snapshot reads (Debezium's
// snapshot fails), one of a type whose placeholder pgoutbox does not know,
// and a nullable key column with a default that is hashed or truncated.
func TestCheckKeyColumns(t *testing.T) {
	filter := func(re string) ColumnFilter {
		p, _ := ParsePatterns(re)
		return ColumnFilter{Patterns: p}
	}
	hash := func(re string) []ColumnMapping {
		m, _ := ParseColumnMappings("hash:SHA-256:s:" + re)
		return m
	}
	for _, tc := range []struct {
		name string
		id   uint32
		d    DebeziumConfig
		want string // the refused column; "" for none
	}{
		{"first column left out", oidInt8, DebeziumConfig{ColumnFilter: filter(`public\.t\.id`), NotNull: map[string]bool{"id": true}}, ""},
		{"hashed", oidText, DebeziumConfig{ColumnMappings: hash(`public\.t\.id`), NotNull: map[string]bool{"id": true}}, ""},
		{"last column left out", oidInt8, DebeziumConfig{ColumnFilter: filter(`public\.t\.(code|note)`), KeyColumns: []string{"code"},
			NotNull: map[string]bool{"code": true}}, "code"},
		{"all but the key read", oidInt8, DebeziumConfig{ColumnFilter: filter(`public\.t\.code`), KeyColumns: []string{"code"},
			NotNull: map[string]bool{"code": true}}, ""},
		{"money left out", oidMoney, DebeziumConfig{ColumnFilter: filter(`public\.t\.id`), NotNull: map[string]bool{"id": true}}, "id"},
		{"boolean with a default left out", oidBool, DebeziumConfig{ColumnFilter: filter(`public\.t\.id`), NotNull: map[string]bool{"id": true},
			Defaults: map[string]string{"id": "true"}}, ""},
		{"nullable key left out with a default", oidText, DebeziumConfig{ColumnFilter: filter(`public\.t\.code`), KeyColumns: []string{"code"},
			Defaults: map[string]string{"code": "'x'::text"}}, "code"},
		{"nullable key hashed with a default", oidText, DebeziumConfig{ColumnMappings: hash(`public\.t\.code`), KeyColumns: []string{"code"},
			Defaults: map[string]string{"code": "'x'::text"}}, "code"},
		{"nullable key masked with a default", oidText, DebeziumConfig{ColumnMappings: []ColumnMapping{{Patterns: filter(`public\.t\.code`).Patterns,
			Mapper: ColumnMapper{Mask: 3}}}, KeyColumns: []string{"code"}, Defaults: map[string]string{"code": "'x'::text"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cols := tc.d.MapColumns("public", "t", keyTable(tc.id, oidText))
			err := Columns{}.Check(cols, EncoderConfig{Format: Debezium, Debezium: tc.d})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrColumnType) || !strings.Contains(err.Error(), tc.want+": ") {
				t.Fatalf("Check: %v, want a refusal naming %s", err, tc.want)
			}
		})
	}
}

// The key's schema in a snapshot read has the catalog's NOT NULL and
// default of a key column the filter leaves out; in a streamed event,
// whose schema Debezium builds from pgoutput's relation message, the
// column is optional and has no default.
func TestKeyColumnExcludedSchema(t *testing.T) {
	p, err := ParsePatterns(`public\.t\.id`)
	if err != nil {
		t.Fatal(err)
	}
	d := DebeziumConfig{ColumnFilter: ColumnFilter{Patterns: p}, NotNull: map[string]bool{"id": true}, Defaults: map[string]string{"id": "7"},
		Key: ConvJSONSchemas, Value: ConvJSON}
	row := []string{"42", "Order", "o-1", "Created", "{}", "c-77", "n"}
	read, _ := encodeKeyRow(t, d, keyTable(oidInt4, oidText), row, SnapshotRow)
	streamed, _ := encodeKeyRow(t, d, keyTable(oidInt4, oidText), row, 0)
	const schema = `{"schema":{"type":"struct","fields":[%s],"optional":false,"name":"pgoutbox.public.t.Key"},"payload":%s}`
	if want := fmt.Sprintf(schema, `{"type":"int32","optional":false,"default":7,"field":"id"}`, `{"id":7}`); read != want {
		t.Errorf("read's key\n%s\nwant\n%s", read, want)
	}
	if want := fmt.Sprintf(schema, `{"type":"int32","optional":true,"field":"id"}`, `{"id":42}`); streamed != want {
		t.Errorf("streamed key\n%s\nwant\n%s", streamed, want)
	}
}
