package transform

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf16"
)

// PartitionRoutingClass is Debezium's PartitionRouting, which sets a
// change event's Kafka partition from fields of its envelope.
const PartitionRoutingClass = "io.debezium.transforms.partitions.PartitionRouting"

// bitsName is Debezium's logical type of bit strings, which its
// PostgreSQL connector holds as a byte[] where bytea is a ByteBuffer.
const bitsName = "io.debezium.data.Bits"

// partitionRouting is PartitionRouting (Debezium 3.6.1): the partition of
// a change event is the sum of its fields' hashes (Java's hashCode, or
// Debezium's MurmurHash3 of it), made non-negative, modulo
// partition.topic.num. A record that is not a change event (the Outbox
// Event Router's, a tombstone) passes unchanged, as in Debezium.
type partitionRouting struct {
	paths  [][]string // partition.payload.fields, each split at its dots
	num    int32
	murmur bool
	// server: a Debezium Server configuration, whose sinks (Kafka's
	// among them) produce without the record's partition.
	server bool
}

func newPartitionRouting(o *options) transformation {
	t := &partitionRouting{server: o.p.prefix != ""}
	if v, _ := o.raw("partition.payload.fields"); javaTrim(v) == "" {
		o.refuse("partition.payload.fields", "missing (Debezium requires a value)")
	} else {
		// Configuration.getList: String.split(","), which drops trailing
		// empty items, each item trimmed.
		items := strings.Split(v, ",")
		for len(items) > 0 && items[len(items)-1] == "" {
			items = items[:len(items)-1]
		}
		for _, it := range items {
			it = javaTrim(it)
			if it == "" {
				o.refuse("partition.payload.fields", fmt.Sprintf("%q: empty string element(s) not permitted (Debezium refuses them)", v))
				break
			}
			t.paths = append(t.paths, splitPath(it))
		}
	}
	if v, ok := o.raw("partition.topic.num"); !ok {
		o.refuse("partition.topic.num", "missing (Debezium requires it)")
	} else if n, err := strconv.ParseInt(v, 10, 32); err != nil {
		// Integer.parseInt of the value as given: " 3" is not one.
		o.refuse("partition.topic.num", fmt.Sprintf("%q: an integer is expected (Debezium refuses it)", v))
	} else if n <= 0 {
		o.refuse("partition.topic.num", fmt.Sprintf("%q: a positive, non-zero integer value is expected (Debezium refuses it)", v))
	} else {
		t.num = int32(n)
	}
	// HashFunction.parse: any other value, as a missing one, is java.
	if v, ok := o.raw("partition.hash.function"); ok && strings.EqualFold(javaTrim(v), "murmur") {
		t.murmur = true
	}
	if o.failed {
		return nil
	}
	if t.server {
		// Named among the keys pgoutbox leaves unused, in run's warning.
		o.p.ignored = append(o.p.ignored, o.p.name(o.prefix+"type"))
	}
	return t
}

// splitPath is a field's path as String.split("\\.") gives it, each part
// trimmed: trailing empty parts dropped.
func splitPath(f string) []string {
	parts := strings.Split(f, ".")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	for i := range parts {
		parts[i] = javaTrim(parts[i])
	}
	return parts
}

func (t *partitionRouting) apply(r *Record) (bool, error) {
	if t.server || r.Value == nil || r.ValueSchema == nil || !strings.HasSuffix(r.ValueSchema.Name, ".Envelope") {
		return true, nil
	}
	env, ok := r.Value.(*Struct)
	if !ok {
		return false, dataErrorf("a change event's value is not a struct: %s", javaClass(r.ValueSchema, r.Value))
	}
	op, hasOp := envelopeOp(env)
	if op == "t" || op == "m" {
		return true, nil // truncates and messages pass unchanged
	}
	var sum int32
	found := false
	for _, path := range t.paths {
		s, v, err := fieldValue(env, path, op, hasOp)
		if err != nil {
			return false, err
		}
		if v == nil {
			continue // absent or null: not used
		}
		h, err := t.hash(s, v)
		if err != nil {
			return false, dataErrorf("partition.payload.fields %s: %v", strings.Join(path, "."), err)
		}
		sum += h // int arithmetic, overflow wraps as in Java
		found = true
	}
	if !found {
		return true, nil
	}
	n := sum & math.MaxInt32
	if n == math.MaxInt32 {
		n = 0
	}
	r.Partition, r.HasPartition = n%t.num, true
	return true, nil
}

// envelopeOp is the envelope's op; hasOp false when it has no such field.
func envelopeOp(env *Struct) (string, bool) {
	i := env.Schema.field("op")
	if i < 0 {
		return "", false
	}
	op, _ := env.get(i, true).(string)
	return op, true
}

// fieldValue reads a path as PartitionRouting does: a field the struct
// lacks, or a step through a field that is not a struct, is absent (nil);
// "change" before the last step is before for a delete, after otherwise;
// a null struct on the way fails, as Debezium's task fails on it
// (NullPointerException).
func fieldValue(env *Struct, path []string, op string, hasOp bool) (*Schema, any, error) {
	if len(path) == 0 {
		return nil, nil, dataErrorf("Unprocessable message: partition.payload.fields has an item of dots alone (ArrayIndexOutOfBoundsException)")
	}
	cur := env
	for i, name := range path[:len(path)-1] {
		if name == "change" {
			if !hasOp {
				return nil, nil, nil
			}
			name = "after"
			if op == "d" {
				name = "before"
			}
		}
		if cur == nil {
			return nil, nil, dataErrorf("Unprocessable message: %s is null on the way to partition.payload.fields %s (NullPointerException)", strings.Join(path[:i], "."), strings.Join(path, "."))
		}
		j := cur.Schema.field(name)
		if j < 0 || cur.Schema.Fields[j].Schema.Type != StructT {
			return nil, nil, nil
		}
		cur, _ = cur.Values[j].(*Struct) // Struct.getStruct: without the default
	}
	last := path[len(path)-1]
	if cur == nil {
		return nil, nil, dataErrorf("Unprocessable message: %s is null on the way to partition.payload.fields %s (NullPointerException)", strings.Join(path[:len(path)-1], "."), strings.Join(path, "."))
	}
	j := cur.Schema.field(last)
	if j < 0 {
		return nil, nil, nil
	}
	return cur.Schema.Fields[j].Schema, cur.get(j, true), nil
}

func (t *partitionRouting) hash(s *Schema, v any) (int32, error) {
	if !t.murmur {
		return javaHash(s, v)
	}
	// MurmurHash3.hash(Object): a String's UTF-8 and a byte[]'s bytes are
	// hashed, anything else by its hashCode's four bytes.
	switch x := v.(type) {
	case string:
		return murmur32([]byte(x)), nil
	case []byte:
		if s != nil && s.Name == bitsName {
			return murmur32(x), nil
		}
	}
	h, err := javaHash(s, v)
	if err != nil {
		return 0, err
	}
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(h))
	return murmur32(b[:]), nil
}

// javaHash is the hashCode of the Java object Kafka Connect holds v in,
// by its schema: Integer, Short and Byte their value, Long and
// java.util.Date (Connect's Date, Time, Timestamp) their bits folded,
// Float and Double their bits, Boolean 1231 or 1237, String over its
// UTF-16, BigDecimal (Connect's Decimal) from its unscaled value and
// scale, ByteBuffer (bytes) over its bytes, List and Map as their
// interfaces define. A Struct's hashCode mixes its schema's Type enums'
// identity hashes, and a byte[]'s is its identity: neither is the same in
// two JVMs, so no partition can be Debezium's.
func javaHash(s *Schema, v any) (int32, error) {
	if v == nil {
		return 0, nil
	}
	if s == nil {
		return 0, fmt.Errorf("a value without a schema (%s) is not supported", javaClass(s, v))
	}
	switch s.Type {
	case Int8, Int16, Int32, Int64:
		n, _ := v.(int64)
		switch s.logical() {
		case dateName:
			return longHash(n * 86400000), nil
		case timeName, timestampName:
			return longHash(n), nil
		}
		if s.Type == Int64 {
			return longHash(n), nil
		}
		return int32(n), nil
	case Float32:
		f, _ := v.(float64)
		if math.IsNaN(f) {
			return 0x7fc00000, nil
		}
		return int32(math.Float32bits(float32(f))), nil
	case Float64:
		f, _ := v.(float64)
		if math.IsNaN(f) {
			return longHash(0x7ff8000000000000), nil
		}
		return longHash(int64(math.Float64bits(f))), nil
	case Boolean:
		if b, _ := v.(bool); b {
			return 1231, nil
		}
		return 1237, nil
	case String:
		str, _ := v.(string)
		var h int32
		for _, u := range utf16.Encode([]rune(str)) {
			h = 31*h + int32(u)
		}
		return h, nil
	case Bytes:
		b, _ := v.([]byte)
		switch {
		case s.logical() == decimalName:
			return decimalHash(s, b), nil
		case s.Name == bitsName:
			return 0, fmt.Errorf("a bit string: its byte[]'s Java hashCode is its identity, different in each JVM, so no partition would be Debezium's (partition.hash.function=murmur hashes its bytes)")
		}
		h := int32(1)
		for i := len(b) - 1; i >= 0; i-- { // ByteBuffer.hashCode: from the end
			h = 31*h + int32(int8(b[i]))
		}
		return h, nil
	case Array:
		items, _ := v.([]any)
		h := int32(1)
		for _, it := range items {
			x, err := javaHash(s.Items, it)
			if err != nil {
				return 0, err
			}
			h = 31*h + x
		}
		return h, nil
	case Map:
		entries, _ := v.([]MapEntry)
		var h int32
		for _, e := range entries {
			k, err := javaHash(s.Keys, e.Key)
			if err != nil {
				return 0, err
			}
			x, err := javaHash(s.Values, e.Value)
			if err != nil {
				return 0, err
			}
			h += k ^ x
		}
		return h, nil
	}
	return 0, fmt.Errorf("a %s: a Struct's Java hashCode mixes identity hashes, different in each JVM, so no partition would be Debezium's", describe(s, v))
}

// longHash is Long.hashCode: the high and low words xored.
func longHash(n int64) int32 { return int32(n ^ int64(uint64(n)>>32)) }

// decimalHash is BigDecimal.hashCode: 31 times its unscaled value's
// BigInteger.hashCode (the magnitude's 32-bit words, high first, folded
// by 31, times the sign) plus the scale. b is the unscaled value's two's
// complement.
func decimalHash(s *Schema, b []byte) int32 {
	scale := 0
	if p, ok := s.param("scale"); ok {
		scale, _ = strconv.Atoi(p)
	}
	u := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		u.Sub(u, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	mag := new(big.Int).Abs(u).Bytes()
	for len(mag)%4 != 0 {
		mag = append([]byte{0}, mag...)
	}
	var h int32
	for i := 0; i < len(mag); i += 4 {
		h = 31*h + int32(binary.BigEndian.Uint32(mag[i:]))
	}
	return 31*(h*int32(u.Sign())) + int32(scale)
}

// murmur32 is Debezium's MurmurHash3 (Infinispan's x64 variant, seed
// 9001) of key: the high word of the 64-bit hash. Whole 16-byte blocks
// are read unsigned, the tail's bytes sign-extended, as its Java does.
func murmur32(key []byte) int32 {
	const seed = 9001
	h1 := uint64(0x9368e53c2f6af274) ^ seed
	h2 := uint64(0x586dcd208f7cd3fd) ^ seed
	c1 := uint64(0x87c37b91114253d5)
	c2 := uint64(0x4cf5ad432745937f)
	mix := func(k1, k2 uint64) {
		k1 *= c1
		k1 = k1<<23 | k1>>(64-23)
		k1 *= c2
		h1 ^= k1
		h1 += h2
		h2 = h2<<41 | h2>>(64-41)
		k2 *= c2
		k2 = k2<<23 | k2>>(64-23)
		k2 *= c1
		h2 ^= k2
		h2 += h1
		h1 = h1*3 + 0x52dce729
		h2 = h2*3 + 0x38495ab5
		c1 = c1*5 + 0x7b7d159c
		c2 = c2*5 + 0x6bce6396
	}
	n := len(key)
	for i := 0; i+16 <= n; i += 16 {
		mix(binary.LittleEndian.Uint64(key[i:]), binary.LittleEndian.Uint64(key[i+8:]))
	}
	if tail := key[n&^15:]; len(tail) > 0 {
		var k1, k2 uint64
		for i, b := range tail {
			x := uint64(int64(int8(b))) // sign-extended
			if i < 8 {
				k1 ^= x << (8 * i)
			} else {
				k2 ^= x << (8 * (i - 8))
			}
		}
		mix(k1, k2)
	}
	h2 ^= uint64(n)
	h1 += h2
	h2 += h1
	h1 = fmix64(h1)
	h2 = fmix64(h2)
	h1 += h2
	return int32(h1 >> 32)
}

func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}
