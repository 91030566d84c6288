package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/migrations"
	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/poll"
)

func TestMain(m *testing.M) { pgcluster.Main(m) }

// open connects to a fresh database on the shared throwaway cluster.
func open(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgcluster.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// migrated is a database with pgoutbox's tables and public.outbox.
func migrated(t *testing.T) *pgx.Conn {
	t.Helper()
	conn := open(t)
	if _, err := migrations.Migrate(context.Background(), conn, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	return conn
}

func TestEnsure(t *testing.T) {
	ctx := context.Background()
	conn := open(t)
	p := Pipeline{Name: "p"}
	if _, _, err := p.Check(ctx, conn); !errors.Is(err, ErrNoState) {
		t.Fatalf("Check before Ensure: %v, want ErrNoState", err)
	}
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	from, to, err := Ensure(ctx, conn)
	if err != nil || from != 0 || to != latest {
		t.Fatalf("Ensure = %d, %d, %v; want 0, %d", from, to, err, latest)
	}
	if from, to, err = Ensure(ctx, conn); err != nil || from != latest || to != 0 {
		t.Fatalf("Ensure again = %d, %d, %v; want %d, 0", from, to, err, latest)
	}
	known, confirmed, err := p.Check(ctx, conn)
	if err != nil || known || confirmed != nil {
		t.Fatalf("Check = %t, %v, %v; want an unknown pipeline", known, confirmed, err)
	}
	// Ensure leaves the outbox table to migrate.
	var outbox bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('public.outbox') IS NOT NULL").Scan(&outbox); err != nil || outbox {
		t.Fatalf("outbox table created: %t, %v", outbox, err)
	}
}

func TestModeAndStatus(t *testing.T) {
	ctx := context.Background()
	conn := migrated(t)
	p := Pipeline{Name: "p"}
	if _, err := p.Status(ctx, conn, time.Hour); !errors.Is(err, ErrNoPipeline) {
		t.Fatalf("Status of no pipeline: %v", err)
	}
	steps := []struct {
		mode   Mode
		reason Reason
	}{
		{ModePoll, Started(ModePoll)},
		{ModePoll, Reason{Code: ReasonHandoff, Detail: "slot created"}},
		{ModeWAL, Reason{Code: ReasonHandoffDone, Detail: "done"}},
		{ModePoll, Reason{Code: ReasonWALUnavailable, Detail: "replication not ready: wal_level"}},
	}
	for i, s := range steps {
		if err := p.SetMode(ctx, conn, "public.outbox", s.mode, s.reason); err != nil {
			t.Fatal(err)
		}
		st, err := p.Status(ctx, conn, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode != s.mode || st.Reason != s.reason || st.Table != "public.outbox" {
			t.Fatalf("step %d: status %s %+v %s, want %s %+v", i, st.Mode, st.Reason, st.Table, s.mode, s.reason)
		}
	}
	st, _ := p.Status(ctx, conn, time.Hour)
	if st.Switches != 2 {
		t.Errorf("switches %d, want 2 (poll to wal, wal to poll)", st.Switches)
	}
	if !st.KafkaKnown || st.KafkaProblem != "" || st.DeadLetters == nil || *st.DeadLetters != 0 || st.Lost != nil || st.Silence != nil {
		t.Errorf("a new pipeline's operations: %+v", st)
	}

	// A row saved by an older pgoutbox, before the codes.
	if _, err := conn.Exec(ctx, "UPDATE pgoutbox_state SET mode = 'poll', mode_reason = 'started in poll mode' WHERE pipeline = 'p'"); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Status(ctx, conn, time.Hour); err != nil || st.Reason.Code != ReasonStarted {
		t.Fatalf("older reason read as %+v, %v", st.Reason, err)
	}

	since := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	if err := p.SaveBrokerHealth(ctx, conn, "nats-jetstream", "topic t: unknown topic", since); err != nil {
		t.Fatal(err)
	}
	if err := p.SaveAlive(ctx, conn, &since); err != nil {
		t.Fatal(err)
	}
	if err := p.SaveLost(ctx, conn, 3, 10, 12); err != nil {
		t.Fatal(err)
	}
	st, err := p.Status(ctx, conn, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if st.KafkaProblem != "topic t: unknown topic" || st.KafkaSince == nil || !st.KafkaSince.Equal(since) || st.Broker != "nats-jetstream" {
		t.Errorf("broker %q: %q since %v", st.Broker, st.KafkaProblem, st.KafkaSince)
	}
	if st.Alive == nil || st.Silence == nil || *st.Silence > time.Minute || st.LastPublish == nil || !st.LastPublish.Equal(since) {
		t.Errorf("alive %v silence %v last publish %v", st.Alive, st.Silence, st.LastPublish)
	}
	if l := st.Lost; l == nil || l.Rows != 3 || l.FromSeq != 10 || l.ToSeq != 12 || !l.Recent {
		t.Errorf("lost %+v", l)
	}
	if err := p.SaveBrokerHealth(ctx, conn, "nats-jetstream", "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if st, _ := p.Status(ctx, conn, time.Hour); st.KafkaProblem != "" || st.KafkaSince != nil {
		t.Errorf("kafka problem not cleared: %q %v", st.KafkaProblem, st.KafkaSince)
	}
}

func TestPositions(t *testing.T) {
	ctx := context.Background()
	conn := migrated(t)
	p := Pipeline{Name: "p"}
	if st, err := p.Positions(ctx, conn); err != nil || st != nil {
		t.Fatalf("Positions of no pipeline: %+v, %v", st, err)
	}
	lsn := "0/1000"
	if err := p.SaveSetup(ctx, conn, "public.outbox", &lsn); err != nil {
		t.Fatal(err)
	}
	if known, confirmed, err := p.Check(ctx, conn); err != nil || !known || confirmed == nil || *confirmed != lsn {
		t.Fatalf("Check = %t, %v, %v", known, confirmed, err)
	}
	seq, id := int64(40), int64(7)
	if err := p.SaveFloor(ctx, conn, "0/2000", 900, &seq, &id); err != nil {
		t.Fatal(err)
	}
	// Neither the floor nor the confirmed position moves back.
	older := int64(30)
	if err := p.SaveFloor(ctx, conn, "0/1800", 800, &older, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.SaveConfirmed(ctx, conn, "0/1500"); err != nil {
		t.Fatal(err)
	}
	st, err := p.Positions(ctx, conn)
	if err != nil || st == nil {
		t.Fatal(st, err)
	}
	if *st.FloorXID != "900" || *st.FloorSeq != 40 || *st.Cluster != 7 || *st.Confirmed != "0/2000" {
		t.Fatalf("positions %s %d %d %s", *st.FloorXID, *st.FloorSeq, *st.Cluster, *st.Confirmed)
	}
	if f, err := p.Floor(ctx, conn); err != nil || f.XID != 900 || f.Foreign != nil {
		t.Fatalf("floor %+v, %v", f, err)
	}

	// A change of cluster keeps the old floor for copied rows, empties
	// this cluster's, and makes a handoff pending.
	other := int64(8)
	foreign := &outbox.ForeignFloor{XID: 900, Seq: 40}
	if err := p.RecordClusterChange(ctx, conn, ClusterChange{Cluster: &other, Note: "moved", Foreign: foreign}); err != nil {
		t.Fatal(err)
	}
	f, err := p.Floor(ctx, conn)
	if err != nil || f.XID != 0 || f.Foreign == nil || *f.Foreign != *foreign {
		t.Fatalf("floor after a change %+v, %v", f, err)
	}
	h, err := p.Handoff(ctx, conn)
	if err != nil || !h.Pending || h.XMax != nil || h.Seq != nil {
		t.Fatalf("handoff after a change %+v, %v", h, err)
	}
	s, err := p.Status(ctx, conn, time.Hour)
	if err != nil || s.ClusterChange == nil || s.ClusterChange.What != "moved" || *s.ClusterChange.Previous != 7 || *s.Cluster != 8 ||
		s.ClusterChange.OldFloorXID != "900" || *s.ClusterChange.OldFloorSeq != 40 || s.Confirmed != "" {
		t.Fatalf("status after a change %+v, %v", s, err)
	}

	if err := p.SaveHandoffBounds(ctx, conn, 1000, 55); err != nil {
		t.Fatal(err)
	}
	if h, err = p.Handoff(ctx, conn); err != nil || !h.Pending || *h.XMax != 1000 || *h.Seq != 55 {
		t.Fatalf("handoff %+v, %v", h, err)
	}
	// Bounds that changed since (the slot replaced again) do not end it.
	for _, b := range []struct {
		xmax uint64
		seq  int64
	}{{999, 55}, {1000, 54}} {
		if ended, err := p.EndHandoff(ctx, conn, b.xmax, b.seq); err != nil || ended {
			t.Fatalf("EndHandoff(%d, %d) with bounds 1000, 55: %t, %v", b.xmax, b.seq, ended, err)
		}
	}
	if ended, err := p.EndHandoff(ctx, conn, 1000, 55); err != nil || !ended {
		t.Fatalf("EndHandoff: %t, %v", ended, err)
	}
	if h, err = p.Handoff(ctx, conn); err != nil || h.Pending || h.XMax != nil {
		t.Fatalf("handoff after its end %+v, %v", h, err)
	}
	if err := p.PendHandoff(ctx, conn, "public.outbox"); err != nil {
		t.Fatal(err)
	}
	if h, err = p.Handoff(ctx, conn); err != nil || !h.Pending {
		t.Fatalf("handoff pended %+v, %v", h, err)
	}
	if err := p.CountSlotLoss(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if s, _ := p.Status(ctx, conn, time.Hour); s.SlotLosses != 1 {
		t.Fatalf("slot losses %d", s.SlotLosses)
	}

	if err := p.Forget(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Positions(ctx, conn); err != nil || st != nil {
		t.Fatalf("Positions after Forget: %+v, %v", st, err)
	}
	// Forget where no state table exists is nothing to do.
	if err := p.Forget(ctx, open(t)); err != nil {
		t.Fatal(err)
	}
}

func TestDeadLetters(t *testing.T) {
	ctx := context.Background()
	conn := migrated(t)
	p := Pipeline{Name: "p"}
	lsn := "0/16B3748"
	add := func(event, aggregate string) bool {
		t.Helper()
		added, err := p.AddDeadLetter(ctx, conn, NewDeadLetter{Table: "public.outbox", EventID: event, AggregateID: aggregate,
			LSN: &lsn, TxID: "750", Reason: "bad row", Row: []byte(`{"id":"` + event + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return added
	}
	if !add("e1", "a") || !add("e2", "a") || !add("e3", "b") {
		t.Fatal("a new dead letter was not added")
	}
	if add("e1", "a") {
		t.Fatal("the same event was recorded twice")
	}
	held, err := p.HeldAggregates(ctx, conn)
	if err != nil || len(held) != 2 {
		t.Fatalf("held %v, %v", held, err)
	}
	list, err := p.DeadLetters(ctx, conn, false)
	if err != nil || len(list) != 3 || list[0].EventID != "e1" || list[0].LSN != lsn || list[2].AggregateID != "b" {
		t.Fatalf("dead letters %+v, %v", list, err)
	}
	if raw, err := p.DeadLetterRow(ctx, conn, list[0].ID); err != nil || string(raw) != `{"id": "e1"}` {
		t.Fatalf("row %s, %v", raw, err)
	}
	if err := p.SkipDeadLetter(ctx, conn, list[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := p.SkipDeadLetter(ctx, conn, list[0].ID); err == nil {
		t.Fatal("a resolved dead letter was skipped again")
	}
	if err := (Pipeline{Name: "other"}).SkipDeadLetter(ctx, conn, list[1].ID); err == nil {
		t.Fatal("another pipeline's dead letter was skipped")
	}
	if held, err := p.IsHeld(ctx, conn, "a"); err != nil || !held {
		t.Fatalf("aggregate a with e2 open: held %t, %v", held, err)
	}
	if err := p.MarkReplayed(ctx, conn, list[1].ID); err != nil {
		t.Fatal(err)
	}
	if held, err := p.IsHeld(ctx, conn, "a"); err != nil || held {
		t.Fatalf("aggregate a resolved: held %t, %v", held, err)
	}
	openOnes, err := p.DeadLetters(ctx, conn, false)
	if err != nil || len(openOnes) != 1 || openOnes[0].EventID != "e3" {
		t.Fatalf("open dead letters %+v, %v", openOnes, err)
	}
	all, err := p.DeadLetters(ctx, conn, true)
	if err != nil || len(all) != 3 || all[0].Resolution != ResolutionSkipped || all[1].Resolution != ResolutionReplayed || all[0].ReplayedAt == nil {
		t.Fatalf("all dead letters %+v, %v", all, err)
	}
	if err := p.SetMode(ctx, conn, "public.outbox", ModeWAL, Started(ModeWAL)); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Status(ctx, conn, time.Hour); err != nil || st.DeadLetters == nil || *st.DeadLetters != 1 {
		t.Fatalf("status counts %v open dead letters, %v", st.DeadLetters, err)
	}

	// Before the dead-letter table exists: ErrNoState.
	bare := open(t)
	if _, err := p.HeldAggregates(ctx, bare); !errors.Is(err, ErrNoState) {
		t.Fatalf("HeldAggregates without the table: %v", err)
	}
	if _, err := p.DeadLetters(ctx, bare, true); !errors.Is(err, ErrNoState) {
		t.Fatalf("DeadLetters without the table: %v", err)
	}
}

// DeletePublished deletes old rows polling marked, and old rows the WAL
// published (txid in [start, floor)), and nothing else.
func TestDeletePublished(t *testing.T) {
	ctx := context.Background()
	conn := migrated(t)
	p := Pipeline{Name: "p"}
	table, err := outbox.ParseTable("public.outbox")
	if err != nil {
		t.Fatal(err)
	}
	insert := func(age string, published bool) {
		t.Helper()
		pub := "NULL"
		if published {
			pub = "now()"
		}
		if _, err := conn.Exec(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload, created_at, published_at)
VALUES ('order', 'a', 'Placed', '{}', now() - interval '`+age+`', `+pub+`)`); err != nil {
			t.Fatal(err)
		}
	}
	insert("2 hours", true)  // marked by polling, old: deleted
	insert("2 hours", true)  // deleted
	insert("1 second", true) // marked, young: stays
	insert("2 hours", false) // unmarked, no floor: stays
	if b, err := p.Published(ctx, conn); err != nil || b.Start != nil || b.Floor != nil {
		t.Fatalf("bounds of no pipeline %+v, %v", b, err)
	}
	n, err := DeletePublished(ctx, conn, table, "created_at", time.Hour, Published{}, 1)
	if err != nil || n != 1 {
		t.Fatalf("deleted %d (limit 1), %v", n, err)
	}
	if n, err = DeletePublished(ctx, conn, table, "created_at", time.Hour, Published{}, 10); err != nil || n != 1 {
		t.Fatalf("deleted %d, %v", n, err)
	}

	// The unmarked row is below the floor and at the WAL start: the WAL
	// published it.
	var txid uint64
	if err := conn.QueryRow(ctx, "SELECT txid::text::bigint FROM outbox WHERE published_at IS NULL").Scan(&txid); err != nil {
		t.Fatal(err)
	}
	if err := p.SaveSetup(ctx, conn, "public.outbox", nil); err != nil {
		t.Fatal(err)
	}
	if err := p.SaveWALStart(ctx, conn, txid, true); err != nil {
		t.Fatal(err)
	}
	if err := p.SaveWALStart(ctx, conn, txid+5, false); err != nil { // set already: kept
		t.Fatal(err)
	}
	if err := p.SaveFloor(ctx, conn, "0/1", txid, nil, nil); err != nil { // floor = txid: not below
		t.Fatal(err)
	}
	b, err := p.Published(ctx, conn)
	if err != nil || b.Start == nil || b.Floor == nil {
		t.Fatalf("bounds %+v, %v", b, err)
	}
	if n, err = DeletePublished(ctx, conn, table, "created_at", time.Hour, b, 10); err != nil || n != 0 {
		t.Fatalf("deleted %d at the floor, %v", n, err)
	}
	if err := p.SaveFloor(ctx, conn, "0/2", txid+1, nil, nil); err != nil {
		t.Fatal(err)
	}
	if b, err = p.Published(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if n, err = DeletePublished(ctx, conn, table, "created_at", time.Hour, b, 10); err != nil || n != 1 {
		t.Fatalf("deleted %d below the floor, %v", n, err)
	}
	var left int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox").Scan(&left); err != nil || left != 1 {
		t.Fatalf("%d rows left, %v; want the young one", left, err)
	}
	count, _, err := p.Unpublished(ctx, conn, outbox.Table{Schema: "public", Name: "outbox"}, poll.Config{Table: "public.outbox"}, "created_at")
	if err != nil || count != 0 {
		t.Fatalf("unpublished %d, %v", count, err)
	}
}

// The Kafka transaction a relay left open without asking to commit it is
// kept per pipeline, the last one recorded; a database before migration
// 017 has none and takes the write as nothing to record.
func TestUnended(t *testing.T) {
	ctx := context.Background()
	conn := migrated(t)
	p := Pipeline{Name: "p"}
	if err := p.SaveSetup(ctx, conn, "public.outbox", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := p.Unended(ctx, conn); ok || err != nil {
		t.Fatalf("Unended before any: %t, %v", ok, err)
	}
	// A later epoch of the same producer id replaces an earlier one, never
	// the other way round (a stopped relay saving late); another producer
	// id replaces it.
	for _, c := range []struct {
		id            int64
		epoch, wantEp int16
	}{{7, 3, 3}, {7, 5, 5}, {7, 4, 5}, {8, 1, 1}} {
		if err := p.SaveUnended(ctx, conn, c.id, c.epoch); err != nil {
			t.Fatal(err)
		}
		if id, e, ok, err := p.Unended(ctx, conn); !ok || err != nil || id != c.id || e != c.wantEp {
			t.Fatalf("after saving %d, %d: Unended = %d, %d, %t, %v; want %d, %d", c.id, c.epoch, id, e, ok, err, c.id, c.wantEp)
		}
	}
	if _, err := conn.Exec(ctx, "ALTER TABLE pgoutbox_state DROP COLUMN unended_epoch"); err != nil {
		t.Fatal(err)
	}
	if err := p.SaveUnended(ctx, conn, 7, 6); err != nil {
		t.Fatalf("SaveUnended before migration 017: %v", err)
	}
	if _, _, ok, err := p.Unended(ctx, conn); ok || err != nil {
		t.Fatalf("Unended before migration 017: %t, %v", ok, err)
	}
}
