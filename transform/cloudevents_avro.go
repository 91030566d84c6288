package transform

import (
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/pgoutbox/pgoutbox/schema"
)

// This file writes CloudEvents as Debezium's CloudEventsConverter (3.6.1)
// writes them with data.serializer.type avro: the data written by the
// registry's AvroConverter (the converter's avro.* options), framed with
// its magic byte and id before the datum whatever the converter's
// headers.enabled says (the CloudEventsConverter passes it no headers),
// under the record's topic, and the event carrying it as bytes with the
// attributes datacontenttype application/avro and dataschema
// <registry URL>/schemas/ids/<the 4 bytes after the magic byte>. With
// serializer.type json the event is JSON, the data in base64; with avro
// the data is framed under <topic>-data and the event is an Avro record
// itself, registered and framed under the topic by the same converter.

// The CloudEvents converters with Avro data: a JSON event, or an Avro one.
const (
	cloudEventsAvroData  = schema.ConvCloudEvents + ":" + schema.ConvAvro
	cloudEventsAvroEvent = schema.ConvCloudEvents + ":" + schema.ConvAvro + ":" + schema.ConvAvro
)

// cloudEventsAvro tells a CloudEvents converter with Avro data, and
// whether the event itself is Avro.
func cloudEventsAvro(conv schema.Converter) (data, event bool) {
	switch conv {
	case cloudEventsAvroData:
		return true, false
	case cloudEventsAvroEvent:
		return true, true
	}
	return false, false
}

// cloudEventNames adjusts the event's schema name as the converter's
// schema.name.adjustment.mode avro (its default) does.
var cloudEventNames avroAdjuster

// cloudEventAvro returns what writes the value of r as a CloudEvent with
// Avro data (a nil func for a null value), once the registry can frame.
func (r *Record) cloudEventAvro(c Converters) (func(string, func(string, string, []byte) ([]byte, error)) ([]byte, error), error) {
	var e *cloudEvent
	if c.CloudEvents.Headers {
		var err error
		if e, err = r.headerEvent(c); err != nil || e == nil {
			return nil, err
		}
	} else {
		if r.Value == nil {
			return nil, nil
		}
		ce, err := changeCloudEvent(schema.ConvAvro, r.ValueSchema, r.Value)
		if err != nil {
			return nil, err
		}
		e = &ce
	}
	_, event := cloudEventsAvro(c.Value)
	dataSchema, datum, err := encodeAvro(e.data.Schema, e.data)
	if err != nil {
		return nil, err
	}
	topic := r.Topic
	return func(url string, frame func(topic, schema string, datum []byte) ([]byte, error)) ([]byte, error) {
		dataTopic := topic
		if event {
			// The data's schema apart from the event's.
			dataTopic += "-data"
		}
		framed, err := frame(dataTopic, dataSchema, datum)
		if err != nil {
			return nil, err
		}
		e.avroData = framed
		e.dataSchema = url + "/schemas/ids/" + schemaIDText(framed)
		if !event {
			return appendEvent(nil, *e)
		}
		s, v, err := e.avroEnvelope()
		if err != nil {
			return nil, err
		}
		evSchema, evDatum, err := encodeAvro(s, v)
		if err != nil {
			return nil, err
		}
		return frame(topic, evSchema, evDatum)
	}, nil
}

// schemaIDText is the data's schema id as the converter reads it back for
// dataschema: the 4-byte integer after the magic byte, whatever the id's
// width (the high half of Apicurio's 8-byte ids, 0 for ids below 2^32).
func schemaIDText(framed []byte) string {
	if len(framed) < 5 {
		return "0"
	}
	return strconv.Itoa(int(int32(binary.BigEndian.Uint32(framed[1:5]))))
}

// avroEnvelope is the event as the Connect struct the converter gives the
// AvroConverter: the attributes as strings, dataschema, iodebeziumop,
// each field of the source block as an extension attribute (int64 a
// string, smaller integers int32; optional as the field is), the
// transaction block's three, optional, and the data as bytes; named
// <server>.<database>.CloudEvents.Envelope, adjusted for Avro.
func (e *cloudEvent) avroEnvelope() (*Schema, *Struct, error) {
	source := e.source
	ts, _ := structField(source, "ts_ms")
	ms, ok := ts.(int64)
	if !ok {
		return nil, nil, dataErrorf("CloudEventsConverter: the source block has no ts_ms")
	}
	op, ok := e.op.(string)
	if !ok {
		return nil, nil, dataErrorf("CloudEventsConverter: the event has no op, a required attribute of an Avro CloudEvent")
	}
	name, err := cloudEventNames.adjust(fieldText(source, "name") + "." + fieldText(source, "db") + ".CloudEvents.Envelope")
	if err != nil {
		return nil, nil, err
	}
	s := &Schema{Type: StructT, Name: name}
	v := &Struct{Schema: s}
	add := func(n string, fs *Schema, val any) {
		s.Fields = append(s.Fields, Field{Name: n, Schema: fs})
		v.Values = append(v.Values, val)
	}
	str := &Schema{Type: String}
	add("id", str, e.ceID())
	add("source", str, "/debezium/"+fieldText(source, "connector")+"/"+fieldText(source, "name"))
	add("specversion", str, "1.0")
	add("type", str, e.ceType())
	add("time", str, cloudEventTime(ms))
	add("datacontenttype", str, "application/avro")
	add("dataschema", str, e.dataSchema)
	add("iodebeziumop", str, op)
	for i, f := range source.Schema.Fields {
		fs, val, err := extensionAttribute(f.Schema, source.Values[i], false)
		if err != nil {
			return nil, nil, err
		}
		add(extensionName("", f.Name), fs, val)
	}
	for _, f := range transactionFields {
		var fv any
		if t, ok := e.tx.(*Struct); ok {
			fv, _ = structField(t, f.Name)
		}
		fs, val, err := extensionAttribute(f.Schema, fv, true)
		if err != nil {
			return nil, nil, err
		}
		add(extensionName("tx", f.Name), fs, val)
	}
	add("data", &Schema{Type: Bytes}, e.avroData)
	return s, v, nil
}

// extensionAttribute is a source or transaction field as an extension
// attribute of an Avro CloudEvent: its schema and value.
func extensionAttribute(fs *Schema, v any, optional bool) (*Schema, any, error) {
	out := &Schema{Optional: optional || fs.Optional}
	switch fs.Type {
	case Boolean:
		out.Type = Boolean
	case Int8, Int16, Int32:
		out.Type = Int32
		switch x := v.(type) {
		case int8:
			v = int32(x)
		case int16:
			v = int32(x)
		}
	case String:
		out.Type = String
	case Int64:
		out.Type = String
		if x, ok := v.(int64); ok {
			v = strconv.FormatInt(x, 10)
		}
	default:
		return nil, nil, dataErrorf("CloudEventsConverter: source field of type %s cannot be an extension attribute", fs.Type)
	}
	if v == nil && !out.Optional {
		return nil, nil, dataErrorf("CloudEventsConverter: a null for a required extension attribute")
	}
	return out, v, nil
}

// extensionName is "iodebezium", then prefix and name in ASCII letters
// and digits only.
func extensionName(prefix, name string) string {
	var b strings.Builder
	b.WriteString("iodebezium")
	for _, c := range []byte(prefix + name) {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			b.WriteByte(c)
		}
	}
	return b.String()
}
