package schema

import (
	"strings"
	"testing"
	"time"
)

// The digests are those Java 17 computes with MessageDigest, the salt's
// getBytes() and, for v1, ObjectOutputStream.writeObject of the String.
func TestHashString(t *testing.T) {
	for _, tc := range []struct {
		name   string
		m      ColumnMapper
		text   string
		length int
		want   string
	}{
		{"v1", ColumnMapper{Hash: "SHA-256", Salt: "CzQMA0cB5K"}, "ann@example.com", -1, "51a61a921ad466f1821aba9d16ec112f1646e755acec0573125cfb109f3e01c8"},
		{"v2", ColumnMapper{Hash: "SHA-256", Salt: "CzQMA0cB5K", HashV2: true}, "ann@example.com", -1, "73123ac0b06ee4009f26a60b756934d7420b0b2e9f2044c9bf17bb87b0ab1daf"},
		{"v1 any case, cut", ColumnMapper{Hash: "sha256", Salt: "CzQMA0cB5K"}, "ann@example.com", 20, "51a61a921ad466f1821a"},
		{"v1 modified UTF-8", ColumnMapper{Hash: "SHA-256", Salt: "sél"}, "héllo 😀", -1, "f689a8e876e018f50c0ae5e790c007e8960854d1739faadead18e3326965db61"},
		{"v2 UTF-8", ColumnMapper{Hash: "SHA-256", Salt: "sél", HashV2: true}, "héllo 😀", -1, "527f04d4f13d0399c613aef9875f87eb42bb0010eb1bb614be774986ac037a76"},
		{"v1 empty", ColumnMapper{Hash: "MD5", Salt: "x"}, "", -1, "df12190c86422910fc034c56464df221"},
		{"v1 long string", ColumnMapper{Hash: "SHA-1", Salt: "x"}, strings.Repeat("a", 70000), -1, "c285202ea9cc3c6cd4f10e499e5798e818a409e3"},
	} {
		if got := string(tc.m.hashString([]byte(tc.text), tc.length)); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestJavaSerializedString(t *testing.T) {
	got := javaSerializedString("ann@example.com")
	want := "\xac\xed\x00\x05\x74\x00\x0fann@example.com"
	if string(got) != want {
		t.Errorf("got % x", got)
	}
}

func TestCheckHashAlgorithm(t *testing.T) {
	for _, name := range []string{"SHA-256", "sha-256", "SHA", "SHA1", "MD5", "SHA-512/256", "sha3-512"} {
		if err := CheckHashAlgorithm(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range []string{"SHA-3-256", "SHA3256", "foo", "MD2", "v2"} {
		if err := CheckHashAlgorithm(name); err == nil {
			t.Errorf("%s: taken", name)
		}
	}
}

// A hashed column: its values hashed (NULL kept, a varchar(n) cut to n),
// its schema marked masked; an excluded one is left out of after and the
// value schema, not of the key; the first mapping that matches applies.
func TestColumnHashAndFilter(t *testing.T) {
	maps, err := ParseColumnMappings(`mask:3:public\.t\.note;hash:SHA-256:CzQMA0cB5K:public\.t\.(email|code|note|n)`)
	if err != nil {
		t.Fatal(err)
	}
	ex, _ := ParsePatterns(`public\.t\.ssn`)
	c := DebeziumConfig{ColumnMappings: maps, ColumnFilter: ColumnFilter{Patterns: ex}}
	cols := c.MapColumns("public", "t", []Column{
		{Name: "id", TypeOID: oidInt4, TypMod: -1},
		{Name: "aggregatetype", TypeOID: oidText, TypMod: -1}, {Name: "aggregateid", TypeOID: oidText, TypMod: -1},
		{Name: "type", TypeOID: oidText, TypMod: -1}, {Name: "payload", TypeOID: oidText, TypMod: -1},
		{Name: "email", TypeOID: oidText, TypMod: -1},
		{Name: "code", TypeOID: oidVarchar, TypMod: 10 + 4},
		{Name: "note", TypeOID: oidText, TypMod: -1},
		{Name: "n", TypeOID: oidInt4, TypMod: -1},
		{Name: "ssn", TypeOID: oidText, TypMod: -1},
	})
	if cols[5].Mapper.Hash != "SHA-256" || cols[7].Mapper.Mask != 3 || !cols[9].Mapper.Exclude || cols[0].Mapper != (ColumnMapper{}) {
		t.Fatalf("mappers %+v", cols)
	}
	enc, err := NewEncoder(EncoderConfig{Format: Debezium, Debezium: DebeziumConfig{ColumnMappings: maps, ColumnFilter: c.ColumnFilter,
		KeyColumns: []string{"id"}, Value: ConvJSONSchemas, Key: ConvJSONSchemas}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Columns{}.Bind(cols)
	if err != nil {
		t.Fatal(err)
	}
	o := [][]byte{[]byte("Customer"), []byte("c-7"), []byte("Created"), []byte("{}")}
	values := enc.MapValues(b, append(append([][]byte{[]byte("7")}, o...), []byte("ann@example.com"), []byte("ann@example.com"), nil, []byte("5"), []byte("123-45-6789")))
	if string(values[5]) != "51a61a921ad466f1821aba9d16ec112f1646e755acec0573125cfb109f3e01c8" || string(values[6]) != "51a61a921a" ||
		string(values[7]) != "***" || string(values[8]) != "5" || string(values[0]) != "7" || string(values[1]) != "Customer" {
		t.Fatalf("values %q", values)
	}
	if v := enc.MapValues(b, append(append([][]byte{[]byte("7")}, o...), nil, nil, nil, nil, nil)); v[5] != nil || v[6] != nil {
		t.Errorf("NULL hashed: %q", v)
	}
	rec, err := b.Record(values, time.UnixMilli(0))
	if err != nil {
		t.Fatal(err)
	}
	rec.Origin = Origin{Schema: "public", Table: "t"}
	msg, err := enc.Encode(&rec)
	if err != nil {
		t.Fatal(err)
	}
	v := string(msg.Value)
	if strings.Contains(v, "ssn") || strings.Contains(v, "123-45") {
		t.Errorf("excluded column in the value: %s", v)
	}
	if !strings.Contains(v, `{"type":"string","optional":true,"parameters":{"masked":"true"},"field":"email"}`) ||
		!strings.Contains(v, `{"type":"int32","optional":true,"parameters":{"masked":"true"},"field":"n"}`) {
		t.Errorf("schema not marked: %s", v)
	}
	if !strings.Contains(string(msg.Key), `"payload":{"id":7}`) {
		t.Errorf("key %s", msg.Key)
	}
}
