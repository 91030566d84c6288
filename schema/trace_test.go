package schema

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

const (
	testTraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	testTraceState  = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
)

func TestParseTraceContext(t *testing.T) {
	for _, tc := range []struct {
		in, parent, state string
	}{
		{testTraceParent, testTraceParent, ""},
		{" " + testTraceParent + "\n", testTraceParent, ""},
		// What the Quarkus outbox extension writes into tracingspancontext:
		// java.util.Properties.store output.
		{"#\n#Thu Nov 26 10:00:00 UTC 2026\ntraceparent=" + testTraceParent + "\ntracestate=" + testTraceState + "\n", testTraceParent, testTraceState},
		{"traceparent: " + testTraceParent, testTraceParent, ""},
		// A later version may carry more fields.
		{"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra", "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra", ""},
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra", "", ""},       // version 00 is exactly 55
		{"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "", ""},             // version ff
		{"00-00000000000000000000000000000000-b7ad6b7169203331-01", "", ""},             // zero trace id
		{"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", "", ""},             // zero parent id
		{"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", "", ""},             // upper case
		{"uber-trace-id=0af7651916cd43dd8448eb211c80319c:b7ad6b7169203331:0:1", "", ""}, // another propagator's
		{"", "", ""},
	} {
		p, s := parseTraceContext([]byte(tc.in))
		if p != tc.parent || s != tc.state {
			t.Errorf("%q: got %q %q, want %q %q", tc.in, p, s, tc.parent, tc.state)
		}
	}
}

// The traceparent header pgoutbox writes is one OpenTelemetry's Go
// propagator reads: the consumer's span continues the writer's trace, as
// the child of the span that wrote the row.
func TestTraceHeadersReadByOpenTelemetry(t *testing.T) {
	cols := []Column{{Name: "id", TypeOID: oidUUID, TypMod: -1}, {Name: "aggregatetype", TypeOID: oidText, TypMod: -1}, {Name: "aggregateid", TypeOID: oidText, TypMod: -1}, {Name: "type", TypeOID: oidText, TypMod: -1},
		{Name: "payload", TypeOID: oidJSONB, TypMod: -1}, {Name: "tracingspancontext", TypeOID: oidText, TypMod: -1}}
	props := "#\n#Thu Nov 26 10:00:00 UTC 2026\ntraceparent=" + testTraceParent + "\ntracestate=" + testTraceState + "\n"
	row := [][]byte{[]byte("406c07f3-26f0-4eea-a50c-109940064b8f"), []byte("Order"), []byte("1"), []byte("OrderCreated"), []byte(`{"a":1}`), []byte(props)}
	for _, tc := range []struct {
		format Format
		pass   bool
	}{{CloudEvents, false}, {CloudEventsBinary, false}, {DebeziumOutbox, true}} {
		t.Run(string(tc.format), func(t *testing.T) {
			b, err := Columns{PassThrough: tc.pass}.Bind(cols)
			if err != nil {
				t.Fatal(err)
			}
			r, err := b.Record(row, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			e, err := NewEncoder(EncoderConfig{Format: tc.format, Source: "/test"})
			if err != nil {
				t.Fatal(err)
			}
			m, err := e.Encode(&r)
			if err != nil {
				t.Fatal(err)
			}
			carrier := propagation.MapCarrier{}
			for _, h := range m.Headers {
				carrier[h.Key] = string(h.Value)
			}
			ctx := propagation.TraceContext{}.Extract(context.Background(), carrier)
			sc := trace.SpanContextFromContext(ctx)
			if !sc.IsValid() || !sc.IsRemote() || !sc.IsSampled() {
				t.Fatalf("headers %v: span context %+v not valid", m.Headers, sc)
			}
			if sc.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || sc.SpanID().String() != "b7ad6b7169203331" {
				t.Fatalf("span context %s/%s", sc.TraceID(), sc.SpanID())
			}
			if sc.TraceState().String() != testTraceState {
				t.Fatalf("trace state %q", sc.TraceState().String())
			}
		})
	}
}
