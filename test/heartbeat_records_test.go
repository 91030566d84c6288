package test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// Heartbeat records (--heartbeat-topic, Debezium's heartbeat.interval.ms
// above 0) arrive on their topic keyed as Debezium keys them, and are
// delivered as events are: while the broker holds every produce request
// that carries the heartbeat topic, the slot is not confirmed past the
// heartbeats whose records wait, though heartbeats go on being written;
// released, the slot moves on.
func TestHeartbeatRecordsDelivery(t *testing.T) {
	e := testenv.New(t)
	const hbTopic = "__debezium-heartbeat.shop"
	e.Run(t, "--format", "debezium-outbox", "--topic-prefix", "shop", "--heartbeat-topic", hbTopic,
		"--key-converter", "json", "--value-converter", "json")
	e.AwaitSlotActive(t, "pgoutbox")
	start := time.Now()
	recs := kafkatest.Consume(t, e.Brokers, []string{hbTopic}, 2, 20*time.Second)
	for _, r := range recs {
		if string(r.Key) != `{"serverName":"shop"}` {
			t.Errorf("heartbeat key %s, want Debezium's {\"serverName\":\"shop\"}", r.Key)
		}
		var v struct {
			TS *int64 `json:"ts_ms"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil || v.TS == nil {
			t.Fatalf("heartbeat value %s: want {\"ts_ms\":…}", r.Value)
		}
		if ts := time.UnixMilli(*v.TS); ts.Before(start.Add(-time.Minute)) || ts.After(time.Now().Add(time.Second)) {
			t.Errorf("heartbeat ts_ms %s, not the time of the beat", ts)
		}
		if r.Partition != 0 {
			t.Errorf("heartbeat in partition %d, Debezium's go to 0", r.Partition)
		}
	}
	hbID := topicID(t, e.Brokers, hbTopic)

	fake := e.Kafka.Fake
	var withhold atomic.Bool
	withhold.Store(true)
	release := make(chan struct{})
	var held atomic.Int64
	fake.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if pr, ok := req.(*kmsg.ProduceRequest); ok && withhold.Load() {
			for _, tp := range pr.Topics {
				if tp.Topic == hbTopic || tp.TopicID == hbID {
					held.Add(1)
					fake.SleepControl(func() { <-release })
					break
				}
			}
		}
		return nil, nil, false
	})
	testenv.Eventually(t, 10*time.Second, "a produce request to the heartbeat topic held", func() bool { return held.Load() > 0 })
	// Every heartbeat held is written before now.
	now := currentLSN(t, e)
	time.Sleep(2500 * time.Millisecond) // heartbeats and status updates go on meanwhile
	if s := e.Slot("pgoutbox"); s.ConfirmedLSN >= now {
		t.Fatalf("confirmed_flush_lsn %s passed %s, though the heartbeat records before it wait for Kafka", s.ConfirmedLSN, now)
	}
	withhold.Store(false)
	close(release)
	testenv.Eventually(t, 20*time.Second, "the slot confirmed past the held heartbeats", func() bool {
		return e.Slot("pgoutbox").ConfirmedLSN >= now
	})
	if n := len(testenv.Drain(t, e.Brokers, hbTopic, 0)); n < 10 {
		t.Errorf("%d heartbeat records in about 4 seconds of heartbeats every 200ms", n)
	}
}

// A plain configuration (no --heartbeat-topic) writes no heartbeat record.
func TestHeartbeatNoRecords(t *testing.T) {
	e := testenv.New(t)
	e.Run(t, "--format", "debezium-outbox", "--topic-prefix", "shop")
	e.AwaitSlotActive(t, "pgoutbox")
	e.Insert(testenv.NewRow("order", "o-1", "Placed", `{}`))
	kafkatest.Consume(t, e.Brokers, []string{"outbox.event.order"}, 1, 20*time.Second)
	time.Sleep(time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(testenv.TimeoutContext(t, 15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for name := range topics {
		if strings.Contains(name, "heartbeat") {
			t.Errorf("topic %s without --heartbeat-topic", name)
		}
	}
}

func currentLSN(t *testing.T, e *testenv.Env) pglogrepl.LSN {
	t.Helper()
	var s string
	if err := e.Conn.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&s); err != nil {
		t.Fatal(err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// Under exactly-once delivery the heartbeat records are written in Kafka
// transactions, as the events are, and the slot moves on past them.
func TestHeartbeatRecordsExactlyOnce(t *testing.T) {
	e := testenv.New(t)
	const hbTopic = "__debezium-heartbeat.shop"
	e.Run(t, "--format", "debezium-outbox", "--topic-prefix", "shop", "--heartbeat-topic", hbTopic,
		"--value-converter", "json", "--delivery", "exactly-once")
	e.AwaitSlotActive(t, "pgoutbox")
	e.Insert(testenv.NewRow("order", "o-1", "Placed", `{}`))
	events := kafkatest.Consume(t, e.Brokers, []string{"outbox.event.order"}, 1, 20*time.Second)
	recs := kafkatest.Consume(t, e.Brokers, []string{hbTopic}, 3, 20*time.Second)
	for _, r := range append(recs, events...) {
		if !r.Attrs.IsTransactional() {
			t.Errorf("%s: %s written outside a Kafka transaction", r.Topic, r.Value)
		}
	}
	now := currentLSN(t, e)
	testenv.Eventually(t, 20*time.Second, "the slot confirmed past the heartbeats", func() bool {
		return e.Slot("pgoutbox").ConfirmedLSN >= now
	})
}
