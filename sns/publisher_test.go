package sns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
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

// publisher is a publisher through endpoint, pinged.
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

// record is an event's record: its key, its body, its event id, its
// headers (name, value, ...).
func record(key, body, id string, headers ...string) *kgo.Record {
	r := &kgo.Record{Topic: "orders", Value: []byte(body), Context: outbox.WithEventID(context.Background(), id)}
	if key != "" {
		r.Key = []byte(key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	return r
}

func produce(t *testing.T, p *Publisher, recs []*kgo.Record) ([]*kgo.Record, []error) {
	t.Helper()
	return sinktest.Produce(t, p, recs)
}

func succeeded(t *testing.T, errs []error) {
	t.Helper()
	if slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		t.Fatalf("outcomes %v", errs)
	}
}

// Each record goes to the topic its destination resolves to, with its
// headers as attributes. On a FIFO topic each message is in its key's
// group (or its group header's, or the default group without either),
// with its event id as the deduplication id unless the dedup header
// gives one, each group in order; a copy of an event id is dropped by
// SNS. On a standard topic each is published.
func TestPublishes(t *testing.T) {
	m := mototest.Start(t)
	fifoARN, fifoQ := m.CreateTopic(t, "orders.fifo", nil)
	stdARN, stdQ := m.CreateTopic(t, "orders", nil)
	prefix := strings.TrimSuffix(stdARN, "orders")

	p := publisher(t, m.Endpoint(), Config{TopicARN: fifoARN, DedupHeader: "eventId"})
	var recs []*kgo.Record
	want := map[string][]string{}
	for i := range 30 {
		key, b := fmt.Sprintf("o-%d", i%3), fmt.Sprintf(`{"n":%d}`, i)
		recs = append(recs, record(key, b, fmt.Sprintf("id-%d", i), "type", "created"))
		want[key] = append(want[key], b)
	}
	recs = append(recs, record("o-1", `{"n":28}`, "id-28"), // a copy: dropped
		record("o-1", "by header", "id-30", "aggregateId", "g-x"),
		record("", "no key", "id-31"),
		record("o-2", "dedup header", "id-32", "eventId", "e-32"))
	want["g-x"], want["default"] = []string{"by header"}, []string{"no key"}
	want["o-2"] = append(want["o-2"], "dedup header")
	_, errs := produce(t, p, recs)
	succeeded(t, errs)
	got := map[string][]string{}
	dedup := map[string]string{}
	for _, msg := range m.ReceiveAll(t, fifoQ, 33, time.Minute, nil) {
		got[msg.MessageGroupId] = append(got[msg.MessageGroupId], msg.Body)
		dedup[msg.Body] = msg.MessageDeduplicationId
		if strings.HasPrefix(msg.Body, `{"n"`) && msg.MessageAttributes["type"] != "created" {
			t.Errorf("%s: attributes %v, want type=created", msg.Body, msg.MessageAttributes)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("groups\n  %v\nwant\n  %v", got, want)
	}
	if dedup[`{"n":0}`] != "id-0" || dedup["dedup header"] != "e-32" {
		t.Errorf("deduplication ids %q and %q, want id-0 and e-32", dedup[`{"n":0}`], dedup["dedup header"])
	}

	// By prefix, to the standard topic; an ARN destination as it is.
	p = publisher(t, m.Endpoint(), Config{TopicARNPrefix: prefix})
	in := []*kgo.Record{record("k", "one", "1"), record("k", "two", "2"), {Topic: fifoARN, Key: []byte("k"), Value: []byte("to the ARN")}}
	_, errs = produce(t, p, in)
	succeeded(t, errs)
	var bodies []string
	for _, msg := range m.ReceiveAll(t, stdQ, 2, time.Minute, nil) {
		bodies = append(bodies, msg.Body)
	}
	if slices.Sort(bodies); !slices.Equal(bodies, []string{"one", "two"}) {
		t.Errorf("standard topic: %v", bodies)
	}
	if msgs := m.ReceiveAll(t, fifoQ, 1, time.Minute, nil); msgs[0].Body != "to the ARN" || msgs[0].MessageGroupId != "k" {
		t.Errorf("FIFO topic: %q", msgs)
	}
}

// A record SNS would not take is refused before it is sent, as poison.
func TestFitsRefuses(t *testing.T) {
	m := mototest.Start(t)
	arn, _ := m.CreateTopic(t, "checks.fifo", nil)
	p := publisher(t, m.Endpoint(), Config{TopicARN: arn, DedupHeader: "dedup"})
	many := make([]string, 0, 22)
	for i := range 11 {
		many = append(many, "h"+strconv.Itoa(i), "v")
	}
	tests := []struct {
		name string
		rec  *kgo.Record
	}{
		{"a tombstone", &kgo.Record{Topic: "orders", Key: []byte("k")}},
		{"not UTF-8", record("k", "\xff\xfe", "1")},
		{"larger than SNS takes", record("k", strings.Repeat("x", MaxMessageBytes-10), "1", "header", "0123456789")},
		{"a group with a space", record("o 1", "{}", "1")},
		{"eleven headers", record("k", "{}", "1", many...)},
		{"a header name with a space", record("k", "{}", "1", "a b", "v")},
		{"a header name of AWS's", record("k", "{}", "1", "AWS.trace", "v")},
		{"an empty header value", record("k", "{}", "1", "type", "")},
		{"a deduplication id too long", record("k", "{}", "1", "dedup", strings.Repeat("d", 129))},
		{"a destination that is not a topic", &kgo.Record{Topic: "arn:aws:sns:us-east-1:1:outbox.event.order", Value: []byte("{}")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.Fits(context.Background(), tt.rec)
			var me *MessageError
			if !errors.As(err, &me) || !me.Poison() || !me.Permanent() {
				t.Fatalf("Fits: %v, want a *MessageError", err)
			}
		})
	}
	if err := p.Fits(context.Background(), record("k", strings.Repeat("é", MaxMessageBytes/2-20), "1", "h", "v")); err != nil {
		t.Errorf("a message at the limit: %v", err)
	}
}

// A topic that does not exist fails Ping and the request with an error
// that says so.
func TestMissingTopic(t *testing.T) {
	m := mototest.Start(t)
	cfg := Config{TopicARN: "arn:aws:sns:us-east-1:123456789012:missing", Region: mototest.Region, Endpoint: m.Endpoint(),
		Credentials: credentials.NewStaticCredentialsProvider(mototest.AccessKey, mototest.SecretKey, "")}
	p, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var re *RequestError
	if err := p.Ping(context.Background()); !errors.As(err, &re) || !strings.Contains(err.Error(), "does not create topics") {
		t.Fatalf("Ping: %v", err)
	}
	if _, errs := produce(t, p, []*kgo.Record{record("k", "{}", "1")}); !errors.As(errs[0], &re) {
		t.Fatalf("outcome %v", errs[0])
	}
}

// faults is a proxy to moto that fails the PublishBatch entries fail
// names (by group, and its attempt) as SNS refuses a message it blames on
// the sender, forwarding the others; it keeps each request's groups.
type faults struct {
	*httptest.Server
	fail func(group string, attempt int) bool
	// hold, when set before the first request, holds every request until
	// it is closed: what is handed over meanwhile waits, together.
	hold chan struct{}

	mu       sync.Mutex
	attempts map[string]int
	requests [][]string
}

const entry = "PublishBatchRequestEntries.member."

func newFaults(t *testing.T, upstream string, fail func(group string, attempt int) bool) *faults {
	f := &faults{fail: fail, attempts: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.hold != nil {
			<-f.hold
		}
		body, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(body))
		var failed string
		if form.Get("Action") == "PublishBatch" {
			kept, groups := url.Values{}, []string(nil)
			f.mu.Lock()
			for i, n := 1, 1; form.Has(entry + strconv.Itoa(i) + ".Id"); i++ {
				from := entry + strconv.Itoa(i) + "."
				g := form.Get(from + "MessageGroupId")
				groups = append(groups, g)
				f.attempts[g]++
				if f.fail(g, f.attempts[g]) {
					failed += "<member><Id>" + form.Get(from+"Id") + "</Id><Code>InvalidParameter</Code><Message>refused by the test</Message><SenderFault>true</SenderFault></member>"
					continue
				}
				for k, v := range form {
					if rest, ok := strings.CutPrefix(k, from); ok {
						kept[entry+strconv.Itoa(n)+"."+rest] = v
					}
				}
				n++
			}
			f.requests = append(f.requests, groups)
			f.mu.Unlock()
			if len(kept) == 0 {
				fmt.Fprintf(w, "<PublishBatchResponse><PublishBatchResult><Successful/><Failed>%s</Failed></PublishBatchResult></PublishBatchResponse>", failed)
				return
			}
			for k, v := range form {
				if !strings.HasPrefix(k, entry) {
					kept[k] = v
				}
			}
			body = []byte(kept.Encode())
		}
		req, _ := http.NewRequest(r.Method, upstream+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		req.Header.Del("Content-Length")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), 502)
			return
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if failed != "" && resp.StatusCode == 200 {
			out = bytes.Replace(out, []byte("</PublishBatchResult>"), []byte("<Failed>"+failed+"</Failed></PublishBatchResult>"), 1)
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

// An entry SNS refused is sent again, alone, before its group's next;
// after every attempt it fails with SNS's answer, the messages after it
// are not counted, and when it comes again Fits refuses it as poison.
// Several groups share a request; none appears twice in one.
func TestRefusedEntry(t *testing.T) {
	m := mototest.Start(t)
	arn, q := m.CreateTopic(t, "refusals.fifo", nil)
	f := newFaults(t, m.Endpoint(), func(group string, attempt int) bool {
		return group == "b" && attempt == 1 || group == "c"
	})
	p := publisher(t, f.URL, Config{TopicARN: arn, Retries: 2})
	// p1's request is held while the others are handed over: they wait
	// together, as records do under load, whatever the machine's speed.
	f.hold = make(chan struct{})
	time.AfterFunc(500*time.Millisecond, func() { close(f.hold) })
	_, errs := produce(t, p, []*kgo.Record{record("p", "p1", "0"), record("a", "a1", "1"), record("b", "b1", "2"), record("b", "b2", "3")})
	succeeded(t, errs)
	var got []string
	for _, msg := range m.ReceiveAll(t, q, 4, time.Minute, nil) {
		if msg.Body != "p1" {
			got = append(got, msg.Body)
		}
	}
	if !slices.Equal(got, []string{"a1", "b1", "b2"}) && !slices.Equal(got, []string{"b1", "a1", "b2"}) {
		t.Errorf("bodies %v, want b1 before b2, each once", got)
	}
	for _, req := range f.sent() {
		seen := map[string]bool{}
		for _, g := range req {
			if seen[g] {
				t.Errorf("request %v carries group %s twice", req, g)
			}
			seen[g] = true
		}
	}
	together := false
	for _, req := range f.sent() {
		together = together || slices.Contains(req, "a") && slices.Contains(req, "b")
	}
	if !together {
		t.Errorf("no request carried a and b together: %v", f.sent())
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

// Validate refuses what SNS cannot take, naming the setting.
func TestValidate(t *testing.T) {
	creds := credentials.NewStaticCredentialsProvider("a", "b", "")
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{Credentials: creds}, "no region"},
		{Config{Region: "r", Credentials: creds, TopicARN: "orders"}, "topic.arn"},
		{Config{Region: "r", Credentials: creds, TopicARNPrefix: "orders-"}, "topic.arn.prefix"},
		{Config{Region: "r", Credentials: creds, GroupID: "a b"}, "fifo.default.group.id"},
		{Config{Region: "r", Credentials: creds, Endpoint: "localhost:4566"}, "endpoint"},
	} {
		cfg := tt.cfg
		cfg.Defaults()
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want an error naming %s", tt.cfg, err, tt.want)
		}
	}
}
