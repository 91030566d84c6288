package schema

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Postgres type OIDs that change how a column's text value is read.
const (
	oidText        uint32 = 25
	oidJSON        uint32 = 114
	oidVarchar     uint32 = 1043
	oidTimestamp   uint32 = 1114
	oidTimestamptz uint32 = 1184
	oidJSONB       uint32 = 3802
)

// maxIdentifierLen is the longest Postgres identifier (NAMEDATALEN-1 bytes).
const maxIdentifierLen = 63

// RowError is a row that cannot become an event (a poison row): which column
// and why. Callers decide to dead-letter or halt; a RowError never means the
// source or the sink is broken.
//
// Column is the table's column name when the error comes from
// [Binding.Record], and the record field's default column name (id,
// aggregatetype, aggregateid, type, payload, headers, time) when it comes
// from an [Encoder] or a router.
type RowError struct {
	Column string
	Reason string
}

func (e *RowError) Error() string { return "column " + e.Column + ": " + e.Reason }

// Columns names the outbox table's columns. Empty fields take the defaults of
// [DefaultColumns]. Names are matched exactly (case-sensitive), as Postgres
// reports them.
type Columns struct {
	ID, AggregateType, AggregateID, Type, Payload, Headers, Time string

	// Additional are further columns carried into the message, as
	// Debezium's table.fields.additional.placement (see
	// [ParseAdditionalFields]). Each must exist in the table.
	Additional []AdditionalField
}

// DefaultColumns returns the default column names, which match Debezium's
// outbox defaults: id, aggregatetype, aggregateid, type, payload, headers,
// created_at.
func DefaultColumns() Columns {
	return Columns{
		ID:            "id",
		AggregateType: "aggregatetype",
		AggregateID:   "aggregateid",
		Type:          "type",
		Payload:       "payload",
		Headers:       "headers",
		Time:          "created_at",
	}
}

func (c Columns) withDefaults() Columns {
	d := DefaultColumns()
	for _, f := range []struct{ dst, def *string }{
		{&c.ID, &d.ID}, {&c.AggregateType, &d.AggregateType}, {&c.AggregateID, &d.AggregateID},
		{&c.Type, &d.Type}, {&c.Payload, &d.Payload}, {&c.Headers, &d.Headers}, {&c.Time, &d.Time},
	} {
		if *f.dst == "" {
			*f.dst = *f.def
		}
	}
	return c
}

// fields lists the record fields in a fixed order with their column names.
func (c Columns) fields() [numFields]string {
	return [numFields]string{c.ID, c.AggregateType, c.AggregateID, c.Type, c.Payload, c.Headers, c.Time}
}

// Validate reports whether every column name (after defaults) can name a
// Postgres column: at most 63 bytes and no NUL byte.
func (c Columns) Validate() error {
	c = c.withDefaults()
	for i, name := range c.fields() {
		if len(name) > maxIdentifierLen {
			return fmt.Errorf("schema: %s column name %q is longer than %d bytes", fieldNames[i], name, maxIdentifierLen)
		}
		if strings.IndexByte(name, 0) >= 0 {
			return fmt.Errorf("schema: %s column name %q contains a NUL byte", fieldNames[i], name)
		}
	}
	return validateAdditional(c.Additional)
}

// Column is one column of the table as the source sees it: a pgoutput
// Relation message or a query's field descriptions.
type Column struct {
	Name    string
	TypeOID uint32
}

// Record fields, in the order of Columns.fields.
const (
	fID = iota
	fAggregateType
	fAggregateID
	fType
	fPayload
	fHeaders
	fTime
	numFields
)

// fieldNames are the record fields' default column names, used in messages
// and in RowErrors raised outside a Binding.
var fieldNames = [numFields]string{"id", "aggregatetype", "aggregateid", "type", "payload", "headers", "time"}

// Human-readable field names for RowError reasons.
var fieldLabels = [numFields]string{"id", "aggregate type", "aggregate id", "type", "payload", "headers", "time"}

// Binding maps a table's columns, in table order, to the record fields. It is
// immutable and safe for concurrent use. Build a new one when the table's
// shape changes (a new pgoutput Relation message).
type Binding struct {
	ncols int
	idx   [numFields]int    // column index per field; -1 when absent (Headers, Time)
	oid   [numFields]uint32 // type OID per bound field
	name  [numFields]string // column name per field, for RowErrors

	cols []Column          // the table's columns, in table order
	add  []AdditionalField // Columns.Additional, aliases defaulted
	addI []int             // column index per additional field
}

// Bind maps a table's columns (in table order) to the record fields. Missing
// required columns (id, aggregatetype, aggregateid, type, payload) give an
// error wrapping [ErrMissingColumn] naming them; the headers and time columns
// are optional. A column name that appears twice is an error.
func (c Columns) Bind(cols []Column) (*Binding, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	names := c.withDefaults().fields()
	b := &Binding{ncols: len(cols), name: names, cols: cols}
	for f := range b.idx {
		b.idx[f] = -1
	}
	for i, col := range cols {
		for f, name := range names {
			if col.Name != name {
				continue
			}
			if b.idx[f] >= 0 {
				return nil, fmt.Errorf("schema: column %q appears twice", col.Name)
			}
			b.idx[f] = i
			b.oid[f] = col.TypeOID
		}
	}
	var missing []string
	for f := fID; f <= fPayload; f++ {
		if b.idx[f] < 0 {
			missing = append(missing, names[f])
		}
	}
	for _, a := range c.Additional {
		i := columnIndex(cols, a.Column)
		if i < 0 {
			missing = append(missing, a.Column)
			continue
		}
		if a.Alias == "" {
			a.Alias = a.Column
		}
		b.add = append(b.add, a)
		b.addI = append(b.addI, i)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrMissingColumn, strings.Join(missing, ", "))
	}
	return b, nil
}

func columnIndex(cols []Column, name string) int {
	for i, c := range cols {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// Record is one outbox row as an event.
type Record struct {
	ID, AggregateType, AggregateID, Type string

	Payload []byte // JSON text
	Headers []byte // JSON object text, or nil
	Time    time.Time

	// Origin says where the row came from; the caller fills it in.
	Origin Origin

	// Additional holds the values of Columns.Additional, in that order.
	Additional []FieldValue

	// Columns and Values are the whole row in table order, as given to
	// [Binding.Record] (aliased, not copied), for envelopes that carry
	// every column (Debezium's change event). Nil when the record was not
	// built by a Binding.
	Columns []Column
	Values  [][]byte

	bind *Binding // the binding that built the record, for column types
}

// FieldValue is one additional column's value.
type FieldValue struct {
	Column    string // the table's column
	Alias     string // the name it takes in the message
	Placement Placement
	TypeOID   uint32
	Value     []byte // text format; nil is SQL NULL
}

// Origin is where a record came from, for envelopes that carry it (such as
// Debezium's source block). The CloudEvents envelopes do not use it.
type Origin struct {
	Database, Schema, Table string
	// LSN is the row's WAL position and CommitLSN its transaction's
	// commit LSN; both are 0 for a polled row.
	LSN, CommitLSN uint64
	TxID           uint64
	CommitTime     time.Time
}

// Record builds a record from a row's values in table column order, in text
// format (as pgoutput and pgx text results give them); nil means SQL NULL.
// commitTime is used when the table has no time column or the value is NULL.
//
// Aliasing: the four string fields are copied (into one allocation), but
// Payload and Headers are subslices of values, not copies. The replication
// package's stream and poller copy each row's values into one buffer of its
// own, handed to the caller, so this is safe there; a caller whose buffers
// are reused (pgx RawValues, valid only until the next row) must copy values
// first. Do not modify values while the Record (or a Message encoded from it)
// is in use.
//
// Rules, each violation a [*RowError] naming the table's column:
//   - id, aggregatetype, aggregateid and type must be non-NULL and non-empty;
//   - payload must be non-NULL JSON: jsonb values are trusted, any other type
//     (json, text, varchar, ...) is checked with json.Valid and stripped of
//     surrounding JSON whitespace;
//   - headers: NULL gives nil, otherwise it must be a JSON object;
//   - time: timestamptz and timestamp (taken as UTC) text in ISO DateStyle,
//     also accepted from text columns (with 'T' or ' ', 'Z' or a numeric
//     offset); infinity, BC years and years past 9999 are rejected.
//
// A values slice whose length differs from the bound table is a plain error
// (a programming or schema-change error, not a poison row).
func (b *Binding) Record(values [][]byte, commitTime time.Time) (Record, error) {
	if len(values) != b.ncols {
		return Record{}, fmt.Errorf("schema: row has %d values, table has %d columns", len(values), b.ncols)
	}
	var total int
	for f := fID; f <= fType; f++ {
		v := values[b.idx[f]]
		if v == nil {
			return Record{}, &RowError{Column: b.name[f], Reason: "null " + fieldLabels[f]}
		}
		if len(v) == 0 {
			return Record{}, &RowError{Column: b.name[f], Reason: "empty " + fieldLabels[f]}
		}
		total += len(v)
	}

	payload := values[b.idx[fPayload]]
	if payload == nil {
		return Record{}, &RowError{Column: b.name[fPayload], Reason: "null payload"}
	}
	if len(payload) == 0 {
		return Record{}, &RowError{Column: b.name[fPayload], Reason: "empty payload"}
	}
	if b.oid[fPayload] != oidJSONB {
		payload = trimJSONSpace(payload)
		if !json.Valid(payload) {
			return Record{}, &RowError{Column: b.name[fPayload], Reason: "payload is not valid JSON"}
		}
	}

	var headers []byte
	if i := b.idx[fHeaders]; i >= 0 && values[i] != nil {
		headers = values[i]
		if b.oid[fHeaders] != oidJSONB {
			headers = trimJSONSpace(headers)
			if !json.Valid(headers) {
				return Record{}, &RowError{Column: b.name[fHeaders], Reason: "headers is not valid JSON"}
			}
		}
		if len(headers) == 0 || headers[0] != '{' {
			return Record{}, &RowError{Column: b.name[fHeaders], Reason: "headers is not a JSON object"}
		}
	}

	t := commitTime
	if i := b.idx[fTime]; i >= 0 && values[i] != nil {
		var reason string
		t, reason = parseTimestamp(values[i])
		if reason != "" {
			return Record{}, &RowError{Column: b.name[fTime], Reason: reason}
		}
	}

	// One allocation for the four strings: build them back to back and slice.
	var sb strings.Builder
	sb.Grow(total)
	for f := fID; f <= fType; f++ {
		sb.Write(values[b.idx[f]])
	}
	all := sb.String()
	var s [4]string
	off := 0
	for f := fID; f <= fType; f++ {
		n := len(values[b.idx[f]])
		s[f] = all[off : off+n]
		off += n
	}
	var add []FieldValue
	if len(b.add) > 0 {
		add = make([]FieldValue, len(b.add))
		for i, a := range b.add {
			add[i] = FieldValue{Column: a.Column, Alias: a.Alias, Placement: a.Placement,
				TypeOID: b.cols[b.addI[i]].TypeOID, Value: values[b.addI[i]]}
		}
	}
	return Record{
		ID:            s[fID],
		AggregateType: s[fAggregateType],
		AggregateID:   s[fAggregateID],
		Type:          s[fType],
		Payload:       payload,
		Headers:       headers,
		Time:          t,
		Additional:    add,
		Columns:       b.cols,
		Values:        values,
		bind:          b,
	}, nil
}

// trimJSONSpace strips JSON whitespace (RFC 8259: space, tab, LF, CR) from
// both ends.
func trimJSONSpace(b []byte) []byte {
	for len(b) > 0 && isJSONSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isJSONSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// RawID returns the row's id column as text, or "" when it is NULL. It
// reads the row without validating it, for rows that cannot become a record.
func (b *Binding) RawID(values [][]byte) string { return b.raw(fID, values) }

// RawAggregateID returns the row's aggregate id as text, or "" when NULL.
func (b *Binding) RawAggregateID(values [][]byte) string { return b.raw(fAggregateID, values) }

func (b *Binding) raw(f int, values [][]byte) string {
	if i := b.idx[f]; i >= 0 && i < len(values) && values[i] != nil {
		return string(values[i])
	}
	return ""
}
