package test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// createTopics creates topics for a relay that does not create them on
// first use.
func createTopics(t *testing.T, brokers []string, topics ...string) {
	t.Helper()
	createTopicsWith(t, brokers, nil, topics...)
}

// createTopicsWith creates topics with settings, such as max.message.bytes.
func createTopicsWith(t *testing.T, brokers []string, settings map[string]*string, topics ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopics(testenv.TimeoutContext(t, 15*time.Second), 3, 1, settings, topics...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			t.Fatalf("create topic %s: %v", r.Topic, r.Err)
		}
	}
}

// Topics whose max.message.bytes is 100,000 and a relay at its default
// --max-message-bytes, under load, with a 200 KB row: the relay learns the
// topic's limit from the broker and dead-letters the row before producing
// it, once, holding its aggregate's later events behind it; every other
// event is delivered once and in order, and the session never restarts.
// After the row is fixed, dlq replay publishes the aggregate's events
// once each, in order.
func TestBrokerLimitDeadLettersOversizedRow(t *testing.T) {
	for _, mode := range []relay.Mode{relay.ModeWAL, relay.ModePoll} {
		t.Run(string(mode), func(t *testing.T) {
			e := testenv.NewKafka(t)
			const topic = "outbox.event.account"
			createTopicsWith(t, e.Brokers, limit100k, topic, "pgoutbox.dlq")
			cfg := e.Config()
			if mode == relay.ModeWAL {
				e.Setup(cfg)
			}
			load := e.StartLoad(t, 3)
			addr := testenv.FreeAddr(t)
			p := e.Run(t, "--mode", string(mode), "--kafka-create-topics=false", "--poll-interval", "50ms", "--metrics-addr", addr)
			time.Sleep(time.Second)
			const acct = "acct-5"
			big, bigSeq := load.WriteOne(t, acct, `{"blob":"`+strings.Repeat("x", 200_000)+`"}`)
			time.Sleep(2 * time.Second)
			committed := load.Finish()

			// The oversized row and every later event of its aggregate
			// are dead-lettered; everything else is delivered.
			held, want := awaitHeld(t, e, committed, big, bigSeq, acct)
			rep := testenv.Check(t, e.Brokers, topic, want)
			if n, _ := metric(addr, "pgoutbox_events_dead_lettered_total"); int(n) != len(held) {
				t.Errorf("pgoutbox_events_dead_lettered_total %v, want %d", n, len(held))
			}
			if n, _ := metric(addr, "pgoutbox_reconnects_total"); n != 0 {
				t.Errorf("pgoutbox_reconnects_total %v, want 0", n)
			}
			if err := p.Signal(t, syscall.SIGTERM); err != nil {
				t.Errorf("exit after SIGTERM: %v", err)
			}
			t.Logf("%s mode: %v; %d dead-lettered (the 200 KB row and %d held behind it)", mode, rep, len(held), len(held)-1)
			if rep.Lost != 0 || rep.Duplicates != 0 || rep.OrderViolations != 0 {
				t.Errorf("lost %d, duplicates %d, order violations %d", rep.Lost, rep.Duplicates, rep.OrderViolations)
			}
			if rep.Committed < 200 {
				t.Errorf("only %d events committed; the load was too light to mean anything", rep.Committed)
			}
			for _, rec := range testenv.Drain(t, e.Brokers, topic, 0) {
				if id := testenv.DecodeEvent(t, rec).ID; held[id] {
					t.Errorf("event %s of aggregate %s reached the topic ahead of the dead-lettered row", id, acct)
				}
			}
			log := p.Out.String()
			if n := strings.Count(log, `"msg":"reconnecting"`) + strings.Count(log, `"msg":"restarting the session`); n != 0 {
				t.Errorf("the session restarted %d times", n)
			}
			n, reasons := testenv.DeadLetterRows(t, e)
			if len(n) != len(held) {
				t.Errorf("%d events dead-lettered, want %d", len(n), len(held))
			}
			for id, c := range n {
				if c != 1 || !held[id] {
					t.Errorf("event %s: %d dead letters (held behind the row: %v)", id, c, held[id])
				}
			}
			for _, s := range []string{big, topic, "exceeds the maximum message size of 100000 bytes"} {
				if !strings.Contains(reasons[big], s) {
					t.Errorf("reason %q does not name %q", reasons[big], s)
				}
			}
			if !strings.Contains(log, `"event_id":"`+big+`"`) {
				t.Errorf("no log line names event %s", big)
			}
			if _, ok := e.Status(t); ok {
				t.Error("status exits 0 with open dead letters")
			}

			// Fixed and replayed: the aggregate's events arrive once each,
			// in order.
			if _, err := e.Conn.Exec(context.Background(), `UPDATE outbox SET payload = '{"fixed":true}' WHERE id = $1`, big); err != nil {
				t.Fatal(err)
			}
			if got := testenv.ReplayDeadLetters(t, e); got != len(held) {
				t.Errorf("replay published %d, want %d", got, len(held))
			}
			if rep := testenv.Check(t, e.Brokers, topic, committed); rep.Lost != 0 || rep.Duplicates != 0 || rep.OrderViolations != 0 {
				t.Errorf("after replay: %v", rep)
			}
			if _, ok := e.Status(t); !ok {
				t.Error("status exits non-zero after every dead letter was replayed")
			}
		})
	}
}

// limit100k is a topic's setting for records of 100,000 bytes at most.
var limit100k = map[string]*string{"max.message.bytes": kadm.StringPtr("100000")}

// metric reads one unlabelled metric from a relay's metrics endpoint; false
// while the endpoint does not answer.
func metric(addr, name string) (float64, bool) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// aggregateOf reads an event's aggregate id from the outbox.
func aggregateOf(t *testing.T, e *testenv.Env, id string) string {
	t.Helper()
	var agg string
	if err := e.Conn.QueryRow(context.Background(), "SELECT aggregateid FROM outbox WHERE id = $1", id).Scan(&agg); err != nil {
		t.Fatal(err)
	}
	return agg
}

// With the dead-letter topic missing and topic creation off, each session
// fails on the dead letters' records and the relay retries: the
// dead-letter table still holds exactly one row per event, and once the
// rows are fixed dlq replay publishes each event once.
func TestDeadLettersOnceWhileTheirTopicIsMissing(t *testing.T) {
	e := testenv.NewKafka(t)
	const topic = "outbox.event.order"
	createTopicsWith(t, e.Brokers, limit100k, topic) // not pgoutbox.dlq
	cfg := e.Config()
	e.Setup(cfg)
	big := `{"blob":"` + strings.Repeat("x", 200_000) + `"}`
	var events []string
	for i := 0; i < 4; i++ {
		agg := fmt.Sprintf("o-%d", i)
		events = append(events, e.Insert(testenv.NewRow("order", agg, "Placed", big))...)
		events = append(events, e.Insert(testenv.NewRow("order", agg, "Paid", `{"n":2}`), testenv.NewRow("order", agg, "Shipped", `{"n":3}`))...)
	}
	good := e.Insert(testenv.NewRow("order", "o-9", "Placed", `{}`))
	addr := testenv.FreeAddr(t)
	p := e.Run(t, "--mode", "wal", "--kafka-create-topics=false", "--metrics-addr", addr)
	// Several sessions fail on the missing topic.
	testenv.Eventually(t, 90*time.Second, "two failed sessions", func() bool {
		n, _ := metric(addr, "pgoutbox_reconnects_total")
		return n >= 2
	})
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Logf("exit after SIGTERM: %v", err)
	}
	if n := strings.Count(p.Out.String(), `"msg":"reconnecting"`); n < 2 {
		t.Fatalf("the relay retried %d times; the test needs it to retry", n)
	}
	n, _ := testenv.DeadLetterRows(t, e)
	for _, id := range events {
		if n[id] != 1 {
			t.Errorf("event %s: %d dead letters, want 1", id, n[id])
		}
	}
	if len(n) != len(events) {
		t.Errorf("%d events dead-lettered, want %d", len(n), len(events))
	}

	if _, err := e.Conn.Exec(context.Background(), `UPDATE outbox SET payload = '{"fixed":true}' WHERE length(payload::text) > 1000`); err != nil {
		t.Fatal(err)
	}
	if got := testenv.ReplayDeadLetters(t, e); got != len(events) {
		t.Errorf("replay published %d, want %d", got, len(events))
	}
	seen := map[string]int{}
	for _, rec := range testenv.Drain(t, e.Brokers, topic, 0) {
		seen[testenv.DecodeEvent(t, rec).ID]++
	}
	for _, id := range events {
		if seen[id] != 1 {
			t.Errorf("event %s published %d times, want once", id, seen[id])
		}
	}
	// The event after the dead letters was sent again by each session
	// (at least once); it is not the dead letters' to count.
	if seen[good[0]] == 0 {
		t.Errorf("event %s was not published", good[0])
	}
}

// A topic's limit lowered while the relay runs: the relay learned the old
// one, so Kafka refuses the large record after it was produced. The session
// ends once; the next one learns the new limit and dead-letters the record
// before producing anything, holds its aggregate's later event behind it,
// and delivers the other aggregate. No later event of the aggregate reaches
// the topic before it, in WAL and poll modes.
func TestLimitLoweredWhileRunning(t *testing.T) {
	for _, mode := range []relay.Mode{relay.ModeWAL, relay.ModePoll} {
		t.Run(string(mode), func(t *testing.T) {
			e := testenv.NewKafka(t)
			const topic = "outbox.event.order"
			cfg := e.Config()
			cfg.Mode = mode
			cfg.PollInterval = 50 * time.Millisecond
			if mode == relay.ModeWAL {
				e.Setup(cfg)
			}
			r := e.Start(cfg)
			first := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":1}`), testenv.NewRow("order", "o-2", "Placed", `{"n":1}`))
			testenv.AwaitIDs(t, e.Brokers, topic, first, 15*time.Second)

			cl, err := kgo.NewClient(kgo.SeedBrokers(e.Brokers...))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			limit := "10000"
			resp, err := kadm.NewClient(cl).AlterTopicConfigs(testenv.TimeoutContext(t, 15*time.Second),
				[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &limit}}, topic)
			if err == nil {
				for _, rr := range resp {
					err = errors.Join(err, rr.Err)
				}
			}
			if err != nil {
				t.Fatalf("lower the topic's limit: %v", err)
			}
			ids := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"blob":"`+strings.Repeat("x", 50_000)+`"}`),
				testenv.NewRow("order", "o-1", "Placed", `{"n":3}`), testenv.NewRow("order", "o-2", "Placed", `{"n":2}`))
			big, after, other := ids[0], ids[1], ids[2]
			testenv.AwaitIDs(t, e.Brokers, topic, []string{other}, 30*time.Second)
			testenv.Eventually(t, 30*time.Second, "dead letters recorded", func() bool {
				n, _ := testenv.DeadLetterRows(t, e)
				return len(n) >= 2
			})
			n, reasons := testenv.DeadLetterRows(t, e)
			if len(n) != 2 || n[big] != 1 || n[after] != 1 {
				t.Fatalf("dead letters %v, want one each for %s and %s", n, big, after)
			}
			for _, s := range []string{big, topic, "exceeds the maximum message size of 10000 bytes"} {
				if !strings.Contains(reasons[big], s) {
					t.Errorf("reason %q does not name %q", reasons[big], s)
				}
			}
			if s := r.Stats.Sessions.Load(); mode == relay.ModeWAL && s != 2 {
				t.Errorf("%d WAL sessions, want 2: the refusal ends one, once", s)
			}
			var o1 []string
			for _, rec := range testenv.Drain(t, e.Brokers, topic, 0) {
				if string(rec.Key) == "o-1" {
					o1 = append(o1, testenv.DecodeEvent(t, rec).ID)
				}
			}
			for _, id := range o1 {
				if id != first[0] {
					t.Fatalf("aggregate o-1 reached the topic as %v: an event went ahead of the refused one", o1)
				}
			}

			if _, err := e.Conn.Exec(context.Background(), `UPDATE outbox SET payload = '{"n":2}' WHERE id = $1`, big); err != nil {
				t.Fatal(err)
			}
			if got, err := relay.Replay(context.Background(), cfg, testenv.Logger(t)); err != nil || got != 2 {
				t.Fatalf("replay published %d: %v", got, err)
			}
			o1 = o1[:0]
			seen := map[string]bool{}
			for _, rec := range testenv.Drain(t, e.Brokers, topic, 0) {
				if id := testenv.DecodeEvent(t, rec).ID; string(rec.Key) == "o-1" && !seen[id] {
					seen[id] = true
					o1 = append(o1, id)
				}
			}
			if want := []string{first[0], big, after}; strings.Join(o1, ",") != strings.Join(want, ",") {
				t.Fatalf("aggregate o-1 arrived as %v, want %v", o1, want)
			}
		})
	}
}

// The same under load: three writers, the topic's limit lowered to 100,000
// bytes while the relay runs with the old limit learned, then a 200 KB row.
// Batches of small records over the new limit are refused too, until the
// relay learns it. Nothing is lost, no aggregate is reordered, the row and
// the later events of its aggregate are dead-lettered once each, and none
// of those reaches the topic.
func TestLimitLoweredUnderLoad(t *testing.T) {
	e := testenv.NewKafka(t)
	const topic = "outbox.event.account"
	cfg := e.Config()
	e.Setup(cfg)
	load := e.StartLoad(t, 3)
	e.Start(cfg)
	testenv.Eventually(t, 15*time.Second, "the topic created", func() bool {
		return len(testenv.Drain(t, e.Brokers, topic, 0)) > 0
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	limit := "100000"
	resp, err := kadm.NewClient(cl).AlterTopicConfigs(testenv.TimeoutContext(t, 15*time.Second),
		[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &limit}}, topic)
	if err == nil {
		for _, rr := range resp {
			err = errors.Join(err, rr.Err)
		}
	}
	if err != nil {
		t.Fatalf("lower the topic's limit: %v", err)
	}
	const acct = "acct-5"
	big, bigSeq := load.WriteOne(t, acct, `{"blob":"`+strings.Repeat("x", 200_000)+`"}`)
	time.Sleep(2 * time.Second)
	committed := load.Finish()
	held, want := awaitHeld(t, e, committed, big, bigSeq, acct)
	rep := testenv.Check(t, e.Brokers, topic, want)
	t.Logf("%v; %d dead-lettered", rep, len(held))
	if rep.Lost != 0 || rep.OrderViolations != 0 {
		t.Errorf("lost %d, order violations %d", rep.Lost, rep.OrderViolations)
	}
	for _, rec := range testenv.Drain(t, e.Brokers, topic, 0) {
		if id := testenv.DecodeEvent(t, rec).ID; held[id] && id != big {
			t.Errorf("event %s of aggregate %s reached the topic ahead of the refused row", id, acct)
		}
	}
	n, _ := testenv.DeadLetterRows(t, e)
	for id, c := range n {
		if c != 1 || !held[id] {
			t.Errorf("event %s: %d dead letters (held behind the row: %v)", id, c, held[id])
		}
	}
	if len(n) != len(held) {
		t.Errorf("%d events dead-lettered, want %d", len(n), len(held))
	}
}

// awaitHeld waits until the refused event big and every later event of its
// aggregate are dead-lettered, and returns them (held) and the committed
// events that must be delivered (want).
func awaitHeld(t *testing.T, e *testenv.Env, committed map[string]int, big string, bigSeq int, aggregate string) (held map[string]bool, want map[string]int) {
	t.Helper()
	held = map[string]bool{big: true}
	for id, seq := range committed {
		if seq > bigSeq && aggregateOf(t, e, id) == aggregate {
			held[id] = true
		}
	}
	testenv.Eventually(t, 60*time.Second, "dead letters recorded", func() bool {
		n, _ := testenv.DeadLetterRows(t, e)
		return len(n) >= len(held)
	})
	want = map[string]int{}
	for id, seq := range committed {
		if !held[id] {
			want[id] = seq
		}
	}
	return held, want
}
