package replication

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/schema"
)

// Messages selects the logical decoding messages
// (pg_logical_emit_message) the stream reads as outbox rows, by their
// prefix, as Debezium's message.prefix.include.list and
// message.prefix.exclude.list do: comma-separated regular expressions,
// each matching a whole prefix, case-insensitively; the include list wins
// when both are given. pgoutbox's own heartbeat prefix is never read.
type Messages struct {
	include, exclude schema.Patterns
}

// ParseMessages reads the include and exclude lists; both empty is nil:
// no message is read.
func ParseMessages(include, exclude string) (*Messages, error) {
	m := &Messages{}
	var err error
	if m.include, err = schema.ParsePatterns(include); err != nil {
		return nil, fmt.Errorf("message prefix include list: %w", err)
	}
	if m.exclude, err = schema.ParsePatterns(exclude); err != nil {
		return nil, fmt.Errorf("message prefix exclude list: %w", err)
	}
	if len(m.include) == 0 && len(m.exclude) == 0 {
		return nil, nil
	}
	return m, nil
}

// Reads tells whether a message of prefix is read; a nil Messages reads
// none.
func (m *Messages) Reads(prefix string) bool {
	if m == nil || prefix == HeartbeatPrefix {
		return false
	}
	if len(m.include) > 0 {
		return m.include.Match(prefix)
	}
	return !m.exclude.Match(prefix)
}

// MessageSchema is the schema name of the relations messages are read
// into: each message's row names its prefix as the table.
const MessageSchema = "pg_logical_emit_message"

// Type OIDs the JSON values of a message become.
const (
	oidBool  = 16
	oidInt8  = 20
	oidText  = 25
	oidFlt8  = 701
	oidJSONB = 3802
)

// messageRows turns messages into rows: the top-level fields of a JSON
// object become the columns of a relation, strings text, whole numbers
// bigint, other numbers double precision, booleans boolean, objects and
// arrays jsonb (null a NULL text). Content that is not a JSON object
// becomes a row of no column, which binds to nothing: the pipeline
// dead-letters it (or stops) as it does a row it cannot bind. The
// relations are shared between messages of the same shape, as the
// pipeline binds a relation once.
type messageRows struct {
	rels map[string]*outbox.Relation
}

// maxMessageShapes bounds the relations kept; past it they are made anew.
const maxMessageShapes = 1024

func (mr *messageRows) row(prefix string, content []byte) (*outbox.Relation, [][]byte) {
	cols, values := messageColumns(content)
	var key strings.Builder
	key.WriteString(prefix)
	for _, c := range cols {
		fmt.Fprintf(&key, "\x00%s\x00%d", c.Name, c.TypeOID)
	}
	if mr.rels == nil || len(mr.rels) >= maxMessageShapes {
		mr.rels = map[string]*outbox.Relation{}
	}
	rel, ok := mr.rels[key.String()]
	if !ok {
		rel = &outbox.Relation{Schema: MessageSchema, Name: prefix, Columns: cols, Message: true}
		mr.rels[key.String()] = rel
	}
	return rel, values
}

// messageColumns reads content's top-level fields in their order; a field
// given twice keeps its last value, as a JSON parser keeps it.
func messageColumns(content []byte) ([]schema.Column, [][]byte) {
	dec := json.NewDecoder(bytes.NewReader(content))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil
	}
	var cols []schema.Column
	var values [][]byte
	at := map[string]int{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil
		}
		name, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil
		}
		oid, v := messageValue(raw)
		c := schema.Column{Name: name, TypeOID: oid, TypMod: -1}
		if i, ok := at[name]; ok {
			cols[i], values[i] = c, v
			continue
		}
		at[name] = len(cols)
		cols, values = append(cols, c), append(values, v)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, nil
	}
	if _, err := dec.Token(); err == nil {
		return nil, nil // more after the object
	}
	return cols, values
}

func messageValue(raw json.RawMessage) (uint32, []byte) {
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return oidText, nil
		}
		return oidText, []byte(s)
	case '{', '[':
		return oidJSONB, append([]byte(nil), raw...)
	case 't', 'f':
		return oidBool, []byte(raw[:1])
	case 'n':
		return oidText, nil
	}
	if bytes.ContainsAny(raw, ".eE") {
		return oidFlt8, append([]byte(nil), raw...)
	}
	return oidInt8, append([]byte(nil), raw...)
}
