package transform

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/pgoutbox/pgoutbox/schema"
)

// This file writes a change event as Debezium's CloudEventsConverter
// (3.6.1) writes a record's value with its defaults: serializer.type and
// data.serializer.type json, extension.attributes.enable true, and
// metadata.source value,id:generate,type:generate (the event's own
// source, op and transaction; the id and type made of them). The
// CloudEvent is JSON without schemas; its data, the change event's
// before and after, is written by the data converter, JsonConverter with
// schemas (the default) or without.

// cloudEventsDataName is the data's schema name for the PostgreSQL
// connector (RecordAndMetadataBaseImpl.dataSchemaName).
const cloudEventsDataName = "io.debezium.connector.postgresql.Data"

// cloudEventsData is the converter of a CloudEvent's data: the
// CloudEventsConverter's delegate, JsonConverter with schemas by default.
func cloudEventsData(conv schema.Converter) schema.Converter {
	if _, d, ok := strings.Cut(string(conv), ":"); ok {
		return schema.Converter(d)
	}
	return schema.ConvJSONSchemas
}

// appendCloudEvent writes the change event v (of schema s) as a
// CloudEvent; data is the converter of its data, json or json-schemas.
// A value that is not a change event (a transform made it something
// else) is a DataError: Debezium's converter writes it as a null, which
// would lose the event.
func appendCloudEvent(dst []byte, data schema.Converter, s *Schema, v any) ([]byte, error) {
	e, err := changeCloudEvent(data, s, v)
	if err != nil {
		return dst, err
	}
	return appendEvent(dst, e)
}

// changeCloudEvent is the CloudEvent of the change event v (of schema s).
func changeCloudEvent(data schema.Converter, s *Schema, v any) (cloudEvent, error) {
	ev, ok := v.(*Struct)
	if !ok || s == nil || !strings.HasSuffix(s.Name, ".Envelope") || ev.Schema.Type != StructT {
		return cloudEvent{}, dataErrorf("CloudEventsConverter: the value is not a change event (%s), which Debezium's converter writes as a null", describe(s, v))
	}
	src, _ := structField(ev, "source")
	source, ok := src.(*Struct)
	if !ok {
		return cloudEvent{}, dataErrorf("CloudEventsConverter: the change event has no source block")
	}
	op, _ := structField(ev, "op")
	tx, _ := structField(ev, "transaction")
	ds := &Schema{Type: StructT, Name: cloudEventsDataName}
	dv := &Struct{Schema: ds}
	for _, n := range []string{"before", "after"} {
		i := ev.Schema.field(n)
		if i < 0 {
			return cloudEvent{}, dataErrorf("CloudEventsConverter: the change event has no %s field", n)
		}
		ds.Fields = append(ds.Fields, ev.Schema.Fields[i])
		dv.Values = append(dv.Values, ev.Values[i])
	}
	return cloudEvent{source: source, op: op, tx: tx, data: dv, dataConv: data}, nil
}

// cloudEvent is what a CloudEvent is made of: the metadata, the id and
// type when they are not generated, and the data.
type cloudEvent struct {
	source   *Struct
	op, tx   any
	id, typ  *string // nil: generated
	data     *Struct
	dataConv schema.Converter
	// avroData is the data as the registry's AvroConverter framed it,
	// dataSchema its dataschema attribute; nil without Avro data.
	avroData   []byte
	dataSchema string
}

// appendEvent writes e as CloudEventsConverter writes a CloudEvent in
// JSON: its attributes, the extension attributes, then the data.
func appendEvent(dst []byte, e cloudEvent) ([]byte, error) {
	source, op, tx := e.source, e.op, e.tx
	name := fieldText(source, "name")
	connector := fieldText(source, "connector")
	ts, _ := structField(source, "ts_ms")
	ms, ok := ts.(int64)
	if !ok {
		return dst, dataErrorf("CloudEventsConverter: the source block has no ts_ms")
	}

	dst = append(dst, `{"id":`...)
	dst = schema.AppendJSONString(dst, e.ceID())
	dst = append(dst, `,"source":`...)
	dst = schema.AppendJSONString(dst, "/debezium/"+connector+"/"+name)
	dst = append(dst, `,"specversion":"1.0","type":`...)
	dst = schema.AppendJSONString(dst, e.ceType())
	dst = append(dst, `,"time":"`...)
	dst = append(dst, cloudEventTime(ms)...)
	if e.avroData != nil {
		dst = append(dst, `","datacontenttype":"application/avro","dataschema":`...)
		dst = schema.AppendJSONString(dst, e.dataSchema)
		dst = append(dst, `,"iodebeziumop":`...)
	} else {
		dst = append(dst, `","datacontenttype":"application/json","iodebeziumop":`...)
	}
	if o, ok := op.(string); ok {
		dst = schema.AppendJSONString(dst, o)
	} else {
		dst = append(dst, "null"...)
	}
	var err error
	for i, f := range source.Schema.Fields {
		if dst, err = appendExtension(dst, "", f, source.Values[i]); err != nil {
			return dst, err
		}
	}
	// The transaction block's attributes, null when the event has none.
	for _, f := range transactionFields {
		var fv any
		if t, ok := tx.(*Struct); ok {
			fv, _ = structField(t, f.Name)
		}
		if dst, err = appendExtension(dst, "tx", f, fv); err != nil {
			return dst, err
		}
	}
	dst = append(dst, `,"data":`...)
	if e.avroData != nil {
		// JsonConverter writes bytes in base64.
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, e.avroData)
		dst = append(dst, '"')
	} else if e.dataConv == schema.ConvJSON {
		dst, err = appendJSONValue(dst, e.data.Schema, e.data)
	} else {
		dst, err = appendJSONEnvelope(dst, e.data.Schema, e.data)
	}
	return append(dst, '}'), err
}

// ceID is the event's id: its id header, or made as
// PostgresCloudEventsMaker.ceId makes it (Java's string concatenation, a
// null as "null").
func (e cloudEvent) ceID() string {
	if e.id != nil {
		return *e.id
	}
	s := e.source
	return "name:" + fieldText(s, "name") + ";lsn:" + fieldText(s, "lsn") + ";txId:" + fieldText(s, "txId") + ";sequence:" + fieldText(s, "sequence")
}

// ceType is the event's type: its type header, or the connector's.
func (e cloudEvent) ceType() string {
	if e.typ != nil {
		return *e.typ
	}
	return "io.debezium.connector." + fieldText(e.source, "connector") + ".DataChangeEvent"
}

// cloudEventTime is ts_ms as SimpleDateFormat("yyyy-MM-dd'T'HH:mm:ss.SSSXXX")
// writes it in UTC.
func cloudEventTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// headerCloudEvent writes r's value as CloudEventsConverter does with
// its metadata from headers (RecordAndMetadataHeaderImpl): the source
// block, op and transaction from the source, op and transaction
// headers, which a HeaderFrom before the router copied from the change
// event; the id and type from the id and type headers (the router's
// event id, a type placed in a header) unless generated; the data the
// value's struct, renamed. A null value is a null. Where Debezium's
// converter writes a null for a value with a schema (no source or op
// header), or its task fails (no id or type header, a value that is not
// a struct), the record's error is a DataError.
func (r *Record) headerCloudEvent(c Converters) ([]byte, error) {
	e, err := r.headerEvent(c)
	if err != nil || e == nil {
		return nil, err
	}
	return appendEvent(nil, *e)
}

// headerEvent is the CloudEvent headerCloudEvent writes; nil for a null
// value.
func (r *Record) headerEvent(c Converters) (*cloudEvent, error) {
	if r.ValueSchema == nil || r.Value == nil {
		return nil, nil
	}
	hv := func(key string) (any, bool) {
		for i := len(r.Headers) - 1; i >= 0; i-- {
			if r.Headers[i].Key == key {
				return r.Headers[i].Value, true
			}
		}
		return nil, false
	}
	src, hasSource := hv("source")
	op, hasOp := hv("op")
	if !hasSource || !hasOp {
		return nil, dataErrorf("CloudEventsConverter: no source or op header (a HeaderFrom$Value before the router copies them), for which Debezium's converter writes a null")
	}
	source, ok := src.(*Struct)
	if !ok {
		return nil, dataErrorf("CloudEventsConverter: the source header is not the source block")
	}
	st, ok := r.Value.(*Struct)
	if !ok || r.ValueSchema.Type != StructT {
		return nil, dataErrorf("CloudEventsConverter: the value is a %s, not a struct (Debezium: Mismatching schema)", describe(r.ValueSchema, r.Value))
	}
	e := cloudEvent{source: source, op: op, dataConv: cloudEventsData(c.Value)}
	e.tx, _ = hv("transaction")
	for _, f := range []struct {
		key    string
		header bool
		dst    **string
	}{{"id", c.CloudEvents.IDHeader, &e.id}, {"type", c.CloudEvents.TypeHeader, &e.typ}} {
		if !f.header {
			continue
		}
		v, ok := hv(f.key)
		if !ok {
			return nil, dataErrorf("CloudEventsConverter: Header `%s` was not provided", f.key)
		}
		s, ok := v.(string)
		if !ok {
			return nil, dataErrorf("CloudEventsConverter: the %s header is a %s, not a string", f.key, describe(nil, v))
		}
		*f.dst = &s
	}
	ds := &Schema{Type: StructT, Name: cloudEventsDataName, Fields: r.ValueSchema.Fields}
	e.data = &Struct{Schema: ds, Values: st.Values}
	return &e, nil
}

// transactionFields are the transaction block's fields
// (TransactionMonitor.TRANSACTION_BLOCK_SCHEMA), whose attributes every
// event carries.
var transactionFields = []Field{
	{Name: "id", Schema: &Schema{Type: String}},
	{Name: "total_order", Schema: &Schema{Type: Int64}},
	{Name: "data_collection_order", Schema: &Schema{Type: Int64}},
}

// appendExtension appends one extension attribute: its name "iodebezium"
// then prefix and the field's name in ASCII letters and digits only, its
// value an int64 as a string (CloudEvents has no 64-bit integer), a
// boolean, string or smaller integer as it is.
func appendExtension(dst []byte, prefix string, f Field, v any) ([]byte, error) {
	switch f.Schema.Type {
	case Boolean, Int8, Int16, Int32, Int64, String:
	default:
		return dst, dataErrorf("CloudEventsConverter: source field %s of type %s cannot be an extension attribute", f.Name, f.Schema.Type)
	}
	dst = append(dst, `,"iodebezium`...)
	for _, c := range []byte(prefix + f.Name) {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			dst = append(dst, c)
		}
	}
	dst = append(dst, `":`...)
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case int64:
		if f.Schema.Type == Int64 {
			dst = append(dst, '"')
			dst = strconv.AppendInt(dst, x, 10)
			return append(dst, '"'), nil
		}
	}
	return appendJSONValue(dst, f.Schema, v)
}

// structField returns the value of st's field name; ok is false when st
// has no such field.
func structField(st *Struct, name string) (any, bool) {
	i := st.Schema.field(name)
	if i < 0 {
		return nil, false
	}
	return st.Values[i], true
}

// fieldText is a field's value as Java's string concatenation writes it:
// a string as it is, a number in decimal, a null (or no such field)
// "null".
func fieldText(st *Struct, name string) string {
	switch x, _ := structField(st, name); v := x.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case bool:
		return strconv.FormatBool(v)
	}
	return "null"
}
