package kinesis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/test/mototest"
	"github.com/pgoutbox/pgoutbox/test/sinktest"
)

// publisher is a publisher of endpoint's streams.
func publisher(t *testing.T, endpoint string, cfg Config) *Publisher {
	t.Helper()
	cfg.Region, cfg.Endpoint = mototest.Region, endpoint
	cfg.Credentials = credentials.NewStaticCredentialsProvider(mototest.AccessKey, mototest.SecretKey, "")
	p, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func record(topic, key, value string) *kgo.Record {
	r := &kgo.Record{Topic: topic}
	if key != "" {
		r.Key = []byte(key)
	}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

// produce hands recs over and waits for their outcomes.
func produce(t *testing.T, p *Publisher, recs []*kgo.Record) *sinktest.Outcomes {
	t.Helper()
	o := &sinktest.Outcomes{}
	sinktest.ProduceTo(t, p, o, recs)
	return o
}

// byKey is what a stream holds, each partition key's data in order.
func byKey(recs []mototest.Record) map[string][]string {
	out := map[string][]string{}
	for _, r := range recs {
		out[r.PartitionKey] = append(out[r.PartitionKey], string(r.Data))
	}
	return out
}

// Each record is written to the stream named like its topic, its key as
// the partition key (null.key without one), its value as the data (none
// for a tombstone); every promise runs in produce order, each partition
// key's records are in order on their shard, and requests carry several
// records once they wait.
func TestPublishesInOrder(t *testing.T) {
	m := mototest.Start(t)
	m.CreateStream(t, "orders", 2)
	m.CreateStream(t, "payments", 1)
	p := publisher(t, m.Endpoint(), Config{})
	var recs []*kgo.Record
	want := map[string][]string{}
	for i := range 300 {
		key := fmt.Sprintf("o-%d", i%7)
		v := fmt.Sprintf(`{"n":%d}`, i)
		recs = append(recs, record("orders", key, v))
		want[key] = append(want[key], v)
	}
	recs = append(recs, record("orders", "", `{"no":"key"}`), record("orders", "o-1", ""), record("payments", "p-1", `{"p":1}`))
	want["default"] = []string{`{"no":"key"}`}
	want["o-1"] = append(want["o-1"], "")
	o := produce(t, p, recs)
	got, errs := o.Got()
	for i, err := range errs {
		if err != nil || got[i] != recs[i] {
			t.Fatalf("promise %d: %v (record %p, want %p)", i, err, got[i], recs[i])
		}
	}
	if len(got) != len(recs) {
		t.Fatalf("%d promises of %d records", len(got), len(recs))
	}
	stream := m.ReadStream(t, "orders")
	if g := byKey(stream); !equalMaps(g, want) {
		t.Errorf("stream orders by key:\n%v\nwant\n%v", g, want)
	}
	shards := map[string]bool{}
	for _, r := range stream {
		shards[r.Shard] = true
	}
	if len(shards) != 2 {
		t.Errorf("records on %d shards of 2", len(shards))
	}
	if g := byKey(m.ReadStream(t, "payments")); len(g) != 1 || g["p-1"][0] != `{"p":1}` {
		t.Errorf("stream payments: %v", g)
	}
}

func equalMaps(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// A stream name or partition key Kinesis does not take, or a record
// larger than it takes, is refused before it is sent, as poison.
func TestFitsRefuses(t *testing.T) {
	p := &Publisher{cfg: Config{NullKey: DefaultNullKey, MaxRecordBytes: 1000}}
	tests := []struct {
		name string
		rec  *kgo.Record
		want any
	}{
		{"a stream name with a slash", record("a/b", "k", "v"), new(*FieldError)},
		{"a long stream name", record(strings.Repeat("s", 129), "k", "v"), new(*FieldError)},
		{"an empty key", &kgo.Record{Topic: "s", Key: []byte{}, Value: []byte("v")}, new(*FieldError)},
		{"a key of 257 characters", record("s", strings.Repeat("é", 257), "v"), new(*FieldError)},
		{"a key in bytes", &kgo.Record{Topic: "s", Key: []byte{0xff, 0xfe}, Value: []byte("v")}, new(*FieldError)},
		{"too large", record("s", "k", strings.Repeat("x", 1000)), new(*TooLargeError)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.Fits(context.Background(), tt.rec)
			if !errors.As(err, tt.want) {
				t.Fatalf("Fits: %v, want %T", err, tt.want)
			}
			var poison interface{ Poison() bool }
			if !errors.As(err, &poison) || !poison.Poison() {
				t.Errorf("%v is not poison", err)
			}
		})
	}
	for _, ok := range []*kgo.Record{record("a.b_c-D9", strings.Repeat("é", 256), "v"), record("s", "", strings.Repeat("x", 993))} {
		if err := p.Fits(context.Background(), ok); err != nil {
			t.Errorf("Fits(%s): %v", ok.Topic, err)
		}
	}
}

// A stream that does not exist fails its records with an error that says
// so, halts the publisher, and a record after it is not counted; after
// Resume, records go through again.
func TestMissingStreamHalts(t *testing.T) {
	m := mototest.Start(t)
	m.CreateStream(t, "there", 1)
	p := publisher(t, m.Endpoint(), Config{})
	o := produce(t, p, []*kgo.Record{record("there", "k", "1"), record("missing", "k", "2"), record("there", "k", "3")})
	_, errs := o.Got()
	var re *RequestError
	if errs[0] != nil || !errors.As(errs[1], &re) || re.Code != "ResourceNotFoundException" || !strings.Contains(re.Error(), "does not create streams") {
		t.Fatalf("outcomes %v; want nil, the missing stream's", errs)
	}
	if !errors.Is(errs[2], errAfterFailure) {
		t.Errorf("the record after the failed one: %v", errs[2])
	}
	if err := p.Produce(context.Background(), record("there", "k", "4"), func(*kgo.Record, error) {}); !errors.Is(err, ErrHalted) {
		t.Errorf("Produce after the failure: %v, want ErrHalted", err)
	}
	p.Resume()
	o = produce(t, p, []*kgo.Record{record("there", "k", "5")})
	if _, errs := o.Got(); errs[0] != nil {
		t.Fatalf("after Resume: %v", errs[0])
	}
	if g := byKey(m.ReadStream(t, "there")); !slices.Equal(g["k"], []string{"1", "5"}) {
		t.Errorf("stream there: %v", g)
	}
}

// faults is a proxy to moto that fails the PutRecords entries fail names
// (by partition key and the key's attempt) as Kinesis reports a shard's
// throughput exceeded, forwarding the others; it keeps each request's
// partition keys.
type faults struct {
	*httptest.Server
	fail func(key string, attempt int) bool
	hold time.Duration // how long the first request waits, for records to queue behind it
	seen chan struct{} // closed when the first request came

	mu       sync.Mutex
	attempts map[string]int
	requests [][]string
}

func newFaults(t *testing.T, upstream string, fail func(key string, attempt int) bool) *faults {
	f := &faults{fail: fail, attempts: map[string]int{}, seen: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve(upstream)))
	t.Cleanup(f.Close)
	return f
}

type putRecords struct {
	StreamName string
	Records    []json.RawMessage
}

func (f *faults) serve(upstream string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		in := putRecords{}
		isPut := strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".PutRecords")
		failed := map[int]bool{}
		if isPut {
			if err := json.Unmarshal(body, &in); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			var keys []string
			var kept []json.RawMessage
			f.mu.Lock()
			for i, e := range in.Records {
				var entry struct{ PartitionKey string }
				_ = json.Unmarshal(e, &entry)
				keys = append(keys, entry.PartitionKey)
				f.attempts[entry.PartitionKey]++
				if f.fail(entry.PartitionKey, f.attempts[entry.PartitionKey]) {
					failed[i] = true
					continue
				}
				kept = append(kept, e)
			}
			f.requests = append(f.requests, keys)
			first := len(f.requests) == 1
			f.mu.Unlock()
			if first {
				close(f.seen)
				time.Sleep(f.hold)
			}
			if len(kept) == 0 {
				f.answer(w, len(in.Records), failed, nil)
				return
			}
			body, _ = json.Marshal(putRecords{StreamName: in.StreamName, Records: kept})
		}
		req, _ := http.NewRequest(r.Method, upstream+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), 502)
			return
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if !isPut || resp.StatusCode != 200 {
			w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
			w.WriteHeader(resp.StatusCode)
			_, _ = w.Write(out)
			return
		}
		var res struct{ Records []json.RawMessage }
		_ = json.Unmarshal(out, &res)
		f.answer(w, len(in.Records), failed, res.Records)
	}
}

// answer is PutRecords' answer: moto's results for the entries forwarded,
// in order, and a throughput error for the others.
func (f *faults) answer(w http.ResponseWriter, n int, failed map[int]bool, written []json.RawMessage) {
	var recs []json.RawMessage
	for i := range n {
		if failed[i] {
			recs = append(recs, json.RawMessage(`{"ErrorCode":"ProvisionedThroughputExceededException","ErrorMessage":"Rate exceeded for shard"}`))
			continue
		}
		recs = append(recs, written[0])
		written = written[1:]
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(map[string]any{"FailedRecordCount": len(failed), "Records": recs})
}

func (f *faults) sent() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// Entries Kinesis did not write are sent again, alone, and a key's
// records stay in order: b1 fails twice while a1 and c1, in its request,
// are written; b1 is sent again alone, b2 only after it; nothing is
// written twice.
func TestFailedEntriesSentAgain(t *testing.T) {
	m := mototest.Start(t)
	m.CreateStream(t, "s", 2)
	f := newFaults(t, m.Endpoint(), func(key string, attempt int) bool { return key == "b" && attempt <= 2 })
	f.hold = 300 * time.Millisecond // a0 alone, then the others together
	p := publisher(t, f.URL, Config{})
	o := &sinktest.Outcomes{}
	if err := p.Produce(context.Background(), record("s", "a", "a0"), o.Promise); err != nil {
		t.Fatal(err)
	}
	<-f.seen
	sinktest.ProduceTo(t, p, o, []*kgo.Record{record("s", "b", "b1"), record("s", "a", "a1"), record("s", "b", "b2"), record("s", "c", "c1")})
	if _, errs := o.Got(); slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		t.Fatalf("outcomes %v", errs)
	}
	want := map[string][]string{"a": {"a0", "a1"}, "b": {"b1", "b2"}, "c": {"c1"}}
	if g := byKey(m.ReadStream(t, "s")); !equalMaps(g, want) {
		t.Errorf("stream s by key: %v, want %v", g, want)
	}
	want2 := [][]string{{"a"}, {"b", "a", "c"}, {"b"}, {"b"}, {"b"}}
	if got := f.sent(); !slices.EqualFunc(got, want2, slices.Equal) {
		t.Errorf("requests' keys %v, want %v", got, want2)
	}
	for _, req := range f.sent() {
		seen := map[string]bool{}
		for _, k := range req {
			if seen[k] {
				t.Errorf("request %v carries key %s twice", req, k)
			}
			seen[k] = true
		}
	}
}

// After Retries attempts, the record that was never written fails with
// its entry's error, the records after it are not counted, and those
// before it are.
func TestRetriesExhausted(t *testing.T) {
	m := mototest.Start(t)
	m.CreateStream(t, "s", 1)
	f := newFaults(t, m.Endpoint(), func(key string, _ int) bool { return key == "b" })
	p := publisher(t, f.URL, Config{Retries: 2})
	o := produce(t, p, []*kgo.Record{record("s", "a", "a1"), record("s", "b", "b1"), record("s", "c", "c1")})
	_, errs := o.Got()
	var ee *EntryError
	if errs[0] != nil || !errors.As(errs[1], &ee) || ee.Code != "ProvisionedThroughputExceededException" || ee.Attempts != 2 {
		t.Fatalf("outcomes %v; want nil, b's throughput error after 2 attempts", errs)
	}
	if !errors.Is(errs[2], errAfterFailure) {
		t.Errorf("c1 after the failed b1: %v", errs[2])
	}
}
