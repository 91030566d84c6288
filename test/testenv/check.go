package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

// Eventually polls cond every 50 ms until it holds, and fails the test
// naming what it waited for if timeout passes first.
func Eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TimeoutContext is a context that ends after d, or when the test ends.
func TimeoutContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Event is what tests read back of a structured CloudEvent.
type Event struct {
	ID           string          `json:"id"`
	Source       string          `json:"source"`
	Type         string          `json:"type"`
	PartitionKey string          `json:"partitionkey"`
	Data         json.RawMessage `json:"data"`
}

// DecodeEvent reads r's value as a structured CloudEvent, failing the test
// if it is not one.
func DecodeEvent(t *testing.T, r *kgo.Record) Event {
	t.Helper()
	var ev Event
	if err := json.Unmarshal(r.Value, &ev); err != nil {
		t.Fatalf("record value is not a CloudEvent: %v: %s", err, r.Value)
	}
	return ev
}

// EventID reads a record's event id from its CloudEvent, for CheckOnce.
func EventID(t *testing.T) func(*kgo.Record) string {
	return func(r *kgo.Record) string { return DecodeEvent(t, r).ID }
}

// HeaderOf is the value of r's header key, and whether r has it (an
// absent header told from an empty one).
func HeaderOf(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// AwaitIDs reads topic from the start until every id has arrived, and
// returns how many records it read. Duplicates (allowed after a restart)
// do not count towards completion.
func AwaitIDs(t *testing.T, brokers []string, topic string, ids []string, timeout time.Duration) int {
	t.Helper()
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	c := kafkatest.NewConsumer(t, brokers, topic)
	deadline := time.Now().Add(timeout)
	read := 0
	for len(want) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events never arrived on %s within %s", len(want), len(ids), topic, timeout)
		}
		fs := c.PollRecords(TimeoutContext(t, time.Second), 10000)
		fs.EachRecord(func(r *kgo.Record) {
			read++
			delete(want, DecodeEvent(t, r).ID)
		})
	}
	return read
}

// Drain reads every record of topic up to the end offsets the broker
// reports now, and returns those past the first skip ones. Reading to the
// end offsets, not until a poll comes back empty, makes it exact however
// slow the first fetch is.
func Drain(t *testing.T, brokers []string, topic string, skip int) []*kgo.Record {
	t.Helper()
	admin, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ends, err := kadm.NewClient(admin).ListEndOffsets(TimeoutContext(t, 15*time.Second), topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	c := kafkatest.NewConsumer(t, brokers, topic)
	var out []*kgo.Record
	n := 0
	deadline := time.Now().Add(30 * time.Second)
	for len(want) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("drain %s: partitions %v not read to their end", topic, want)
		}
		fs := c.PollRecords(TimeoutContext(t, time.Second), 10000)
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
			if n >= skip {
				out = append(out, r)
			}
			n++
		})
	}
	return out
}

// CountIDs reads the whole topic and counts the records of each event id.
func CountIDs(t *testing.T, brokers []string, topic string) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, r := range Drain(t, brokers, topic, 0) {
		n[DecodeEvent(t, r).ID]++
	}
	return n
}

// CheckOnce fails the test unless recs (a topic read with Drain, say) hold
// every wanted id exactly once and nothing else, reading each record's id
// with id.
func CheckOnce(t *testing.T, recs []*kgo.Record, want []string, id func(*kgo.Record) string) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range recs {
		seen[id(r)]++
	}
	missing := 0
	for _, w := range want {
		if seen[w] == 0 {
			missing++
		}
		delete(seen, w)
	}
	if missing > 0 || len(seen) > 0 || len(recs) != len(want) {
		t.Errorf("%d records for %d rows: %d rows missing, %d unexpected ids", len(recs), len(want), missing, len(seen))
	}
}

// Report is what Check finds in a topic against what committed: events
// delivered (first deliveries), lost, delivered again, and first
// deliveries out of their aggregate's commit order.
type Report struct {
	Committed, Delivered, Lost, Duplicates, OrderViolations int
	// LongestGap is the longest time between two consecutive new events,
	// by the time they were appended to Kafka: under continuous load, how
	// long the worst fault of the run stopped the flow.
	LongestGap time.Duration
}

// String is the report in one line, for the test log.
func (r Report) String() string {
	return fmt.Sprintf("committed %d, delivered %d, lost %d, duplicates %d, order violations %d, longest stall %v",
		r.Committed, r.Delivered, r.Lost, r.Duplicates, r.OrderViolations, r.LongestGap.Round(time.Millisecond))
}

// Check reads the topic from the start until every committed event (event
// id -> its place in its aggregate's commit order, as Load.Finish returns)
// has arrived or a minute passes, then a little longer to count late
// duplicates, and compares with what committed: nothing lost, duplicates
// counted, and per aggregate (the record key) the first delivery of each
// event in commit order (a redelivery replays a suffix and is allowed).
// An event that never committed, and each order violation, fail the test;
// losses and duplicates are the caller's to judge.
func Check(t *testing.T, brokers []string, topic string, committed map[string]int) Report {
	t.Helper()
	return CheckWith(t, brokers, topic, committed, nil)
}

// CheckWith is Check that also accepts the events in maybe (of commits whose
// outcome the writer could not know): they may arrive or not, are counted
// neither as delivered nor as lost, and are not ordered.
func CheckWith(t *testing.T, brokers []string, topic string, committed map[string]int, maybe map[string]bool) Report {
	t.Helper()
	c := kafkatest.NewConsumer(t, brokers, topic)
	rep := Report{Committed: len(committed)}
	seen := map[string]int{}
	last := map[string]int{}
	var firsts []time.Time
	deadline := time.Now().Add(60 * time.Second)
	idle := 0
	for {
		fs := c.PollRecords(TimeoutContext(t, 500*time.Millisecond), 10000)
		if fs.NumRecords() == 0 {
			idle++
		} else {
			idle = 0
		}
		fs.EachRecord(func(r *kgo.Record) {
			ev := DecodeEvent(t, r)
			seen[ev.ID]++
			if seen[ev.ID] > 1 {
				rep.Duplicates++
				return
			}
			seq, ok := committed[ev.ID]
			if !ok && maybe[ev.ID] {
				return
			}
			if !ok {
				t.Errorf("event %s was never committed (rolled back?)", ev.ID)
				return
			}
			rep.Delivered++
			firsts = append(firsts, r.Timestamp)
			if prev, ok := last[string(r.Key)]; ok && seq <= prev {
				rep.OrderViolations++
				t.Errorf("aggregate %s: seq %d delivered after %d", r.Key, seq, prev)
			}
			last[string(r.Key)] = seq
		})
		if (rep.Delivered == len(committed) && idle >= 2) || time.Now().After(deadline) {
			break
		}
	}
	rep.Lost = len(committed) - rep.Delivered
	slices.SortFunc(firsts, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(firsts); i++ {
		rep.LongestGap = max(rep.LongestGap, firsts[i].Sub(firsts[i-1]))
	}
	return rep
}

// CheckEvents compares the events a broker other than Kafka holds, in the
// order it holds them, with what committed (Load's ids and places): nothing
// lost, nothing never committed, and per aggregate the first copy of each
// event in commit order. It returns the report and, for each copy, the
// place of the event's first copy.
func CheckEvents(t *testing.T, events []LoadEvent, committed map[string]int) (Report, []int) {
	t.Helper()
	rep := Report{Committed: len(committed)}
	first := map[string]int{}
	last := map[string]int{}
	var dupAt []int
	for i, ev := range events {
		if at, ok := first[ev.ID]; ok {
			rep.Duplicates++
			dupAt = append(dupAt, at)
			continue
		}
		first[ev.ID] = i
		seq, ok := committed[ev.ID]
		if !ok {
			t.Errorf("event %s was never committed (rolled back?)", ev.ID)
			continue
		}
		rep.Delivered++
		if prev, ok := last[ev.PartitionKey]; ok && seq <= prev {
			rep.OrderViolations++
			t.Errorf("aggregate %s: seq %d held after %d", ev.PartitionKey, seq, prev)
		}
		last[ev.PartitionKey] = seq
	}
	rep.Lost = len(committed) - rep.Delivered
	return rep, dupAt
}

// Missing lists the committed events that are not among events, as
// "id (seq n)", sorted: what CheckEvents counted lost.
func Missing(events []LoadEvent, committed map[string]int) []string {
	held := map[string]bool{}
	for _, ev := range events {
		held[ev.ID] = true
	}
	var lost []string
	for id, seq := range committed {
		if !held[id] {
			lost = append(lost, fmt.Sprintf("%s (seq %d)", id, seq))
		}
	}
	slices.Sort(lost)
	return lost
}

// CheckAfterFault checks a broker's events after a fault under load: it
// waits until read's events hold every committed one, then, a second
// later (a late copy would show), that nothing was lost, no aggregate's
// order broken, at least 100 delivered, at most maxCopies copies, and that
// the relay p started a session again (without that the fault failed
// nothing and tested nothing). serverLog is what to show of the broker
// when events are lost.
func CheckAfterFault(t *testing.T, p *Proc, read func() []LoadEvent, committed map[string]int, maxCopies int, serverLog func() string) Report {
	t.Helper()
	Eventually(t, 2*time.Minute, "every committed event", func() bool {
		return len(Missing(read(), committed)) == 0
	})
	time.Sleep(time.Second)
	rep, _ := CheckEvents(t, read(), committed)
	t.Log(rep)
	if rep.Lost != 0 || rep.OrderViolations != 0 || rep.Delivered < 100 {
		t.Errorf("%v: want nothing lost, no order violation, at least 100 delivered\n%s", rep, serverLog())
	}
	if rep.Duplicates > maxCopies {
		t.Errorf("%d duplicates, want at most %d", rep.Duplicates, maxCopies)
	}
	if !strings.Contains(p.Out.String(), `"msg":"reconnecting"`) {
		t.Errorf("the relay did not start again: the fault failed nothing\n%s", p.Out.String())
	}
	return rep
}
