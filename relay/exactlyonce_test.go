package relay

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/replication"
)

func TestDeliveryValidation(t *testing.T) {
	for _, tt := range []struct {
		mode     Mode
		delivery Delivery
		topic    string
		ok       bool
	}{
		{ModeAuto, AtLeastOnce, "", true},
		{ModeAuto, "", "", true}, // the default
		{ModeWAL, ExactlyOnce, "", true},
		{ModePoll, ExactlyOnce, "", true},
		{ModeAuto, ExactlyOnce, "", false},
		{ModeWAL, "exactly-twice", "", false},
		{ModeWAL, ExactlyOnce, "bad{topic}", false},
		{ModeWAL, ExactlyOnce, "pgoutbox.dlq", false}, // the dead-letter topic
	} {
		cfg := Config{Mode: tt.mode, Delivery: tt.delivery, PositionTopic: tt.topic}
		cfg.Replication.DatabaseURL = "postgres://127.0.0.1:1/none"
		cfg.Sink.Brokers = []string{"127.0.0.1:1"}
		cfg.Defaults()
		err := cfg.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("mode %s, delivery %q, position topic %q: %v", tt.mode, tt.delivery, tt.topic, err)
		}
		if tt.mode == ModeAuto && tt.delivery == ExactlyOnce && !errors.Is(err, ErrExactlyOnceMode) {
			t.Errorf("auto mode with exactly-once: %v, want ErrExactlyOnceMode", err)
		}
	}
}

func TestPositionRecordRoundTrip(t *testing.T) {
	r := testRelay(t, "", PoisonHalt)
	r.cfg.PositionTopic = "pgoutbox.position"
	for _, p := range []position{
		{mode: ModeWAL, end: 0x1A2B3C4, commit: 0x1A2B3A0},
		{mode: ModePoll, seqs: []int64{3, 4, 9}},
	} {
		rec, err := r.positionRecord(p)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Topic != "pgoutbox.position" || string(rec.Key) != r.cfg.Replication.Slot {
			t.Fatalf("record to %s keyed %q", rec.Topic, rec.Key)
		}
		got, err := parsePosition(rec)
		if err != nil {
			t.Fatal(err)
		}
		if got.mode != p.mode || got.end != p.end || got.commit != p.commit || !slices.Equal(got.seqs, p.seqs) {
			t.Fatalf("%s: read back %+v, wrote %+v", rec.Value, got, p)
		}
	}
	rec, _ := r.positionRecord(position{mode: ModeWAL})
	rec.Value = []byte(`{"mode":"sideways"}`)
	if _, err := parsePosition(rec); err == nil {
		t.Fatal("a position of an unknown mode was accepted")
	}
}

// The ledger skips what Kafka has, confirms positions with nothing to
// publish at once only while no Kafka transaction has records, and a
// transaction is due only at a Postgres commit.
func TestTxnLedger(t *testing.T) {
	var confirmed []pglogrepl.LSN
	l := &txnLedger{after: position{mode: ModeWAL, end: 200, commit: 190}, stats: &Stats{},
		confirm: func(lsn pglogrepl.LSN) { confirmed = append(confirmed, lsn) }}
	old := replication.Change{Kind: replication.KindRow, FinalLSN: 190}
	if !l.skip(&old) || l.stats.SkippedCommitted.Load() != 1 {
		t.Fatal("a row of the last transaction Kafka has was not skipped")
	}
	l.boundary(&replication.Change{Kind: replication.KindCommit, LSN: 200, FinalLSN: 190})
	if !slices.Equal(confirmed, []pglogrepl.LSN{200}) {
		t.Fatalf("confirmed %v after a skipped transaction, want [0/C8]", confirmed)
	}
	next := replication.Change{Kind: replication.KindRow, FinalLSN: 300}
	if l.skip(&next) {
		t.Fatal("a row after what Kafka has was skipped")
	}
	l.produce(0, &next)
	if l.due(true, 10, time.Hour) {
		t.Fatal("due in the middle of a Postgres transaction")
	}
	l.boundary(&replication.Change{Kind: replication.KindCommit, LSN: 310, FinalLSN: 300})
	if !l.due(true, 10, time.Hour) || l.due(false, 10, time.Hour) || !l.due(false, 1, time.Hour) {
		t.Fatal("due: idle, size and age bounds")
	}
	l.boundary(&replication.Change{Kind: replication.KindHeartbeat, LSN: 320})
	if len(confirmed) != 1 || l.later != 320 || l.last.end != 310 {
		t.Fatalf("a heartbeat behind an open Kafka transaction: confirmed %v, later %s, last %s", confirmed, l.later, l.last.end)
	}
	l.ack(entry{}, errors.New("refused"))
	if l.failed() == nil {
		t.Fatal("a failed record was not kept")
	}
}
