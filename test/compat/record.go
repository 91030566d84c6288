package compat

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"
)

// Record is a Kafka record as a consumer sees it. Nil Key, Value or
// header value is Kafka's null, distinct from empty.
type Record struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Key       Bytes    `json:"key"`
	Value     Bytes    `json:"value"`
	Headers   []Header `json:"headers,omitempty"`
	// Timestamp is the record's timestamp in Unix milliseconds.
	Timestamp int64 `json:"timestamp"`
}

// Header is a record header.
type Header struct {
	Key   string `json:"key"`
	Value Bytes  `json:"value"`
}

// Bytes is a byte string that may be null. In JSON it is null, a string
// when it is valid UTF-8, or {"base64": "…"} otherwise, so that recorded
// streams stay readable.
type Bytes []byte

// MarshalJSON writes b as null, a string or {"base64": …}.
func (b Bytes) MarshalJSON() ([]byte, error) {
	switch {
	case b == nil:
		return []byte("null"), nil
	case utf8.Valid(b):
		return json.Marshal(string(b))
	}
	return json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString(b)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (b *Bytes) UnmarshalJSON(data []byte) error {
	switch {
	case bytes.Equal(data, []byte("null")):
		*b = nil
		return nil
	case len(data) > 0 && data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*b = Bytes(s)
		if *b == nil {
			*b = Bytes{}
		}
		return nil
	}
	var v struct{ Base64 *string }
	if err := json.Unmarshal(data, &v); err != nil || v.Base64 == nil {
		return fmt.Errorf("compat: bytes: want null, a string or {\"base64\": …}, got %s", data)
	}
	d, err := base64.StdEncoding.DecodeString(*v.Base64)
	if err != nil {
		return err
	}
	*b = append(Bytes{}, d...)
	return nil
}

// ReadRecords reads a recorded stream: one JSON record a line; blank lines
// and lines starting with # are skipped.
func ReadRecords(r io.Reader) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, fmt.Errorf("compat: line %d: %w", n, err)
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}

// WriteRecords writes a stream as ReadRecords reads it.
func WriteRecords(w io.Writer, recs []Record) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}
