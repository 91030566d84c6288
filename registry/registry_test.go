package registry

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pgoutbox/pgoutbox/test/registrytest"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

// countingTransport counts the requests a serde makes.
type countingTransport struct {
	n    atomic.Int64
	next http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

func newSerde(t *testing.T, cfg Config, isKey bool) (*Serde, *countingTransport) {
	t.Helper()
	s, err := New(cfg, isKey)
	if err != nil {
		t.Fatal(err)
	}
	ct := &countingTransport{next: s.client.Transport}
	s.client.Transport = ct
	return s, ct
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const (
	schemaV1 = `{"type":"record","name":"V","namespace":"t","fields":[{"name":"a","type":"int"}],"connect.name":"t.V"}`
	// A field added with a default: a backward-compatible evolution.
	schemaV2 = `{"type":"record","name":"V","namespace":"t","fields":[{"name":"a","type":"int"},{"name":"b","type":["null","string"],"default":null}],"connect.name":"t.V"}`
	// a's type changed: not backward compatible.
	schemaBad = `{"type":"record","name":"V","namespace":"t","fields":[{"name":"a","type":"string"}],"connect.name":"t.V"}`
)

// Against Apicurio Registry itself: each framing of Apicurio's converter,
// the schema registered under <topic>-value once per content, the
// Confluent-compatible API, a lookup of a schema not registered, an
// evolution the subject's compatibility rule refuses, and the registry
// down.
func TestSerdeAgainstApicurio(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	api := reg.URL + "/apis/registry/v2"
	ctx := context.Background()
	datum := []byte{2, 4}

	t.Run("headers", func(t *testing.T) {
		s, ct := newSerde(t, Config{URL: api, Headers: true}, false)
		out, hs, err := s.Frame(ctx, "t1", schemaV1, datum)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, datum) || len(hs) != 2 || hs[0].Key != "apicurio.value.globalId" || hs[1].Key != "apicurio.value.encoding" || string(hs[1].Value) != "BINARY" {
			t.Fatalf("framed %x, headers %q", out, hs)
		}
		id := binary.BigEndian.Uint64(hs[0].Value)
		if code, body := get(t, api+"/ids/globalIds/"+itoa(id)); code != 200 || body != schemaV1 {
			t.Fatalf("global id %d: %d %s", id, code, body)
		}
		if code, _ := get(t, api+"/groups/default/artifacts/t1-value"); code != 200 {
			t.Fatalf("subject t1-value: %d", code)
		}
		// The same content for another topic: no request, the first
		// topic's id (Apicurio's resolver caches by content).
		before := ct.n.Load()
		_, hs2, err := s.Frame(ctx, "t2", schemaV1, datum)
		if err != nil || ct.n.Load() != before || !bytes.Equal(hs2[0].Value, hs[0].Value) {
			t.Fatalf("second topic: err %v, %d more requests, id %x", err, ct.n.Load()-before, hs2[0].Value)
		}
		if ct.n.Load() != 1 {
			t.Fatalf("%d requests for one schema, want 1", ct.n.Load())
		}
	})
	t.Run("magic byte", func(t *testing.T) {
		for _, tc := range []struct {
			size    int
			content bool
		}{{8, false}, {4, false}, {4, true}} {
			s, _ := newSerde(t, Config{URL: api, IDSize: tc.size, ContentID: tc.content}, true)
			out, hs, err := s.Frame(ctx, "t3", schemaV1, datum)
			if err != nil || hs != nil || len(out) != 1+tc.size+len(datum) || out[0] != 0 {
				t.Fatalf("%+v: %x %q %v", tc, out, hs, err)
			}
			id := uint64(binary.BigEndian.Uint32(out[1:5]))
			if tc.size == 8 {
				id = binary.BigEndian.Uint64(out[1:9])
			}
			kind := "globalIds"
			if tc.content {
				kind = "contentIds"
			}
			if code, body := get(t, api+"/ids/"+kind+"/"+itoa(id)); code != 200 || body != schemaV1 {
				t.Fatalf("%+v: %s %d: %d %s", tc, kind, id, code, body)
			}
		}
	})
	t.Run("json", func(t *testing.T) {
		// Apicurio's ExtJsonConverter: a KCONNECT artifact, the global id
		// in a JSON frame whatever the id settings say.
		const connectSchema = `{"type":"struct","fields":[{"type":"int32","optional":true,"field":"a"}],"optional":true,"name":"payload"}`
		s, _ := newSerde(t, Config{URL: api, JSON: true, Headers: true, ContentID: true}, false)
		out, hs, err := s.Frame(ctx, "tjson", connectSchema, []byte(`{"a":1}`))
		if err != nil || hs != nil {
			t.Fatalf("%s %q %v", out, hs, err)
		}
		var framed struct {
			SchemaID uint64          `json:"schemaId"`
			Payload  json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(out, &framed); err != nil || string(framed.Payload) != `{"a":1}` || !strings.HasPrefix(string(out), `{"schemaId":`) {
			t.Fatalf("framed %s: %v", out, err)
		}
		if code, body := get(t, api+"/ids/globalIds/"+itoa(framed.SchemaID)); code != 200 || body != connectSchema {
			t.Fatalf("global id %d: %d %s", framed.SchemaID, code, body)
		}
		if code, body := get(t, api+"/groups/default/artifacts/tjson-value/meta"); code != 200 || !strings.Contains(body, `"type":"KCONNECT"`) {
			t.Fatalf("artifact tjson-value: %d %s", code, body)
		}
		if _, err := New(Config{URL: api, JSON: true, Strategy: RecordStrategy}, false); err == nil {
			t.Error("a record strategy for Connect schemas")
		}
	})
	t.Run("confluent", func(t *testing.T) {
		s, _ := newSerde(t, Config{URL: reg.URL + "/apis/ccompat/v6", API: Confluent}, false)
		out, _, err := s.Frame(ctx, "t4", schemaV2, datum)
		if err != nil || len(out) != 5+len(datum) || out[0] != 0 {
			t.Fatalf("%x %v", out, err)
		}
		id := binary.BigEndian.Uint32(out[1:5])
		code, body := get(t, reg.URL+"/apis/ccompat/v6/schemas/ids/"+itoa(uint64(id)))
		if code != 200 || !strings.Contains(body, `\"name\":\"b\"`) {
			t.Fatalf("schema id %d: %d %s", id, code, body)
		}
		if code, _ := get(t, reg.URL+"/apis/ccompat/v6/subjects/t4-value/versions/1"); code != 200 {
			t.Fatalf("subject t4-value: %d", code)
		}
	})
	t.Run("not registered", func(t *testing.T) {
		s, _ := newSerde(t, Config{URL: api, NoAutoRegister: true}, false)
		_, _, err := s.Frame(ctx, "t5", schemaV1, datum)
		var re *RefusedError
		if !errors.As(err, &re) || !re.Poison() || re.Subject != "t5-value" {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("incompatible", func(t *testing.T) {
		s, _ := newSerde(t, Config{URL: api}, false)
		if _, _, err := s.Frame(ctx, "t6", schemaV1, datum); err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, api+"/groups/default/artifacts/t6-value/rules", strings.NewReader(`{"type":"COMPATIBILITY","config":"BACKWARD"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 204 {
			t.Fatalf("setting the rule: %v %v", resp, err)
		}
		resp.Body.Close()
		if _, _, err := s.Frame(ctx, "t6", schemaV2, datum); err != nil {
			t.Fatalf("a compatible evolution: %v", err)
		}
		_, _, err = s.Frame(ctx, "t6", schemaBad, datum)
		var re *RefusedError
		if !errors.As(err, &re) || re.Status != 409 || !strings.Contains(re.Answer, "Incompatible") {
			t.Fatalf("an incompatible evolution: %v", err)
		}
		if code, body := get(t, api+"/groups/default/artifacts/t6-value"); body != schemaV2 {
			t.Fatalf("latest version: %d %s", code, body)
		}
		// Looked up without registering: the subject's latest version
		// (find-latest) whatever the record's schema, or this schema's.
		latest, _ := newSerde(t, Config{URL: api, NoAutoRegister: true, FindLatest: true, Headers: true}, false)
		byContent, _ := newSerde(t, Config{URL: api, NoAutoRegister: true, Headers: true}, false)
		_, h1, err1 := latest.Frame(ctx, "t6", schemaV1, datum)
		_, h2, err2 := byContent.Frame(ctx, "t6", schemaV1, datum)
		if err1 != nil || err2 != nil {
			t.Fatalf("lookups: %v, %v", err1, err2)
		}
		id1, id2 := binary.BigEndian.Uint64(h1[0].Value), binary.BigEndian.Uint64(h2[0].Value)
		if _, body := get(t, api+"/ids/globalIds/"+itoa(id1)); body != schemaV2 {
			t.Errorf("find-latest: global id %d is %s, want the latest version", id1, body)
		}
		if _, body := get(t, api+"/ids/globalIds/"+itoa(id2)); body != schemaV1 {
			t.Errorf("by content: global id %d is %s, want the first version", id2, body)
		}
	})
	t.Run("strategies", func(t *testing.T) {
		for _, tc := range []struct {
			cfg  Config
			path string // where the schema is then
		}{
			{Config{URL: api, Strategy: SimpleTopicStrategy}, api + "/groups/default/artifacts/t8"},
			{Config{URL: api, Strategy: RecordStrategy}, api + "/groups/t/artifacts/V"},
			{Config{URL: api, Strategy: TopicRecordStrategy}, api + "/groups/t/artifacts/t8-V"},
			{Config{URL: api, Strategy: QualifiedRecordStrategy}, api + "/groups/default/artifacts/t.V"},
			{Config{URL: reg.URL + "/apis/ccompat/v6", API: Confluent, Strategy: RecordStrategy}, reg.URL + "/apis/ccompat/v6/subjects/t.V/versions/latest"},
			{Config{URL: reg.URL + "/apis/ccompat/v6", API: Confluent, Strategy: TopicRecordStrategy}, reg.URL + "/apis/ccompat/v6/subjects/t8-t.V/versions/latest"},
		} {
			s, _ := newSerde(t, tc.cfg, false)
			if _, _, err := s.Frame(ctx, "t8", schemaV1, datum); err != nil {
				t.Fatalf("%s: %v", tc.cfg.Strategy, err)
			}
			if code, body := get(t, tc.path); code != 200 || !strings.Contains(body, `"name":`) && !strings.Contains(body, `\"name\"`) {
				t.Errorf("%s %s: %s: %d %s", tc.cfg.API, tc.cfg.Strategy, tc.path, code, body)
			}
		}
		s, _ := newSerde(t, Config{URL: api, Strategy: RecordStrategy}, false)
		_, _, err := s.Frame(ctx, "t8", `"string"`, datum)
		var re *RefusedError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), "Avro record") {
			t.Fatalf("a record strategy given a string schema: %v", err)
		}
	})
	t.Run("tls", func(t *testing.T) {
		// A registry of its own, over https with a CA's certificate.
		ca := tlstest.New(t)
		sec := registrytest.Start(t, registrytest.Options{TLS: ca})
		s, _ := newSerde(t, Config{URL: sec.TLSURL + "/apis/registry/v2", CAFile: ca.WritePEM(t, t.TempDir())}, false)
		if _, _, err := s.Frame(ctx, "t9", schemaV1, datum); err != nil {
			t.Fatalf("https with the CA: %v", err)
		}
		s, _ = newSerde(t, Config{URL: sec.TLSURL + "/apis/registry/v2"}, false)
		_, _, err := s.Frame(ctx, "t9", schemaV1, datum)
		var ue *UnreachableError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("https without the CA: %v", err)
		}
	})
	t.Run("down", func(t *testing.T) {
		reg.Stop()
		s, _ := newSerde(t, Config{URL: api, Username: "u", Password: "secret-pass"}, false)
		_, _, err := s.Frame(ctx, "t7", schemaV1, datum)
		var ue *UnreachableError
		if !errors.As(err, &ue) || strings.Contains(err.Error(), "secret-pass") {
			t.Fatalf("err %v", err)
		}
		var p interface{ Poison() bool }
		if errors.As(err, &p) {
			t.Fatal("an unreachable registry is the record's fault")
		}
	})
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
