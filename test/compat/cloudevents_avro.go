package compat

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// Debezium's CloudEventsConverter with Avro (serializer.type or
// data.serializer.type avro) writes through its own AvroConverter,
// configured by value.converter.avro.*: the corpus registry's URL goes
// to value.converter.avro.apicurio.registry.url, and the converter,
// handed no headers, puts every id after a magic byte. The data, framed
// itself, is inside the event: in base64 in a JSON event, as bytes in
// an Avro one; each id is resolved to its schema and the datum decoded.

const cloudEventsConverter = "io.debezium.converters.CloudEventsConverter"

// cloudEventsAvro tells a CloudEventsConverter value with Avro, and
// whether the event itself is Avro.
func cloudEventsAvro(conf map[string]string, part string) (avro, event bool) {
	if part != "value" || conf["value.converter"] != cloudEventsConverter {
		return false, false
	}
	is := func(k string) bool { return strings.EqualFold(strings.TrimSpace(conf["value.converter."+k]), "avro") }
	return is("serializer.type") || is("data.serializer.type"), is("serializer.type")
}

// resolveCloudEvent resolves the ids of r's CloudEvent with Avro data:
// an Avro event becomes "schema:<its schema>|json:<the event>", its data
// "schema:<the data's schema>|json:<the data>"; in a JSON event, the
// data's base64 becomes that string.
func (rc registryClient) resolveCloudEvent(ctx context.Context, r *Record, f framing, event bool) {
	if r.Value == nil {
		return
	}
	if !event {
		r.Value = replaceJSONField(r.Value, "data", func(raw json.RawMessage) any {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return nil
			}
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return nil
			}
			return rc.resolveDatum(ctx, b, f)
		})
		return
	}
	sch, datum, ok := rc.framed(ctx, r.Value, f)
	if !ok {
		return
	}
	v, ok := decodeAvro(sch, datum)
	m, isMap := v.(map[string]any)
	if !ok || !isMap {
		return
	}
	if h, ok := m["data"].(string); ok {
		if b, err := hex.DecodeString(h); err == nil {
			m["data"] = rc.resolveDatum(ctx, b, f)
		}
	}
	js, err := json.Marshal(m)
	if err != nil {
		return
	}
	r.Value = Bytes("schema:" + sch + "|json:" + string(js))
}

// framed splits a framed datum into its schema, resolved, and the datum.
func (rc registryClient) framed(ctx context.Context, b []byte, f framing) (string, []byte, bool) {
	if len(b) < 1+f.idSize || b[0] != 0 {
		return "", nil, false
	}
	var id int64
	if f.idSize == 4 {
		id = int64(binary.BigEndian.Uint32(b[1:5]))
	} else {
		id = int64(binary.BigEndian.Uint64(b[1:9]))
	}
	return rc.schemaOf(ctx, f.content, id), b[1+f.idSize:], true
}

// resolveDatum is a framed datum as "schema:<schema>|json:<datum>", or
// its hex when it cannot be read.
func (rc registryClient) resolveDatum(ctx context.Context, b []byte, f framing) string {
	sch, datum, ok := rc.framed(ctx, b, f)
	if !ok {
		return hex.EncodeToString(b)
	}
	v, ok := decodeAvro(sch, datum)
	if !ok {
		return "schema:" + sch + "|datum:" + hex.EncodeToString(datum)
	}
	js, _ := json.Marshal(v)
	return "schema:" + sch + "|json:" + string(js)
}

// decodeAvro decodes a whole datum of schema text sch.
func decodeAvro(sch string, datum []byte) (any, bool) {
	var s any
	if json.Unmarshal([]byte(sch), &s) != nil {
		return nil, false
	}
	d := &avroDecoder{b: datum, named: map[string]any{}}
	d.register(s, "")
	v, err := d.value(s, "")
	return v, err == nil && len(d.b) == 0
}

// replaceJSONField replaces the value of v's top-level field name by
// what with gives of it (nil: left as it is), keeping the rest as it is.
func replaceJSONField(v Bytes, name string, with func(json.RawMessage) any) Bytes {
	dec := json.NewDecoder(bytes.NewReader(v))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return v
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return v
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return v
		}
		if k, _ := kt.(string); k != name {
			continue
		}
		nv := with(raw)
		if nv == nil {
			return v
		}
		js, err := json.Marshal(nv)
		if err != nil {
			return v
		}
		end := dec.InputOffset()
		start := end - int64(len(raw))
		out := append(Bytes{}, v[:start]...)
		out = append(out, js...)
		return append(out, v[end:]...)
	}
	return v
}

// UsesCloudEventsAvro tells a case whose CloudEventsConverter builds an
// AvroConverter: Debezium's plugin must see Apicurio's jars, which the
// worker's classpath gives it (the debezium/connect image links them into
// each connector's directory).
func (c Case) UsesCloudEventsAvro() bool {
	avro, _ := cloudEventsAvro(c.DebeziumConfig(), "value")
	return avro
}
