package compat

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"strings"
)

// The avro:PATH normalization decodes an Avro datum by its schema (as the
// registry resolved it: in place of the framing, or in the id header) to
// JSON, where the field at PATH is set to null on both sides.

// nullAvroPath returns r's value as "schema:<schema>|json:<the datum as
// JSON, PATH null>"; the value as it is when it cannot be decoded.
func nullAvroPath(r Record, path []string) Bytes {
	if s, js, ok := strings.Cut(string(r.Value), "|json:"); ok && strings.HasPrefix(s, "schema:") {
		// Decoded by an earlier avro: normalization.
		var v any
		if json.Unmarshal([]byte(js), &v) != nil {
			return r.Value
		}
		out, err := json.Marshal(nullPath(v, path))
		if err != nil {
			return r.Value
		}
		return Bytes(s + "|json:" + string(out))
	}
	schemaText, datum := "", []byte(r.Value)
	if s, d, ok := strings.Cut(string(r.Value), "|datum:"); ok && strings.HasPrefix(s, "schema:") {
		schemaText, datum = s[len("schema:"):], []byte(d)
	} else {
		for _, h := range r.Headers {
			if (h.Key == "apicurio.value.globalId" || h.Key == "apicurio.value.contentId") && strings.HasPrefix(string(h.Value), "schema:") {
				schemaText = string(h.Value)[len("schema:"):]
			}
		}
	}
	if schemaText == "" {
		return r.Value
	}
	var sch any
	if err := json.Unmarshal([]byte(schemaText), &sch); err != nil {
		return r.Value
	}
	d := &avroDecoder{b: datum, named: map[string]any{}}
	d.register(sch, "")
	v, err := d.value(sch, "")
	if err != nil || len(d.b) != 0 {
		return r.Value
	}
	v = nullPath(v, path)
	js, err := json.Marshal(v)
	if err != nil {
		return r.Value
	}
	return Bytes("schema:" + schemaText + "|json:" + string(js))
}

// nullPath sets the field at path to nil in decoded records.
func nullPath(v any, path []string) any {
	m, ok := v.(map[string]any)
	if !ok || len(path) == 0 {
		return v
	}
	if _, ok := m[path[0]]; !ok {
		return v
	}
	if len(path) == 1 {
		m[path[0]] = nil
	} else {
		m[path[0]] = nullPath(m[path[0]], path[1:])
	}
	return m
}

type avroDecoder struct {
	b     []byte
	named map[string]any // record schemas by full and local name
}

var errAvro = errors.New("malformed avro datum")

func (d *avroDecoder) long() (int64, error) {
	u, n := binary.Uvarint(d.b)
	if n <= 0 {
		return 0, errAvro
	}
	d.b = d.b[n:]
	return int64(u>>1) ^ -int64(u&1), nil
}

func (d *avroDecoder) bytes() ([]byte, error) {
	n, err := d.long()
	if err != nil || n < 0 || int(n) > len(d.b) {
		return nil, errAvro
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out, nil
}

// register notes every named record of s, by its full and local name: a
// later reference may come before the datum that would reach its
// definition (a null in the union that defines it).
func (d *avroDecoder) register(s any, space string) {
	switch x := s.(type) {
	case []any:
		for _, b := range x {
			d.register(b, space)
		}
	case map[string]any:
		if t, _ := x["type"].(string); t == "record" {
			name, _ := x["name"].(string)
			if ns, ok := x["namespace"].(string); ok {
				space = ns
			}
			d.named[name] = x
			d.named[space+"."+name] = x
			fields, _ := x["fields"].([]any)
			for _, f := range fields {
				fm, _ := f.(map[string]any)
				d.register(fm["type"], space)
			}
			return
		}
		d.register(x["type"], space)
		d.register(x["items"], space)
		d.register(x["values"], space)
	}
}

// value decodes one datum of schema s (a name, a union, or an object)
// in the enclosing namespace space.
func (d *avroDecoder) value(s any, space string) (any, error) {
	switch x := s.(type) {
	case []any: // a union
		i, err := d.long()
		if err != nil || i < 0 || int(i) >= len(x) {
			return nil, errAvro
		}
		return d.value(x[i], space)
	case string:
		return d.primitive(x, space)
	case map[string]any:
		t, _ := x["type"].(string)
		switch t {
		case "record":
			if ns, ok := x["namespace"].(string); ok {
				space = ns
			}
			out := map[string]any{}
			fields, _ := x["fields"].([]any)
			for _, f := range fields {
				fm, _ := f.(map[string]any)
				fn, _ := fm["name"].(string)
				v, err := d.value(fm["type"], space)
				if err != nil {
					return nil, err
				}
				out[fn] = v
			}
			return out, nil
		case "array", "map":
			var out []any
			for {
				n, err := d.long()
				if err != nil {
					return nil, err
				}
				if n == 0 {
					return out, nil
				}
				for ; n > 0; n-- {
					if t == "map" {
						k, err := d.bytes()
						if err != nil {
							return nil, err
						}
						v, err := d.value(x["values"], space)
						if err != nil {
							return nil, err
						}
						out = append(out, []any{string(k), v})
						continue
					}
					v, err := d.value(x["items"], space)
					if err != nil {
						return nil, err
					}
					out = append(out, v)
				}
			}
		}
		return d.value(x["type"], space)
	}
	return nil, errAvro
}

func (d *avroDecoder) primitive(t, space string) (any, error) {
	switch t {
	case "null":
		return nil, nil
	case "boolean":
		if len(d.b) < 1 {
			return nil, errAvro
		}
		v := d.b[0] != 0
		d.b = d.b[1:]
		return v, nil
	case "int", "long":
		return d.long()
	case "float":
		if len(d.b) < 4 {
			return nil, errAvro
		}
		v := math.Float32frombits(binary.LittleEndian.Uint32(d.b))
		d.b = d.b[4:]
		return float64(v), nil
	case "double":
		if len(d.b) < 8 {
			return nil, errAvro
		}
		v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
		d.b = d.b[8:]
		return v, nil
	case "string":
		b, err := d.bytes()
		return string(b), err
	case "bytes":
		b, err := d.bytes()
		return hex.EncodeToString(b), err
	}
	for _, name := range []string{space + "." + t, t} {
		if s, ok := d.named[name]; ok {
			return d.value(s, space)
		}
	}
	return nil, errAvro
}
