package schema

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
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
	// ConvAvro is a schema registry's Avro converter (Apicurio's
	// io.apicurio.registry.utils.converter.AvroConverter, Confluent's
	// io.confluent.connect.avro.AvroConverter): the value's Avro binary
	// datum, with its Avro schema in the Message (KeySchema,
	// ValueSchema) for the registry to register and frame; a NULL is
	// Kafka's null. Header parts cannot be avro.
	ConvAvro Converter = "avro"
	// ConvDebeziumByteArray is Debezium 3's own ByteArrayConverter: a
	// byte[] as it is, anything else through its delegate, written
	// "debezium-bytearray:json" and so on. The connector's bytea values
	// are ByteBuffers, not byte[], so every value goes through the
	// delegate, but a NULL of a bytea column is a null. Without a
	// delegate (a header converter is never given one) it writes
	// nothing: Debezium's task fails.
	ConvDebeziumByteArray Converter = "debezium-bytearray"
	// ConvCloudEvents is Debezium's CloudEventsConverter, for the values
	// of change events: each a CloudEvent in JSON (structured mode) made
	// of the event's source block, its before and after the data, written
	// by its delegate, "cloudevents:json-schemas" (the default,
	// JsonConverter's schemas.enable) or "cloudevents:json";
	// "cloudevents:avro" writes the data with the registry's Avro
	// converter, "cloudevents:avro:avro" the event too. Package
	// transform writes it (Encoder.ConnectOnly).
	ConvCloudEvents Converter = "cloudevents"
	// ConvApicurioJSON is Apicurio's JSON converter (ExtJsonConverter)
	// for keys and values: the part as JsonConverter writes it without
	// schemas, its Connect schema registered in Apicurio Registry, framed
	// there as {"schemaId":…,"payload":…}. Package transform writes it
	// (Encoder.ConnectOnly), package registry frames it.
	ConvApicurioJSON Converter = "apicurio-json"
	// ConvText is what Debezium Server's sns sink sends of a value: the
	// Connect record's own value, a Java String as it is (StringConverter)
	// and anything else through its delegate, the converter the
	// configuration names, written "text:json-schemas" and so on. The
	// sink reads the record itself, bypassing the converter for text.
	ConvText Converter = "text"
)

// The number converters are Kafka's LongConverter, IntegerConverter,
// ShortConverter, FloatConverter, DoubleConverter and BooleanConverter:
// a part of that Connect type as Kafka's serializer of it writes it
// (big-endian; a boolean one byte), anything else failing the record.
// Package transform writes them (Encoder.ConnectOnly).
const (
	ConvLong    Converter = "long"
	ConvInteger Converter = "integer"
	ConvShort   Converter = "short"
	ConvFloat   Converter = "float"
	ConvDouble  Converter = "double"
	ConvBoolean Converter = "boolean"
)

// IsNumber tells one of the number converters.
func (c Converter) IsNumber() bool {
	switch c {
	case ConvLong, ConvInteger, ConvShort, ConvFloat, ConvDouble, ConvBoolean:
		return true
	}
	return false
}

// ParseConverter returns the converter named s; "" gives "" (the format's
// default).
func ParseConverter(s string) (Converter, error) {
	c := Converter(s)
	switch c.base() {
	case "", ConvString, ConvJSON, ConvJSONSchemas, ConvByteArray, ConvAvro, ConvApicurioJSON,
		ConvLong, ConvInteger, ConvShort, ConvFloat, ConvDouble, ConvBoolean:
		if c.base() == c {
			return c, nil
		}
	case ConvBinary, ConvDebeziumByteArray:
		switch c.delegate() {
		case "":
			if c == c.base() {
				return c, nil
			}
		case ConvString, ConvJSON, ConvJSONSchemas, ConvByteArray, ConvAvro:
			return c, nil
		}
	case ConvCloudEvents:
		switch c.delegate() {
		case "":
			if c == c.base() {
				return c + ":" + ConvJSONSchemas, nil
			}
		case ConvJSON, ConvJSONSchemas, ConvAvro, ConvAvro + ":" + ConvAvro:
			// avro: Avro data in a JSON event; avro:avro: an Avro event.
			return c, nil
		}
	case ConvText:
		if d, err := ParseConverter(string(c.delegate())); err == nil {
			switch d.base() {
			case ConvString, ConvJSON, ConvJSONSchemas, ConvByteArray, ConvBinary, ConvCloudEvents:
				return ConvText + ":" + d, nil
			}
		}
	}
	return "", fmt.Errorf("schema: unknown converter %q (want %q, %q, %q, %q, %q, %q, %q or %q, each of the last two with a delegate such as %q, %q with %q or %q, or a number converter: %q, %q, %q, %q, %q, %q)",
		s, ConvString, ConvJSON, ConvJSONSchemas, ConvByteArray, ConvAvro, ConvApicurioJSON, ConvBinary, ConvDebeziumByteArray, ConvBinary+":"+ConvJSON,
		ConvCloudEvents, ConvCloudEvents+":"+ConvJSONSchemas, ConvCloudEvents+":"+ConvJSON, ConvLong, ConvInteger, ConvShort, ConvFloat, ConvDouble, ConvBoolean)
}

// IsCloudEvents tells Debezium's CloudEventsConverter, with either delegate.
func (c Converter) IsCloudEvents() bool { return c.base() == ConvCloudEvents }

// base is the converter without its delegate.
func (c Converter) base() Converter {
	b, _, _ := strings.Cut(string(c), ":")
	return Converter(b)
}

// delegate is a binary or text converter's delegate, "" for none.
func (c Converter) delegate() Converter {
	_, d, _ := strings.Cut(string(c), ":")
	return Converter(d)
}

// writer returns the converter that writes a value of kind k (in a
// header when header is set): c itself, or a delegate. ok is false when
// nothing can write it: a bytearray or a binary converter without a
// delegate given anything but bytes, Debezium's bytearray converter
// without a delegate, or a string converter given bytes or a key or value
// given a java.util.Date (StringConverter prints a Java object's
// toString, such as "java.nio.HeapByteBuffer[pos=0 lim=3 cap=3]", or a
// date in the worker's time zone).
func (c Converter) writer(k javaKind, header bool) (Converter, bool) {
	switch b := c.base(); {
	case b == ConvText && k == javaString:
		return ConvString, true
	case b == ConvText && c.delegate().IsCloudEvents():
		return "", false // CloudEventsConverter writes a struct, and the column is none
	case b == ConvText:
		return c.delegate().writer(k, header)
	case b == ConvBinary && k != javaBytes, b == ConvDebeziumByteArray:
		if c.delegate() == "" {
			return "", false
		}
		return c.delegate().writer(k, header)
	case b == ConvBinary, c == ConvByteArray:
		if k != javaBytes {
			return "", false
		}
		return ConvByteArray, true
	case c == ConvString && k == javaBytes, c == ConvString && k == javaDate && !header:
		return "", false
	}
	return c, true
}

// ForStruct returns the converter that writes a struct value (envelope
// placements, an expanded payload); ok is false when none can.
func (c Converter) ForStruct() (Converter, bool) {
	if b := c.base(); b == ConvBinary || b == ConvDebeziumByteArray || b == ConvText {
		c = c.delegate()
	}
	return c, c == ConvJSON || c == ConvJSONSchemas || c == ConvAvro || c == ConvApicurioJSON
}

// DebeziumConfig configures the [DebeziumOutbox] and [Debezium] formats.
type DebeziumConfig struct {
	// Key, Value and Header are the converters. Defaults: for the outbox
	// format a string key, a JSON value without schemas and string
	// headers; for the change event a JSON key and value without schemas.
	Key, Value, Header Converter
	// ExpandJSONPayload is the outbox router's table.expand.json.payload.
	ExpandJSONPayload bool
	// JSONPayloadNullBytes is the router's
	// table.json.payload.null.behavior=optional_bytes: an expanded
	// payload's null fields are in its schema as optional bytes, not left
	// out.
	JSONPayloadNullBytes bool
	// MessageNullBytes is DecodeLogicalDecodingMessageContent's
	// fields.null.include, for the payload of a message's row (Record.Message).
	MessageNullBytes bool
	// TopicPrefix is Debezium's topic.prefix: source.name and the schema
	// names ("<prefix>.<schema>.<table>.Value"). Default "pgoutbox".
	TopicPrefix string
	// Version is source.version in change events. Default "pgoutbox".
	Version string
	// NotNull says which columns are NOT NULL, for the "optional" flags
	// of schemas; a column not in it is optional. cmd reads it from the
	// catalog.
	NotNull map[string]bool
	// Defaults are the columns' default expressions (pg_get_expr of
	// pg_attrdef), for the defaults of the change event's schemas under
	// json-schemas; a column not in it has none. cmd reads it from the
	// catalog.
	Defaults map[string]string
	// KeyColumns are the primary key columns, the change event's key.
	// Default: the id column, unless NullKey.
	KeyColumns []string
	// NullKey writes change events with a null key and no key schema,
	// as Debezium writes those of a table without a primary key (or
	// unique index) that message.key.columns names no column of. It
	// applies only when KeyColumns is empty; the outbox router's records
	// keep the aggregate id.
	NullKey bool
	// Tables are the shapes of a pipeline's other tables, by
	// "schema.table", whose NotNull, Defaults, KeyColumns and NullKey
	// differ from the ones above (the first table's): the change events
	// of tables of different columns. A table not in it has the ones
	// above.
	Tables map[string]TableShape
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
	// TimePrecision, DecimalHandling and BinaryHandling are the
	// connector's value options: how a column is typed wherever it
	// reaches a record (key, value, envelope fields, headers, the change
	// event's before and after). Defaults: adaptive, precise, bytes.
	TimePrecision   TimePrecision
	DecimalHandling DecimalHandling
	BinaryHandling  BinaryHandling
	// IntervalHandling is the connector's interval.handling.mode.
	// Default numeric.
	IntervalHandling IntervalHandling
	// CloudEventsMetadata is the value converter's metadata.source when
	// it is ConvCloudEvents.
	CloudEventsMetadata CloudEventsMetadata
	// ColumnMappings are the connector's column truncations and masks
	// (ParseColumnMappings), which MapColumns and MapValues apply.
	ColumnMappings []ColumnMapping
	// ColumnFilter is column.include.list or column.exclude.list: the
	// columns MapColumns marks to leave out of the change event's before
	// and after, and their schema.
	ColumnFilter ColumnFilter

	vm           valueModes // the value options, compacted by withDefaults
	defaultCache *sync.Map  // defaultKey: the default as JSON; set by withDefaults
}

// TableShape is what a table's change events take from the catalog:
// DebeziumConfig's fields of the same names.
type TableShape struct {
	NotNull    map[string]bool
	Defaults   map[string]string
	KeyColumns []string
	NullKey    bool
}

// ForTable is c for the table schemaName.table: its shape from Tables
// where it has one there.
func (c DebeziumConfig) ForTable(schemaName, table string) DebeziumConfig {
	sh, ok := c.Tables[schemaName+"."+table]
	if !ok {
		return c
	}
	return c.withShape(sh)
}

// withShape is c with the table shape sh.
func (c DebeziumConfig) withShape(sh TableShape) DebeziumConfig {
	c.NotNull, c.Defaults, c.KeyColumns, c.NullKey = sh.NotNull, sh.Defaults, sh.KeyColumns, sh.NullKey
	c.defaultCache = nil
	if len(c.Defaults) > 0 {
		c.defaultCache = &sync.Map{}
	}
	return c
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
	c.vm, _ = c.modes() // validate reports a bad one
	if len(c.Defaults) > 0 {
		c.defaultCache = &sync.Map{}
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

// ContextHeaderPrefix starts the keys of the context headers Debezium's
// connectors put on every record (DebeziumConfig.ContextHeaders).
const ContextHeaderPrefix = "__debezium.context."

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
		if buf, v, reason = appendConvertedPart(buf, part{conv: c.Header, header: true}, pgType{oid: oidText, mod: -1}, c.vm, []byte(h.v), false); reason != "" {
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
	if _, err := c.modes(); err != nil {
		return err
	}
	c = c.withDefaults(f)
	if c.Header == ConvApicurioJSON {
		return errors.New("schema: Apicurio's JSON converter writes keys and values, not headers")
	}
	if c.Key.IsCloudEvents() || c.Header.IsCloudEvents() {
		return errors.New("schema: Debezium's CloudEventsConverter writes the values of change events: use it as the value converter")
	}
	switch m := c.CloudEventsMetadata; {
	case m != (CloudEventsMetadata{}) && !c.Value.IsCloudEvents():
		return errors.New("schema: a CloudEvents metadata source without Debezium's CloudEventsConverter as the value converter")
	case m.Headers && f != DebeziumOutbox:
		return fmt.Errorf("schema: Debezium's CloudEventsConverter with its metadata from headers is implemented after the Outbox Event Router (format %s)", DebeziumOutbox)
	case m.Headers && c.Header != ConvJSONSchemas:
		// RecordAndMetadataHeaderImpl reads them back with JsonConverter,
		// schemas enabled.
		return fmt.Errorf("schema: Debezium's CloudEventsConverter reads its metadata headers as JSON with schemas: the header converter must be %s, not %s (Debezium's task fails at the first record)", ConvJSONSchemas, c.Header)
	case c.Value.IsCloudEvents() && !m.Headers && f != Debezium:
		// metadata.source=value: a record that is not a change event
		// (the router's) is written as a null.
		return fmt.Errorf("schema: Debezium's CloudEventsConverter makes events of the connector's change events (format %s); after the Outbox Event Router it writes every value as a null unless its metadata comes from headers (metadata.source=header, with HeaderFrom$Value before the router copying source and op)", Debezium)
	}
	if f == Debezium {
		for _, v := range []Converter{c.Key, c.Value} {
			// A number converter writes a part a transform took out of
			// the struct (ExtractField$Key).
			if _, ok := v.ForStruct(); !ok && v != ConvString && !v.IsCloudEvents() && v != ConvApicurioJSON && !v.IsNumber() {
				return errors.New("schema: the debezium change event is a struct: use a json or string key and value converter")
			}
		}
	}
	return nil
}

// jsonSchemaData is how the router infers an expanded payload's schema.
func (c *DebeziumConfig) jsonSchemaData() jsonSchemaData {
	return jsonSchemaData{nullBytes: c.JSONPayloadNullBytes}
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
		return pgType{oid: oidText, mod: -1}
	}
	return r.bind.typ(f)
}

func (r *Record) columnName(f int) string {
	if r.bind == nil {
		return fieldNames[f]
	}
	return r.bind.name[f]
}

// A part of a message: its converter, and whether it is a header (a
// header converter is SimpleHeaderConverter where a key or value's is
// StringConverter).
type part struct {
	conv   Converter
	header bool
	def    []byte // the column's default as JSON, for its schema; nil for none
}

// appendConverted writes a column value through a part's converter under
// the value options m. For ConvJSONSchemas it wraps it as
// {"schema":…,"payload":…}. isNull is set when the converter writes no
// bytes at all but a null (Kafka's null key, value or header value):
// StringConverter, ByteArrayConverter and BinaryDataConverter do for a
// NULL, Debezium's ByteArrayConverter for a NULL bytea; JsonConverter
// writes null as JSON.
func appendConverted(dst []byte, p part, t pgType, m valueModes, text []byte, optional bool) (out []byte, isNull bool, reason string) {
	text = m.valueOf(t, text, optional)
	k := m.kindFor(p.conv, t)
	if text == nil && k == javaBytes && p.conv.base() == ConvDebeziumByteArray {
		return dst, true, ""
	}
	conv, ok := p.conv.writer(k, p.header)
	if !ok {
		return dst, false, "the converter cannot write a value of this column's type"
	}
	switch conv {
	case ConvString:
		if isNullValue(t, m, text) {
			return dst, true, ""
		}
		out, reason = appendStringValue(dst, t, m, text)
		return out, false, reason
	case ConvByteArray:
		if isNullValue(t, m, text) {
			return dst, true, ""
		}
		b, ok := decodeByteaHex(text)
		if !ok {
			return dst, false, "malformed bytea (hex output expected)"
		}
		return append(dst, b...), false, ""
	case ConvJSON:
		out, reason = appendConnectValue(dst, t, m, text)
		return out, false, reason
	case ConvAvro:
		if isNullValue(t, m, text) {
			return dst, true, ""
		}
		if optional {
			// The union's second branch, or its first, before null, for
			// a column with a default.
			branch := byte(2)
			if p.def != nil {
				branch = 0
			}
			dst = append(dst, branch)
		}
		out, reason = appendAvroValue(dst, t, m, text)
		return out, false, reason
	}
	ct, _ := connectTypeOf(t, m)
	if ct.typ == "" {
		ct = connectType{typ: "string"}
	}
	dst = append(dst, `{"schema":`...)
	dst = appendConnectField(dst, ct, optional, p.def, "")
	dst = append(dst, `,"payload":`...)
	dst, reason = appendConnectValue(dst, t, m, text)
	return append(dst, '}'), false, reason
}

// appendConvertedPart appends one converted part and returns its slice of dst; nil
// for a null.
func appendConvertedPart(dst []byte, p part, t pgType, m valueModes, text []byte, optional bool) ([]byte, []byte, string) {
	start := len(dst)
	dst, isNull, reason := appendConverted(dst, p, t, m, text, optional)
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
// below U+0020). A bytea payload is never blank under
// binary.handling.mode=bytes (Debezium tests the toString of its
// ByteBuffer), and blank when empty under the others (its string is "").
func blankPayload(r *Record, m valueModes) bool {
	if r.null(fPayload) {
		return true
	}
	if r.columnOID(fPayload) == oidBytea {
		return m.binary != binaryBytes && string(r.Payload) == `\x`
	}
	for _, c := range r.Payload {
		if c > ' ' {
			return false
		}
	}
	return true
}

// payloadString is the payload as the router's JSON expansion reads it:
// the column's text, or a bytea's string under binary.handling.mode.
func payloadString(r *Record, m valueModes) []byte {
	if r.columnOID(fPayload) == oidBytea {
		if b, ok := decodeByteaHex(r.Payload); ok {
			return appendBinaryString(nil, m, b)
		}
	}
	return r.Payload
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
	buf := make([]byte, 0, len(r.AggregateID)+2*len(r.Payload)+len(r.TraceParent)+len(r.TraceState)+64)
	msg := Message{Timestamp: r.Timestamp}
	var err error
	if buf, msg.Key, msg.KeySchema, err = c.appendOutboxKey(buf, r); err != nil {
		return Message{}, err
	}
	var payload outboxPayload
	payload.read(c, r)
	var envelope []FieldValue
	for _, a := range r.Additional {
		if a.Placement == PlaceEnvelope {
			envelope = append(envelope, a)
		}
	}
	if err := setPartition(&msg, r); err != nil {
		return Message{}, err
	}
	valueStart := len(buf)
	var valueNull bool
	if buf, valueNull, msg.ValueSchema, err = c.appendOutboxValue(buf, r, &payload, envelope); err != nil {
		return Message{}, err
	}
	if !valueNull {
		msg.Value = buf[valueStart:len(buf):len(buf)]
	}
	if _, msg.Headers, err = c.appendOutboxHeaders(buf, r, len(envelope)); err != nil {
		return Message{}, err
	}
	return msg, nil
}

// outboxPayload is the payload column as the router's Connect value: a
// value of its column's type, or the document table.expand.json.payload
// expanded it into.
type outboxPayload struct {
	typ      pgType
	ct       connectType
	optional bool
	def      []byte // the column's default, for its schema
	// expSchema and expValue are the expanded document (nil: not
	// expanded).
	expSchema *cschema
	expValue  []byte
}

// read sets p from r's payload column under c.
func (p *outboxPayload) read(c *DebeziumConfig, r *Record) {
	p.typ, p.optional = r.columnType(fPayload), c.optional(r.columnName(fPayload))
	p.def = c.defaultJSON(r.columnName(fPayload), p.typ)
	p.ct, _ = connectTypeOf(p.typ, c.vm)
	if p.ct.typ == "" {
		p.ct = connectType{typ: "string"}
	}
	expand, jsd := c.ExpandJSONPayload, c.jsonSchemaData()
	if r.Message {
		expand, jsd = true, jsonSchemaData{nullBytes: c.MessageNullBytes}
	}
	if expand && p.ct.typ == "string" && r.Payload != nil {
		if s, v, err := jsd.expandPayload(r.columnName(fPayload), payloadString(r, c.vm)); err == nil {
			p.expSchema, p.expValue = s, v
		}
	}
}

// appendSchema appends the payload's Connect schema as field.
func (p *outboxPayload) appendSchema(dst []byte, field string) []byte {
	if p.expSchema != nil {
		return appendCSchema(dst, p.expSchema, field)
	}
	return appendConnectField(dst, p.ct, p.optional, p.def, field)
}

// appendValue appends the payload's Connect value as JSON, or why it
// cannot be written.
func (p *outboxPayload) appendValue(dst []byte, m valueModes, text []byte) ([]byte, string) {
	if p.expSchema != nil {
		return append(dst, p.expValue...), ""
	}
	return appendConnectValue(dst, p.typ, m, text)
}

// appendOutboxValue appends the router's value after the value
// converter: the payload alone, or a struct of the payload and the
// envelope placements. It reports a null value (a blank payload under
// TombstoneOnEmpty, a NULL one under the string converters) and returns
// the Avro schema of what the avro converter wrote.
func (c *DebeziumConfig) appendOutboxValue(buf []byte, r *Record, p *outboxPayload, envelope []FieldValue) (_ []byte, null bool, avroSchema string, err error) {
	// A struct even when every envelope column is missing (and ignored):
	// {payload} alone.
	isStruct := len(envelope) > 0 || r.bind != nil && r.bind.envelope
	conv, structs := c.Value.ForStruct()
	var reason string
	switch {
	case c.TombstoneOnEmpty && blankPayload(r, c.vm):
		return buf, true, "", nil
	case structs && conv == ConvAvro && (isStruct || p.expSchema != nil):
		buf, avroSchema, err = c.appendAvroOutboxValue(buf, r, envelope, isStruct)
		return buf, false, avroSchema, err
	case !isStruct && p.expSchema == nil:
		var v []byte
		buf, v, reason = appendConvertedPart(buf, part{conv: c.Value, def: p.def}, p.typ, c.vm, r.Payload, p.optional)
		null = v == nil
		if !null && reason == "" {
			avroSchema, reason = avroSchemaOf(c.Value, p.typ, c.vm, p.optional, p.def)
		}
	case !structs:
		return buf, false, "", errors.New("schema: the value converter cannot write a struct value (envelope fields or an expanded payload)")
	case !isStruct:
		// An expanded payload alone.
		if conv == ConvJSONSchemas {
			buf = append(buf, `{"schema":`...)
			buf = p.appendSchema(buf, "")
			buf = append(buf, `,"payload":`...)
		}
		buf, reason = p.appendValue(buf, c.vm, r.Payload)
		if conv == ConvJSONSchemas {
			buf = append(buf, '}')
		}
	default:
		if buf, reason, err = c.appendEnvelopeValue(buf, r, p, envelope, conv == ConvJSONSchemas); err != nil {
			return buf, false, "", err
		}
	}
	if reason != "" {
		return buf, false, "", &RowError{Column: r.columnName(fPayload), Reason: reason}
	}
	return buf, null, avroSchema, nil
}

// appendEnvelopeValue appends the struct of the payload and the envelope
// placements, in JSON, with its schema when withSchema. A payload that
// cannot be written is the reason; a placement that cannot, the error.
func (c *DebeziumConfig) appendEnvelopeValue(buf []byte, r *Record, p *outboxPayload, envelope []FieldValue, withSchema bool) ([]byte, string, error) {
	if withSchema {
		buf = append(buf, `{"schema":{"type":"struct","fields":[`...)
		buf = c.appendEnvelopeSchema(p.appendSchema(buf, "payload"), r, envelope)
		buf = append(buf, `,"payload":`...)
	}
	buf = append(buf, `{"payload":`...)
	buf, reason := p.appendValue(buf, c.vm, r.Payload)
	if reason != "" {
		return buf, reason, nil
	}
	for _, a := range envelope {
		buf = append(buf, ',')
		buf = appendJavaString(buf, a.Alias)
		buf = append(buf, ':')
		if buf, reason = appendConnectValue(buf, a.typ(), c.vm, c.vm.valueOf(a.typ(), a.Value, c.optional(a.Column))); reason != "" {
			return buf, "", &RowError{Column: a.Column, Reason: reason}
		}
	}
	buf = append(buf, '}')
	if withSchema {
		buf = append(buf, '}')
	}
	return buf, "", nil
}

// appendOutboxKey appends the outbox record's key, the aggregate id
// column's value (nil for a null), and returns its Avro schema for the
// avro converter.
func (c *DebeziumConfig) appendOutboxKey(buf []byte, r *Record) ([]byte, []byte, string, error) {
	var keyText []byte
	if !r.null(fAggregateID) {
		keyText = []byte(r.AggregateID)
	}
	t, optional := r.columnType(fAggregateID), c.optional(r.columnName(fAggregateID))
	buf, key, reason := appendConvertedPart(buf, part{conv: c.Key, def: c.defaultJSON(r.columnName(fAggregateID), t)}, t, c.vm, keyText, optional)
	var sch string
	if key != nil && reason == "" {
		sch, reason = avroSchemaOf(c.Key, t, c.vm, optional, c.defaultJSON(r.columnName(fAggregateID), t))
	}
	if reason != "" {
		return buf, nil, "", &RowError{Column: r.columnName(fAggregateID), Reason: reason}
	}
	return buf, key, sch, nil
}

// appendEnvelopeSchema writes the rest of the schema of a value with
// envelope placements, after its payload field: the placed columns' fields
// and the struct's name (EventRouterDelegate.getSchemaName: the after
// struct's name with the routed value inserted before ".Value") and
// version.
func (c *DebeziumConfig) appendEnvelopeSchema(buf []byte, r *Record, envelope []FieldValue) []byte {
	for _, a := range envelope {
		ct, _ := connectTypeOf(a.typ(), c.vm)
		if ct.typ == "" {
			ct = connectType{typ: "string"}
		}
		buf = append(buf, ',')
		buf = appendConnectField(buf, ct, c.optional(a.Column), c.defaultJSON(a.Column, a.typ()), a.Alias)
	}
	buf = append(buf, `],"optional":false,"name":`...)
	buf = appendJavaString(buf, c.TopicPrefix+"."+r.Origin.Schema+"."+r.Origin.Table+"."+r.AggregateType+".Value")
	if r.Version != nil {
		buf = append(buf, `,"version":`...)
		buf = strconv.AppendInt(buf, int64(*r.Version), 10)
	}
	return append(buf, '}')
}

// appendOutboxHeaders writes the router's headers: the connector's
// context, the trace context, id, then the header placements.
func (c *DebeziumConfig) appendOutboxHeaders(buf []byte, r *Record, envelopeFields int) ([]byte, []Header, error) {
	var reason string
	hs := make([]Header, 0, 7+len(r.Additional)-envelopeFields)
	// Debezium's message records carry no context headers
	// (LogicalDecodingMessageMonitor builds them without
	// DebeziumHeaderProducer's), so neither do the events decoded from them.
	if !r.Message {
		if buf, hs, reason = c.appendContextHeaders(buf, hs); reason != "" {
			return buf, nil, errors.New("schema: the header converter cannot write the context headers: " + reason)
		}
	}
	for _, h := range [...]struct{ key, v string }{{"traceparent", r.TraceParent}, {"tracestate", r.TraceState}} {
		if h.v == "" {
			continue
		}
		var v []byte
		// A STRING schema, not optional: what Debezium's
		// KafkaConnectHeadersSetter adds.
		if buf, v, reason = appendConvertedPart(buf, part{conv: c.Header, header: true}, pgType{oid: oidText, mod: -1}, c.vm, []byte(h.v), false); reason != "" {
			return buf, nil, &RowError{Column: DefaultTraceColumn, Reason: reason}
		}
		hs = append(hs, Header{Key: h.key, Value: v})
	}
	var idText []byte
	if !r.null(fID) {
		idText = []byte(r.ID)
	}
	var v []byte
	if buf, v, reason = appendConvertedPart(buf, part{conv: c.Header, header: true, def: c.defaultJSON(r.columnName(fID), r.columnType(fID))}, r.columnType(fID), c.vm, idText, c.optional(r.columnName(fID))); reason != "" {
		return buf, nil, &RowError{Column: r.columnName(fID), Reason: reason}
	}
	hs = append(hs, Header{Key: "id", Value: v})
	for _, a := range r.Additional {
		if a.Placement != PlaceHeader {
			continue
		}
		if buf, v, reason = appendConvertedPart(buf, part{conv: c.Header, header: true, def: c.defaultJSON(a.Column, a.typ())}, a.typ(), c.vm, a.Value, c.optional(a.Column)); reason != "" {
			return buf, nil, &RowError{Column: a.Column, Reason: reason}
		}
		hs = append(hs, Header{Key: a.Alias, Value: v})
	}
	return buf, hs, nil
}

// appendChangeSource appends the change event's source block up to its
// last fields (xmin, origin, origin_lsn: always null), which the caller
// writes with what follows it.
func appendChangeSource(buf []byte, c *DebeziumConfig, r *Record) []byte {
	o := &r.Origin
	ct := o.CommitTime
	if ct.IsZero() {
		ct = r.Time
	}
	buf = append(buf, `,"source":{"version":`...)
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
	return buf
}

// encodeDebeziumChange writes Debezium's change event for an insert of the
// row (schemas off): key {pk columns}, or null for a table without a key
// (NullKey); value {before, after, source, transaction, op, ts_ms, ts_us,
// ts_ns}. Columns of types Debezium does not map are left out, as Debezium
// does (include.unknown.datatypes=false).
func (e *Encoder) encodeDebeziumChange(r *Record) (Message, error) {
	c := e.dbzFor(r.Origin.Schema, r.Origin.Table)
	if r.Columns == nil || len(r.Columns) != len(r.Values) {
		return Message{}, errors.New("schema: the debezium change event needs the whole row (a Record built by a Binding)")
	}
	var reason string
	keyCols := c.keyColumns(r.columnName(fID))
	noKey := keyCols == nil || r.Op == OpTruncate // Debezium's truncate event has a null key
	if e.ConnectOnly() {
		return Message{}, errors.New("schema: a change event under StringConverter or the avro converter is written by package transform (Encoder.ConnectOnly)")
	}
	keyConv, _ := c.Key.ForStruct()
	valueConv, _ := c.Value.ForStruct()
	var cs *changeSchema
	size := 512 + 2*len(r.Payload)
	if keyConv == ConvJSONSchemas || valueConv == ConvJSONSchemas {
		if cs = e.changeSchemas.forRecord(c, r, keyCols); cs.err != nil {
			return Message{}, cs.err
		}
		size += len(cs.key) + len(cs.value)
	}
	for _, v := range r.Values {
		size += len(v)
	}
	buf := make([]byte, 0, size)
	// No key: Kafka's null, which JsonConverter writes for a null key
	// and no schema, with or without schemas.
	if !noKey {
		var err error
		if buf, err = appendChangeKey(buf, c, r, keyConv, cs, keyCols); err != nil {
			return Message{}, err
		}
	}
	k := len(buf)

	if valueConv == ConvJSONSchemas {
		buf = append(buf, `{"schema":`...)
		buf = append(buf, cs.value...)
		buf = append(buf, `,"payload":`...)
	}
	buf = append(buf, `{"before":`...)
	var err error
	if r.Before == nil {
		buf = append(buf, "null"...)
	} else if buf, err = appendRowStruct(buf, c, r, r.Before, keyCols); err != nil {
		return Message{}, err
	}
	buf = append(buf, `,"after":`...)
	if r.Op == OpDelete || r.Op == OpTruncate {
		buf = append(buf, "null"...)
	} else if buf, err = appendRowStruct(buf, c, r, r.Values, keyCols); err != nil {
		return Message{}, err
	}
	buf = appendChangeSource(buf, c, r)
	now := c.Now()
	buf = append(buf, `,"xmin":null,"origin":null,"origin_lsn":null},"transaction":`...)
	buf = appendTxBlock(buf, r.Origin.Tx)
	op := `,"op":"c","ts_ms":`
	switch {
	case r.Op == OpUpdate:
		op = `,"op":"u","ts_ms":`
	case r.Op == OpDelete:
		op = `,"op":"d","ts_ms":`
	case r.Op == OpTruncate:
		op = `,"op":"t","ts_ms":`
	case r.Origin.Snapshot != 0:
		op = `,"op":"r","ts_ms":`
	}
	buf = append(buf, op...)
	buf = strconv.AppendInt(buf, now.UnixMilli(), 10)
	buf = append(buf, `,"ts_us":`...)
	buf = strconv.AppendInt(buf, now.UnixMicro(), 10)
	buf = append(buf, `,"ts_ns":`...)
	buf = strconv.AppendInt(buf, now.UnixNano(), 10)
	buf = append(buf, '}')
	if valueConv == ConvJSONSchemas {
		buf = append(buf, '}')
	}
	v := len(buf)
	var hs []Header
	if buf, hs, reason = c.appendContextHeaders(buf, hs); reason != "" {
		return Message{}, errors.New("schema: the header converter cannot write the context headers: " + reason)
	}
	if r.MovedKey != nil && !noKey {
		var err error
		if buf, hs, err = e.appendMovedKey(buf, hs, c, r, keyCols, cs); err != nil {
			return Message{}, err
		}
	}
	msg := Message{Key: buf[:k:k], Value: buf[k:v:v], Headers: hs}
	if noKey {
		msg.Key = nil // an empty slice would be an empty key, not Kafka's null
	}
	return msg, nil
}

// appendRowStruct appends the struct of a row's values, the change
// event's before or after: its columns of types Debezium maps, less
// those column.exclude.list leaves out.
func appendRowStruct(buf []byte, c *DebeziumConfig, r *Record, values [][]byte, keyCols []string) ([]byte, error) {
	buf = append(buf, '{')
	first := true
	for i, col := range r.Columns {
		if _, ok := connectTypeOf(col.typ(), c.vm); !ok || col.Mapper.Exclude {
			continue
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = appendJavaString(buf, col.Name)
		buf = append(buf, ':')
		var reason string
		v, fallback := c.rowValue(r, values, i, keyCols)
		typ := col.typ()
		if fallback && typ.oid == oidTimestamptz {
			typ.mod = 0 // Debezium writes its epoch fallback without fractional digits
		}
		if buf, reason = appendConnectValue(buf, typ, c.vm, c.vm.valueOf(typ, v, c.optional(col.Name))); reason != "" {
			return buf, &RowError{Column: col.Name, Reason: reason}
		}
	}
	return append(buf, '}'), nil
}

// appendChangeKey appends the change event's key: the struct of keyCols,
// in the envelope of its schema cs.key under json-schemas.
func appendChangeKey(buf []byte, c *DebeziumConfig, r *Record, keyConv Converter, cs *changeSchema, keyCols []string) ([]byte, error) {
	if keyConv == ConvJSONSchemas {
		buf = append(buf, `{"schema":`...)
		buf = append(buf, cs.key...)
		buf = append(buf, `,"payload":`...)
	}
	buf = append(buf, '{')
	for i, name := range keyCols {
		j := columnIndex(r.Columns, name)
		if j < 0 {
			return buf, fmt.Errorf("schema: key column %q is not in the table", name)
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendJavaString(buf, name)
		buf = append(buf, ':')
		var reason string
		if buf, reason = appendConnectValue(buf, keyType(r.Columns[j]), c.vm, c.keyValue(r, j)); reason != "" {
			return buf, &RowError{Column: name, Reason: reason}
		}
	}
	buf = append(buf, '}')
	if keyConv == ConvJSONSchemas {
		buf = append(buf, '}')
	}
	return buf, nil
}

// The headers Debezium puts on the two change events of an update that
// moved its row to another key: the delete carries the new key, the
// create the old one.
const (
	NewKeyHeader = "__debezium.newkey"
	OldKeyHeader = "__debezium.oldkey"
)

// appendMovedKey appends the header of the other key of a moved row
// (Record.MovedKey) to hs, written by the header converter: JSON with or
// without the key's schema, or SimpleHeaderConverter's text, for keys of
// integers, text and uuids, where it is JSON's; under it another key gets
// no header.
func (e *Encoder) appendMovedKey(buf []byte, hs []Header, c *DebeziumConfig, r *Record, keyCols []string, cs *changeSchema) ([]byte, []Header, error) {
	name := NewKeyHeader
	if r.Op != OpDelete {
		name = OldKeyHeader
	}
	other := *r
	other.Values = r.MovedKey
	start := len(buf)
	switch conv, _ := c.Header.ForStruct(); conv {
	case ConvJSONSchemas:
		if cs == nil {
			if cs = e.changeSchemas.forRecord(c, r, keyCols); cs.err != nil {
				return buf, hs, cs.err
			}
		}
		fallthrough
	case ConvJSON:
		var err error
		if buf, err = appendChangeKey(buf, c, &other, conv, cs, keyCols); err != nil {
			return buf, hs, err
		}
	case ConvString:
		// SimpleHeaderConverter's text of a struct (Kafka's Values) is
		// JSON's for the key types checked here.
		for _, col := range keyCols {
			if j := columnIndex(r.Columns, col); j < 0 || !simpleKeyType(r.Columns[j].TypeOID) {
				return buf, hs, nil
			}
		}
		var err error
		if buf, err = appendChangeKey(buf, c, &other, ConvJSON, cs, keyCols); err != nil {
			return buf, hs, err
		}
	default:
		return buf, hs, nil
	}
	return buf, append(hs, Header{Key: name, Value: buf[start:len(buf):len(buf)]}), nil
}

// simpleKeyType tells a key column's type whose value SimpleHeaderConverter
// writes as JSON does: an integer, text, or a uuid.
func simpleKeyType(oid uint32) bool {
	switch oid {
	case oidInt2, oidInt4, oidInt8, oidText, oidVarchar, oidBpchar, oidUUID:
		return true
	}
	return false
}
