package test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/broker"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/sink"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// A row that cannot become a Kafka record stops the relay with an error
// naming the row and the reason. Everything before it is delivered and
// confirmed; nothing from its transaction on is confirmed, so a fixed
// configuration (or the dead-letter policy) can still publish it.
func TestPoisonRowHalts(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		aggID   string
		isErr   func(error) bool
	}{
		{"empty aggregate id", `{}`, "", func(err error) bool {
			var re *schema.RowError
			return errors.As(err, &re) && re.Column == "aggregateid"
		}},
		{"payload over the broker's limit", `{"blob":"` + strings.Repeat("x", 4000) + `"}`, "o-1", func(err error) bool {
			var tl *sink.TooLargeError
			return errors.As(err, &tl)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := testenv.NewKafka(t)
			cfg := e.Config()
			cfg.OnPoison = relay.PoisonHalt
			kc := &cfg.Sink.(*broker.Kafka).Config
			kc.MaxMessageBytes, kc.MaxBufferedBytes = 2048, 1<<20
			e.Setup(cfg)
			good := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":1}`))
			before := e.CurrentLSN()
			e.Insert(testenv.NewRow("order", tt.aggID, "Placed", tt.payload))
			e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":3}`))
			r := e.Start(cfg)

			recs := kafkatest.Consume(t, e.Brokers, []string{"outbox.event.order"}, 1, 15*time.Second)
			if id := testenv.DecodeEvent(t, recs[0]).ID; id != good[0] {
				t.Fatalf("first event %s, want %s", id, good[0])
			}
			var err error
			select {
			case <-r.Done():
				err = r.Err()
			case <-time.After(20 * time.Second):
				t.Fatal("the relay did not stop at the poison row")
			}
			if !tt.isErr(err) {
				t.Fatalf("relay stopped with %v", err)
			}
			t.Logf("relay stopped with: %v", err)
			if got := e.Slot("pgoutbox").ConfirmedLSN; got > before {
				t.Fatalf("confirmed %s past the poison row's transaction (which starts after %s)", got, before)
			}
			if n := testenv.Drain(t, e.Brokers, "outbox.event.order", 0); len(n) != 1 {
				t.Fatalf("%d records published; the events after the poison row must wait", len(n))
			}
			var pending int
			e.Conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox").Scan(&pending)
			if pending != 3 {
				t.Fatalf("outbox has %d rows", pending)
			}
		})
	}
}

// Under the default policy, poison rows go to the dead letters with their
// reason: a payload over the broker's limit, a payload that is not JSON
// where the column allows it, an empty aggregate id. Other aggregates keep
// flowing; later events of a poisoned aggregate are held behind it, so
// nothing overtakes it. Once the rows are fixed, a replay publishes them in
// order and the aggregate flows again.
func TestPoisonRowsDeadLettered(t *testing.T) {
	for _, mode := range []relay.Mode{relay.ModeWAL, relay.ModePoll} {
		t.Run(string(mode), func(t *testing.T) {
			e := testenv.NewKafka(t)
			ctx := context.Background()
			if _, err := e.Conn.Exec(ctx, "ALTER TABLE outbox ALTER COLUMN payload TYPE text"); err != nil {
				t.Fatal(err)
			}
			cfg := e.Config()
			cfg.Mode = mode
			cfg.PollInterval = 50 * time.Millisecond
			kc := &cfg.Sink.(*broker.Kafka).Config
			kc.MaxMessageBytes, kc.MaxBufferedBytes = 2048, 1<<20
			if mode == relay.ModeWAL {
				e.Setup(cfg)
			}
			e.Start(cfg)
			big := `{"blob":"` + strings.Repeat("x", 4000) + `"}`
			n1 := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":1}`))[0]
			tooLarge := e.Insert(testenv.NewRow("order", "o-1", "Placed", big))[0]
			n3 := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":3}`))[0]
			other := e.Insert(testenv.NewRow("order", "o-2", "Placed", `{"other":true}`))[0]
			notJSON := e.Insert(testenv.NewRow("order", "o-4", "Placed", `{not json`))[0]
			noKey := e.Insert(testenv.NewRow("order", "", "Placed", `{"n":5}`))[0]

			testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", []string{n1, other}, 15*time.Second)
			dlq := testenv.AwaitDeadLetters(t, e.Brokers, "pgoutbox.dlq", 4, 15*time.Second)
			got := map[string]string{}
			for _, d := range dlq {
				got[d.EventID] = d.Reason
			}
			for id, want := range map[string]string{tooLarge: "exceeds the maximum message size", n3: "held behind", notJSON: "JSON", noKey: "aggregate"} {
				if !strings.Contains(got[id], want) {
					t.Errorf("dead letter for %s: reason %q, want it to mention %q", id, got[id], want)
				}
			}
			time.Sleep(500 * time.Millisecond)
			for _, rec := range testenv.Drain(t, e.Brokers, "outbox.event.order", 0) {
				if id := testenv.DecodeEvent(t, rec).ID; id == n3 {
					t.Fatal("an event overtook the dead-lettered event of its aggregate")
				}
			}

			// Fix the rows and replay.
			if _, err := e.Conn.Exec(ctx, `UPDATE outbox SET payload = '{"n":2}' WHERE id = $1;`, tooLarge); err != nil {
				t.Fatal(err)
			}
			e.Conn.Exec(ctx, `UPDATE outbox SET payload = '{"fixed":true}' WHERE id = $1`, notJSON)
			e.Conn.Exec(ctx, `UPDATE outbox SET aggregateid = 'o-5' WHERE id = $1`, noKey)
			published, err := relay.Replay(ctx, cfg, testenv.Logger(t))
			if err != nil || published != 4 {
				t.Fatalf("replay published %d: %v", published, err)
			}
			n4 := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":4}`))[0]
			testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", []string{tooLarge, n3, notJSON, noKey, n4}, 15*time.Second)
			var order []string
			for _, rec := range testenv.Drain(t, e.Brokers, "outbox.event.order", 0) {
				if string(rec.Key) == "o-1" {
					order = append(order, testenv.DecodeEvent(t, rec).ID)
				}
			}
			want := []string{n1, tooLarge, n3, n4}
			if strings.Join(order, ",") != strings.Join(want, ",") {
				t.Fatalf("aggregate o-1 arrived as %v, want %v", order, want)
			}
			var open int
			e.Conn.QueryRow(ctx, "SELECT count(*) FROM pgoutbox_dead_letter WHERE replayed_at IS NULL").Scan(&open)
			if open != 0 {
				t.Fatalf("%d dead letters still open", open)
			}
		})
	}
}
