package transform

import (
	"fmt"
	"strings"
	"time"

	"github.com/pgoutbox/pgoutbox/schema"
)

// Record is a Kafka Connect record (ConnectRecord) as the transforms see
// it after the router.
type Record struct {
	Topic string
	// Partition is the record's partition when HasPartition is set (the
	// router's partition placement), Connect's null otherwise.
	Partition    int32
	HasPartition bool
	KeySchema    *Schema
	Key          any
	ValueSchema  *Schema
	Value        any
	// Timestamp is the record's timestamp in milliseconds.
	Timestamp int64
	Headers   []Header
}

// Header is a Connect header: a name and a value with its schema.
type Header struct {
	Key    string
	Schema *Schema
	Value  any
}

// Converters name how a record is written: its key, value and header
// converters.
type Converters struct {
	Key, Value, Header schema.Converter
	// CloudEvents is the value converter's metadata.source when Value is
	// Debezium's CloudEventsConverter.
	CloudEvents schema.CloudEventsMetadata
}

// Read reads the router's record for the chain: msg written with every
// converter schema.ConvJSONSchemas, which carries each part's schema, its
// topic, and its timestamp (now when msg has none: Connect's source
// records always carry one, the router's). A nil chain reads too.
func (c *Chain) Read(topic string, msg *schema.Message, now time.Time) (Record, error) {
	var cache *schemaCache
	if c != nil {
		cache = &c.schemas
	}
	r := Record{Topic: topic, Partition: msg.Partition, HasPartition: msg.HasPartition}
	ts := msg.Timestamp
	if ts.IsZero() {
		ts = now
	}
	r.Timestamp = ts.UnixMilli()
	var err error
	if r.KeySchema, r.Key, err = decodeEnvelope(msg.Key, cache); err != nil {
		return Record{}, fmt.Errorf("key: %w", err)
	}
	if r.ValueSchema, r.Value, err = decodeEnvelope(msg.Value, cache); err != nil {
		return Record{}, fmt.Errorf("value: %w", err)
	}
	r.Headers = make([]Header, len(msg.Headers))
	for i, h := range msg.Headers {
		s, v, err := decodeEnvelope(h.Value, cache)
		if err != nil {
			return Record{}, fmt.Errorf("header %s: %w", h.Key, err)
		}
		r.Headers[i] = Header{Key: h.Key, Schema: s, Value: v}
	}
	return r, nil
}

// Message writes r through the converters c: the Kafka record without its
// topic.
func (r *Record) Message(c Converters) (schema.Message, error) {
	msg := schema.Message{Partition: r.Partition, HasPartition: r.HasPartition, Timestamp: time.UnixMilli(r.Timestamp)}
	var err error
	if msg.Key, msg.KeySchema, err = encodeKeyOrValue(c.Key, r.KeySchema, r.Key); err != nil {
		return schema.Message{}, fmt.Errorf("key: %w", err)
	}
	if avro, _ := cloudEventsAvro(c.Value); avro {
		msg.FinishValue, err = r.cloudEventAvro(c)
	} else if c.Value.IsCloudEvents() && c.CloudEvents.Headers {
		msg.Value, err = r.headerCloudEvent(c)
	} else {
		msg.Value, msg.ValueSchema, err = encodeKeyOrValue(c.Value, r.ValueSchema, r.Value)
	}
	if err != nil {
		return schema.Message{}, fmt.Errorf("value: %w", err)
	}
	if len(r.Headers) > 0 {
		msg.Headers = make([]schema.Header, len(r.Headers))
		for i, h := range r.Headers {
			v, err := encodePart(c.Header, true, h.Schema, h.Value)
			if err != nil {
				return schema.Message{}, fmt.Errorf("header %s: %w", h.Key, err)
			}
			msg.Headers[i] = schema.Header{Key: h.Key, Value: v}
		}
	}
	return msg, nil
}

// encodeKeyOrValue writes a key or a value; under the avro converter (or
// a binary converter delegating to it) also its Avro schema, which the
// registry registers and frames the datum with. A null is Kafka's null.
func encodeKeyOrValue(conv schema.Converter, s *Schema, v any) ([]byte, string, error) {
	c := conv
	if conv == schema.ConvApicurioJSON {
		return encodeApicurioJSON(s, v)
	}
	if conv.IsCloudEvents() {
		if v == nil {
			return nil, "", nil
		}
		out, err := appendCloudEvent(nil, cloudEventsData(conv), s, v)
		return out, "", err
	}
	if b, d, ok := strings.Cut(string(conv), ":"); ok && (schema.Converter(b) == schema.ConvBinary || schema.Converter(b) == schema.ConvDebeziumByteArray) {
		if _, isBytes := v.([]byte); !isBytes {
			c = schema.Converter(d)
		}
	}
	if c != schema.ConvAvro {
		out, err := encodePart(conv, false, s, v)
		return out, "", err
	}
	if v == nil {
		return nil, "", nil
	}
	sch, datum, err := encodeAvro(s, v)
	return datum, sch, err
}

// encodeApicurioJSON writes a part as Apicurio's ExtJsonConverter does
// before its framing: the value as JsonConverter writes it without
// schemas, and its Connect schema as JsonConverter's asJsonSchema, which
// the converter registers; package registry frames the two. A null value
// with a schema is a DataError, as Apicurio's resolver throws on it
// (NullPointerException: no record to resolve a schema of).
func encodeApicurioJSON(s *Schema, v any) ([]byte, string, error) {
	switch {
	case s == nil && v == nil:
		return nil, "", nil
	case v == nil:
		return nil, "", dataErrorf("Apicurio's JSON converter: a null %s value, on which its schema resolver fails", describe(s, v))
	}
	datum, err := appendJSONValue(nil, s, v)
	if err != nil {
		return nil, "", err
	}
	return datum, string(appendJSONSchema(nil, s, "")), nil
}
