package schema

import (
	"path/filepath"
	"strings"
	"testing"
)

// The NATS binding's binary mode: every attribute a ce- header,
// percent-encoded, datacontenttype among them; the golden files show the
// records of TestEncodeGolden so.
func TestEncodeNATSBinaryGolden(t *testing.T) {
	for _, g := range goldenRecords {
		t.Run(g.name, func(t *testing.T) {
			e, err := NewEncoder(EncoderConfig{Format: CloudEventsBinary, Source: g.source, Protocol: ProtocolNATS})
			if err != nil {
				t.Fatal(err)
			}
			rec := g.rec
			m, err := e.Encode(&rec)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			for _, h := range m.Headers {
				if strings.HasPrefix(h.Key, "ce_") || h.Key == "content-type" {
					t.Errorf("header %s: the Kafka binding's", h.Key)
				}
				for _, c := range h.Value {
					if c <= ' ' || c >= 0x7f || c == '"' {
						t.Errorf("header %s: %q not percent-encoded", h.Key, h.Value)
						break
					}
				}
			}
			checkGolden(t, filepath.Join("testdata", g.name+".cloudevents-binary-nats.golden"), renderMessage(m))
		})
	}
}

func TestPercentEncode(t *testing.T) {
	for in, want := range map[string]string{
		"plain-1.0":         "plain-1.0",
		"Euro € 😀":          "Euro%20%E2%82%AC%20%F0%9F%98%80", // the binding's own example
		`a "b" 100%`:        "a%20%22b%22%20100%25",
		"tab\tdel\x7f":      "tab%09del%7F",
		"/orders?x=1&y=%2F": "/orders?x=1&y=%252F",
	} {
		if got := string(percentEncode([]byte(in))); got != want {
			t.Errorf("percentEncode(%q) = %q, want %q", in, got, want)
		}
	}
}
