package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
)

// decodeJNode is the document as encoding/json's tokens give it: the
// oracle parseJNode's own reading is checked against.
func decodeJNode(b []byte) (*jnode, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	n, err := decodeJValue(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	return n, nil
}

func decodeJValue(d *json.Decoder) (*jnode, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			n := &jnode{kind: 'o'}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeJValue(d)
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				if _, dup := n.get(k); dup {
					for i := range n.keys {
						if n.keys[i] == k {
							n.vals[i] = v
						}
					}
					continue
				}
				n.keys = append(n.keys, k)
				n.vals = append(n.vals, v)
			}
			_, err = d.Token()
			return n, err
		}
		n := &jnode{kind: 'a'}
		for d.More() {
			v, err := decodeJValue(d)
			if err != nil {
				return nil, err
			}
			n.elems = append(n.elems, v)
		}
		_, err = d.Token()
		return n, err
	case string:
		return &jnode{kind: 's', str: t}, nil
	case bool:
		return &jnode{kind: 'b', b: t}, nil
	case nil:
		return &jnode{kind: 'z'}, nil
	case json.Number:
		return &jnode{kind: 'n', num: parseJNum(string(t))}, nil
	}
	return nil, errors.New("unexpected JSON token")
}

var jsonSeeds = []string{
	`{}`, `[]`, `{"a":1,"b":[true,false,null],"c":{"d":"e"}}`, ` { "a" : [ 1 , 2.5e3 , -0.0 ] } `,
	`{"a":1,"a":2,"b":3}`, `{"s":"tab\there \"q\" \\ \/ \u00e9 \ud83d\ude00 \ud800"}`, "{\"bad\":\"\xff\xfe\"}",
	`[1,`, `{"a":}`, `{"a":1}x`, `{"a" 1}`, `[01]`, `"str"`, `12345678901234567890`, `{"n":1e400}`,
	`[[[[[]]]]]`, `{"":""}`, "[1,\n2\r\n]", `[tru]`, `{"a":1,}`,
}

// parseJNode reads every document as encoding/json does, and refuses
// what it refuses.
func TestParseJNode(t *testing.T) {
	for _, s := range jsonSeeds {
		checkParse(t, []byte(s))
	}
}

func FuzzParseJNode(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkParse)
}

func checkParse(t *testing.T, b []byte) {
	got, err := parseJNode(b)
	want, werr := decodeJNode(b)
	if (err == nil) != (werr == nil) {
		t.Fatalf("%q: error %v, encoding/json's %v", b, err, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: %+v, encoding/json's %+v", b, got, want)
	}
}
