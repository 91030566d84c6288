package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/cloudevents/sdk-go/v2/event"
)

// The oracle: every message the encoder produces is read back with the
// CloudEvents Go SDK, independently of this package's code, and each
// attribute is compared with the record it came from.

// kafkaBinaryMessage is a Kafka record in binary content mode seen through
// the SDK's binding API, mapped as the Kafka protocol binding says (and as
// the SDK's own sarama binding does): ce_* headers are attributes or
// extensions, content-type is datacontenttype, the value is data.
type kafkaBinaryMessage struct {
	headers []Header
	value   []byte
}

var kafkaSpecs = spec.WithPrefix("ce_")

func (m *kafkaBinaryMessage) ReadEncoding() binding.Encoding { return binding.EncodingBinary }

func (m *kafkaBinaryMessage) ReadStructured(context.Context, binding.StructuredWriter) error {
	return binding.ErrNotStructured
}

func (m *kafkaBinaryMessage) ReadBinary(ctx context.Context, w binding.BinaryWriter) error {
	var version spec.Version
	for _, h := range m.headers {
		if h.Key == kafkaSpecs.PrefixedSpecVersionName() {
			version = kafkaSpecs.Version(string(h.Value))
		}
	}
	if version == nil {
		return binding.ErrUnknownEncoding
	}
	for _, h := range m.headers {
		var err error
		switch {
		case h.Key == "content-type":
			err = w.SetAttribute(version.AttributeFromKind(spec.DataContentType), string(h.Value))
		case version.Attribute(h.Key) != nil:
			err = w.SetAttribute(version.Attribute(h.Key), string(h.Value))
		case strings.HasPrefix(h.Key, kafkaSpecs.Prefix()):
			err = w.SetExtension(strings.TrimPrefix(h.Key, kafkaSpecs.Prefix()), string(h.Value))
		default:
			err = fmt.Errorf("unexpected header %q", h.Key)
		}
		if err != nil {
			return err
		}
	}
	if len(m.value) > 0 {
		return w.SetData(bytes.NewReader(m.value))
	}
	return nil
}

func (m *kafkaBinaryMessage) Finish(error) error { return nil }

// GetAttribute and GetExtension complete binding.MessageMetadataReader,
// which the SDK requires of a binary message.
func (m *kafkaBinaryMessage) GetAttribute(k spec.Kind) (spec.Attribute, any) {
	attr := kafkaSpecs.Version("1.0").AttributeFromKind(k)
	if attr == nil {
		return nil, nil
	}
	if k == spec.DataContentType {
		return attr, string(headerValue(Message{Headers: m.headers}, "content-type"))
	}
	if v := headerValue(Message{Headers: m.headers}, attr.PrefixedName()); v != nil {
		return attr, string(v)
	}
	return attr, nil
}

func (m *kafkaBinaryMessage) GetExtension(name string) any {
	if v := headerValue(Message{Headers: m.headers}, kafkaSpecs.Prefix()+name); v != nil {
		return string(v)
	}
	return nil
}

// decodeMessage parses m with the SDK in the given mode.
func decodeMessage(format Format, m Message) (*event.Event, error) {
	switch format {
	case CloudEventsBinary:
		return binding.ToEvent(context.Background(), &kafkaBinaryMessage{headers: m.Headers, value: m.Value})
	default:
		if !json.Valid(m.Value) {
			return nil, fmt.Errorf("value is not valid JSON: %s", m.Value)
		}
		var ev cloudevents.Event
		if err := json.Unmarshal(m.Value, &ev); err != nil {
			return nil, err
		}
		return &ev, nil
	}
}

// checkMessage verifies m against r with the SDK as the oracle.
func checkMessage(t testing.TB, format Format, source string, r *Record, m Message) {
	t.Helper()
	ev, err := decodeMessage(format, m)
	if err != nil {
		t.Fatalf("SDK cannot read the %s message: %v\nvalue: %s\nheaders: %q", format, err, m.Value, m.Headers)
	}
	if err := ev.Validate(); err != nil {
		t.Fatalf("SDK says the event is invalid: %v", err)
	}
	check := func(attr string, got, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %#v, want %#v", attr, got, want)
		}
	}
	check("specversion", ev.SpecVersion(), "1.0")
	wantID, wantType := r.ID, r.Type
	if format == CloudEventsBinary {
		// The SDK's attribute setters trim white space around id and type
		// (EventContextV1.SetID, SetType); its JSON reader does not.
		wantID, wantType = strings.TrimSpace(wantID), strings.TrimSpace(wantType)
	}
	check("id", ev.ID(), wantID)
	check("source", ev.Source(), source)
	check("type", ev.Type(), wantType)
	if format == CloudEventsBinary {
		check("ce_id header", string(headerValue(m, "ce_id")), r.ID)
		check("ce_type header", string(headerValue(m, "ce_type")), r.Type)
	}
	check("datacontenttype", ev.DataContentType(), "application/json")
	if !ev.Time().Equal(r.Time) {
		t.Errorf("time = %v, want the instant %v", ev.Time(), r.Time)
	}
	if !bytes.Equal(ev.Data(), r.Payload) {
		t.Errorf("data = %s, want the payload %s", ev.Data(), r.Payload)
	}
	if string(m.Key) != r.AggregateID {
		t.Errorf("key = %q, want the aggregate id %q", m.Key, r.AggregateID)
	}

	// Extensions: partitionkey, aggregatetype and the headers object's
	// members, read with encoding/json. Binary mode carries every value as
	// its canonical string.
	want := map[string]any{"partitionkey": r.AggregateID, "aggregatetype": r.AggregateType}
	if r.Headers != nil {
		dec := json.NewDecoder(bytes.NewReader(r.Headers))
		dec.UseNumber()
		var hs map[string]any
		if err := dec.Decode(&hs); err != nil {
			t.Fatalf("headers %s: %v", r.Headers, err)
		}
		for k, v := range hs {
			switch v := v.(type) {
			case json.Number:
				n, err := v.Int64()
				if err != nil {
					t.Fatalf("encoded a non-integer extension %s=%s", k, v)
				}
				want[k] = int32(n)
			default:
				want[k] = v
			}
			if format == CloudEventsBinary {
				want[k] = fmt.Sprint(want[k])
			}
		}
	}
	got := ev.Extensions()
	if len(got) != len(want) {
		t.Errorf("extensions = %#v, want %#v", got, want)
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("extension %s = %#v (present %v), want %#v", k, g, ok, w)
		}
	}

	// The Kafka headers themselves.
	switch format {
	case CloudEventsBinary:
		if !bytes.Equal(m.Value, r.Payload) {
			t.Errorf("binary value = %s, want the payload %s", m.Value, r.Payload)
		}
		seen := map[string]bool{}
		for _, h := range m.Headers {
			if seen[h.Key] {
				t.Errorf("header %q appears twice", h.Key)
			}
			seen[h.Key] = true
		}
		if string(headerValue(m, "content-type")) != "application/json" {
			t.Errorf("content-type = %q", headerValue(m, "content-type"))
		}
	default:
		if len(m.Headers) != 1 || m.Headers[0].Key != "content-type" ||
			string(m.Headers[0].Value) != "application/cloudevents+json; charset=UTF-8" {
			t.Errorf("structured headers = %q, want only content-type: application/cloudevents+json; charset=UTF-8", m.Headers)
		}
	}
}

func headerValue(m Message, key string) []byte {
	for _, h := range m.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}
