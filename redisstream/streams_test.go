package redisstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/test/faultproxy"
	"github.com/pgoutbox/pgoutbox/test/redistest"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

func newStreams(t *testing.T, addr string, cfg Config) *Streams {
	t.Helper()
	cfg.Addrs = []string{addr}
	s, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// record is an event's record: its id on its context, as the relay sets
// it; an empty value is a tombstone.
func record(topic, id, key, value string, headers ...string) *kgo.Record {
	r := &kgo.Record{Topic: topic, Key: []byte(key), Context: outbox.WithEventID(context.Background(), id)}
	if value != "" {
		r.Value = []byte(value)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	return r
}

// outcomes collects promises in the order they run.
type outcomes struct {
	mu   sync.Mutex
	got  []string
	errs map[string]error
}

func (o *outcomes) promise(r *kgo.Record, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	id := outbox.EventID(r.Context)
	o.got = append(o.got, id)
	if err != nil {
		if o.errs == nil {
			o.errs = map[string]error{}
		}
		o.errs[id] = err
	}
}

func (o *outcomes) failed(id string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.errs[id]
}

func produce(t *testing.T, s *Streams, o *outcomes, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range recs {
		if err := s.Produce(ctx, r, o.promise); err != nil {
			t.Fatalf("produce %s: %v", outbox.EventID(r.Context), err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func fields(es []redistest.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, strings.Join(e.Fields, "|"))
	}
	return out
}

// Records become entries as Debezium Server's sink writes them, in
// order, compact and extended; a record sent again after it was written
// (the relay's resend after a failure) is not written twice.
func TestWrite(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		format string
		want   []string
	}{
		{FormatCompact, []string{`o-1|{"n":1}`, `o-1|default`, `p-1|{"n":3}`}},
		{FormatExtended, []string{`key|o-1|value|{"n":1}|ID|e1`, `key|o-1|value|default|ID|e2`, `key|p-1|value|{"n":3}|ID|e3`}},
	} {
		t.Run(tc.format, func(t *testing.T) {
			stream := "events." + tc.format
			s := newStreams(t, srv.Addr, Config{Format: tc.format})
			var o outcomes
			produce(t, s, &o,
				record(stream, "e1", "o-1", `{"n":1}`, "id", "e1"),
				record(stream, "e2", "o-1", "", "id", "e2"), // a tombstone
				record(stream, "e3", "p-1", `{"n":3}`, "id", "e3"),
				record(stream, "e1", "o-1", `{"n":1}`, "id", "e1"), // sent again
			)
			if strings.Join(o.got, " ") != "e1 e2 e3 e1" || len(o.errs) != 0 {
				t.Errorf("promises %v, errors %v", o.got, o.errs)
			}
			if got := fields(srv.Entries(stream)); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// A key that is not a stream is refused for its records, which Debezium
// Server counts as written: at the check, and when the key changes type
// between the check and the write, in the reply, with every later record
// failed too and nothing more written until Resume.
func TestWrongType(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	c := srv.Client()
	if err := c.Set(ctx, "taken", "a string", 0).Err(); err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.Forward(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	s := newStreams(t, p.Addr(), Config{})
	var wt *WrongTypeError
	if err := s.Fits(ctx, record("taken", "e0", "k", "v")); !errors.As(err, &wt) || !wt.Poison() || !wt.Permanent() {
		t.Fatalf("Fits: %v, want a *WrongTypeError", err)
	}
	var o outcomes
	produce(t, s, &o, record("later", "e1", "k", "v1"))
	if err := c.Del(ctx, "later").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "later", "now a string", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if len(o.errs) != 0 {
		t.Fatalf("e1: %v", o.errs)
	}
	// e2 and e3 in one batch: queued while a slow one is in flight.
	if err := s.Fits(ctx, record("other", "e3", "k", "v3")); err != nil {
		t.Fatal(err)
	}
	p.Delay(200 * time.Millisecond)
	if err := s.Produce(ctx, record("slow", "e1b", "k", "v"), o.promise); err != nil {
		t.Fatal(err)
	}
	if err := s.Produce(ctx, record("later", "e2", "k", "v2"), o.promise); err != nil {
		t.Fatal(err)
	}
	if err := s.Produce(ctx, record("other", "e3", "k", "v3"), o.promise); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Delay(0)
	if err := o.failed("e2"); !errors.As(err, &wt) {
		t.Errorf("e2: %v, want a *WrongTypeError", err)
	}
	if o.failed("e3") == nil {
		t.Error("e3, after the failed e2, was acknowledged")
	}
	if err := s.Produce(ctx, record("other", "e4", "k", "v4"), o.promise); !errors.Is(err, ErrHalted) {
		t.Errorf("a record after the failure: %v, want ErrHalted", err)
	}
	// e3 was written in the same MULTI/EXEC (another stream): sent again
	// after Resume, it is not written twice.
	s.Resume()
	produce(t, s, &o, record("other", "e3", "k", "v3"))
	if got := fields(srv.Entries("other")); strings.Join(got, " ") != "k|v3" {
		t.Errorf("other: %v, want one entry", got)
	}
}

// An entry over the server's proto-max-bulk-len is refused before it is
// sent (a server closes the connection of a client that sends one).
func TestTooLarge(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, "--proto-max-bulk-len", "1mb")
	s := newStreams(t, srv.Addr, Config{})
	var tl *TooLargeError
	big := strings.Repeat("x", 1<<20+1)
	if err := s.Fits(ctx, record("events", "e1", "k", big)); !errors.As(err, &tl) || tl.Max != 1<<20 || !tl.Poison() {
		t.Fatalf("Fits: %v, want a *TooLargeError of max 1 MiB", err)
	}
	if err := s.Fits(ctx, record("events", "e1", "k", big[:1<<20])); err != nil {
		t.Errorf("an entry of the limit: %v", err)
	}
	// The relay cuts a dead letter's large values after Fits refused it
	// and produces the same record: the entry is the record as it is now.
	r := record("events", "e2", "k", big)
	if err := s.Fits(ctx, r); !errors.As(err, &tl) {
		t.Fatalf("Fits: %v, want a *TooLargeError", err)
	}
	r.Value = []byte("cut")
	var o outcomes
	produce(t, s, &o, r)
	if err := o.failed("e2"); err != nil || srv.Count("events") != 1 {
		t.Errorf("the record cut after Fits: %v, %d entries", err, srv.Count("events"))
	}
	capped := newStreams(t, srv.Addr, Config{MaxEntryBytes: 100})
	if err := capped.Fits(ctx, record("events", "e1", "k", strings.Repeat("x", 100))); !errors.As(err, &tl) || tl.Max != 100 {
		t.Errorf("over MaxEntryBytes: %v", err)
	}
}

// A server at its maxmemory: writing pauses before it (Debezium Server's
// throttle, from INFO memory) until memory is freed; where INFO is
// refused, the server refuses the batch whole (MULTI/EXEC): nothing of it
// is written, its records fail, and once memory is freed the records sent
// again are written once, in order.
func TestOutOfMemory(t *testing.T) {
	for _, refused := range []bool{false, true} {
		t.Run(map[bool]string{false: "throttled", true: "refused"}[refused], func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.Start(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
			c := srv.Client()
			if err := c.Do(ctx, "acl", "setuser", "noinfo", "on", ">pw", "~*", "+@all", "-info").Err(); err != nil {
				t.Fatal(err)
			}
			// Ballast until the server refuses more: used memory is then
			// over maxmemory.
			var ballast []string
			for i := 0; ; i++ {
				key := fmt.Sprintf("ballast-%d", i)
				if err := c.Set(ctx, key, strings.Repeat("b", 32<<10), 0).Err(); err != nil {
					if !strings.Contains(err.Error(), "OOM") || i == 0 {
						t.Fatal(err)
					}
					break
				}
				ballast = append(ballast, key)
			}
			cfg := Config{WaitRetryDelay: 50 * time.Millisecond}
			if refused {
				cfg.User, cfg.Password = "noinfo", "pw"
			}
			s := newStreams(t, srv.Addr, cfg)
			var o outcomes
			recs := []*kgo.Record{record("events", "e1", "k", "v1"), record("events", "e2", "k", "v2")}
			halted := false // refused: e1's refusal came before e2 was handed over
			for i, r := range recs {
				err := s.Produce(ctx, r, o.promise)
				if refused && i > 0 && errors.Is(err, ErrHalted) {
					halted = true
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if !refused {
				time.Sleep(500 * time.Millisecond)
				if s.Buffered() != 2 || srv.Count("events") != 0 {
					t.Fatalf("at maxmemory: %d records wait (want 2), %d entries (want none)", s.Buffered(), srv.Count("events"))
				}
			} else {
				if err := s.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				var re *ReplyError
				if err := o.failed("e1"); !errors.As(err, &re) || !strings.Contains(err.Error(), "OOM") {
					t.Fatalf("e1: %v, want the OOM refusal", err)
				}
				if !halted && o.failed("e2") == nil || srv.Count("events") != 0 {
					t.Fatalf("e2 %v; the stream holds %d entries, want none", o.failed("e2"), srv.Count("events"))
				}
			}
			if err := c.Del(ctx, ballast...).Err(); err != nil {
				t.Fatal(err)
			}
			if refused {
				s.Resume()
				o = outcomes{}
				produce(t, s, &o, recs...)
			} else if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if len(o.errs) != 0 || strings.Join(fields(srv.Entries("events")), " ") != "k|v1 k|v2" {
				t.Errorf("after memory was freed: %v, entries %v", o.errs, fields(srv.Entries("events")))
			}
		})
	}
}

// A connection lost after the server wrote a batch, before its reply came
// back: the next connection finds the batch written, and the records the
// relay sends again are acknowledged without being written twice; a batch
// lost before the server read it is written when sent again.
func TestLostReply(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name    string
		written bool
	}{{"written", true}, {"not written", false}} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := faultproxy.Forward(srv.Addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			stream := "lost." + strings.ReplaceAll(tc.name, " ", "-")
			s := newStreams(t, p.Addr(), Config{SocketTimeout: 5 * time.Second})
			var o outcomes
			// A first entry, so that the stream's last entry is known.
			produce(t, s, &o, record(stream, "e0", "k", "v0"))
			recs := []*kgo.Record{record(stream, "e1", "k", "v1"), record(stream, "e2", "k", "same"), record(stream, "e3", "k", "same")}
			ctx := context.Background()
			if tc.written {
				// Each way takes 400 ms: the batch reaches the server at
				// 400 ms, its reply would be back at 800.
				p.Delay(400 * time.Millisecond)
				for _, r := range recs {
					if err := s.Produce(ctx, r, o.promise); err != nil {
						t.Fatal(err)
					}
				}
				eventuallyCount(t, srv, stream, 4)
				p.Reset()
			} else {
				p.Blackhole()
				for _, r := range recs {
					if err := s.Produce(ctx, r, o.promise); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(300 * time.Millisecond)
				p.Reset()
				p.Heal()
			}
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if o.failed("e1") == nil || o.failed("e3") == nil {
				t.Fatalf("the batch whose reply was lost was acknowledged: %v", o.errs)
			}
			p.Delay(0)
			s.Resume()
			o = outcomes{}
			produce(t, s, &o, recs...)
			if len(o.errs) != 0 {
				t.Fatalf("sent again: %v", o.errs)
			}
			if got := fields(srv.Entries(stream)); strings.Join(got, " ") != "k|v0 k|v1 k|same k|same" {
				t.Errorf("entries %v, want each once", got)
			}
		})
	}
}

func eventuallyCount(t *testing.T, srv *redistest.Server, stream string, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for srv.Count(stream) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d entries, want %d", stream, srv.Count(stream), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The server killed and started again: with its append-only file, what
// it acknowledged is there and is not written again when sent again;
// without one, the entries it lost are written again.
func TestServerRestart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		kept    bool
		entries string
	}{
		{"appendfsync always", nil, true, "k|v1 k|v2 k|v3"},
		{"no persistence", []string{"--appendonly", "no"}, false, "k|v1 k|v2 k|v3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t, tc.args...)
			s := newStreams(t, srv.Addr, Config{})
			var o outcomes
			produce(t, s, &o, record("events", "e1", "k", "v1"), record("events", "e2", "k", "v2"))
			srv.Kill()
			srv.Start()
			if got := srv.Count("events"); (got == 2) != tc.kept {
				t.Fatalf("after the restart the stream holds %d entries", got)
			}
			// The relay sends again what it had not confirmed. The old
			// connection is gone: the first batch fails, Resume, again.
			o = outcomes{}
			produce(t, s, &o, record("events", "e1", "k", "v1"))
			s.Resume()
			o = outcomes{}
			produce(t, s, &o, record("events", "e1", "k", "v1"), record("events", "e2", "k", "v2"), record("events", "e3", "k", "v3"))
			if len(o.errs) != 0 {
				t.Fatalf("sent again: %v", o.errs)
			}
			if got := strings.Join(fields(srv.Entries("events")), " "); got != tc.entries {
				t.Errorf("entries %s, want %s", got, tc.entries)
			}
		})
	}
}

// With wait.enabled, a record is acknowledged only once a replica has
// it: without a replica it waits, and it is acknowledged when one comes.
func TestWaitForReplica(t *testing.T) {
	srv := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	s := newStreams(t, srv.Addr, Config{Wait: true, WaitTimeout: 200 * time.Millisecond, WaitRetryDelay: 100 * time.Millisecond})
	var o outcomes
	ctx := context.Background()
	if err := s.Produce(ctx, record("events", "e1", "k", "v1"), o.promise); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	o.mu.Lock()
	early := len(o.got)
	o.mu.Unlock()
	if early != 0 || srv.Count("events") != 1 {
		t.Fatalf("without a replica: %d promises ran (want none); %d entries", early, srv.Count("events"))
	}
	redistest.StartReplica(t, srv)
	flushCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := s.Flush(flushCtx); err != nil {
		t.Fatal(err)
	}
	if len(o.errs) != 0 || len(o.got) != 1 {
		t.Errorf("with a replica: %v %v", o.got, o.errs)
	}
}

// A refused password stops at Ping, permanently, without showing it.
func TestAuth(t *testing.T) {
	srv := redistest.Start(t, "--requirepass", "s3cret-pass")
	bad := newStreams(t, srv.Addr, Config{Password: "wrong-pass"})
	err := bad.Ping(context.Background())
	var ae *AuthError
	if !errors.As(err, &ae) || !ae.Permanent() || strings.Contains(err.Error(), "wrong-pass") {
		t.Errorf("wrong password: %v, want a permanent *AuthError without the password", err)
	}
	good := newStreams(t, srv.Addr, Config{Password: "s3cret-pass"})
	if err := good.Ping(context.Background()); err != nil {
		t.Errorf("right password: %v", err)
	}
}

// An ACL user that may add entries but not read streams nor CONFIG writes
// as Debezium Server's sink would; one that may not add entries is
// refused, permanently.
func TestACL(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	c := srv.Client()
	if err := c.Do(ctx, "acl", "setuser", "writer", "on", ">pw", "~*", "+@all", "-xrange", "-xrevrange", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "acl", "setuser", "reader", "on", ">pw", "~*", "+@all", "-xadd").Err(); err != nil {
		t.Fatal(err)
	}
	w := newStreams(t, srv.Addr, Config{User: "writer", Password: "pw"})
	var o outcomes
	produce(t, w, &o, record("acl", "e1", "k", "v1"))
	if len(o.errs) != 0 || srv.Count("acl") != 1 {
		t.Errorf("a user without XRANGE and CONFIG: %v, %d entries", o.errs, srv.Count("acl"))
	}
	r := newStreams(t, srv.Addr, Config{User: "reader", Password: "pw"})
	o = outcomes{}
	produce(t, r, &o, record("acl", "e2", "k", "v2"))
	var ae *AuthError
	if err := o.failed("e2"); !errors.As(err, &ae) || !ae.Permanent() {
		t.Errorf("a user without XADD: %v, want a permanent *AuthError", err)
	}
}

// A Redis Cluster (cluster.enabled): streams of different slots on
// different nodes, each slot's entries one MULTI/EXEC; a node killed
// fails its records, the others' are written, and once it is back what
// the relay sends again is written once.
func TestCluster(t *testing.T) {
	ctx := context.Background()
	cl := redistest.StartCluster(t, 3)
	a, b := "outbox.event.order", "outbox.event.Payment" // slots 13696 and 7374
	if cl.Node(a) == cl.Node(b) {
		t.Fatal("both streams on one node")
	}
	s, err := New(Config{Addrs: strings.Split(cl.Addrs(), ","), Cluster: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	var o outcomes
	produce(t, s, &o, record(a, "e1", "o-1", "v1"), record(b, "e2", "p-1", "v2"))
	if len(o.errs) != 0 {
		t.Fatal(o.errs)
	}
	node := cl.Node(a)
	node.Kill()
	o = outcomes{}
	recs := []*kgo.Record{record(b, "e3", "p-1", "v3"), record(a, "e4", "o-1", "v4"), record(b, "e5", "p-1", "v5")}
	for _, r := range recs {
		if err := s.Produce(ctx, r, o.promise); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if o.failed("e4") == nil || o.failed("e5") == nil {
		t.Fatalf("with the node of %s down: %v", a, o.errs)
	}
	node.Start()
	cl.AwaitOK()
	s.Resume()
	o = outcomes{}
	produce(t, s, &o, recs...)
	if len(o.errs) != 0 {
		t.Fatalf("sent again: %v", o.errs)
	}
	got := func(stream string) string { return strings.Join(fields(cl.Entries(stream)), " ") }
	if got(a) != "o-1|v1 o-1|v4" || got(b) != "p-1|v2 p-1|v3 p-1|v5" {
		t.Errorf("%s: %s; %s: %s", a, got(a), b, got(b))
	}
}

// TLS: a client that trusts the server's CA writes; one that does not
// stops at Ping (a permanent error), as does one that asks a plaintext
// server for TLS.
func TestTLS(t *testing.T) {
	ctx := context.Background()
	ca := tlstest.New(t)
	srv := redistest.StartTLS(t, ca)
	trusted := &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}
	s := newStreams(t, srv.Addr, Config{TLS: trusted})
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("trusted: %v", err)
	}
	var o outcomes
	produce(t, s, &o, record("tls", "e1", "k", "v"))
	if len(o.errs) != 0 || srv.Count("tls") != 1 {
		t.Errorf("over TLS: %v, %d entries", o.errs, srv.Count("tls"))
	}
	var auth *AuthError
	err := newStreams(t, srv.Addr, Config{TLS: &tls.Config{MinVersion: tls.VersionTLS12}}).Ping(ctx)
	if !errors.As(err, &auth) || !auth.Permanent() {
		t.Errorf("an untrusted certificate: %v, want a permanent *AuthError", err)
	}
	plain := redistest.Start(t)
	if err := newStreams(t, plain.Addr, Config{TLS: trusted, ConnectTimeout: time.Second}).Ping(ctx); err == nil {
		t.Error("TLS to a plaintext server answered")
	}
}

// SkipPrefix: a record whose stream starts with it is acknowledged in its
// turn and not written, as Debezium Server's sink drops heartbeats
// (skip.heartbeat.messages); the others are written.
func TestSkipPrefix(t *testing.T) {
	srv := redistest.Start(t)
	s := newStreams(t, srv.Addr, Config{SkipPrefix: "__debezium-heartbeat"})
	var o outcomes
	produce(t, s, &o,
		record("events", "e1", "k", "v1"),
		record("__debezium-heartbeat.shop", "", "k", "beat"),
		record("events", "e2", "k", "v2"),
		record("__debezium-heartbeat-other", "", "k", "beat"))
	if len(o.errs) != 0 || strings.Join(o.got, " ") != "e1  e2 " {
		t.Errorf("promises %q, failures %v; want e1, the heartbeat, e2, the other, none failed", o.got, o.errs)
	}
	if got := strings.Join(fields(srv.Entries("events")), " "); got != "k|v1 k|v2" {
		t.Errorf("events %s", got)
	}
	if n := srv.Count("__debezium-heartbeat.shop") + srv.Count("__debezium-heartbeat-other"); n != 0 {
		t.Errorf("%d entries in the skipped streams", n)
	}
}
