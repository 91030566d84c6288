package pulsar

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// fieldsOf decodes a message's fields: each number's varints and bytes,
// in order.
func fieldsOf(t *testing.T, b []byte) map[protowire.Number][]any {
	t.Helper()
	out := map[protowire.Number][]any{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("a malformed tag")
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			out[num] = append(out[num], v)
			b = b[n:]
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			out[num] = append(out[num], v)
			b = b[n:]
		default:
			t.Fatalf("field %d of wire type %d", num, typ)
		}
	}
	return out
}

// A SEND frame is the command, the magic, the CRC32C of what follows,
// the metadata of a batch of one (producer, sequence id, key, one
// message) and the batch: the message's own metadata (properties in
// order, key, size, null) and its value.
func TestSendFrame(t *testing.T) {
	md, payload := batchOfOne("standalone-0-1", 7, 1700000000000, []byte{0, 0, 0, 0, 0, 0, 0, 3}, [][2]string{{"id", "e-1"}, {"type", "Paid"}}, "o-1", nil, true)
	b := sendFrame(3, 7, md, payload)
	total := binary.BigEndian.Uint32(b)
	if int(total) != len(b)-4 {
		t.Fatalf("total size %d of a %d-byte frame", total, len(b))
	}
	cmdSize := binary.BigEndian.Uint32(b[4:])
	cmd := fieldsOf(t, b[8:8+cmdSize])
	if cmd[1][0] != uint64(cmdSend) {
		t.Fatalf("command type %v", cmd[1])
	}
	send := fieldsOf(t, cmd[cmdSend][0].([]byte))
	if send[1][0] != uint64(3) || send[2][0] != uint64(7) {
		t.Errorf("SEND producer %v, sequence %v", send[1], send[2])
	}
	rest := b[8+cmdSize:]
	if rest[0] != 0x0e || rest[1] != 0x01 {
		t.Fatalf("no magic: % x", rest[:2])
	}
	if sum := binary.BigEndian.Uint32(rest[2:]); sum != crc32.Checksum(rest[6:], crc32.MakeTable(crc32.Castagnoli)) {
		t.Errorf("checksum %08x is not the CRC32C of what follows", sum)
	}
	mdSize := binary.BigEndian.Uint32(rest[6:])
	meta := fieldsOf(t, rest[10:10+mdSize])
	if string(meta[1][0].([]byte)) != "standalone-0-1" || meta[2][0] != uint64(7) || string(meta[6][0].([]byte)) != "o-1" || meta[11][0] != uint64(1) ||
		fmt.Sprint(meta[16]) != "[[0 0 0 0 0 0 0 3]]" {
		t.Errorf("metadata %v", meta)
	}
	batch := rest[10+mdSize:]
	singleSize := binary.BigEndian.Uint32(batch)
	single := fieldsOf(t, batch[4:4+singleSize])
	if len(single[1]) != 2 || string(single[2][0].([]byte)) != "o-1" || single[3][0] != uint64(0) || single[9][0] != uint64(1) {
		t.Errorf("the message's metadata %v", single)
	}
	if kv := fieldsOf(t, single[1][1].([]byte)); string(kv[1][0].([]byte)) != "type" || string(kv[2][0].([]byte)) != "Paid" {
		t.Errorf("the second property %v", kv)
	}
	if len(batch) != int(4+singleSize) {
		t.Errorf("a null value with %d bytes after its metadata", len(batch)-int(4+singleSize))
	}
	md, payload = batchOfOne("p", 8, 1, nil, nil, "k", []byte("{}"), false)
	if _, ok := fieldsOf(t, md)[16]; ok {
		t.Error("a schema version without a schema")
	}
	if string(payload[len(payload)-2:]) != "{}" {
		t.Errorf("the value is not the batch's end: %q", payload)
	}
}

// The broker's answers a producer reads.
func TestParseCommand(t *testing.T) {
	receipt := frame(cmdSendReceipt, fields(nil).varint(1, 3).varint(2, 9).bytes(3, fields(nil).varint(1, 5).varint(2, 6)))
	c, err := parseCommand(receipt[8:])
	if err != nil || c.typ != cmdSendReceipt || c.producerID != 3 || c.sequenceID != 9 || c.err() != nil {
		t.Errorf("SEND_RECEIPT: %+v, %v", c, err)
	}
	sendErr := frame(cmdSendError, fields(nil).varint(1, 3).varint(2, 10).varint(3, 2).str(4, "bookie down"))
	if c, err := parseCommand(sendErr[8:]); err != nil || c.err() == nil || c.err().Error() != "PersistenceError: bookie down" {
		t.Errorf("SEND_ERROR: %+v, %v", c, err)
	}
	lookup := frame(cmdLookupAnswer, fields(nil).str(1, "pulsar://b2:6650").varint(3, lookupRedirect).varint(4, 4).boolean(5, true))
	if c, err := parseCommand(lookup[8:]); err != nil || c.brokerURL != "pulsar://b2:6650" || c.lookupType != lookupRedirect || !c.authoritative || c.requestID != 4 {
		t.Errorf("LOOKUP_RESPONSE: %+v, %v", c, err)
	}
	failed := frame(cmdPartitionedMetadataAnswer, fields(nil).varint(2, 5).varint(3, 1).varint(4, 4).str(5, "not allowed"))
	if c, err := parseCommand(failed[8:]); err != nil || c.err() == nil || c.requestID != 5 {
		t.Errorf("PARTITIONED_METADATA_RESPONSE failed: %+v, %v", c, err)
	}
	if _, err := parseCommand([]byte{0x08}); err == nil {
		t.Error("a truncated command parsed")
	}
}

// A key's partition is Java's String.hashCode, sign bit cleared, modulo
// the partitions, as Pulsar's Java client routes a keyed message.
func TestPartition(t *testing.T) {
	for _, tc := range []struct {
		key  string
		hash int32 // Java's "...".hashCode()
	}{
		{"hello", 99162322}, {"Aa", 2112}, {"BB", 2112}, {"é", 233},
		{"😀", 1772899}, // a surrogate pair: two UTF-16 units
		{"polygenelubricants", -2147483648},
		{"", 0},
	} {
		for _, n := range []int{1, 3, 7} {
			if got, want := partition(tc.key, n), int(tc.hash&0x7fffffff)%n; got != want {
				t.Errorf("partition(%q, %d) = %d, want %d", tc.key, n, got, want)
			}
		}
	}
}

func FuzzParseCommand(f *testing.F) {
	f.Add(frame(cmdSendReceipt, fields(nil).varint(1, 3).varint(2, 9))[8:])
	f.Add(frame(cmdLookupAnswer, fields(nil).str(1, "pulsar://b:6650").varint(3, 1).varint(4, 1))[8:])
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseCommand(b)
		if err == nil && c == nil {
			t.Fatal("no command and no error")
		}
	})
}

// A service URL's hosts, with Pulsar's default ports.
func TestServiceAddrs(t *testing.T) {
	for url, want := range map[string]string{
		"pulsar://b1:6650":              "b1:6650",
		"pulsar://b1":                   "b1:6650",
		"pulsar+ssl://b1":               "b1:6651",
		"pulsar://b1:6650,b2:6650,b3":   "b1:6650 b2:6650 b3:6650",
		"pulsar+ssl://b1:7000,b2:7000/": "b1:7000 b2:7000",
	} {
		p, err := New(Config{ServiceURL: url}, nil)
		if err != nil {
			t.Errorf("%s: %v", url, err)
			continue
		}
		if got := strings.Join(p.serviceAddrs(), " "); got != want {
			t.Errorf("%s: %s, want %s", url, got, want)
		}
	}
}
