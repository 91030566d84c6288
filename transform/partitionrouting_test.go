package transform

import (
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/schema"
)

func decimalValue(t *testing.T, s string) []byte {
	t.Helper()
	digits, frac, _ := strings.Cut(s, ".")
	u, ok := new(big.Int).SetString(digits+frac, 10)
	if !ok {
		t.Fatalf("decimal %q", s)
	}
	return schema.DecimalBytes(u)
}

func decimalSchema(scale string) *Schema {
	return &Schema{Type: Bytes, Name: decimalName, Params: []Param{{"scale", scale}}}
}

// The hashes of the values a change event's field holds, as Java 17 gives
// them: hashCode of the object Kafka Connect holds the value in, and
// Debezium 3.6.1's MurmurHash3.getInstance().hash(Object).
func TestPartitionRoutingHashes(t *testing.T) {
	str := &Schema{Type: String}
	i32, i64 := &Schema{Type: Int32}, &Schema{Type: Int64}
	v1 := int32(1)
	ts := &Schema{Type: Int64, Name: timestampName, Version: &v1}
	date := &Schema{Type: Int32, Name: dateName, Version: &v1}
	for _, c := range []struct {
		name         string
		s            *Schema
		v            any
		java, murmur int32
	}{
		{"empty string", str, "", 0, 89125410},
		{"a", str, "a", 97, -1119243492},
		{"hello", str, "hello", 99162322, 1671093224},
		{"16 bytes", str, "0123456789abcdef", 285443752, 26898387},
		{"17 bytes", str, "0123456789abcdefg", 258821823, -1536414354},
		{"non-ASCII", str, "héllo wörld ✓", 1283059084, 761619175},
		{"a surrogate pair", str, "a😀b", 57849694, -916027309},
		{"orders", str, "orders", -1008770331, 110124605},
		{"tail of high bytes", str, "ÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿ", -44573217, -1475641907},
		{"int32 0", i32, int64(0), 0, 1805505889},
		{"int32 1", i32, int64(1), 1, -1931162451},
		{"int32 -1", i32, int64(-1), -1, 171705313},
		{"int32 max", i32, int64(math.MaxInt32), math.MaxInt32, 925940511},
		{"int32 min", i32, int64(math.MinInt32), math.MinInt32, -797218156},
		{"int64 -1", i64, int64(-1), 0, 1805505889},
		{"int64 max", i64, int64(math.MaxInt64), math.MinInt32, -797218156},
		{"int64", i64, int64(1234567890123), 1912276436, 518237802},
		{"int16", &Schema{Type: Int16}, int64(-5), -5, 1960881932},
		{"int8", &Schema{Type: Int8}, int64(-128), -128, -1726399188},
		{"true", &Schema{Type: Boolean}, true, 1231, -1891831265},
		{"false", &Schema{Type: Boolean}, false, 1237, -682375457},
		{"float 1.5", &Schema{Type: Float32}, 1.5, 1069547520, 1166483436},
		{"float -0", &Schema{Type: Float32}, math.Copysign(0, -1), math.MinInt32, -797218156},
		{"float NaN", &Schema{Type: Float32}, math.NaN(), 2143289344, -831917046},
		{"float 0.1", &Schema{Type: Float32}, float64(float32(0.1)), 1036831949, 1362821355},
		{"double 1.5", &Schema{Type: Float64}, 1.5, 1073217536, -1122085266},
		{"double 0.1", &Schema{Type: Float64}, 0.1, -1507852285, 2122881335},
		{"double NaN", &Schema{Type: Float64}, math.NaN(), 2146959360, -1249978784},
		{"decimal 0", decimalSchema("0"), decimalValue(t, "0"), 0, 1805505889},
		{"decimal 12.34", decimalSchema("2"), decimalValue(t, "12.34"), 38256, -1299364558},
		{"decimal -12.34", decimalSchema("2"), decimalValue(t, "-12.34"), -38252, 2048110607},
		{"decimal beyond a long", decimalSchema("2"), decimalValue(t, "123456789012345678901234567890.12"), -1747325893, -102512819},
		{"negative beyond a long", decimalSchema("2"), decimalValue(t, "-123456789012345678901234567890.12"), 1747325897, -975388065},
		{"decimal long max", decimalSchema("0"), decimalValue(t, "9223372036854775807"), 2147482656, 1403440188},
		{"decimal two words", decimalSchema("1"), decimalValue(t, "4294967296.5"), 9766, -269812071},
		{"Date", date, int64(19000), 922493310, -1695593378},
		{"Timestamp", ts, int64(1700000000123), -807048720, 942063065},
		{"Timestamp -1", ts, int64(-1), 0, 1805505889},
		{"empty bytes", &Schema{Type: Bytes}, []byte{}, 1, -1931162451},
		{"bytes", &Schema{Type: Bytes}, []byte{1, 0xff, 0x80}, -93247, -1431325797},
		{"array", &Schema{Type: Array, Items: &Schema{Type: Int32, Optional: true}}, []any{int64(1), int64(2), nil}, 30814, 814707627},
		{"array of strings", &Schema{Type: Array, Items: str}, []any{"a", "b"}, 4066, -645483681},
		{"map", &Schema{Type: Map, Keys: str, Values: i32}, []MapEntry{{"a", int64(1)}, {"b", int64(2)}}, 192, 959213707},
		{"map of a null", &Schema{Type: Map, Keys: str, Values: &Schema{Type: Int32, Optional: true}}, []MapEntry{{"a", nil}}, 97, 239415403},
	} {
		j, err := (&partitionRouting{}).hash(c.s, c.v)
		if err != nil || j != c.java {
			t.Errorf("%s: java %d, %v; want %d", c.name, j, err, c.java)
		}
		m, err := (&partitionRouting{murmur: true}).hash(c.s, c.v)
		if err != nil || m != c.murmur {
			t.Errorf("%s: murmur %d, %v; want %d", c.name, m, err, c.murmur)
		}
	}
	// MurmurHash3.hash(byte[]) of i*37+0x70 for i < n: whole blocks and
	// every tail length, with bytes above 0x7f.
	for n, want := range map[int]int32{0: 89125410, 1: 1582877471, 7: -880098679, 8: 1451601833, 9: -806736596,
		15: -1241237626, 16: -881534384, 17: -2093445907, 31: 868620295, 32: 911021562, 33: -333603865} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*37 + 0x70)
		}
		if got := murmur32(b); got != want {
			t.Errorf("murmur of %d bytes: %d, want %d", n, got, want)
		}
	}
	bits := &Schema{Type: Bytes, Name: bitsName}
	if got, err := (&partitionRouting{murmur: true}).hash(bits, []byte{1, 2, 3, 200}); err != nil || got != -439330783 {
		t.Errorf("murmur of a bit string's byte[]: %d, %v", got, err)
	}
	// Identity hashes: no partition can be Debezium's.
	row := &Schema{Type: StructT, Fields: []Field{{"x", i32}}}
	for _, c := range []struct {
		s *Schema
		v any
	}{
		{bits, []byte{1}},
		{row, &Struct{Schema: row, Values: []any{int64(1)}}},
		{&Schema{Type: Array, Items: row}, []any{&Struct{Schema: row, Values: []any{int64(1)}}}},
	} {
		if _, err := (&partitionRouting{}).hash(c.s, c.v); err == nil {
			t.Errorf("%s: hashed", describe(c.s, c.v))
		}
	}
}

// routingEvent is the change event of TestPartitionRouting: a row (id
// int32, name, sub struct) of table orders, an insert.
func routingEvent(id int64) Record {
	sub := &Schema{Type: StructT, Optional: true, Fields: []Field{{"x", &Schema{Type: Int32}}}}
	row := &Schema{Type: StructT, Optional: true, Name: "t.Value", Fields: []Field{
		{"id", &Schema{Type: Int32}}, {"name", &Schema{Type: String, Optional: true}}, {"sub", sub}}}
	src := &Schema{Type: StructT, Name: "io.debezium.connector.postgresql.Source", Fields: []Field{
		{"table", &Schema{Type: String}}, {"lsn", &Schema{Type: Int64, Optional: true}}}}
	env := &Schema{Type: StructT, Name: "t.Envelope", Fields: []Field{
		{"before", row}, {"after", row}, {"source", src}, {"op", &Schema{Type: String}}}}
	after := &Struct{Schema: row, Values: []any{id, "n" + itoa(id), nil}}
	return Record{Topic: "topic", ValueSchema: env, Value: &Struct{Schema: env, Values: []any{
		nil, after, &Struct{Schema: src, Values: []any{"orders", int64(42)}}, "c"}}}
}

func itoa(n int64) string { return big.NewInt(n).String() }

func routing(t *testing.T, props map[string]string) (transformation, []string) {
	t.Helper()
	p := &parser{props: map[string]string{}, used: map[string]bool{}}
	for k, v := range props {
		p.props["transforms.p."+k] = v
	}
	return newPartitionRouting(p.options("transforms.p.")), p.problems
}

// Partitions of inserts with ids 1, 2, 3, 7 and 1000, over 5 partitions,
// as Debezium 3.6.1's PartitionRouting sets them on the same envelope
// (-1: the partition is left unset; "fail": Debezium's task fails).
func TestPartitionRouting(t *testing.T) {
	ids := []int64{1, 2, 3, 7, 1000}
	for _, c := range []struct {
		fields, hash string
		want         []int32
		fail         bool
	}{
		{"change.id", "java", []int32{1, 2, 3, 2, 0}, false},
		{"change.id", "murmur", []int32{2, 1, 1, 1, 0}, false},
		{"change.name,source.table", "java", []int32{1, 2, 3, 2, 0}, false},
		{"change.name,source.table", "murmur", []int32{2, 2, 3, 2, 3}, false},
		{"after.id,op", "java", []int32{0, 1, 2, 1, 4}, false},
		{"nope,after.nope,nope.x", "java", []int32{-1, -1, -1, -1, -1}, false},
		{"after.name.x", "java", []int32{-1, -1, -1, -1, -1}, false},
		{"after.sub", "java", []int32{-1, -1, -1, -1, -1}, false},
		{"op", "Murmur ", []int32{0, 0, 0, 0, 0}, false},
		{"op", "foo", []int32{4, 4, 4, 4, 4}, false},
		{"before.id", "java", nil, true},
		{"after.sub.x", "java", nil, true},
		{"change.sub.x", "java", nil, true},
		{"source", "java", nil, true}, // a Struct's hash differs in each JVM
		{"change.id,source", "murmur", nil, true},
		{".", "java", nil, true},
	} {
		tr, problems := routing(t, map[string]string{"partition.payload.fields": c.fields, "partition.topic.num": "5", "partition.hash.function": c.hash})
		if tr == nil {
			t.Fatal(problems)
		}
		for i, id := range ids {
			r := routingEvent(id)
			keep, err := tr.apply(&r)
			switch {
			case c.fail:
				if err == nil {
					t.Errorf("%s %s id %d: no error, Debezium's task fails", c.fields, c.hash, id)
				}
			case err != nil || !keep:
				t.Errorf("%s %s id %d: %v", c.fields, c.hash, id, err)
			case c.want[i] < 0 && r.HasPartition:
				t.Errorf("%s %s id %d: partition %d, want none", c.fields, c.hash, id, r.Partition)
			case c.want[i] >= 0 && (!r.HasPartition || r.Partition != c.want[i]):
				t.Errorf("%s %s id %d: partition %d (%v), want %d", c.fields, c.hash, id, r.Partition, r.HasPartition, c.want[i])
			}
		}
	}

	tr, _ := routing(t, map[string]string{"partition.payload.fields": "change.id", "partition.topic.num": "5"})
	// A delete's change is its before.
	r := routingEvent(7)
	env := r.Value.(*Struct)
	env.Values[0], env.Values[1], env.Values[3] = env.Values[1], nil, "d"
	if _, err := tr.apply(&r); err != nil || !r.HasPartition || r.Partition != 2 {
		t.Errorf("delete: partition %d %v, %v", r.Partition, r.HasPartition, err)
	}
	// Not change events: the router's record, a tombstone, a truncate.
	router := Record{Topic: "outbox.event.Order", KeySchema: &Schema{Type: String}, Key: "o-1", ValueSchema: &Schema{Type: String}, Value: "{}"}
	tomb := Record{Topic: "topic", Key: "o-1"}
	trunc := routingEvent(7)
	trunc.Value.(*Struct).Values[3] = "t"
	for _, r := range []Record{router, tomb, trunc} {
		if keep, err := tr.apply(&r); !keep || err != nil || r.HasPartition {
			t.Errorf("%s: %v %v, partition %v", r.Topic, keep, err, r.HasPartition)
		}
	}
	// The sum of two fields overflows as Java's int does; MAX_VALUE
	// becomes 0: 2147483647 alone.
	tr, _ = routing(t, map[string]string{"partition.payload.fields": "change.id,change.id", "partition.topic.num": "3"})
	r = routingEvent(math.MaxInt32) // 2*MAX wraps to -2: & MAX_VALUE gives MAX-1
	if _, err := tr.apply(&r); err != nil || r.Partition != (math.MaxInt32-1)%3 {
		t.Errorf("overflow: partition %d, %v", r.Partition, err)
	}
	tr, _ = routing(t, map[string]string{"partition.payload.fields": "change.id", "partition.topic.num": "3"})
	r = routingEvent(math.MaxInt32)
	if _, err := tr.apply(&r); err != nil || r.Partition != 0 {
		t.Errorf("MAX_VALUE: partition %d, %v", r.Partition, err)
	}
}

// Debezium Server's sinks produce without the record's partition: under
// its configuration the transform leaves the record as it is.
func TestPartitionRoutingServer(t *testing.T) {
	ch, ignored, err := Parse(Config{Props: map[string]string{
		"debezium.transforms":                            "p",
		"debezium.transforms.p.type":                     PartitionRoutingClass,
		"debezium.transforms.p.partition.payload.fields": "change.id",
		"debezium.transforms.p.partition.topic.num":      "5",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ignored) != 1 || ignored[0] != "debezium.transforms.p.type" {
		t.Errorf("ignored %q: the transform's type should be named", ignored)
	}
	r := routingEvent(7)
	if keep, err := ch.Apply(&r); !keep || err != nil || r.HasPartition {
		t.Errorf("%v %v, partition %d %v", keep, err, r.Partition, r.HasPartition)
	}
}

// The options as Debezium 3.6.1's configure validates them.
func TestPartitionRoutingConfig(t *testing.T) {
	for _, c := range []struct {
		props   map[string]string
		refused string // "" for accepted
	}{
		{map[string]string{"partition.payload.fields": "a"}, "partition.topic.num"},
		{map[string]string{"partition.topic.num": "3"}, "partition.payload.fields"},
		{map[string]string{"partition.payload.fields": "a", "partition.topic.num": "0"}, "partition.topic.num"},
		{map[string]string{"partition.payload.fields": "a", "partition.topic.num": "-2"}, "partition.topic.num"},
		{map[string]string{"partition.payload.fields": "a", "partition.topic.num": " 3 "}, "partition.topic.num"},
		{map[string]string{"partition.payload.fields": "a", "partition.topic.num": "x"}, "partition.topic.num"},
		{map[string]string{"partition.payload.fields": "a", "partition.topic.num": "3000000000"}, "partition.topic.num"},
		{map[string]string{"partition.payload.fields": "", "partition.topic.num": "3"}, "partition.payload.fields"},
		{map[string]string{"partition.payload.fields": "a, ", "partition.topic.num": "3"}, "partition.payload.fields"},
		{map[string]string{"partition.payload.fields": "a,,b", "partition.topic.num": "3"}, "partition.payload.fields"},
		{map[string]string{"partition.payload.fields": "a,", "partition.topic.num": "3"}, ""},
		{map[string]string{"partition.payload.fields": "a", "partition.topic.num": "+3", "partition.hash.function": "anything"}, ""},
	} {
		tr, problems := routing(t, c.props)
		switch {
		case c.refused == "" && (tr == nil || len(problems) > 0):
			t.Errorf("%v: refused: %v", c.props, problems)
		case c.refused != "" && (tr != nil || len(problems) != 1 || !strings.HasPrefix(problems[0], "transforms.p."+c.refused+":")):
			t.Errorf("%v: %v, want %s refused", c.props, problems, c.refused)
		}
	}
	tr, _ := routing(t, map[string]string{"partition.payload.fields": " after . id ,source.table,", "partition.topic.num": "3"})
	if got := tr.(*partitionRouting).paths; len(got) != 2 || strings.Join(got[0], "|") != "after|id" || strings.Join(got[1], "|") != "source|table" {
		t.Errorf("paths %q", got)
	}
}
