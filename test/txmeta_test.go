package test

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// Transaction metadata (--transaction-metadata, Debezium's
// provide.transaction.metadata) is delivered as the events are: while the
// broker holds every produce request that carries the transaction topic,
// the slot is not confirmed past the transactions whose END waits, even
// though the stream goes on; pgoutbox killed then and started again sends
// them again, and in the end every event is in Kafka and every
// transaction has its BEGIN and an END that counts its events.
func TestTransactionMetadataDelivery(t *testing.T) {
	e := testenv.New(t)
	const txTopic = "shop.transaction"
	args := []string{"--format", "debezium-outbox", "--transaction-metadata", "--topic-prefix", "shop", "--value-converter", "json"}
	p := e.Run(t, args...)
	e.AwaitSlotActive(t, "pgoutbox")
	if len(p.Logged("transaction metadata: streaming the WAL only (--mode wal): polling knows no transactions")) != 1 {
		t.Errorf("no word at start that the WAL is the only mode:\n%s", p.Out.String())
	}
	ids := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":0}`))
	kafkatest.Consume(t, e.Brokers, []string{txTopic}, 2, 20*time.Second)
	txID := topicID(t, e.Brokers, txTopic) // produce requests name topics by id since v13

	fake := e.Kafka.Fake
	var withhold atomic.Bool
	withhold.Store(true)
	release := make(chan struct{})
	var held atomic.Int64
	fake.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if pr, ok := req.(*kmsg.ProduceRequest); ok && withhold.Load() {
			for _, tp := range pr.Topics {
				if tp.Topic == txTopic || tp.TopicID == txID {
					held.Add(1)
					fake.SleepControl(func() { <-release })
					break
				}
			}
		}
		return nil, nil, false
	})

	probe := testenv.NewCommitProbe(e)
	for i := range 3 {
		ids = append(ids, e.Insert(testenv.NewRow("order", "o-1", "Placed", `{}`), testenv.NewRow("order", "o-2", "Paid", `{"i":`+string(rune('0'+i))+`}`))...)
	}
	commits := probe.Commits()
	if len(commits) != 3 {
		t.Fatalf("probe saw %d commits, want 3", len(commits))
	}
	testenv.Eventually(t, 10*time.Second, "a produce request to the transaction topic held", func() bool { return held.Load() > 0 })
	time.Sleep(1500 * time.Millisecond) // status updates and heartbeats go on meanwhile
	if s := e.Slot("pgoutbox"); s.ConfirmedLSN >= commits[0] {
		t.Fatalf("confirmed_flush_lsn %s reached the commit %s whose transaction records Kafka has not acknowledged", s.ConfirmedLSN, commits[0])
	}

	// Killed with the transaction records unacknowledged: nothing past
	// them was confirmed, so the next start sends them again.
	p.Signal(t, syscall.SIGKILL)
	withhold.Store(false)
	close(release)
	e.Run(t, args...)
	testenv.Eventually(t, 30*time.Second, "the slot confirmed past the last commit", func() bool {
		return e.Slot("pgoutbox").ConfirmedLSN >= commits[2]
	})

	seen := map[string]bool{}
	for _, r := range testenv.Drain(t, e.Brokers, "outbox.event.order", 0) {
		id, _ := testenv.HeaderOf(r, "id")
		seen[id] = true
	}
	for _, id := range ids {
		if !seen[id] {
			t.Errorf("event %s lost", id)
		}
	}
	type txRecord struct {
		Status     string `json:"status"`
		ID         string `json:"id"`
		EventCount *int64 `json:"event_count"`
	}
	begins, ends := map[string]int{}, map[string]int64{}
	var order []string
	for _, r := range testenv.Drain(t, e.Brokers, txTopic, 0) {
		var v txRecord
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("%s: %v", r.Value, err)
		}
		xid, _, ok := strings.Cut(v.ID, ":")
		if !ok || !strings.Contains(string(r.Key), v.ID) {
			t.Fatalf("record %s, key %s: want an id <xid>:<lsn> in both", r.Value, r.Key)
		}
		switch v.Status {
		case "BEGIN":
			begins[xid]++
			if begins[xid] == 1 {
				order = append(order, xid)
			}
		case "END":
			// Its key is not BEGIN's (the ids differ in their position),
			// nor, on a topic of several partitions, its partition: the
			// order across them is not kept, as with Debezium.
			if v.EventCount == nil {
				t.Fatalf("END without event_count: %s", r.Value)
			}
			ends[xid] = *v.EventCount
		default:
			t.Fatalf("status %q", v.Status)
		}
	}
	if len(order) != 4 {
		t.Fatalf("BEGIN records of %d transactions, want 4: %v", len(order), begins)
	}
	// The topic has several partitions: the transactions' order is their
	// ids' (a new cluster's ids do not wrap).
	slices.SortFunc(order, func(a, b string) int {
		x, _ := strconv.Atoi(a)
		y, _ := strconv.Atoi(b)
		return x - y
	})
	for i, xid := range order {
		want := int64(2)
		if i == 0 {
			want = 1
		}
		if ends[xid] != want {
			t.Errorf("transaction %s: END counts %d events, want %d", xid, ends[xid], want)
		}
	}
}

// topicID is topic's id, as the broker's metadata gives it.
func topicID(t *testing.T, brokers []string, topic string) [16]byte {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	details, err := kadm.NewClient(cl).ListTopics(testenv.TimeoutContext(t, 15*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := details[topic]
	if !ok || d.Err != nil {
		t.Fatalf("topic %s: %v", topic, d.Err)
	}
	return d.ID
}

// Under exactly-once delivery the transaction records are written in the
// Kafka transactions of their events: a read_committed consumer sees
// them, each marked transactional, a BEGIN and an END per transaction.
func TestTransactionMetadataExactlyOnce(t *testing.T) {
	e := testenv.New(t)
	const txTopic = "shop.transaction"
	e.Run(t, "--format", "debezium-outbox", "--transaction-metadata", "--topic-prefix", "shop", "--value-converter", "json",
		"--delivery", "exactly-once")
	e.AwaitSlotActive(t, "pgoutbox")
	e.Insert(testenv.NewRow("order", "o-1", "Placed", `{}`), testenv.NewRow("order", "o-1", "Paid", `{}`))
	e.Insert(testenv.NewRow("order", "o-2", "Placed", `{}`))
	events := kafkatest.Consume(t, e.Brokers, []string{"outbox.event.order"}, 3, 20*time.Second)
	recs := kafkatest.Consume(t, e.Brokers, []string{txTopic}, 4, 20*time.Second)
	for _, r := range append(recs, events...) {
		if !r.Attrs.IsTransactional() {
			t.Errorf("%s: %s written outside a Kafka transaction", r.Topic, r.Value)
		}
	}
	statuses := map[string]int{}
	for _, r := range recs {
		var v struct{ Status string }
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatal(err)
		}
		statuses[v.Status]++
	}
	if statuses["BEGIN"] != 2 || statuses["END"] != 2 {
		t.Errorf("transaction records %v, want a BEGIN and an END for each of 2 transactions", statuses)
	}
}
