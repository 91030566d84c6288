package test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/sink"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
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
			e := newEnv(t)
			cfg := e.config()
			cfg.Sink.MaxMessageBytes = 2048
			cfg.Sink.MaxBufferedBytes = 1 << 20
			e.setup(cfg)
			good := e.insert(row{"order", "o-1", "Placed", `{"n":1}`})
			before := e.currentLSN()
			e.insert(row{"order", tt.aggID, "Placed", tt.payload})
			e.insert(row{"order", "o-1", "Placed", `{"n":3}`})
			r := e.start(cfg)

			recs := kafkatest.Consume(t, e.brokers, []string{"outbox.event.order"}, 1, 15*time.Second)
			if id := decodeEvent(t, recs[0]).ID; id != good[0] {
				t.Fatalf("first event %s, want %s", id, good[0])
			}
			var err error
			select {
			case err = <-r.done:
				r.done <- err
			case <-time.After(20 * time.Second):
				t.Fatal("the relay did not stop at the poison row")
			}
			if !tt.isErr(err) {
				t.Fatalf("relay stopped with %v", err)
			}
			t.Logf("relay stopped with: %v", err)
			if got := e.slot("pgoutbox").ConfirmedLSN; got > before {
				t.Fatalf("confirmed %s past the poison row's transaction (which starts after %s)", got, before)
			}
			if n := drain(t, e.brokers, "outbox.event.order", 0); len(n) != 1 {
				t.Fatalf("%d records published; the events after the poison row must wait", len(n))
			}
			var pending int
			e.conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox").Scan(&pending)
			if pending != 3 {
				t.Fatalf("outbox has %d rows", pending)
			}
		})
	}
}
