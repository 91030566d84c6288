package schema

import (
	"path/filepath"
	"strings"
	"testing"
)

// The AMQP binding's binary mode: every attribute but datacontenttype a
// cloudEvents: header with its text as it is, datacontenttype the
// content-type header (the message's property); the golden files show
// the records of TestEncodeGolden so.
func TestEncodeAMQPBinaryGolden(t *testing.T) {
	for _, g := range goldenRecords {
		t.Run(g.name, func(t *testing.T) {
			e, err := NewEncoder(EncoderConfig{Format: CloudEventsBinary, Source: g.source, Protocol: ProtocolAMQP})
			if err != nil {
				t.Fatal(err)
			}
			rec := g.rec
			m, err := e.Encode(&rec)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			ids := 0
			for _, h := range m.Headers {
				if strings.HasPrefix(h.Key, "ce_") || strings.HasPrefix(h.Key, "ce-") || h.Key == amqpPrefix+"datacontenttype" {
					t.Errorf("header %s: not the AMQP binding's", h.Key)
				}
				if h.Key == amqpPrefix+"id" {
					ids++
				}
			}
			if ids != 1 {
				t.Errorf("%d cloudEvents:id headers, want 1", ids)
			}
			checkGolden(t, filepath.Join("testdata", g.name+".cloudevents-binary-amqp.golden"), renderMessage(m))
		})
	}
}
