package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/migrations"
	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/registry"
	"github.com/pgoutbox/pgoutbox/relay/internal/flow"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/sink"
	"github.com/pgoutbox/pgoutbox/transform"
)

// The dead-letter tests run on a real PostgreSQL; only Kafka is faked.
func TestMain(m *testing.M) { pgcluster.Main(m) }

// testPipeline is a pipeline for the row path's unit tests: topics
// "<aggregatetype>", dead letters to "dlq". With databaseURL "" it cannot
// reach a database, which the halt policy does not need.
func testPipeline(t *testing.T, databaseURL, onPoison string) *pipeline {
	t.Helper()
	var cfg Config
	cfg.Replication.DatabaseURL = databaseURL
	if databaseURL == "" {
		cfg.Replication.DatabaseURL = "postgres://127.0.0.1:1/none"
	}
	cfg.Sink = fakeOpener{}
	cfg.Router.Topic = "{aggregatetype}"
	cfg.OnPoison = onPoison
	cfg.DLQTopic = "dlq"
	r, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return r.p
}

var testRel, _ = benchRow()

// row is an insert into the outbox table at lsn; event type "" makes it
// poison (an event needs a type).
func row(lsn pglogrepl.LSN, id, aggType, aggID, typ, payload string) outbox.Change {
	_, values := benchRow()
	values = slices.Clone(values)
	values[0] = []byte(fmt.Sprintf("00000000-0000-0000-0000-%012s", id))
	values[1], values[2], values[3], values[4] = []byte(aggType), []byte(aggID), []byte(typ), []byte(payload)
	return outbox.Change{Kind: outbox.KindRow, LSN: lsn, XID: 7, CommitTime: time.Now(), Relation: testRel, Values: values}
}

func commit(lsn pglogrepl.LSN) outbox.Change {
	return outbox.Change{Kind: outbox.KindCommit, LSN: lsn}
}

// confirms records what a watermark confirms.
type confirms struct {
	mu  sync.Mutex
	lsn []pglogrepl.LSN
}

func (c *confirms) confirm(lsn pglogrepl.LSN) {
	c.mu.Lock()
	c.lsn = append(c.lsn, lsn)
	c.mu.Unlock()
}

func (c *confirms) last() pglogrepl.LSN {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.lsn) == 0 {
		return 0
	}
	return c.lsn[len(c.lsn)-1]
}

// walPublisher is a WAL session's publisher on k, confirming into c.
func walPublisher(t *testing.T, r *pipeline, k Sink, c *confirms) (*publisher, *flow.Watermark) {
	t.Helper()
	dl, err := openDeadLetters(context.Background(), r.cfg, r.hooks, r.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dl.close)
	wm := flow.NewWatermark(0, c.confirm, nil)
	p := r.newPublisher(k, dl, ModeWAL, r.cfg.Columns)
	p.recordCtx = context.Background()
	p.ledger = flow.NewWALLedger(wm, &flow.Polled{}, r.cfg.Poll.Order, 0, r.stats.skipped())
	return p, wm
}

// Acks arrive out of order across partitions; the watermark confirms a
// commit only once it and every transaction before it are acked.
func TestPublisherConfirmsOnlyTheAckedPrefix(t *testing.T) {
	r := testPipeline(t, "", PoisonHalt)
	k := newFakeSink()
	var c confirms
	p, _ := walPublisher(t, r, k, &c)
	batch := []outbox.Change{
		row(10, "a1", "order", "A", "Placed", `{}`), commit(100),
		row(110, "b1", "order", "B", "Placed", `{}`), row(120, "b2", "invoice", "B", "Sent", `{}`), commit(200),
		{Kind: outbox.KindHeartbeat, LSN: 250},
		row(260, "c1", "order", "C", "Placed", `{}`), commit(300),
	}
	if err := p.publish(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	// Buffered: a1, b1, b2, c1.
	steps := []struct {
		ack  int
		want pglogrepl.LSN
	}{
		{3, 0},   // c1: three transactions before it wait
		{1, 0},   // b1: a1 still waits
		{0, 100}, // a1: its transaction only; b2 is not acked
		{0, 300}, // b2: the rest, the heartbeat with it
	}
	for i, s := range steps {
		k.ack(s.ack)
		if got := c.last(); got != s.want {
			t.Fatalf("step %d: confirmed %s, want %s", i, got, s.want)
		}
	}
	if got := r.stats.Published.Load(); got != 4 {
		t.Errorf("published %d, want 4", got)
	}
}

// A delivery failure stops the watermark for good: nothing after the
// failed record is confirmed, even once it is acked.
func TestPublisherFailureStopsTheConfirm(t *testing.T) {
	r := testPipeline(t, "", PoisonHalt)
	k := newFakeSink()
	var c confirms
	p, wm := walPublisher(t, r, k, &c)
	batch := []outbox.Change{
		row(10, "a1", "order", "A", "Placed", `{}`), commit(100),
		row(110, "b1", "invoice", "B", "Sent", `{}`), commit(200),
	}
	if err := p.publish(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	k.fail(0, kgo.ErrRecordTimeout)
	k.ack(0)
	if got := c.last(); got != 0 {
		t.Fatalf("confirmed %s after the first record failed", got)
	}
	var de *DeliveryError
	if err := wm.Failed(); !errors.As(err, &de) || de.Topic != "order" {
		t.Fatalf("watermark failure %v, want the record's DeliveryError", err)
	}
}

// A refused record ends the session; its followers fail with it and are
// never delivered before it. Under the halt policy its second refusal
// stops the relay at it on the next session, before anything of the
// aggregate is produced.
func TestPublisherRefusedRecordHalts(t *testing.T) {
	r := testPipeline(t, "", PoisonHalt)
	batch := []outbox.Change{
		row(10, "a1", "order", "A", "Placed", `{}`),
		row(20, "b1", "order", "B", "Placed", `{}`),
		row(30, "a2", "order", "A", "Paid", `{}`), commit(100),
	}
	for session := 1; session <= 2; session++ {
		k := newFakeSink()
		var c confirms
		p, wm := walPublisher(t, r, k, &c)
		if err := p.publish(context.Background(), batch); err != nil {
			t.Fatalf("session %d: %v", session, err)
		}
		k.fail(0, kerr.InvalidRecord)
		waitFor(t, func() bool { return k.pending() == 0 })
		if got := k.acked(); len(got) != 0 {
			t.Fatalf("session %d: delivered %v after the refusal", session, got)
		}
		if wm.Failed() == nil || c.last() != 0 {
			t.Fatalf("session %d: the refusal did not stop the confirm", session)
		}
		if err := k.Produce(context.Background(), &kgo.Record{Topic: "order"}, nil); !errors.Is(err, sink.ErrHalted) {
			t.Fatalf("session %d: produce after the refusal: %v", session, err)
		}
		if refused, _ := r.refused.endSession(); !refused {
			t.Fatalf("session %d: the refusal did not end the session", session)
		}
	}
	k := newFakeSink()
	var c confirms
	p, _ := walPublisher(t, r, k, &c)
	err := p.publish(context.Background(), batch)
	var re *RefusedError
	if !errors.As(err, &re) || !permanent(err) {
		t.Fatalf("third session: %v, want the permanent refusal", err)
	}
	if n := k.pending(); n != 0 {
		t.Fatalf("%d records produced after the twice refused event", n)
	}
}

// waitFor waits until cond holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(time.Millisecond)
	}
}

// A polled batch marks exactly the rows Kafka acked, whatever order the
// acks come in; a failure fails its partition's later rows with it, and
// is the batch's error.
func TestPublisherPollBatchMarksTheAcked(t *testing.T) {
	r := testPipeline(t, "", PoisonHalt)
	k := newFakeSink()
	p := r.newPublisher(k, nil, ModePoll, r.cfg.Columns)
	var rows []poll.Row
	for i, typ := range []string{"x", "y", "x", "y"} {
		c := row(0, fmt.Sprint(i+1), typ, "K"+fmt.Sprint(i), "T", `{}`)
		rows = append(rows, poll.Row{Change: c, Seq: int64(i + 1)})
	}
	led := p.batch(context.Background(), context.Background(), rows)
	k.ack(2)                        // seq 3
	k.fail(1, kgo.ErrRecordTimeout) // seq 2, and seq 4 of its topic
	k.ack(0)                        // seq 1
	<-led.Settled()
	if got := led.AckedSeqs(); !slices.Equal(got, []int64{1, 3}) {
		t.Errorf("acked seqs %v, want [1 3]", got)
	}
	var de *DeliveryError
	if err := led.Failed(); !errors.As(err, &de) || de.Topic != "y" {
		t.Errorf("batch error %v, want the DeliveryError of topic y", err)
	}
}

// deadLetterDB is a database with pgoutbox's tables, for the dead-letter
// policy.
func deadLetterDB(t *testing.T) (string, *pgx.Conn) {
	t.Helper()
	url := pgcluster.NewDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := migrations.Migrate(ctx, conn, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	return url, conn
}

func deadLettered(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT aggregate_id || ':' || right(event_id, 2) FROM pgoutbox_dead_letter ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Poison rows go to the dead-letter topic in their place and hold their
// aggregate; the other aggregates flow, and the transaction is confirmed.
func TestPublisherPoisonRows(t *testing.T) {
	url, conn := deadLetterDB(t)
	r := testPipeline(t, url, PoisonDeadLetter)
	k := newFakeSink()
	k.max = 1024
	var c confirms
	p, _ := walPublisher(t, r, k, &c)
	large := `{"blob": "` + strings.Repeat("x", 2000) + `"}`
	batch := []outbox.Change{
		row(10, "a1", "order", "A", "Placed", `{}`),
		row(20, "a2", "order", "A", "", `{}`), // no type: malformed
		row(30, "a3", "order", "A", "Paid", `{}`),
		row(40, "b1", "order", "B", "Placed", `{}`),
		row(50, "b2", "order", "B", "Paid", large), // over the limit
		row(60, "c1", "order", "C", "Placed", `{}`),
		commit(100),
	}
	if err := p.publish(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if err := k.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"order/A", "dlq/A", "dlq/A", "order/B", "dlq/B", "order/C"}
	if got := k.acked(); !slices.Equal(got, want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
	if got, want := deadLettered(t, conn), []string{"A:a2", "A:a3", "B:b2"}; !slices.Equal(got, want) {
		t.Errorf("dead letters %v, want %v", got, want)
	}
	if got := c.last(); got != 100 {
		t.Errorf("confirmed %s, want 100", got)
	}
}

// An aggregate with an open dead letter is held: its events are
// dead-lettered behind it until the dead letter is replayed, while other
// aggregates flow.
func TestPublisherHeldAggregate(t *testing.T) {
	url, conn := deadLetterDB(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `INSERT INTO pgoutbox_dead_letter (pipeline, outbox_table, event_id, aggregate_id, txid, reason, row_data)
VALUES ('pgoutbox', 'public.outbox', 'earlier', 'H', 1, 'test', '{}')`); err != nil {
		t.Fatal(err)
	}
	r := testPipeline(t, url, PoisonDeadLetter)
	k := newFakeSink()
	var c confirms
	p, _ := walPublisher(t, r, k, &c)
	if err := p.publish(ctx, []outbox.Change{
		row(10, "h1", "order", "H", "Placed", `{}`), row(20, "g1", "order", "G", "Placed", `{}`), commit(100),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "UPDATE pgoutbox_dead_letter SET replayed_at = now(), resolution = 'replayed'"); err != nil {
		t.Fatal(err)
	}
	if err := p.publish(ctx, []outbox.Change{row(110, "h2", "order", "H", "Paid", `{}`), commit(200)}); err != nil {
		t.Fatal(err)
	}
	if err := k.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := k.acked(), []string{"dlq/H", "order/G", "order/H"}; !slices.Equal(got, want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
	if got := c.last(); got != 200 {
		t.Errorf("confirmed %s, want 200", got)
	}
}

// Under the dead-letter policy, an event refused twice is dead-lettered
// on the next session before anything after it is produced; the later
// event of its aggregate is held behind it, the other aggregate flows.
func TestPublisherRefusedRecordDeadLettered(t *testing.T) {
	url, conn := deadLetterDB(t)
	r := testPipeline(t, url, PoisonDeadLetter)
	batch := []outbox.Change{
		row(10, "a1", "order", "A", "Placed", `{}`),
		row(20, "b1", "order", "B", "Placed", `{}`),
		row(30, "a2", "order", "A", "Paid", `{}`), commit(100),
	}
	for session := 1; session <= 2; session++ {
		k := newFakeSink()
		var c confirms
		p, _ := walPublisher(t, r, k, &c)
		if err := p.publish(context.Background(), batch); err != nil {
			t.Fatalf("session %d: %v", session, err)
		}
		k.fail(0, kerr.InvalidRecord)
		waitFor(t, func() bool { return k.pending() == 0 })
		if got := k.acked(); len(got) != 0 {
			t.Fatalf("session %d: delivered %v after the refusal", session, got)
		}
		r.refused.endSession()
	}
	k := newFakeSink()
	var c confirms
	p, _ := walPublisher(t, r, k, &c)
	if err := p.publish(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if err := k.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := k.acked(), []string{"dlq/A", "order/B", "dlq/A"}; !slices.Equal(got, want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
	if got, want := deadLettered(t, conn), []string{"A:a1", "A:a2"}; !slices.Equal(got, want) {
		t.Errorf("dead letters %v, want %v", got, want)
	}
	if got := c.last(); got != 100 {
		t.Errorf("confirmed %s, want 100", got)
	}
}

// ackSink acks every record as it is produced.
type ackSink struct{}

func (ackSink) Fits(context.Context, *kgo.Record) error { return nil }
func (ackSink) Produce(_ context.Context, rec *kgo.Record, promise func(*kgo.Record, error)) error {
	promise(rec, nil)
	return nil
}
func (ackSink) AbortBuffered()              {}
func (ackSink) Flush(context.Context) error { return nil }

// BenchmarkPublish is one row's whole way through the publisher of a WAL
// session, a one-row transaction each: bind (cached), record, size check,
// produce, ack into the watermark, commit and confirm.
func BenchmarkPublish(b *testing.B) {
	rl := benchRelay(b)
	r := rl.p
	rel, values := benchRow()
	wm := flow.NewWatermark(0, func(pglogrepl.LSN) {}, nil)
	p := r.newPublisher(ackSink{}, nil, ModeWAL, r.cfg.Columns)
	p.recordCtx = context.Background()
	p.ledger = flow.NewWALLedger(wm, &flow.Polled{}, r.cfg.Poll.Order, 0, r.stats.skipped())
	batch := []outbox.Change{
		{Kind: outbox.KindRow, Relation: rel, Values: values, CommitTime: time.Now()},
		{Kind: outbox.KindCommit},
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(values[4])))
	lsn := pglogrepl.LSN(0)
	for b.Loop() {
		lsn += 100
		batch[0].LSN, batch[1].LSN = lsn-50, lsn
		if err := p.publish(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
}

// The WAL session after a poll phase skips the rows polling published,
// until its stream passes the position the phase ended at.
func TestPublisherSkipsPolledRows(t *testing.T) {
	r := testPipeline(t, "", PoisonHalt)
	k := newFakeSink()
	var c confirms
	p, wm := walPublisher(t, r, k, &c)
	polled := &flow.Polled{}
	polled.Add(1)
	polled.Add(3) // published by polling, but the stream never replays it
	polled.EndAt(150)
	p.ledger = flow.NewWALLedger(wm, polled, r.cfg.Poll.Order, 0, r.stats.skipped())
	withSeq := func(c outbox.Change, seq string) outbox.Change {
		c.Values[7] = []byte(seq)
		return c
	}
	if err := p.publish(context.Background(), []outbox.Change{
		withSeq(row(10, "a1", "order", "A", "Placed", `{}`), "1"), commit(100),
		withSeq(row(160, "a2", "order", "A", "Paid", `{}`), "2"), commit(200),
	}); err != nil {
		t.Fatal(err)
	}
	if got := c.last(); got != 100 {
		t.Fatalf("confirmed %s, want 100: the skipped row's transaction has nothing in flight", got)
	}
	if n := k.pending(); n != 1 {
		t.Fatalf("%d records produced, want 1: seq 1 was published by polling", n)
	}
	if n := r.stats.SkippedPolled.Load(); n != 1 {
		t.Errorf("skipped %d, want 1", n)
	}
	if polled.Rows() != nil {
		t.Error("the polled rows are kept after the stream passed the poll phase's end")
	}
}

// benchRelay is a relay for the row-path benchmarks; nothing it names is
// dialled.
func benchRelay(b *testing.B) *Relay {
	b.Helper()
	var cfg Config
	cfg.Replication.DatabaseURL = "postgres://bench"
	cfg.Sink = fakeOpener{}
	cfg.OnPoison = PoisonHalt
	rl, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	return rl
}

// A row a transform drops (Kafka Connect's Filter) is produced nowhere and
// counts as done at once: a transaction of only such rows is confirmed
// without waiting for anything, one with others once they are acked, and
// a polled batch marks it published with the acked rows.
func TestPublisherFilteredRowsCountAsDone(t *testing.T) {
	r := filterPipeline(t)

	k := newFakeSink()
	var c confirms
	p, _ := walPublisher(t, r, k, &c)
	batch := []outbox.Change{
		row(10, "a1", "order", "A", "Placed", `{}`), row(20, "x1", "audit", "X", "Seen", `{}`), commit(100),
		row(110, "x2", "audit", "X", "Seen", `{}`), commit(200),
		row(210, "a2", "order", "A", "Paid", `{}`), commit(300),
	}
	if err := p.publish(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if n := k.pending(); n != 2 {
		t.Fatalf("%d records produced, want the 2 order events", n)
	}
	k.ack(0)
	if got := c.last(); got != 200 {
		t.Fatalf("confirmed %s after the first order event, want 200 (the audit transaction needs nothing)", got)
	}
	k.ack(0)
	if got := c.last(); got != 300 {
		t.Fatalf("confirmed %s, want 300", got)
	}
	if got := k.acked(); !slices.Equal(got, []string{"outbox.event.order/A", "outbox.event.order/A"}) {
		t.Errorf("delivered %v", got)
	}
	if got := r.stats.Filtered.Load(); got != 2 {
		t.Errorf("filtered %d, want 2", got)
	}

	k = newFakeSink()
	pp := r.newPublisher(k, nil, ModePoll, r.cfg.Columns)
	var rows []poll.Row
	for i, agg := range []string{"order", "audit", "order"} {
		rows = append(rows, poll.Row{Change: row(0, fmt.Sprint(i+1), agg, "K", "T", `{}`), Seq: int64(i + 1)})
	}
	led := pp.batch(context.Background(), context.Background(), rows)
	k.ack(0)
	k.ack(0)
	<-led.Settled()
	if got := led.AckedSeqs(); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Errorf("marked seqs %v, want [1 2 3]", got)
	}
}

// filterPipeline is a pipeline of Debezium's outbox format whose chain
// drops the events of aggregate type "audit" (Kafka Connect's Filter).
func filterPipeline(t *testing.T) *pipeline {
	t.Helper()
	var cfg Config
	cfg.Replication.DatabaseURL = "postgres://127.0.0.1:1/none"
	cfg.Sink = fakeOpener{}
	cfg.Encoder.Format = schema.DebeziumOutbox
	cfg.Router.RouteReplacement = "outbox.event.${routedByValue}"
	cfg.OnPoison = PoisonHalt
	cfg.Transforms.Props = map[string]string{
		"transforms": "outbox,audit", "transforms.outbox.type": transform.RouterClass,
		"transforms.audit.type": "org.apache.kafka.connect.transforms.Filter", "transforms.audit.predicate": "audit",
		"predicates": "audit", "predicates.audit.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
		"predicates.audit.pattern": `outbox\.event\.audit`,
	}
	rl, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return rl.p
}

// Transforms run after the Outbox Event Router: with another format, a
// chain Kafka Connect refuses, or an avro key or value (the transformed
// path writes no Avro yet), the relay is not built.
func TestTransformsConfig(t *testing.T) {
	props := map[string]string{"transforms": "outbox,f", "transforms.outbox.type": transform.RouterClass,
		"transforms.f.type": "org.apache.kafka.connect.transforms.Filter"}
	reg := &registry.Config{URL: "http://127.0.0.1:1/apis/registry/v2"}
	for _, tc := range []struct {
		format schema.Format
		props  map[string]string
		key    schema.Converter
		err    string
	}{
		{schema.DebeziumOutbox, props, "", ""},
		{schema.CloudEvents, props, "", "after the Outbox Event Router run with format debezium-outbox"},
		{schema.Debezium, props, "", "after the Outbox Event Router run with format debezium-outbox"},
		{schema.Debezium, map[string]string{"transforms": "u", "transforms.u.type": transform.NewStateClass}, "", ""},
		{schema.DebeziumOutbox, map[string]string{"transforms": "u", "transforms.u.type": transform.NewStateClass}, "", "without the Outbox Event Router run on the connector's change events, format debezium"},
		{schema.DebeziumOutbox, map[string]string{"transforms": "outbox,f", "transforms.outbox.type": transform.RouterClass}, "", "transforms.f.type"},
		{schema.DebeziumOutbox, props, schema.ConvAvro, ""}, // Avro after transforms: written by package transform
		{schema.DebeziumOutbox, map[string]string{"transforms": "outbox", "transforms.outbox.type": transform.RouterClass}, schema.ConvAvro, ""},
	} {
		var cfg Config
		cfg.Replication.DatabaseURL = "postgres://127.0.0.1:1/none"
		cfg.Sink = fakeOpener{}
		cfg.Encoder.Format = tc.format
		cfg.Router.RouteReplacement = "outbox.event.${routedByValue}"
		cfg.Transforms.Props = tc.props
		if tc.key != "" {
			cfg.Encoder.Debezium.Key, cfg.Registries.Key = tc.key, reg
		}
		_, err := New(cfg, slog.New(slog.DiscardHandler))
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s %v: err %v, want %q", tc.format, tc.props, err, tc.err)
		}
	}
}
