package schema

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Format is an envelope format.
type Format string

// The envelope formats.
const (
	// CloudEvents is CloudEvents 1.0 in the Kafka protocol binding's
	// structured content mode: the value is the event in the JSON event
	// format. It is the default.
	CloudEvents Format = "cloudevents"
	// CloudEventsBinary is the binary content mode: the value is the
	// payload, the attributes are ce_* headers.
	CloudEventsBinary Format = "cloudevents-binary"
	// DebeziumOutbox is what Debezium's Outbox Event Router emits for the
	// row: key the aggregate id, value the payload, header "id"; see
	// [DebeziumConfig] for the converters.
	DebeziumOutbox Format = "debezium-outbox"
	// Debezium is Debezium's change-event envelope for the insert (before,
	// after, source, op, ts_ms, ...), without schemas.
	Debezium Format = "debezium"
)

// ParseFormat returns the format named s; "" gives the default, [CloudEvents].
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case "":
		return CloudEvents, nil
	case CloudEvents, CloudEventsBinary, DebeziumOutbox, Debezium:
		return f, nil
	}
	return "", fmt.Errorf("schema: unknown format %q (want %q, %q, %q or %q)", s, CloudEvents, CloudEventsBinary, DebeziumOutbox, Debezium)
}

// Header is a Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Message is an encoded record: what goes to Kafka apart from the topic.
//
// Its byte slices are read-only: Key and Value may share one buffer, header
// values may share it or be constants shared by every message of an
// [Encoder], and in binary mode Value is the Record's Payload itself.
type Message struct {
	Key, Value []byte
	// KeySchema and ValueSchema are the Avro schemas of a key and value
	// written by the avro converter ("" otherwise, and for a null): the
	// registry registers them and frames the datum.
	KeySchema, ValueSchema string
	// FinishValue, when set, makes the value once the registry can frame
	// (Debezium's CloudEventsConverter with Avro data, package transform:
	// the data framed into the event, an Avro event framed in turn). url
	// is the registry's; frame returns a datum framed for topic, its
	// magic byte and id before it.
	FinishValue func(url string, frame func(topic, schema string, datum []byte) ([]byte, error)) ([]byte, error)
	Headers     []Header
	// Timestamp is the record's timestamp; zero lets the producer set it.
	Timestamp time.Time
	// Partition is the record's partition when HasPartition is set;
	// otherwise its key chooses it.
	Partition    int32
	HasPartition bool
}

// EncoderConfig configures an [Encoder].
type EncoderConfig struct {
	// Format is the envelope; empty means [CloudEvents].
	Format Format
	// Source is the CloudEvents source attribute: required, a URI-reference
	// (an absolute URI is recommended, e.g. "urn:pgoutbox:orders" or
	// "https://example.com/orders", but "/orders" is legal too).
	Source string
	// Debezium configures the debezium-outbox and debezium formats.
	Debezium DebeziumConfig
	// Protocol is the CloudEvents protocol binding the messages follow:
	// ProtocolKafka (the default), ProtocolNATS or ProtocolAMQP. It
	// changes the binary content mode's headers only (natsbinding.go,
	// amqpbinding.go).
	Protocol Protocol
}

// Validate reports whether the configuration is usable.
func (c EncoderConfig) Validate() error {
	f, err := ParseFormat(string(c.Format))
	if err != nil {
		return err
	}
	switch c.Protocol {
	case "", ProtocolKafka, ProtocolNATS, ProtocolAMQP:
	default:
		return fmt.Errorf("schema: unknown CloudEvents protocol binding %q (want %q, %q or %q)", c.Protocol, ProtocolKafka, ProtocolNATS, ProtocolAMQP)
	}
	if f == DebeziumOutbox || f == Debezium {
		return c.Debezium.validate(f)
	}
	if c.Source == "" {
		return errors.New("schema: CloudEvents source is required")
	}
	for i := 0; i < len(c.Source); i++ {
		if ch := c.Source[i]; !isURIByte(ch) {
			return fmt.Errorf("schema: CloudEvents source %q is not a URI-reference: character %q at offset %d (RFC 3986 allows only ASCII letters, digits, -._~:/?#[]@!$&'()*+,;= and %%-escapes)", c.Source, ch, i)
		}
	}
	if _, err := url.Parse(c.Source); err != nil {
		return fmt.Errorf("schema: CloudEvents source %q is not a URI-reference: %w", c.Source, err)
	}
	return nil
}

// isURIByte reports whether c may appear in an RFC 3986 URI-reference
// (percent-escapes are checked by url.Parse).
func isURIByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~:/?#[]@!$&'()*+,;=%", c) >= 0
}

// Content types of the two modes.
const (
	structuredContentType = "application/cloudevents+json; charset=UTF-8"
	dataContentType       = "application/json"
)

// Encoder turns records into Kafka messages. It is immutable and safe for
// concurrent use.
type Encoder struct {
	format Format

	// structured mode: the constant pieces of the JSON object.
	sourceAndType string   // `,"source":"…","type":`
	headers       []Header // the content-type header, shared (len == cap)

	// binary mode: constant header values.
	specVersion, source, contentType []byte

	dbz           DebeziumConfig // the Debezium formats, defaults applied
	changeSchemas changeSchemas  // the change event's schemas, per table
	// tables is dbz for each table of dbz.Tables, by "schema.table", and
	// for those AddTable added since: a map never changed once stored.
	tables atomic.Pointer[map[string]*DebeziumConfig]

	nats bool // the NATS binding's binary mode
	amqp bool // the AMQP binding's binary mode
}

// NewEncoder returns an encoder for cfg.
func NewEncoder(cfg EncoderConfig) (*Encoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f, _ := ParseFormat(string(cfg.Format))
	e := &Encoder{
		format:        f,
		sourceAndType: `,"source":"` + cfg.Source + `","type":`, // Validate allows no character that needs escaping
		specVersion:   []byte("1.0"),
		source:        []byte(cfg.Source),
		contentType:   []byte(dataContentType),
		dbz:           cfg.Debezium.withDefaults(f),
		nats:          cfg.Protocol == ProtocolNATS,
		amqp:          cfg.Protocol == ProtocolAMQP,
	}
	e.headers = []Header{{Key: "content-type", Value: []byte(structuredContentType)}}
	e.headers = e.headers[:1:1]
	tables := make(map[string]*DebeziumConfig, len(e.dbz.Tables))
	for name, sh := range e.dbz.Tables {
		d := e.dbz.withShape(sh)
		tables[name] = &d
	}
	e.tables.Store(&tables)
	return e, nil
}

// AddTable gives the table schemaName.table the shape sh, as
// DebeziumConfig.Tables does for the tables known at start: a table
// captured since (replication.Config.Captures) takes its own key, NOT NULL
// columns and defaults, not the first table's. It is safe to call while
// the encoder encodes; a record of the table encoded before it took the
// first table's.
func (e *Encoder) AddTable(schemaName, table string, sh TableShape) {
	d := e.dbz.withShape(sh)
	for {
		old := e.tables.Load()
		tables := maps.Clone(*old)
		tables[schemaName+"."+table] = &d
		if e.tables.CompareAndSwap(old, &tables) {
			return
		}
	}
}

// dbzFor is the Debezium formats' configuration for the table
// schemaName.table: its own shape (DebeziumConfig.Tables, AddTable), or
// the encoder's.
func (e *Encoder) dbzFor(schemaName, table string) *DebeziumConfig {
	if d, ok := (*e.tables.Load())[schemaName+"."+table]; ok {
		return d
	}
	return &e.dbz
}

// Format returns the encoder's format.
func (e *Encoder) Format() Format { return e.format }

// Debezium returns the Debezium formats' configuration as the encoder
// runs it: its converters with their defaults, and the run id of its
// context headers.
func (e *Encoder) Debezium() DebeziumConfig { return e.dbz }

// ConnectOnly tells an encoder whose messages Encode cannot write: a
// change event under StringConverter, which writes the key's and the
// value's Struct.toString, under the avro converter, or Debezium's
// CloudEventsConverter; the outbox format under Apicurio's JSON
// converter; and either under a number converter. Encode them with
// JSON schemas and write them through package transform's converters.
func (e *Encoder) ConnectOnly() bool {
	d := e.dbz
	registryJSON := d.Key == ConvApicurioJSON || d.Value == ConvApicurioJSON
	if d.Key.IsNumber() || d.Value.IsNumber() || d.Header.IsNumber() {
		return true
	}
	switch e.format {
	case DebeziumOutbox:
		return registryJSON
	case Debezium:
		k, _ := d.Key.ForStruct()
		v, _ := d.Value.ForStruct()
		return d.Key == ConvString || d.Value == ConvString || k == ConvAvro || v == ConvAvro || d.Value.IsCloudEvents() || registryJSON
	}
	return false
}

// Encode encodes r as a CloudEvent: id is r.ID, type r.Type, time r.Time (in
// UTC, RFC 3339 with 6 fractional digits, or 9 when the time has
// sub-microsecond precision), datacontenttype application/json, and the
// extensions partitionkey (r.AggregateID, also the Kafka key), aggregatetype
// and those read from r.Headers. The payload becomes data unchanged: r must
// satisfy [Binding.Record]'s rules (Payload valid JSON, Headers a JSON object
// or nil).
//
// A record that cannot be a valid CloudEvent gives a [*RowError]: text fields
// with control characters, noncharacters or invalid UTF-8 (CloudEvents
// Strings exclude them), an id or type of only white space (SDKs trim before
// their non-empty check), a time outside years 1-9999, or headers that are not
// valid extensions (names of 1-20 characters a-z0-9 not taken by a context
// attribute; values strings, 32-bit integers or booleans).
func (e *Encoder) Encode(r *Record) (Message, error) {
	switch e.format {
	case DebeziumOutbox:
		return e.encodeDebeziumOutbox(r)
	case Debezium:
		return e.encodeDebeziumChange(r)
	}
	fields := [...]string{fID: r.ID, fAggregateType: r.AggregateType, fAggregateID: r.AggregateID, fType: r.Type}
	for f, s := range fields {
		if s == "" {
			return Message{}, &RowError{Column: r.columnName(f), Reason: "empty " + fieldLabels[f]}
		}
	}
	// The SDKs trim white space before checking that id and type are
	// non-empty (sdk-go does): a blank one would be rejected downstream.
	for _, f := range [...]int{fID, fType} {
		if strings.TrimSpace(fields[f]) == "" {
			return Message{}, &RowError{Column: r.columnName(f), Reason: "blank " + fieldLabels[f] + " (only white space)"}
		}
	}
	sec := r.Time.Unix()
	if sec < minRFC3339Unix || sec > maxRFC3339Unix {
		return Message{}, &RowError{Column: r.columnName(fTime), Reason: "time " + r.Time.UTC().String() + " is out of range for RFC 3339 (years 0001-9999)"}
	}
	var (
		extBuf [4]extension
		exts   = extBuf[:0]
	)
	if r.Headers != nil {
		var reason string
		if exts, reason = parseExtensions(exts, r.Headers); reason != "" {
			return Message{}, &RowError{Column: r.columnName(fHeaders), Reason: reason}
		}
	}
	var err error
	if exts, err = additionalExtensions(exts, r); err != nil {
		return Message{}, err
	}
	var msg Message
	if e.format == CloudEventsBinary {
		for f, s := range fields {
			if reason := ceStringReason(s); reason != "" {
				return Message{}, r.fieldError(f, reason)
			}
		}
		msg = e.encodeBinary(r, exts)
		if e.nats {
			natsBinary(msg.Headers)
		}
		if e.amqp {
			amqpBinary(msg.Headers)
		}
	} else if msg, err = e.encodeStructured(r, exts); err != nil {
		return Message{}, err
	}
	if err := setPartition(&msg, r); err != nil {
		return Message{}, err
	}
	return additionalHeaders(msg, r), nil
}

// additionalExtensions adds the envelope placements of r.Additional as
// string extension attributes; a NULL value adds none.
func additionalExtensions(exts []extension, r *Record) ([]extension, error) {
	for _, a := range r.Additional {
		if a.Placement != PlaceEnvelope || a.Value == nil {
			continue
		}
		if reason := extensionNameReason([]byte(a.Alias)); reason != "" {
			return nil, fmt.Errorf("schema: additional field %s: %s", a.Column, reason)
		}
		for i := range exts {
			if string(exts[i].name) == a.Alias {
				return nil, &RowError{Column: a.Column, Reason: "extension " + a.Alias + " is also in the headers column"}
			}
		}
		if reason := ceStringReason(a.Value); reason != "" {
			return nil, &RowError{Column: a.Column, Reason: reason}
		}
		exts = append(exts, extension{name: []byte(a.Alias), kind: extString, str: a.Value})
	}
	return exts, nil
}

// additionalHeaders appends the header placements of r.Additional as Kafka
// headers carrying the column's text (a NULL value adds a header with a
// null value), then the row's trace context as W3C traceparent and
// tracestate headers, which OpenTelemetry's propagators read.
func additionalHeaders(msg Message, r *Record) Message {
	// msg.Headers may be the encoder's shared slice: it has len == cap,
	// so append copies it.
	for _, a := range r.Additional {
		if a.Placement == PlaceHeader {
			msg.Headers = append(msg.Headers, Header{Key: a.Alias, Value: a.Value})
		}
	}
	if r.TraceParent != "" {
		msg.Headers = append(msg.Headers, Header{Key: "traceparent", Value: []byte(r.TraceParent)})
		if r.TraceState != "" {
			msg.Headers = append(msg.Headers, Header{Key: "tracestate", Value: []byte(r.TraceState)})
		}
	}
	return msg
}

// fieldError is a RowError of field f, named by the table's column.
func (r *Record) fieldError(f int, reason string) error {
	return &RowError{Column: r.columnName(f), Reason: fieldLabels[f] + ": " + reason}
}

// encodeStructured writes the JSON event format. It checks the four text
// fields as CloudEvents Strings while escaping them.
func (e *Encoder) encodeStructured(r *Record, exts []extension) (Message, error) {
	n := len(r.AggregateID) + // the key
		len(`{"specversion":"1.0","id":""`) + len(r.ID) + len(e.sourceAndType) + len(`""`) + len(r.Type) +
		len(`,"time":"2006-01-02T15:04:05.000000000Z"`) +
		len(`,"datacontenttype":"application/json","partitionkey":""`) + len(r.AggregateID) +
		len(`,"aggregatetype":""`) + len(r.AggregateType) + len(`,"data":`) + len(r.Payload) + len(`}`) +
		16 // room for a few escapes; more only costs a reallocation
	for i := range exts {
		n += len(`,"":""`) + len(exts[i].name) + len(exts[i].str) + len("-2147483648")
	}
	buf := make([]byte, 0, n)
	buf = append(buf, r.AggregateID...)
	k := len(buf)
	var reason string
	buf = append(buf, `{"specversion":"1.0","id":`...)
	if buf, reason = appendCEString(buf, r.ID); reason != "" {
		return Message{}, r.fieldError(fID, reason)
	}
	buf = append(buf, e.sourceAndType...)
	if buf, reason = appendCEString(buf, r.Type); reason != "" {
		return Message{}, r.fieldError(fType, reason)
	}
	buf = append(buf, `,"time":"`...)
	buf = appendTime(buf, r.Time)
	buf = append(buf, `","datacontenttype":"application/json","partitionkey":`...)
	if buf, reason = appendCEString(buf, r.AggregateID); reason != "" {
		return Message{}, r.fieldError(fAggregateID, reason)
	}
	buf = append(buf, `,"aggregatetype":`...)
	if buf, reason = appendCEString(buf, r.AggregateType); reason != "" {
		return Message{}, r.fieldError(fAggregateType, reason)
	}
	for i := range exts {
		x := &exts[i]
		buf = append(buf, ',', '"')
		buf = append(buf, x.name...) // [a-z0-9]: nothing to escape
		buf = append(buf, '"', ':')
		buf = x.appendValue(buf, true)
	}
	buf = append(buf, `,"data":`...)
	buf = append(buf, r.Payload...)
	buf = append(buf, '}')
	return Message{Key: buf[:k:k], Value: buf[k:], Headers: e.headers}, nil
}

// The fixed binary-mode headers, in order.
const numBinaryHeaders = 8

func (e *Encoder) encodeBinary(r *Record, exts []extension) Message {
	n := len(r.AggregateID) + len(r.ID) + len(r.Type) + len("2006-01-02T15:04:05.000000000Z") + len(r.AggregateType) +
		len(exts)*len("-2147483648")
	buf := make([]byte, 0, n)
	hs := make([]Header, 0, numBinaryHeaders+len(exts))
	var v []byte
	buf, key := appendPart(buf, r.AggregateID)
	buf, v = appendPart(buf, r.ID)
	hs = append(hs,
		Header{Key: "ce_specversion", Value: e.specVersion},
		Header{Key: "ce_id", Value: v},
		Header{Key: "ce_source", Value: e.source})
	buf, v = appendPart(buf, r.Type)
	hs = append(hs, Header{Key: "ce_type", Value: v})
	t := len(buf)
	buf = appendTime(buf, r.Time)
	hs = append(hs,
		Header{Key: "ce_time", Value: buf[t:len(buf):len(buf)]},
		Header{Key: "ce_partitionkey", Value: key})
	buf, v = appendPart(buf, r.AggregateType)
	hs = append(hs, Header{Key: "ce_aggregatetype", Value: v})
	for i := range exts {
		x := &exts[i]
		if x.kind == extString {
			v = x.str // read-only: aliases the headers or a decoded copy
		} else {
			t := len(buf)
			buf = x.appendValue(buf, false)
			v = buf[t:len(buf):len(buf)]
		}
		hs = append(hs, Header{Key: binaryHeaderKey(x.name), Value: v})
	}
	hs = append(hs, Header{Key: "content-type", Value: e.contentType})
	return Message{Key: key, Value: r.Payload, Headers: hs}
}

// binaryHeaderKey returns "ce_" + name, without allocating for the
// Distributed Tracing extension's attributes.
func binaryHeaderKey(name []byte) string {
	switch string(name) {
	case "traceparent":
		return "ce_traceparent"
	case "tracestate":
		return "ce_tracestate"
	}
	return "ce_" + string(name)
}

// appendPart appends s to buf and returns the appended bytes as their own
// slice, capacity-limited so that appending to it never touches buf.
func appendPart(buf []byte, s string) ([]byte, []byte) {
	t := len(buf)
	buf = append(buf, s...)
	return buf, buf[t:len(buf):len(buf)]
}

// appendTime appends t in UTC as RFC 3339 with 6 fractional digits (9 when
// t has sub-microsecond precision). t must be within years 1-9999.
func appendTime(dst []byte, t time.Time) []byte {
	sec, ns := t.Unix(), t.Nanosecond()
	days, rem := sec/86400, sec%86400
	if rem < 0 {
		days, rem = days-1, rem+86400
	}
	year, month, day := civilFromDays(days)
	hms := int(rem)
	dst = append(dst, twoDigits[year/100*2], twoDigits[year/100*2+1], twoDigits[year%100*2], twoDigits[year%100*2+1], '-',
		twoDigits[month*2], twoDigits[month*2+1], '-',
		twoDigits[day*2], twoDigits[day*2+1], 'T',
		twoDigits[hms/3600*2], twoDigits[hms/3600*2+1], ':',
		twoDigits[hms/60%60*2], twoDigits[hms/60%60*2+1], ':',
		twoDigits[hms%60*2], twoDigits[hms%60*2+1], '.')
	if ns%1000 == 0 {
		us := ns / 1000
		dst = append(dst, twoDigits[us/10000*2], twoDigits[us/10000*2+1],
			twoDigits[us/100%100*2], twoDigits[us/100%100*2+1],
			twoDigits[us%100*2], twoDigits[us%100*2+1])
	} else {
		for div := 100000000; div > 0; div /= 10 {
			dst = append(dst, byte('0'+ns/div%10))
		}
	}
	return append(dst, 'Z')
}

const twoDigits = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// civilFromDays is the inverse of daysSinceEpoch (Howard Hinnant's
// civil_from_days), for days within years 1-9999.
func civilFromDays(days int64) (year, month, day int) {
	z := int(days) + 719468
	era := z / 146097 // z > 0 from year 1 on
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	day = doy - (153*mp+2)/5 + 1
	month = mp + 3
	if month > 12 {
		month -= 12
	}
	year = yoe + era*400
	if month <= 2 {
		year++
	}
	return year, month, day
}
