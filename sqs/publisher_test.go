package sqs

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

	"github.com/pgoutbox/pgoutbox/awsbatch"
	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/test/mototest"
	"github.com/pgoutbox/pgoutbox/test/sinktest"
)

// publisher is a publisher of endpoint's queue, pinged.
func publisher(t *testing.T, endpoint string, cfg Config) *Publisher {
	t.Helper()
	cfg.Region, cfg.Endpoint = mototest.Region, endpoint
	cfg.Credentials = credentials.NewStaticCredentialsProvider(mototest.AccessKey, mototest.SecretKey, "")
	p, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Ping(context.Background()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// record is an event's record: its key, its body, its event id.
func record(key, body, id string) *kgo.Record {
	return &kgo.Record{Topic: "outbox.event.order", Key: []byte(key), Value: []byte(body), Context: outbox.WithEventID(context.Background(), id)}
}

// produce hands recs over, waits for their outcomes, and returns them in
// the order the promises ran.
func produce(t *testing.T, p *Publisher, recs []*kgo.Record) ([]*kgo.Record, []error) {
	t.Helper()
	return sinktest.Produce(t, p, recs)
}

func bodies(msgs []mototest.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Body)
	}
	return out
}

// On a FIFO queue every message is in the configured group, with its
// event id as the deduplication id, in order; a copy sent again with the
// same event id is dropped by SQS. On a standard queue each is sent.
func TestSendsInOrder(t *testing.T) {
	m := mototest.Start(t)
	for _, name := range []string{"events.fifo", "events"} {
		t.Run(name, func(t *testing.T) {
			q := m.CreateQueue(t, name, nil)
			p := publisher(t, m.Endpoint(), Config{QueueURL: q, GroupID: "orders"})
			var recs []*kgo.Record
			var want []string
			for i := range 45 {
				b := fmt.Sprintf(`{"n":%d}`, i)
				recs = append(recs, record(fmt.Sprintf("o-%d", i%3), b, fmt.Sprintf("id-%d", i)))
				want = append(want, b)
			}
			if strings.HasSuffix(name, ".fifo") {
				recs = append(recs, record("o-1", `{"n":44}`, "id-44")) // a copy: dropped
			}
			got, errs := produce(t, p, recs)
			for i, err := range errs {
				if err != nil || got[i] != recs[i] {
					t.Fatalf("promise %d: %v", i, err)
				}
			}
			msgs := m.ReceiveAll(t, q, len(want), time.Minute, nil)
			b := bodies(msgs)
			if !strings.HasSuffix(name, ".fifo") {
				slices.Sort(b)
				slices.Sort(want)
			}
			if !slices.Equal(b, want) {
				t.Fatalf("bodies %v, want %v", b, want)
			}
			if strings.HasSuffix(name, ".fifo") && (msgs[0].MessageGroupId != "orders" || msgs[0].MessageDeduplicationId != "id-0") {
				t.Errorf("group %q, deduplication id %q; want orders, id-0", msgs[0].MessageGroupId, msgs[0].MessageDeduplicationId)
			}
		})
	}
}

// With GroupByKey, each message of a FIFO queue is in its key's group,
// each group's in order, several groups in one request.
func TestGroupByKey(t *testing.T) {
	m := mototest.Start(t)
	q := m.CreateQueue(t, "by-key.fifo", nil)
	f := newFaults(t, m.Endpoint(), func(string, int) bool { return false })
	p := publisher(t, f.URL, Config{QueueURL: q, GroupByKey: true})
	var recs []*kgo.Record
	want := map[string][]string{}
	for i := range 40 {
		key, b := fmt.Sprintf("o-%d", i%4), fmt.Sprintf(`{"n":%d}`, i)
		recs = append(recs, record(key, b, fmt.Sprintf("id-%d", i)))
		want[key] = append(want[key], b)
	}
	if _, errs := produce(t, p, recs); slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		t.Fatalf("outcomes %v", errs)
	}
	got := map[string][]string{}
	for _, msg := range m.ReceiveAll(t, q, 40, time.Minute, nil) {
		got[msg.MessageGroupId] = append(got[msg.MessageGroupId], msg.Body)
	}
	for k, v := range want {
		if !slices.Equal(got[k], v) {
			t.Errorf("group %s: %v, want %v", k, got[k], v)
		}
	}
	most := 0
	for _, req := range f.sent() {
		most = max(most, len(req))
		seen := map[string]bool{}
		for _, g := range req {
			if seen[g] {
				t.Errorf("request %v carries group %s twice", req, g)
			}
			seen[g] = true
		}
	}
	if most < 2 {
		t.Errorf("no request carried several groups: %v", f.sent())
	}
}

// A body or group SQS does not take, or one larger than the queue's
// MaximumMessageSize (read by Ping), is refused before it is sent, as
// poison.
func TestFitsRefuses(t *testing.T) {
	m := mototest.Start(t)
	q := m.CreateQueue(t, "small.fifo", map[string]string{"MaximumMessageSize": "1024"})
	p := publisher(t, m.Endpoint(), Config{QueueURL: q, GroupByKey: true})
	tests := []struct {
		name string
		rec  *kgo.Record
		want any
	}{
		{"a tombstone", &kgo.Record{Key: []byte("k")}, new(*FieldError)},
		{"a control character", record("k", "a\x01b", "1"), new(*FieldError)},
		{"not UTF-8", record("k", "\xff\xfe", "1"), new(*FieldError)},
		{"larger than the queue's limit", record("k", strings.Repeat("x", 1025), "1"), new(*TooLargeError)},
		{"a group with a space", record("o 1", "{}", "1"), new(*FieldError)},
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
	if err := p.Fits(context.Background(), record("k", strings.Repeat("é", 512), "1")); err != nil {
		t.Errorf("1024 bytes: %v", err)
	}
}

// A queue that does not exist fails the request with an error that says
// so, and Ping reports it.
func TestMissingQueue(t *testing.T) {
	m := mototest.Start(t)
	q := m.Endpoint() + "/123456789012/missing"
	cfg := Config{QueueURL: q, Region: mototest.Region, Endpoint: m.Endpoint(),
		Credentials: credentials.NewStaticCredentialsProvider(mototest.AccessKey, mototest.SecretKey, "")}
	p, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var re *RequestError
	if err := p.Ping(context.Background()); !errors.As(err, &re) || !strings.Contains(err.Error(), "does not create queues") {
		t.Fatalf("Ping: %v", err)
	}
	if _, errs := produce(t, p, []*kgo.Record{record("k", "{}", "1")}); !errors.As(errs[0], &re) {
		t.Fatalf("outcome %v", errs[0])
	}
}

// faults is a proxy to moto that fails the SendMessageBatch entries fail
// names (by group, or body on a standard queue, and its attempt) as SQS
// refuses a message it blames on the sender, forwarding the others; it
// keeps each request's groups.
type faults struct {
	*httptest.Server
	fail func(group string, attempt int) bool

	mu       sync.Mutex
	attempts map[string]int
	requests [][]string
}

func newFaults(t *testing.T, upstream string, fail func(group string, attempt int) bool) *faults {
	f := &faults{fail: fail, attempts: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var in struct {
			QueueUrl string
			Entries  []map[string]any
		}
		isBatch := strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".SendMessageBatch")
		var failed []map[string]any
		if isBatch {
			_ = json.Unmarshal(body, &in)
			var kept []map[string]any
			var groups []string
			f.mu.Lock()
			for _, e := range in.Entries {
				g, _ := e["MessageGroupId"].(string)
				if g == "" {
					g, _ = e["MessageBody"].(string)
				}
				groups = append(groups, g)
				f.attempts[g]++
				if f.fail(g, f.attempts[g]) {
					failed = append(failed, map[string]any{"Id": e["Id"], "Code": "InvalidParameterValue", "Message": "refused by the test", "SenderFault": true})
					continue
				}
				kept = append(kept, e)
			}
			f.requests = append(f.requests, groups)
			f.mu.Unlock()
			if len(kept) == 0 {
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				_ = json.NewEncoder(w).Encode(map[string]any{"Successful": []any{}, "Failed": failed})
				return
			}
			in.Entries = kept
			body, _ = json.Marshal(in)
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
		if isBatch && resp.StatusCode == 200 {
			var res map[string]any
			_ = json.Unmarshal(out, &res)
			res["Failed"] = failed
			out, _ = json.Marshal(res)
		}
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(out)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *faults) sent() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// An entry SQS refused is sent again, alone, before its group's next;
// after every attempt it fails with SQS's answer, the messages after it
// are not counted, and when it comes again Fits refuses it as poison.
func TestRefusedEntry(t *testing.T) {
	m := mototest.Start(t)
	q := m.CreateQueue(t, "refusals.fifo", nil)
	f := newFaults(t, m.Endpoint(), func(group string, attempt int) bool {
		return group == "b" && attempt == 1 || group == "c"
	})
	p := publisher(t, f.URL, Config{QueueURL: q, GroupByKey: true, Retries: 2})
	_, errs := produce(t, p, []*kgo.Record{record("a", "a1", "1"), record("b", "b1", "2"), record("b", "b2", "3")})
	if slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		t.Fatalf("outcomes %v", errs)
	}
	if got := bodies(m.ReceiveAll(t, q, 3, time.Minute, nil)); !slices.Equal(got, []string{"a1", "b1", "b2"}) && !slices.Equal(got, []string{"b1", "a1", "b2"}) {
		t.Errorf("bodies %v, want b1 before b2, each once", got)
	}
	c1 := record("c", "c1", "4")
	_, errs = produce(t, p, []*kgo.Record{record("a", "a2", "5"), c1, record("a", "a3", "6")})
	var ee *awsbatch.EntryError
	if !errors.As(errs[1], &ee) || !ee.SenderFault || ee.Attempts != 2 || !errors.Is(errs[2], errAfterFailure) {
		t.Fatalf("outcomes %v; want c1's refusal after 2 attempts, then a3 not counted", errs)
	}
	var refused *awsbatch.RefusedError
	if err := p.Fits(context.Background(), c1); !errors.As(err, &refused) {
		t.Errorf("Fits of the refused message when it comes again: %v", err)
	}
}
