package schema

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Postgres type OIDs that change how a column's text value is read.
const (
	oidText        uint32 = 25
	oidJSON        uint32 = 114
	oidVarchar     uint32 = 1043
	oidTimestamp   uint32 = 1114
	oidTimestamptz uint32 = 1184
	oidJSONB       uint32 = 3802
	oidXML         uint32 = 142
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
	// [ParseAdditionalFields]). Each must exist in the table unless
	// IgnoreMissingAdditional is set.
	Additional []AdditionalField
	// IgnoreMissingAdditional skips an additional column the table does
	// not have (Debezium's table.field.additional.missing=ignore).
	IgnoreMissingAdditional bool

	// SchemaVersion is an optional integer column whose value becomes the
	// value schema's version (Debezium's table.field.event.schema.version);
	// "" for none.
	SchemaVersion string
	// NoHeaders reads no headers column, even a json one of the default
	// name (a column of the table's own that holds something else).
	NoHeaders bool

	// Zone is the zone a time column of type timestamp (without time zone)
	// is read in: the server's TimeZone, in which DEFAULT now() wrote it
	// and in which PostgreSQL casts it to timestamptz. nil is UTC. Under
	// PassThrough it is not used: Debezium reads such a column as UTC.
	Zone *time.Location

	// Trace is the column carrying the writer's trace context: a W3C
	// traceparent, or java.util.Properties text holding traceparent (and
	// tracestate) as Debezium's tracing.span.context.field reads it.
	// Empty means "tracingspancontext"; the column is optional.
	Trace string

	// PassThrough takes rows as Debezium's outbox router does, for the
	// Debezium formats: the type column is optional, a NULL or empty id,
	// aggregate id, type or payload passes (a NULL aggregate id is a null
	// key, a NULL payload a null value), the payload is any text or bytes,
	// unchecked, and the headers and time columns are read only when named
	// (Headers and Time empty mean none): the time column, of a timestamp
	// type, is the Kafka record's timestamp (table.field.event.timestamp).
	// Only a NULL aggregate type is a poison row: Debezium's router fails
	// on it.
	PassThrough bool
	// AnyShape (with PassThrough) binds a table of any columns, none of
	// them required: Debezium's change events carry the row whole, keyed
	// by the table's key, and read the outbox columns only where the
	// table has them.
	AnyShape bool
}

// DefaultTraceColumn is Debezium's tracing.span.context.field default.
const DefaultTraceColumn = "tracingspancontext"

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
	defs := []struct{ dst, def *string }{
		{&c.ID, &d.ID}, {&c.AggregateType, &d.AggregateType}, {&c.AggregateID, &d.AggregateID},
		{&c.Type, &d.Type}, {&c.Payload, &d.Payload},
	}
	if !c.PassThrough {
		defs = append(defs, struct{ dst, def *string }{&c.Time, &d.Time})
		if !c.NoHeaders {
			defs = append(defs, struct{ dst, def *string }{&c.Headers, &d.Headers})
		}
	}
	for _, f := range defs {
		if *f.dst == "" {
			*f.dst = *f.def
		}
	}
	if c.Trace == "" {
		c.Trace = DefaultTraceColumn
	}
	return c
}

// fields lists the record fields in a fixed order with their column names.
func (c Columns) fields() [numFields]string {
	return [numFields]string{c.ID, c.AggregateType, c.AggregateID, c.Type, c.Payload, c.Headers, c.Time}
}

// Validate reports whether every column name (after defaults) is one
// pgoutbox accepts (see [IdentifierProblem]).
func (c Columns) Validate() error {
	if c.NoHeaders && c.Headers != "" {
		return fmt.Errorf("schema: headers column %q given with none to be read", c.Headers)
	}
	c = c.withDefaults()
	for i, name := range c.fields() {
		if name == "" && (i == fHeaders || i == fTime) {
			continue // none: under PassThrough, or NoHeaders
		}
		if p := IdentifierProblem(name); p != "" {
			return fmt.Errorf("schema: %s column %q: %s", fieldNames[i], name, p)
		}
	}
	for _, name := range []string{c.SchemaVersion, c.Trace} {
		if p := IdentifierProblem(name); name != "" && p != "" {
			return fmt.Errorf("schema: column %q: %s", name, p)
		}
	}
	return validateAdditional(c.Additional)
}

// IdentifierProblem says why name is not a table, schema or column name
// pgoutbox accepts, or "" when it is one: 1 to 63 bytes (Postgres'
// NAMEDATALEN-1) of printable UTF-8 without single quotes or backslashes.
// Names are quoted wherever they reach SQL; they are validated too
// because they also reach places quoting does not cover (a sequence name
// in the string literal of a column default, logs, status output).
func IdentifierProblem(name string) string {
	switch {
	case name == "":
		return "empty name"
	case len(name) > maxIdentifierLen:
		return "longer than 63 bytes (Postgres truncates names to 63)"
	case !utf8.ValidString(name):
		return "not valid UTF-8"
	}
	for _, r := range name {
		switch {
		case r == '\'' || r == '\\':
			return "single quotes and backslashes are not accepted in names"
		case !unicode.IsPrint(r):
			return fmt.Sprintf("character %U is not printable", r)
		}
	}
	return ""
}

// Column is one column of the table as the source sees it: a pgoutput
// Relation message or a query's field descriptions.
type Column struct {
	Name    string
	TypeOID uint32
	// TypMod is the type's modifier (atttypmod: a numeric's precision and
	// scale, a time's precision), -1 for none.
	TypMod int32
	// Mapper is what the configuration's column mask or truncation does
	// to the column (DebeziumConfig.MapColumns); zero for nothing.
	Mapper ColumnMapper
	// Key: the column is part of the table's replica identity, as the
	// Relation message flags it (its primary key, by default).
	Key bool
}

func (c Column) typ() pgType { return pgType{oid: c.TypeOID, mod: c.TypMod, mapper: c.Mapper} }

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
	mod   [numFields]int32  // type modifier per bound field
	name  [numFields]string // column name per field, for RowErrors

	cols     []Column          // the table's columns, in table order
	add      []AdditionalField // Columns.Additional, aliases defaulted
	addI     []int             // column index per additional field
	partial  bool              // made by BindAny: Record fails
	anyShape bool              // Columns.AnyShape: no column is required
	// schemaName and table name the table BindTable bound, "" for Bind.
	schemaName, table string

	passThrough bool
	// envelope tells that an additional field is placed in the envelope,
	// whether or not the table has its column: Debezium's router makes the
	// value a struct for any envelope placement it is configured with.
	envelope bool
	versionI int // the schema version column's index, -1 for none
	traceI   int // the trace context column's index, -1 for none
	// zone is Columns.Zone where the time column is a timestamp without
	// time zone; nil otherwise.
	zone *time.Location
	// unreadHeaders is a column of the default headers name left unread
	// because it is not JSON typed; defaultHeaders one read because of
	// its name alone; "" for none.
	unreadHeaders, defaultHeaders string
}

// UnreadHeaders names a column of the default headers name that the
// binding does not read because it is not of a JSON type (text holding
// metadata in a format of the table's own), or "" when there is none.
func (b *Binding) UnreadHeaders() string { return b.unreadHeaders }

// DefaultHeaders names the headers column the binding reads as CloudEvents
// extensions because it has the default name and a JSON type, not because
// it was named, or "" when there is none.
func (b *Binding) DefaultHeaders() string { return b.defaultHeaders }

// BindTable is Bind for the columns of the table schemaName.table, whose
// change events take that table's shape (DebeziumConfig.Tables).
func (c Columns) BindTable(schemaName, table string, cols []Column) (*Binding, error) {
	b, err := c.Bind(cols)
	if b != nil {
		b.schemaName, b.table = schemaName, table
	}
	return b, err
}

// Bind maps a table's columns (in table order) to the record fields. Missing
// required columns (id, aggregatetype, aggregateid, type, payload; without
// type under PassThrough) give an error wrapping [ErrMissingColumn] naming
// them; the headers, time and trace columns are optional, a headers column
// left to its default name is read only when it is json or jsonb, and a
// time column left to its default name only when it is a timestamp. A column
// name that appears twice, or a column whose type cannot serve its role (a
// schema version or partition that is not an integer, a time that is not a
// timestamp), is an error wrapping [ErrColumnType]. Under AnyShape (with
// PassThrough) no column is required.
func (c Columns) Bind(cols []Column) (*Binding, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	timeDefaulted, headersDefaulted := c.Time == "", c.Headers == "" && !c.PassThrough && !c.NoHeaders
	c = c.withDefaults()
	names := c.fields()
	b := &Binding{ncols: len(cols), name: names, cols: cols, passThrough: c.PassThrough, anyShape: c.AnyShape && c.PassThrough, versionI: -1, traceI: -1}
	for f := range b.idx {
		b.idx[f] = -1
	}
	for i, col := range cols {
		for f, name := range names {
			if name == "" || col.Name != name {
				continue
			}
			if b.idx[f] >= 0 {
				return nil, fmt.Errorf("schema: column %q appears twice", col.Name)
			}
			b.idx[f] = i
			b.oid[f], b.mod[f] = col.TypeOID, col.TypMod
		}
	}
	var missing []string
	for f := fID; f <= fPayload; f++ {
		if b.idx[f] < 0 && !(f == fType && c.PassThrough) && !(c.AnyShape && c.PassThrough) {
			missing = append(missing, names[f])
		}
	}
	for _, a := range c.Additional {
		b.envelope = b.envelope || a.Placement == PlaceEnvelope
		i := columnIndex(cols, a.Column)
		if i < 0 {
			if !c.IgnoreMissingAdditional {
				missing = append(missing, a.Column)
			}
			continue
		}
		if a.Alias == "" {
			a.Alias = a.Column
		}
		if a.Placement == PlacePartition && cols[i].TypeOID != oidInt4 {
			return nil, fmt.Errorf("%w: %s: a partition placement reads an integer column (Debezium's int32)", ErrColumnType, a.Column)
		}
		b.add = append(b.add, a)
		b.addI = append(b.addI, i)
	}
	if c.SchemaVersion != "" {
		if b.versionI = columnIndex(cols, c.SchemaVersion); b.versionI < 0 {
			missing = append(missing, c.SchemaVersion)
		} else if cols[b.versionI].TypeOID != oidInt4 {
			return nil, fmt.Errorf("%w: %s: the schema version column must be an integer column (Debezium's int32)", ErrColumnType, c.SchemaVersion)
		}
	}
	b.traceI = columnIndex(cols, c.Trace)
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrMissingColumn, strings.Join(missing, ", "))
	}
	if c.PassThrough && b.idx[fTime] >= 0 && b.oid[fTime] != oidTimestamp && b.oid[fTime] != oidTimestamptz {
		return nil, fmt.Errorf("%w: %s: the Kafka timestamp column (table.field.event.timestamp) must be a timestamp or timestamptz column", ErrColumnType, names[fTime])
	}
	if !c.PassThrough && b.idx[fTime] >= 0 && b.oid[fTime] != oidTimestamp && b.oid[fTime] != oidTimestamptz {
		switch {
		case timeDefaulted:
			// A created_at of the table's own of another type (epoch
			// milliseconds, say) is not an event time: the commit
			// time is.
			b.idx[fTime] = -1
		case b.oid[fTime] != oidText && b.oid[fTime] != oidVarchar:
			return nil, fmt.Errorf("%w: %s: the event time column must be a timestamp or timestamptz column (or text in ISO form)", ErrColumnType, names[fTime])
		}
	}
	if headersDefaulted && b.idx[fHeaders] >= 0 && b.oid[fHeaders] != oidJSON && b.oid[fHeaders] != oidJSONB {
		// A text column of the table's own under that name (seed 004's
		// transfer_events) holds metadata in its own format: read as
		// extensions, every row whose value is not a flat object of
		// lower-case names would go to the dead-letter topic instead of
		// its own. It is read when named.
		b.unreadHeaders, b.idx[fHeaders] = names[fHeaders], -1
	}
	if headersDefaulted && b.idx[fHeaders] >= 0 {
		b.defaultHeaders = names[fHeaders]
	}
	if !c.PassThrough && b.idx[fTime] >= 0 && b.oid[fTime] == oidTimestamp && c.Zone != nil && c.Zone != time.UTC {
		b.zone = c.Zone
	}
	return b, nil
}

// BindAny binds what it can of a table's columns, for reading a row that
// cannot become a record ([Binding.RawID], [Binding.RawAggregateID]): a
// missing column reads as "". It never fails; its Record always does.
func (c Columns) BindAny(cols []Column) *Binding {
	names := c.withDefaults().fields()
	b := &Binding{ncols: len(cols), name: names, cols: cols, partial: true, versionI: -1, traceI: -1}
	for f := range b.idx {
		b.idx[f] = -1
		if names[f] != "" {
			b.idx[f] = columnIndex(cols, names[f])
		}
		if b.idx[f] >= 0 {
			b.oid[f] = cols[b.idx[f]].TypeOID
		}
	}
	return b
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

	Payload []byte // JSON text; under PassThrough the column's text, nil for NULL
	Headers []byte // JSON object text, or nil
	Time    time.Time

	// Timestamp is the Kafka record's timestamp from the time column
	// under PassThrough; zero lets the producer set it.
	Timestamp time.Time
	// Version is the schema version column's value; nil when there is
	// none or it is NULL.
	Version *int32
	// TraceParent and TraceState are the row's W3C trace context, from
	// the trace column; empty when it has none (or none valid).
	TraceParent, TraceState string

	// Origin says where the row came from; the caller fills it in.
	Origin Origin
	// Message: the row is a logical decoding message's JSON, which
	// DecodeLogicalDecodingMessageContent parsed whole, its payload
	// included: the Debezium formats expand a JSON payload as
	// table.expand.json.payload does, whatever that says, and write no
	// context headers, as Debezium's message records have none.
	Message bool

	// Additional holds the values of Columns.Additional, in that order.
	Additional []FieldValue

	// Columns and Values are the whole row in table order, as given to
	// [Binding.Record] (aliased, not copied), for envelopes that carry
	// every column (Debezium's change event). Nil when the record was not
	// built by a Binding.
	Columns []Column
	Values  [][]byte
	// Op is the row's operation (Debezium's change event): an insert,
	// an update or a delete, whose Values are the row it deleted.
	Op Op
	// Before is the row before an update or a delete, as the change
	// event's before carries it, in table order like Values; nil when
	// there is none (an insert, or an update of which the server sent no
	// old row).
	Before [][]byte
	// MovedKey is, for the delete and the create Debezium makes of an
	// update that moved its row to another key, the other row (the new
	// one for the delete, the old one for the create), whose key the
	// change event carries in a header (NewKeyHeader, OldKeyHeader).
	MovedKey [][]byte

	bind  *Binding // the binding that built the record, for column types
	nulls uint8    // bit f set: field f's column is NULL (PassThrough)
}

// null reports whether field f's column was NULL (only under PassThrough;
// elsewhere a NULL is a RowError).
func (r *Record) null(f int) bool { return r.nulls&(1<<f) != 0 }

// Op is a row's operation, as a change event's op names it.
type Op uint8

const (
	// OpInsert is an insert (op c), or a snapshot's read (op r).
	OpInsert Op = iota
	// OpUpdate is an update (op u).
	OpUpdate
	// OpDelete is a delete (op d).
	OpDelete
	// OpTruncate is a table's truncate (op t): no key, no row.
	OpTruncate
)

// FieldValue is one additional column's value.
type FieldValue struct {
	Column    string // the table's column
	Alias     string // the name it takes in the message
	Placement Placement
	TypeOID   uint32
	TypMod    int32
	Mapper    ColumnMapper // the column's (Column.Mapper)
	Value     []byte       // text format; nil is SQL NULL
}

func (v FieldValue) typ() pgType { return pgType{oid: v.TypeOID, mod: v.TypMod, mapper: v.Mapper} }

// Origin is where a record came from, for envelopes that carry it (such as
// Debezium's source block). The CloudEvents envelopes do not use it.
type Origin struct {
	Database, Schema, Table string
	// LSN is the row's WAL position, 0 for a polled row. LastCommitLSN is
	// the end of the last commit read before the row's transaction, 0 for
	// none.
	LSN, LastCommitLSN uint64
	TxID               uint64
	CommitTime         time.Time
	// Snapshot places a row a snapshot read in it; zero for a row that
	// committed after the pipeline's start.
	Snapshot SnapshotMark
	// Tx is the change event's transaction block, zero (null) unless
	// transaction metadata is written (txmeta.go).
	Tx TxBlock
}

// SnapshotMark places a row a snapshot read within it, as Debezium's
// source.snapshot does (its SnapshotRecord): the change event of such a
// row is a read (op r). The zero value is a row of the stream.
type SnapshotMark uint8

const (
	// SnapshotRow is a row of the snapshot none of the others names.
	SnapshotRow SnapshotMark = iota + 1
	// SnapshotFirst is the first row of the snapshot's first table.
	SnapshotFirst
	// SnapshotFirstInTable is the first row of a later table.
	SnapshotFirstInTable
	// SnapshotLastInTable is the last row of a table, other than the
	// snapshot's last.
	SnapshotLastInTable
	// SnapshotLast is the snapshot's last row.
	SnapshotLast
)

// MarkSnapshot is the mark of a row by its place, with Debezium's
// precedence: the snapshot's last, its first, a table's last, a table's
// first.
func MarkSnapshot(firstInSnapshot, lastInSnapshot, firstInTable, lastInTable bool) SnapshotMark {
	switch {
	case lastInSnapshot:
		return SnapshotLast
	case firstInSnapshot:
		return SnapshotFirst
	case lastInTable:
		return SnapshotLastInTable
	case firstInTable:
		return SnapshotFirstInTable
	}
	return SnapshotRow
}

// String is the mark as Debezium's source.snapshot writes it.
func (m SnapshotMark) String() string {
	switch m {
	case SnapshotRow:
		return "true"
	case SnapshotFirst:
		return "first"
	case SnapshotFirstInTable:
		return "first_in_data_collection"
	case SnapshotLastInTable:
		return "last_in_data_collection"
	case SnapshotLast:
		return "last"
	}
	return "false"
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
// Rules, each violation a [*RowError] naming the table's column (under
// PassThrough only a NULL aggregatetype is one, see [Columns]):
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
	if b.partial {
		return Record{}, ErrMissingColumn
	}
	if b.passThrough {
		return b.passRecord(values, commitTime)
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
		if b.zone != nil {
			// The wall time parsed as UTC, read in the server's zone.
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), b.zone).UTC()
		}
	}

	r := b.record(values, total)
	r.Payload, r.Headers, r.Time = payload, headers, t
	return r, nil
}

// record fills what both rule sets share: the four text fields (in one
// allocation), the additional fields, the trace context and the row.
func (b *Binding) record(values [][]byte, total int) Record {
	var sb strings.Builder
	sb.Grow(total)
	for f := fID; f <= fType; f++ {
		if i := b.idx[f]; i >= 0 {
			sb.Write(values[i])
		}
	}
	all := sb.String()
	var s [4]string
	off := 0
	for f := fID; f <= fType; f++ {
		if i := b.idx[f]; i >= 0 {
			n := len(values[i])
			s[f] = all[off : off+n]
			off += n
		}
	}
	var add []FieldValue
	if len(b.add) > 0 {
		add = make([]FieldValue, len(b.add))
		for i, a := range b.add {
			add[i] = FieldValue{Column: a.Column, Alias: a.Alias, Placement: a.Placement,
				TypeOID: b.cols[b.addI[i]].TypeOID, TypMod: b.cols[b.addI[i]].TypMod, Mapper: b.cols[b.addI[i]].Mapper, Value: values[b.addI[i]]}
		}
	}
	r := Record{
		ID:            s[fID],
		AggregateType: s[fAggregateType],
		AggregateID:   s[fAggregateID],
		Type:          s[fType],
		Additional:    add,
		Columns:       b.cols,
		Values:        values,
		bind:          b,
	}
	if b.traceI >= 0 && values[b.traceI] != nil {
		r.TraceParent, r.TraceState = parseTraceContext(values[b.traceI])
	}
	return r
}

// passRecord builds a record under PassThrough: values are taken as they
// are, as Debezium's router takes them.
func (b *Binding) passRecord(values [][]byte, commitTime time.Time) (Record, error) {
	var (
		total int
		nulls uint8
	)
	for f := fID; f <= fType; f++ {
		i := b.idx[f]
		if i < 0 || values[i] == nil {
			if f == fAggregateType && !b.anyShape {
				return Record{}, &RowError{Column: b.name[f], Reason: "null aggregate type (Debezium's router fails on it: the topic is routed by it)"}
			}
			nulls |= 1 << f
			continue
		}
		total += len(values[i])
	}
	r := b.record(values, total)
	r.nulls = nulls
	if i := b.idx[fPayload]; i >= 0 {
		r.Payload = values[i]
	}
	if r.Payload == nil {
		r.nulls |= 1 << fPayload
	}
	r.Time = commitTime
	if i := b.idx[fTime]; i >= 0 && values[i] != nil {
		t, reason := parseTimestamp(values[i])
		if reason != "" {
			return Record{}, &RowError{Column: b.name[fTime], Reason: reason}
		}
		// Debezium converts its micro- or milliseconds with Java's
		// division, which truncates toward zero (before 1970 too).
		r.Time, r.Timestamp = t, time.UnixMilli(t.UnixMicro()/1000)
	}
	if b.versionI >= 0 && values[b.versionI] != nil {
		v, err := strconv.ParseInt(string(values[b.versionI]), 10, 32)
		if err != nil {
			return Record{}, &RowError{Column: b.cols[b.versionI].Name, Reason: "malformed integer"}
		}
		v32 := int32(v)
		r.Version = &v32
	}
	return r, nil
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

// NullAggregateID reports whether the row's aggregate id is NULL: a row of
// no aggregate (it has a null key under PassThrough).
func (b *Binding) NullAggregateID(values [][]byte) bool {
	i := b.idx[fAggregateID]
	return i < 0 || i >= len(values) || values[i] == nil
}

// RawAggregateID returns the row's aggregate id as text, or "" when NULL.
func (b *Binding) RawAggregateID(values [][]byte) string { return b.raw(fAggregateID, values) }

func (b *Binding) raw(f int, values [][]byte) string {
	if i := b.idx[f]; i >= 0 && i < len(values) && values[i] != nil {
		return string(values[i])
	}
	return ""
}

// UnavailablePlaceholder is what a change event carries for a TOAST value
// an update left unchanged, which the server does not send: Debezium's
// unavailable.value.placeholder default.
const UnavailablePlaceholder = "__debezium_unavailable_value"

// Unavailable is the text value standing for col's unchanged TOAST value,
// placeholder (nil: UnavailablePlaceholder), as Debezium's connector gives
// it for a string, JSON, XML or bytea column; nil (a NULL) for the types
// it has no placeholder of here.
func Unavailable(col Column, placeholder []byte) []byte {
	if placeholder == nil {
		placeholder = []byte(UnavailablePlaceholder)
	}
	switch {
	case stringColumn(col.TypeOID), col.TypeOID == oidJSON, col.TypeOID == oidJSONB, col.TypeOID == oidXML:
		return placeholder
	case col.TypeOID == oidBytea:
		return []byte(`\x` + hex.EncodeToString(placeholder))
	}
	return nil
}
