package schema

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Converter is how a part of a Debezium-format message (key, value or
// header) is serialized, after the Kafka Connect converter its users
// configure.
type Converter string

// The converters.
const (
	// ConvString is StringConverter (keys, values) or
	// SimpleHeaderConverter (headers): the value's text.
	ConvString Converter = "string"
	// ConvJSON is JsonConverter with schemas.enable=false.
	ConvJSON Converter = "json"
	// ConvJSONSchemas is JsonConverter with schemas.enable=true:
	// {"schema":…,"payload":…}.
	ConvJSONSchemas Converter = "json-schemas"
	// ConvByteArray is Kafka's ByteArrayConverter: a bytea column's bytes
	// as they are; any other type is refused.
	ConvByteArray Converter = "bytearray"
	// ConvBinary is Debezium's BinaryDataConverter: a bytea column's bytes
	// as they are, anything else through its delegate
	// (delegate.converter.type), written "binary:json" and so on; without
	// a delegate, anything else is refused.
	ConvBinary Converter = "binary"
)

// ParseConverter returns the converter named s; "" gives "" (the format's
// default).
func ParseConverter(s string) (Converter, error) {
	c := Converter(s)
	switch c.base() {
	case "", ConvString, ConvJSON, ConvJSONSchemas, ConvByteArray:
		if c.base() == c {
			return c, nil
		}
	case ConvBinary:
		switch c.delegate() {
		case "":
			if c == ConvBinary {
				return c, nil
			}
		case ConvString, ConvJSON, ConvJSONSchemas, ConvByteArray:
			return c, nil
		}
	}
	return "", fmt.Errorf("schema: unknown converter %q (want %q, %q, %q, %q, %q or %q+a delegate such as %q)",
		s, ConvString, ConvJSON, ConvJSONSchemas, ConvByteArray, ConvBinary, ConvBinary, ConvBinary+":"+ConvJSON)
}

// base is the converter without its delegate.
func (c Converter) base() Converter {
	b, _, _ := strings.Cut(string(c), ":")
	return Converter(b)
}

// delegate is a binary converter's delegate, "" for none.
func (c Converter) delegate() Converter {
	_, d, _ := strings.Cut(string(c), ":")
	return Converter(d)
}

// For returns the converter that writes a value of the given Postgres type:
// c itself, or a binary converter's delegate for a type other than bytea.
// ok is false when nothing can write it: a bytearray or a binary converter
// without a delegate given anything but bytes, or a string converter given
// bytes (StringConverter prints a Java object's name, such as
// "java.nio.HeapByteBuffer[pos=0 lim=3 cap=3]", for them).
func (c Converter) For(oid uint32) (Converter, bool) {
	switch {
	case c.base() == ConvBinary && oid != oidBytea:
		if c.delegate() == "" {
			return "", false
		}
		return c.delegate().For(oid)
	case c.base() == ConvBinary, c == ConvByteArray:
		if oid != oidBytea {
			return "", false
		}
		return ConvByteArray, true
	case c == ConvString && oid == oidBytea:
		return "", false
	}
	return c, true
}

// ForStruct returns the converter that writes a struct value (envelope
// placements, an expanded payload); ok is false when none can.
func (c Converter) ForStruct() (Converter, bool) {
	if c.base() == ConvBinary {
		c = c.delegate()
	}
	return c, c == ConvJSON || c == ConvJSONSchemas
}

// DebeziumConfig configures the [DebeziumOutbox] and [Debezium] formats.
type DebeziumConfig struct {
	// Key, Value and Header are the converters. Defaults: for the outbox
	// format a string key, a JSON value without schemas and string
	// headers; for the change event a JSON key and value without schemas.
	Key, Value, Header Converter
	// ExpandJSONPayload is the outbox router's table.expand.json.payload.
	ExpandJSONPayload bool
	// TopicPrefix is Debezium's topic.prefix: source.name and the schema
	// names ("<prefix>.<schema>.<table>.Value"). Default "pgoutbox".
	TopicPrefix string
	// Version is source.version in change events. Default "pgoutbox".
	Version string
	// NotNull says which columns are NOT NULL, for the "optional" flags
	// of schemas; a column not in it is optional. cmd reads it from the
	// catalog.
	NotNull map[string]bool
	// KeyColumns are the primary key columns, the change event's key.
	// Default: the id column.
	KeyColumns []string
	// Now is the clock for the change event's ts_ms; default time.Now.
	Now func() time.Time
	// ContextHeaders adds the headers Debezium's connectors put on every
	// record (extended.headers.enabled, on by default in Debezium), first:
	// __debezium.context.connectorLogicalName (TopicPrefix), .taskId
	// ("0"), .connectorName ("postgresql") and .runId (RunID).
	ContextHeaders bool
	// RunID identifies the run in the context headers; default a new
	// UUID (version 7) for each encoder, as Debezium draws one per task
	// start.
	RunID string
	// TombstoneOnEmpty is the outbox router's
	// route.tombstone.on.empty.payload: a NULL payload, or a text payload
	// of only white space, gives a null value (a tombstone), key and
	// headers kept.
	TombstoneOnEmpty bool
}

func (c DebeziumConfig) withDefaults(f Format) DebeziumConfig {
	if c.Key == "" {
		c.Key = ConvString
		if f == Debezium {
			c.Key = ConvJSON
		}
	}
	if c.Value == "" {
		c.Value = ConvJSON
	}
	if c.Header == "" {
		c.Header = ConvString
	}
	if c.TopicPrefix == "" {
		c.TopicPrefix = "pgoutbox"
	}
	if c.Version == "" {
		c.Version = "pgoutbox"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.ContextHeaders && c.RunID == "" {
		c.RunID = newRunID(c.Now())
	}
	return c
}

// newRunID returns a UUID of version 7 (RFC 9562): the time in
// milliseconds, then random bits.
func newRunID(now time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[6:])
	ms := uint64(now.UnixMilli())
	for i := 0; i < 6; i++ {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// appendContextHeaders appends the context headers when configured.
func (c *DebeziumConfig) appendContextHeaders(buf []byte, hs []Header) ([]byte, []Header, string) {
	if !c.ContextHeaders {
		return buf, hs, ""
	}
	for _, h := range [...]struct{ key, v string }{
		{"__debezium.context.connectorLogicalName", c.TopicPrefix}, {"__debezium.context.taskId", "0"},
		{"__debezium.context.connectorName", "postgresql"}, {"__debezium.context.runId", c.RunID},
	} {
		var (
			v      []byte
			reason string
		)
		if buf, v, reason = appendConvertedPart(buf, c.Header, pgType{oidText, -1}, []byte(h.v), false); reason != "" {
			return buf, hs, reason
		}
		hs = append(hs, Header{Key: h.key, Value: v})
	}
	return buf, hs, ""
}

func (c DebeziumConfig) validate(f Format) error {
	for _, v := range []Converter{c.Key, c.Value, c.Header} {
		if _, err := ParseConverter(string(v)); err != nil {
			return err
		}
	}
	c = c.withDefaults(f)
	if f == Debezium {
		for _, v := range []Converter{c.Key, c.Value} {
			if _, ok := v.ForStruct(); !ok {
				return errors.New("schema: the debezium change event is a struct: use a json key and value converter")
			}
		}
		if c.Key == ConvJSONSchemas || c.Value == ConvJSONSchemas {
			return errors.New("schema: the debezium change event with schemas (json-schemas) is not supported yet: use json")
		}
	}
	return nil
}

// optional reports whether a column is nullable, for schemas.
func (c *DebeziumConfig) optional(column string) bool { return !c.NotNull[column] }

// columnOID returns the type of the record's column for field f.
func (r *Record) columnOID(f int) uint32 {
	if r.bind == nil {
		return oidText
	}
	return r.bind.oid[f]
}

// columnType is columnOID with the column's type modifier.
func (r *Record) columnType(f int) pgType {
	if r.bind == nil {
		return pgType{oidText, -1}
	}
	return r.bind.typ(f)
}

func (r *Record) columnName(f int) string {
	if r.bind == nil {
		return fieldNames[f]
	}
	return r.bind.name[f]
}

// appendConverted writes a column value through a converter. For
// ConvJSONSchemas it wraps it as {"schema":…,"payload":…}. isNull is set
// when the converter writes no bytes at all but a null (Kafka's null key,
// value or header value): StringConverter, ByteArrayConverter and
// BinaryDataConverter do for a NULL; JsonConverter writes null as JSON.
func appendConverted(dst []byte, conv Converter, t pgType, text []byte, optional bool) (out []byte, isNull bool, reason string) {
	conv, ok := conv.For(t.oid)
	if !ok {
		return dst, false, "the converter cannot write a value of this column's type"
	}
	switch conv {
	case ConvString:
		if isNullValue(t, text) {
			return dst, true, ""
		}
		out, reason = appendStringValue(dst, t, text)
		return out, false, reason
	case ConvByteArray:
		if isNullValue(t, text) {
			return dst, true, ""
		}
		b, ok := decodeByteaHex(text)
		if !ok {
			return dst, false, "malformed bytea (hex output expected)"
		}
		return append(dst, b...), false, ""
	case ConvJSON:
		out, reason = appendConnectValue(dst, t, text)
		return out, false, reason
	}
	ct, _ := connectTypeOf(t)
	if ct.typ == "" {
		ct = connectType{typ: "string"}
	}
	dst = append(dst, `{"schema":`...)
	dst = appendConnectSchema(dst, ct, optional, "")
	dst = append(dst, `,"payload":`...)
	dst, reason = appendConnectValue(dst, t, text)
	return append(dst, '}'), false, reason
}

// appendConvertedPart appends one converted part and returns its slice of dst; nil
// for a null.
func appendConvertedPart(dst []byte, conv Converter, t pgType, text []byte, optional bool) ([]byte, []byte, string) {
	start := len(dst)
	dst, isNull, reason := appendConverted(dst, conv, t, text, optional)
	if isNull {
		return dst, nil, reason
	}
	return dst, dst[start:len(dst):len(dst)], reason
}

// setPartition sets msg's partition from r's partition placement, if any
// and not NULL.
func setPartition(msg *Message, r *Record) error {
	for _, a := range r.Additional {
		if a.Placement != PlacePartition || a.Value == nil {
			continue
		}
		p, err := strconv.ParseInt(string(a.Value), 10, 32)
		if err != nil || p < 0 {
			return &RowError{Column: a.Column, Reason: "not a partition number"}
		}
		msg.Partition, msg.HasPartition = int32(p), true
	}
	return nil
}

// blankPayload reports whether Debezium's router takes the payload for
// empty: null, or text whose Java trim() is empty (every character at or
// below U+0020). A bytea payload is never blank: Debezium tests the
// toString of its ByteBuffer.
func blankPayload(r *Record) bool {
	if r.null(fPayload) {
		return true
	}
	if r.columnOID(fPayload) == oidBytea {
		return false
	}
	for _, c := range r.Payload {
		if c > ' ' {
			return false
		}
	}
	return true
}

// encodeDebeziumOutbox writes what Debezium's Outbox Event Router
// (EventRouterDelegate.apply) emits for the row, after the converters:
//   - key: the aggregate id column's value (null for a NULL under the
//     string, bytearray and binary converters);
//   - value: the payload column's value (a JSON string under JsonConverter,
//     or the expanded document with table.expand.json.payload), or, when
//     additional fields are placed in the envelope, a struct of payload
//     and those fields; null for a blank payload with TombstoneOnEmpty;
//   - headers: traceparent and tracestate (the row's trace context, as
//     Debezium's tracing injects them, before the router adds its own),
//     "id" (the id column), then the header placements in order;
//   - timestamp and partition: the time column and the partition
//     placement's, when set.
//
// The topic is the router's business (route.topic.regex/replacement).
func (e *Encoder) encodeDebeziumOutbox(r *Record) (Message, error) {
	c := &e.dbz
	var (
		buf    = make([]byte, 0, len(r.AggregateID)+2*len(r.Payload)+len(r.TraceParent)+len(r.TraceState)+64)
		reason string
		msg    Message
	)
	msg.Timestamp = r.Timestamp
	// Key.
	var keyText []byte
	if !r.null(fAggregateID) {
		keyText = []byte(r.AggregateID)
	}
	if buf, msg.Key, reason = appendConvertedPart(buf, c.Key, r.columnType(fAggregateID), keyText, c.optional(r.columnName(fAggregateID))); reason != "" {
		return Message{}, &RowError{Column: r.columnName(fAggregateID), Reason: reason}
	}

	// The payload as a Connect value: a Json string, or expanded.
	payloadType := r.columnType(fPayload)
	payloadCT, _ := connectTypeOf(payloadType)
	if payloadCT.typ == "" {
		payloadCT = connectType{typ: "string"}
	}
	var (
		expSchema *cschema
		expValue  []byte
	)
	if c.ExpandJSONPayload && payloadCT.typ == "string" && r.Payload != nil {
		if s, v, err := expandPayload(r.columnName(fPayload), r.Payload); err == nil {
			expSchema, expValue = s, v
		}
	}
	appendPayloadSchema := func(dst []byte, field string) []byte {
		if expSchema != nil {
			return appendCSchema(dst, expSchema, field)
		}
		return appendConnectSchema(dst, payloadCT, c.optional(r.columnName(fPayload)), field)
	}
	appendPayloadValue := func(dst []byte) ([]byte, string) {
		if expSchema != nil {
			return append(dst, expValue...), ""
		}
		return appendConnectValue(dst, payloadType, r.Payload)
	}

	var envelope []FieldValue
	for _, a := range r.Additional {
		switch a.Placement {
		case PlaceEnvelope:
			envelope = append(envelope, a)
		}
	}
	// A struct even when every envelope column is missing (and ignored):
	// {payload} alone.
	isStruct := len(envelope) > 0 || r.bind != nil && r.bind.envelope
	if err := setPartition(&msg, r); err != nil {
		return Message{}, err
	}
	valueStart := len(buf)
	valueNull := false
	switch {
	case c.TombstoneOnEmpty && blankPayload(r):
		valueNull = true
	case !isStruct && expSchema == nil:
		var v []byte
		buf, v, reason = appendConvertedPart(buf, c.Value, payloadType, r.Payload, c.optional(r.columnName(fPayload)))
		valueNull = v == nil
	default:
		conv, ok := c.Value.ForStruct()
		if !ok {
			return Message{}, errors.New("schema: the value converter cannot write a struct value (envelope fields or an expanded payload)")
		}
		if conv == ConvJSONSchemas && !isStruct {
			buf = append(buf, `{"schema":`...)
			buf = appendPayloadSchema(buf, "")
			buf = append(buf, `,"payload":`...)
			buf, reason = appendPayloadValue(buf)
			buf = append(buf, '}')
			break
		}
		if !isStruct {
			buf, reason = appendPayloadValue(buf)
			break
		}
		if conv == ConvJSONSchemas {
			buf = append(buf, `{"schema":{"type":"struct","fields":[`...)
			buf = appendPayloadSchema(buf, "payload")
			for _, a := range envelope {
				ct, _ := connectTypeOf(a.typ())
				if ct.typ == "" {
					ct = connectType{typ: "string"}
				}
				buf = append(buf, ',')
				buf = appendConnectSchema(buf, ct, c.optional(a.Column), a.Alias)
			}
			// EventRouterDelegate.getSchemaName: the after struct's name
			// with the routed value inserted before ".Value".
			buf = append(buf, `],"optional":false,"name":`...)
			buf = appendJavaString(buf, c.TopicPrefix+"."+r.Origin.Schema+"."+r.Origin.Table+"."+r.AggregateType+".Value")
			if r.Version != nil {
				buf = append(buf, `,"version":`...)
				buf = strconv.AppendInt(buf, int64(*r.Version), 10)
			}
			buf = append(buf, `},"payload":`...)
		}
		buf = append(buf, `{"payload":`...)
		if buf, reason = appendPayloadValue(buf); reason != "" {
			break
		}
		for _, a := range envelope {
			buf = append(buf, ',')
			buf = appendJavaString(buf, a.Alias)
			buf = append(buf, ':')
			if buf, reason = appendConnectValue(buf, a.typ(), a.Value); reason != "" {
				return Message{}, &RowError{Column: a.Column, Reason: reason}
			}
		}
		buf = append(buf, '}')
		if conv == ConvJSONSchemas {
			buf = append(buf, '}')
		}
	}
	if reason != "" {
		return Message{}, &RowError{Column: r.columnName(fPayload), Reason: reason}
	}
	if !valueNull {
		msg.Value = buf[valueStart:len(buf):len(buf)]
	}

	// Headers: the connector's context, the trace context, id, then the
	// header placements.
	hs := make([]Header, 0, 7+len(r.Additional)-len(envelope))
	if buf, hs, reason = c.appendContextHeaders(buf, hs); reason != "" {
		return Message{}, errors.New("schema: the header converter cannot write the context headers: " + reason)
	}
	for _, h := range [...]struct{ key, v string }{{"traceparent", r.TraceParent}, {"tracestate", r.TraceState}} {
		if h.v == "" {
			continue
		}
		var v []byte
		// A STRING schema, not optional: what Debezium's
		// KafkaConnectHeadersSetter adds.
		if buf, v, reason = appendConvertedPart(buf, c.Header, pgType{oidText, -1}, []byte(h.v), false); reason != "" {
			return Message{}, &RowError{Column: DefaultTraceColumn, Reason: reason}
		}
		hs = append(hs, Header{Key: h.key, Value: v})
	}
	var idText []byte
	if !r.null(fID) {
		idText = []byte(r.ID)
	}
	var v []byte
	if buf, v, reason = appendConvertedPart(buf, c.Header, r.columnType(fID), idText, c.optional(r.columnName(fID))); reason != "" {
		return Message{}, &RowError{Column: r.columnName(fID), Reason: reason}
	}
	hs = append(hs, Header{Key: "id", Value: v})
	for _, a := range r.Additional {
		if a.Placement != PlaceHeader {
			continue
		}
		if buf, v, reason = appendConvertedPart(buf, c.Header, a.typ(), a.Value, c.optional(a.Column)); reason != "" {
			return Message{}, &RowError{Column: a.Column, Reason: reason}
		}
		hs = append(hs, Header{Key: a.Alias, Value: v})
	}
	msg.Headers = hs
	return msg, nil
}

// encodeDebeziumChange writes Debezium's change event for an insert of the
// row (schemas off): key {pk columns}, value {before, after, source,
// transaction, op, ts_ms, ts_us, ts_ns}. Columns of types Debezium does not
// map are left out, as Debezium does (include.unknown.datatypes=false).
func (e *Encoder) encodeDebeziumChange(r *Record) (Message, error) {
	c := &e.dbz
	if r.Columns == nil || len(r.Columns) != len(r.Values) {
		return Message{}, errors.New("schema: the debezium change event needs the whole row (a Record built by a Binding)")
	}
	buf := make([]byte, 0, 512+2*len(r.Payload))
	var reason string

	keyCols := c.KeyColumns
	if len(keyCols) == 0 {
		keyCols = []string{r.columnName(fID)}
	}
	buf = append(buf, '{')
	for i, name := range keyCols {
		j := columnIndex(r.Columns, name)
		if j < 0 {
			return Message{}, fmt.Errorf("schema: key column %q is not in the table", name)
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendJavaString(buf, name)
		buf = append(buf, ':')
		if buf, reason = appendConnectValue(buf, r.Columns[j].typ(), r.Values[j]); reason != "" {
			return Message{}, &RowError{Column: name, Reason: reason}
		}
	}
	buf = append(buf, '}')
	k := len(buf)

	buf = append(buf, `{"before":null,"after":{`...)
	first := true
	for i, col := range r.Columns {
		if _, ok := connectTypeOf(col.typ()); !ok {
			continue
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = appendJavaString(buf, col.Name)
		buf = append(buf, ':')
		if buf, reason = appendConnectValue(buf, col.typ(), r.Values[i]); reason != "" {
			return Message{}, &RowError{Column: col.Name, Reason: reason}
		}
	}
	o := &r.Origin
	ct := o.CommitTime
	if ct.IsZero() {
		ct = r.Time
	}
	buf = append(buf, `},"source":{"version":`...)
	buf = appendJavaString(buf, c.Version)
	buf = append(buf, `,"connector":"postgresql","name":`...)
	buf = appendJavaString(buf, c.TopicPrefix)
	buf = append(buf, `,"ts_ms":`...)
	buf = strconv.AppendInt(buf, ct.UnixMilli(), 10)
	buf = append(buf, `,"snapshot":"`...)
	buf = append(buf, o.Snapshot.String()...)
	buf = append(buf, `","db":`...)
	buf = appendJavaString(buf, o.Database)
	buf = append(buf, `,"sequence":`...)
	if o.LSN == 0 {
		buf = append(buf, "null"...)
	} else {
		// Debezium: ["<end of the last commit read>","<LSN>"], null
		// for none (its lastCommitLsn).
		if o.LastCommitLSN == 0 {
			buf = append(buf, `"[null,\"`...)
		} else {
			buf = append(buf, `"[\"`...)
			buf = strconv.AppendUint(buf, o.LastCommitLSN, 10)
			buf = append(buf, `\",\"`...)
		}
		buf = strconv.AppendUint(buf, o.LSN, 10)
		buf = append(buf, `\"]"`...)
	}
	buf = append(buf, `,"ts_us":`...)
	buf = strconv.AppendInt(buf, ct.UnixMicro(), 10)
	buf = append(buf, `,"ts_ns":`...)
	buf = strconv.AppendInt(buf, ct.UnixNano(), 10)
	buf = append(buf, `,"schema":`...)
	buf = appendJavaString(buf, o.Schema)
	buf = append(buf, `,"table":`...)
	buf = appendJavaString(buf, o.Table)
	buf = append(buf, `,"txId":`...)
	if o.TxID == 0 {
		buf = append(buf, "null"...)
	} else {
		buf = strconv.AppendUint(buf, o.TxID, 10)
	}
	buf = append(buf, `,"lsn":`...)
	if o.LSN == 0 {
		buf = append(buf, "null"...)
	} else {
		buf = strconv.AppendUint(buf, o.LSN, 10)
	}
	now := c.Now()
	op := `,"xmin":null,"origin":null,"origin_lsn":null},"transaction":null,"op":"c","ts_ms":`
	if o.Snapshot != 0 {
		op = `,"xmin":null,"origin":null,"origin_lsn":null},"transaction":null,"op":"r","ts_ms":`
	}
	buf = append(buf, op...)
	buf = strconv.AppendInt(buf, now.UnixMilli(), 10)
	buf = append(buf, `,"ts_us":`...)
	buf = strconv.AppendInt(buf, now.UnixMicro(), 10)
	buf = append(buf, `,"ts_ns":`...)
	buf = strconv.AppendInt(buf, now.UnixNano(), 10)
	buf = append(buf, '}')
	v := len(buf)
	var hs []Header
	if buf, hs, reason = c.appendContextHeaders(buf, hs); reason != "" {
		return Message{}, errors.New("schema: the header converter cannot write the context headers: " + reason)
	}
	return Message{Key: buf[:k:k], Value: buf[k:v:v], Headers: hs}, nil
}
