package redisstream

import (
	"sort"
	"strings"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kgo"
)

// entry is what XADD writes for one record: its stream and its field and
// value pairs, in order.
type entry struct {
	stream string
	fields []string // name, value, name, value, ...
}

// entryOf builds r's entry as Debezium Server's redis sink does
// (RedisStreamChangeConsumer): the stream is the topic; compact is one
// field, the key (nullKey without one) holding the value (nullValue for
// a tombstone); extended is key and value, then each header with a value,
// its name in upper case, in the order Debezium Server's HashMap of the
// headers gives them.
func entryOf(r *kgo.Record, format, nullKey, nullValue string) entry {
	key, value := nullKey, nullValue
	if r.Key != nil {
		key = string(r.Key)
	}
	if r.Value != nil {
		value = string(r.Value)
	}
	if format != FormatExtended {
		return entry{stream: r.Topic, fields: []string{key, value}}
	}
	fields := make([]string, 0, 4+2*len(r.Headers))
	fields = append(fields, "key", key, "value", value)
	for _, h := range javaHashMapOrder(r.Headers) {
		name := strings.ToUpper(h.Key)
		// A LinkedHashMap: a name met again keeps its place and takes
		// the later value.
		replaced := false
		for i := 0; i < len(fields); i += 2 {
			if fields[i] == name {
				fields[i+1], replaced = string(h.Value), true
				break
			}
		}
		if !replaced {
			fields = append(fields, name, string(h.Value))
		}
	}
	return entry{stream: r.Topic, fields: fields}
}

// size is the entry's bytes: its fields and values.
func (e entry) size() int {
	n := 0
	for _, f := range e.fields {
		n += len(f)
	}
	return n
}

// javaHashMapOrder returns the headers that have a value, a name given
// twice once with its last value, in the order a java.util.HashMap of
// them iterates: by bucket (the name's String.hashCode, spread, masked by
// the table's size, which doubles past three quarters full from 16), and
// in a bucket by insertion. Debezium Server collects the headers into
// one (BaseChangeConsumer.convertHeaders) before it writes them.
func javaHashMapOrder(hs []kgo.RecordHeader) []kgo.RecordHeader {
	var out []kgo.RecordHeader
	at := map[string]int{}
	for _, h := range hs {
		if h.Value == nil {
			continue // Debezium's header converter drops a null header
		}
		if i, ok := at[h.Key]; ok {
			out[i].Value = h.Value
			continue
		}
		at[h.Key] = len(out)
		out = append(out, h)
	}
	size := 16
	for len(out) > size*3/4 {
		size *= 2
	}
	sort.SliceStable(out, func(i, j int) bool {
		return javaSpread(out[i].Key)&uint32(size-1) < javaSpread(out[j].Key)&uint32(size-1)
	})
	return out
}

// javaSpread is HashMap.hash of a String: its hashCode over UTF-16 code
// units, its high half folded into its low half.
func javaSpread(s string) uint32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return uint32(h) ^ uint32(h)>>16
}
