package relay

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/relay/internal/eos"
	"github.com/pgoutbox/pgoutbox/relay/internal/flow"
	"github.com/pgoutbox/pgoutbox/replication"
)

func TestDeliveryValidation(t *testing.T) {
	for _, tt := range []struct {
		mode     Mode
		delivery Delivery
		topic    string
		tables   []string
		snapshot SnapshotMode
		ok       bool
	}{
		{ModeAuto, AtLeastOnce, "", nil, "", true},
		{ModeAuto, "", "", nil, "", true}, // the default
		{ModeWAL, ExactlyOnce, "", nil, "", true},
		{ModePoll, ExactlyOnce, "", nil, "", true},
		{ModeAuto, ExactlyOnce, "", nil, "", true},
		{ModeWAL, "exactly-twice", "", nil, "", false},
		{ModeWAL, ExactlyOnce, "bad{topic}", nil, "", false},
		{ModeWAL, ExactlyOnce, "pgoutbox.dlq", nil, "", false}, // the dead-letter topic
		{ModeWAL, AtLeastOnce, "", []string{"public.outbox", "public.b"}, "", true},
		{ModeWAL, ExactlyOnce, "", []string{"public.outbox", "public.b"}, "", false},
		{ModeWAL, AtLeastOnce, "", nil, SnapshotInitial, true},
		// Refused where a snapshot would run (ErrSnapshotExactlyOnce), not
		// on every start of a pipeline whose snapshot is done.
		{ModeWAL, ExactlyOnce, "", nil, SnapshotInitial, true},
		{ModeWAL, AtLeastOnce, "", nil, SnapshotWhenNeeded, true},
		{ModeWAL, AtLeastOnce, "", nil, SnapshotAlways, true},
		{ModeWAL, ExactlyOnce, "", nil, SnapshotAlways, false},
		{ModeWAL, AtLeastOnce, "", nil, "custom", false},
	} {
		cfg := Config{Mode: tt.mode, Delivery: tt.delivery, Transactions: TransactionConfig{PositionTopic: tt.topic}, Snapshot: tt.snapshot}
		cfg.Replication.Tables = tt.tables
		cfg.Replication.DatabaseURL = "postgres://127.0.0.1:1/none"
		cfg.Sink = fakeOpener{}
		cfg.Defaults()
		err := cfg.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("mode %s, delivery %q, position topic %q, tables %v, snapshot %q: %v", tt.mode, tt.delivery, tt.topic, tt.tables, tt.snapshot, err)
		}
	}
}

// fakeKafka is the seam a session's exactly-once delivery uses (kafka):
// fakeSink's producer, transactions that commit what Flush acks, and a
// position topic whose last committed record the test sets.
type fakeKafka struct {
	*fakeSink
	last                                    *kgo.Record // LastCommitted's answer
	open                                    bool        // TxnOpen's answer
	renewed, fenced, begun, commits, aborts int
	probedFailed                            int
	unsent                                  *[2]int64  // Unsent's answer
	unended                                 [][2]int64 // what Unended was told
	// tells: Settled answers (ok); then "not yet" settledAfter times,
	// counted in asked, before "settled".
	tells               bool
	settledAfter, asked int
}

var (
	_ Transactions = (*fakeKafka)(nil)
	_ PositionLog  = (*fakeKafka)(nil)
)

// broker is f as the session's broker, with transactions.
func (f *fakeKafka) broker() Broker { return Broker{Sink: f, Txn: f, Positions: f} }

func (f *fakeKafka) Renew() error                { f.renewed++; return nil }
func (f *fakeKafka) Fence(context.Context) error { f.fenced++; return nil }
func (f *fakeKafka) Begin() error                { f.begun++; return nil }
func (f *fakeKafka) Abort(context.Context) error { f.aborts++; return nil }
func (f *fakeKafka) HoldsRecords() bool          { return f.open }
func (f *fakeKafka) Probe(context.Context) error { return nil }
func (f *fakeKafka) Settled(context.Context) (bool, bool) {
	f.asked++
	if !f.tells {
		return false, false
	}
	return f.asked > f.settledAfter, true
}
func (f *fakeKafka) Classify(err error) error { return err }
func (f *fakeKafka) Unsent() (int64, int16, bool) {
	if f.unsent == nil {
		return 0, 0, false
	}
	return f.unsent[0], int16(f.unsent[1]), true
}
func (f *fakeKafka) Unended(id int64, epoch int16) {
	f.unended = append(f.unended, [2]int64{id, int64(epoch)})
}
func (f *fakeKafka) ProbeFailed(context.Context) error {
	f.probedFailed++
	return nil
}
func (f *fakeKafka) Commit(ctx context.Context, check func() error) error {
	if err := f.Flush(ctx); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	f.commits++
	return nil
}
func (f *fakeKafka) EnsureCompactedTopic(context.Context, string) error { return nil }
func (f *fakeKafka) LastCommitted(context.Context, string, []byte) (*kgo.Record, error) {
	return f.last, nil
}

// positions are the position records f delivered, read back.
func (f *fakeKafka) positions(t *testing.T) []eos.Position {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []eos.Position
	for _, rec := range f.delivered {
		if rec.Topic == "pgoutbox.position" {
			p, err := eos.ParsePosition(rec)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

// marks is a fake marker: what a poll session's delivery marks published.
type marks struct {
	seqs  []int64
	below uint64
	xids  []uint32
}

func (m *marks) MarkPublished(_ context.Context, seqs []int64) error {
	m.seqs = append(m.seqs, seqs...)
	return nil
}
func (m *marks) MarkTransactions(_ context.Context, _ outbox.Floor, below uint64, xids []uint32) (int64, error) {
	m.below, m.xids = below, xids
	return 1, nil
}

// A poll session's exactly-once delivery against a fake Kafka: it marks
// what the last WAL transaction in Kafka carried before polling, commits
// each acked batch in a Kafka transaction whose position record lists its
// rows and carries the WAL's position, and commits nothing of a batch with
// a failed record, whose open transaction it counts as aborted.
func TestExactlyOncePollDelivery(t *testing.T) {
	ctx := context.Background()
	p := testPipeline(t, "", PoisonHalt)
	m := p.hooks[0].(*Metrics)
	k := &fakeKafka{fakeSink: newFakeSink()}
	var err error
	k.last, err = eos.Position{Mode: ModeWAL, End: 500, Commit: 490, Cluster: 7, FloorXID: 30, XIDs: []uint32{31}}.Record("pgoutbox", "pgoutbox.position", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rows := &marks{}
	d, err := eos.OpenPoll(ctx, newTxnSession(k.broker(), p.cfg, p.hooks, p.log), 7, rows, outbox.Floor{XID: 20})
	if err != nil {
		t.Fatal(err)
	}
	if k.renewed != 1 || k.fenced != 1 || k.begun != 1 || rows.below != 30 || !slices.Equal(rows.xids, []uint32{31}) {
		t.Fatalf("opened: renewed %d, fenced %d, begun %d; marked below %d and %v", k.renewed, k.fenced, k.begun, rows.below, rows.xids)
	}
	batch := func(seqs ...int64) []poll.Row {
		var out []poll.Row
		for _, s := range seqs {
			out = append(out, poll.Row{Change: row(0, fmt.Sprint(s), "order", "A", "Placed", `{}`), Seq: s})
		}
		return out
	}
	pub := p.newPublisher(k, nil, ModePoll, p.cfg.Columns)
	led := pub.batch(ctx, ctx, batch(1, 2))
	k.Flush(ctx)
	<-led.Settled()
	if err := d.Settle(ctx, led); err != nil {
		t.Fatal(err)
	}
	pos := k.positions(t)
	if k.commits != 1 || k.begun != 2 || len(pos) != 1 {
		t.Fatalf("%d commits, %d begun, position records %v", k.commits, k.begun, pos)
	}
	if want := (eos.Position{Mode: ModePoll, End: 500, Commit: 490, Cluster: 7, Seqs: []int64{1, 2}}); !reflect.DeepEqual(pos[0], want) {
		t.Fatalf("position record %+v, want %+v", pos[0], want)
	}
	if got := value(t, m.Registry, "pgoutbox_kafka_transactions_total"); got != 1 {
		t.Fatalf("transactions counted %v", got)
	}

	led = pub.batch(ctx, ctx, batch(3, 4))
	k.fail(0, kerr.InvalidRecord)
	<-led.Settled()
	if err := d.Settle(ctx, led); err == nil || k.commits != 1 {
		t.Fatalf("a batch with a failed record: %v, %d commits", err, k.commits)
	}
	k.open = true
	if err := d.End(ctx, errors.New("the session failed")); err != nil {
		t.Fatalf("end: %v", err)
	}
	if k.probedFailed != 1 || k.aborts != 0 || value(t, m.Registry, "pgoutbox_kafka_transactions_aborted_total", "reason=error") != 1 {
		t.Fatalf("after the failed batch: probed %d, aborted %d", k.probedFailed, k.aborts)
	}
}

// fakeStream is where a WAL session confirms.
type fakeStream struct{ confirmed []pglogrepl.LSN }

func (f *fakeStream) Start() pglogrepl.LSN      { return 0 }
func (f *fakeStream) Confirm(lsn pglogrepl.LSN) { f.confirmed = append(f.confirmed, lsn) }
func (f *fakeStream) Confirmed() pglogrepl.LSN  { return f.confirmed[len(f.confirmed)-1] }

// A WAL session's exactly-once delivery against a fake Kafka, after a
// poll transaction: it marks that transaction's rows and reads the rows
// polling published, skips those and what the WAL position in Kafka
// covers, and commits a Postgres transaction in a Kafka transaction whose
// position record carries it (and, as the stream has not passed it yet,
// where the polled rows' replay ends), before it confirms the slot.
func TestExactlyOnceWALDelivery(t *testing.T) {
	ctx := context.Background()
	p := testPipeline(t, "", PoisonHalt)
	k := &fakeKafka{fakeSink: newFakeSink()}
	var err error
	k.last, err = eos.Position{Mode: ModePoll, End: 500, Commit: 490, Cluster: 7, Seqs: []int64{4, 5}}.Record("pgoutbox", "pgoutbox.position", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var marked []int64
	floor := new(atomic.Uint64)
	d, err := openExactlyOnceWAL(ctx, newTxnSession(k.broker(), p.cfg, p.hooks, p.log), p.cfg, eos.WALOpening{
		Cluster: 7, Floor: floor, HasSeq: true, Order: "seq", Skipped: p.stats.skipped(),
		ReadPolled: func(_ context.Context, last []int64) (flow.Seqs, pglogrepl.LSN, error) {
			marked = last
			var s flow.Seqs
			s.Add(9)
			return s, 600, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(marked, []int64{4, 5}) {
		t.Fatalf("marked %v before reading the polled rows, want the last poll transaction's", marked)
	}
	var to fakeStream
	pub := p.newPublisher(k, nil, ModeWAL, p.cfg.Columns).streaming(d.begin(&to, ctx), ctx)
	withSeq := func(c outbox.Change, seq string, final pglogrepl.LSN) outbox.Change {
		c.Values[7], c.FinalLSN = []byte(seq), final
		return c
	}
	changes := []outbox.Change{
		withSeq(row(480, "a0", "order", "A", "Placed", `{}`), "3", 490), {Kind: outbox.KindCommit, LSN: 500, FinalLSN: 490},
		withSeq(row(560, "a1", "order", "A", "Paid", `{}`), "9", 580), withSeq(row(565, "a2", "order", "A", "Sent", `{}`), "10", 580),
		{Kind: outbox.KindCommit, LSN: 590, FinalLSN: 580},
	}
	if err := d.walk(ctx, pub, changes, make(chan *replication.Batch)); err != nil {
		t.Fatal(err)
	}
	if got := k.acked(); !slices.Equal(got, []string{"order/A", "pgoutbox.position/pgoutbox"}) {
		t.Fatalf("delivered %v, want a2 alone and its position record", got)
	}
	pos := k.positions(t)
	if k.commits != 1 || len(pos) != 1 || pos[0].Mode != ModeWAL || pos[0].End != 590 || pos[0].Commit != 580 || pos[0].PolledUntil != 600 {
		t.Fatalf("%d commits, position records %+v", k.commits, pos)
	}
	if !slices.Equal(to.confirmed, []pglogrepl.LSN{500, 590}) {
		t.Fatalf("confirmed %v: the skipped transaction at once, the next after its commit", to.confirmed)
	}
	if p.stats.SkippedCommitted.Load() != 1 || p.stats.SkippedPolled.Load() != 1 {
		t.Fatalf("skipped %d committed, %d polled", p.stats.SkippedCommitted.Load(), p.stats.SkippedPolled.Load())
	}
}

// Under exactly-once delivery, a Postgres transaction whose rows a
// transform all dropped is committed as a Kafka transaction of its
// position record alone, and then confirmed: the stream moves past it.
func TestExactlyOnceFilteredTransaction(t *testing.T) {
	ctx := context.Background()
	p := filterPipeline(t)
	k := &fakeKafka{fakeSink: newFakeSink()}
	d, err := openExactlyOnceWAL(ctx, newTxnSession(k.broker(), p.cfg, p.hooks, p.log), p.cfg, eos.WALOpening{Floor: new(atomic.Uint64), Order: "seq", Skipped: p.stats.skipped()})
	if err != nil {
		t.Fatal(err)
	}
	to := new(fakeStream)
	pub := p.newPublisher(k, nil, ModeWAL, p.cfg.Columns).streaming(d.begin(to, ctx), ctx)
	r := row(100, "x1", "audit", "X", "Seen", `{}`)
	r.FinalLSN = 105
	if err := d.walk(ctx, pub, []outbox.Change{r, {Kind: outbox.KindCommit, LSN: 110, FinalLSN: 105}}, make(chan *replication.Batch)); err != nil {
		t.Fatal(err)
	}
	if err := d.commitOpen(ctx); err != nil {
		t.Fatal(err)
	}
	if got := k.acked(); !slices.Equal(got, []string{"pgoutbox.position/pgoutbox"}) {
		t.Fatalf("delivered %v, want the position record alone", got)
	}
	if pos := k.positions(t); len(pos) != 1 || pos[0].End != 110 {
		t.Fatalf("position records %+v, want one ending at 110", pos)
	}
	if !slices.Contains(to.confirmed, 110) {
		t.Fatalf("confirmed %v, want 110", to.confirmed)
	}
}

// BenchmarkPublishExactlyOnce is BenchmarkPublish under exactly-once
// delivery: one row's way through the publisher into the transaction
// ledger, a one-row Postgres transaction each, committed in a Kafka
// transaction of its own (as when nothing more waits), with its position
// record, on a fake Kafka that acks at once.
func BenchmarkPublishExactlyOnce(b *testing.B) {
	rl := benchRelay(b)
	p, ctx := rl.p, context.Background()
	k := &fakeKafka{fakeSink: newFakeSink()}
	k.fakeSink.autoAck = true
	d, err := openExactlyOnceWAL(ctx, newTxnSession(k.broker(), p.cfg, p.hooks, p.log), p.cfg, eos.WALOpening{Floor: new(atomic.Uint64), Order: "seq", Skipped: p.stats.skipped()})
	if err != nil {
		b.Fatal(err)
	}
	var to fakeStream
	pub := p.newPublisher(k, nil, ModeWAL, p.cfg.Columns).streaming(d.begin(&to, ctx), ctx)
	rel, values := benchRow()
	batch := []outbox.Change{
		{Kind: outbox.KindRow, Relation: rel, Values: values, CommitTime: time.Now(), XID: 7},
		{Kind: outbox.KindCommit},
	}
	idle := make(chan *replication.Batch)
	b.ReportAllocs()
	b.SetBytes(int64(len(values[4])))
	lsn := pglogrepl.LSN(0)
	for b.Loop() {
		lsn += 100
		batch[0].LSN, batch[0].FinalLSN, batch[1].LSN, batch[1].FinalLSN = lsn-50, lsn-10, lsn, lsn-10
		if err := d.walk(ctx, pub, batch, idle); err != nil {
			b.Fatal(err)
		}
		to.confirmed = to.confirmed[:0]
	}
}

// walTxns is an exactly-once WAL delivery over a fake Kafka, and tx walks
// one Postgres transaction of one row through it, nothing more waiting.
type walTxns struct {
	d   *exactlyOnceWAL
	k   *fakeKafka
	to  *fakeStream
	pub *publisher
}

func newWALTxns(t *testing.T, cfg func(*Config)) *walTxns {
	t.Helper()
	ctx := context.Background()
	p := testPipeline(t, "", PoisonHalt)
	cfg(&p.cfg)
	k := &fakeKafka{fakeSink: newFakeSink()}
	d, err := openExactlyOnceWAL(ctx, newTxnSession(k.broker(), p.cfg, p.hooks, p.log), p.cfg, eos.WALOpening{Floor: new(atomic.Uint64), Order: "seq", Skipped: p.stats.skipped()})
	if err != nil {
		t.Fatal(err)
	}
	to := new(fakeStream)
	return &walTxns{d: d, k: k, to: to, pub: p.newPublisher(k, nil, ModeWAL, p.cfg.Columns).streaming(d.begin(to, ctx), ctx)}
}

func (w *walTxns) tx(t *testing.T, lsn pglogrepl.LSN, id string) {
	t.Helper()
	r := row(lsn, id, "order", "A", "Placed", `{}`)
	r.FinalLSN, r.XID = lsn+5, uint32(lsn)
	if err := w.d.walk(context.Background(), w.pub, []outbox.Change{r, {Kind: outbox.KindCommit, LSN: lsn + 10, FinalLSN: lsn + 5}}, make(chan *replication.Batch)); err != nil {
		t.Fatal(err)
	}
}

// Under load, the Postgres transactions that commit within the interval
// after a Kafka commit share the next Kafka transaction; the first after
// a quiet spell is committed at once, and without an interval each is.
func TestExactlyOnceTransactionInterval(t *testing.T) {
	for _, interval := range []time.Duration{0, 200 * time.Millisecond} {
		w := newWALTxns(t, func(c *Config) { c.Transactions.Interval = interval })
		d, k, to := w.d, w.k, w.to
		tx := func(lsn pglogrepl.LSN, id string) { t.Helper(); w.tx(t, lsn, id) }
		tx(100, "a1")
		if k.commits != 1 {
			t.Fatalf("interval %s: the first transaction: %d commits, want 1 at once", interval, k.commits)
		}
		tx(200, "a2")
		tx(300, "a3")
		if interval == 0 {
			if k.commits != 3 || !slices.Equal(to.confirmed, []pglogrepl.LSN{110, 210, 310}) {
				t.Fatalf("no interval: %d commits, confirmed %v; want each at once", k.commits, to.confirmed)
			}
			continue
		}
		wait, ok := d.waiting()
		if k.commits != 1 || !slices.Equal(to.confirmed, []pglogrepl.LSN{110}) || !ok || wait <= 0 || wait > interval {
			t.Fatalf("within the interval: %d commits, confirmed %v, waiting %s %v; want the two to wait", k.commits, to.confirmed, wait, ok)
		}
		time.Sleep(wait)
		if wait, ok := d.waiting(); !ok || wait != 0 {
			t.Fatalf("after the interval: waiting %s %v", wait, ok)
		}
		tx(400, "a4") // nothing more to read, the interval passed: committed with the two before it
		pos := k.positions(t)
		if k.commits != 2 || len(pos) != 2 || pos[1].End != 410 || !slices.Equal(pos[1].XIDs, []uint32{100, 200, 300, 400}) {
			t.Fatalf("%d commits, positions %+v; want a2, a3 and a4 in the second", k.commits, pos)
		}
		if !slices.Equal(to.confirmed, []pglogrepl.LSN{110, 410}) {
			t.Fatalf("confirmed %v", to.confirmed)
		}
	}
}

// The first record of a Kafka transaction waits Transactions.Settle after
// the last commit (Apache Kafka 4.x holds one sent sooner for 20 ms), and
// only then: a row after a quiet spell goes at once.
func TestExactlyOnceTransactionSettle(t *testing.T) {
	const settle = 300 * time.Millisecond
	w := newWALTxns(t, func(c *Config) { c.Transactions.Settle = settle })
	tx := func(lsn pglogrepl.LSN, id string) time.Duration {
		t.Helper()
		start := time.Now()
		w.tx(t, lsn, id)
		return time.Since(start)
	}
	if took := tx(100, "a1"); took >= settle {
		t.Fatalf("the first transaction waited %s: nothing was committed before it", took)
	}
	if took := tx(200, "a2"); took < settle-10*time.Millisecond {
		t.Fatalf("a transaction right after a commit went after %s, want %s", took, settle)
	}
	time.Sleep(settle)
	if took := tx(300, "a3"); took >= settle/2 {
		t.Fatalf("a transaction %s after the last commit waited %s", settle, took)
	}
	if w.k.commits != 3 || !slices.Equal(w.to.confirmed, []pglogrepl.LSN{110, 210, 310}) {
		t.Fatalf("%d commits, confirmed %v", w.k.commits, w.to.confirmed)
	}
}

// Under SettleAsk a transaction's first record waits only until the
// coordinator says the last commit is complete, asked again while it is
// not, and no longer than settleLimit, however long the fixed settle;
// where the coordinator cannot tell, the fixed settle applies.
func TestExactlyOnceTransactionSettleAsksCoordinator(t *testing.T) {
	const settle = time.Second // far above settleLimit, so that a busy machine cannot blur the two
	for _, c := range []struct {
		name           string
		tells          bool
		after, asked   int
		atLeast, below time.Duration
	}{
		{"settled at the third answer", true, 2, 3, 0, settle / 3},
		{"never settled", true, 1 << 30, -1, settleLimit - 5*time.Millisecond, settle / 3},
		{"cannot tell", false, 0, 1, settle - 10*time.Millisecond, 2 * settle},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWALTxns(t, func(c *Config) { c.Transactions.Settle, c.Transactions.SettleAsk = settle, true })
			w.k.tells, w.k.settledAfter = c.tells, c.after
			w.tx(t, 100, "a1")
			if w.k.asked != 0 {
				t.Fatalf("asked %d times before the first commit", w.k.asked)
			}
			start := time.Now()
			w.tx(t, 200, "a2")
			took := time.Since(start)
			if took < c.atLeast || took >= c.below {
				t.Fatalf("a transaction right after a commit went after %s, want between %s and %s", took, c.atLeast, c.below)
			}
			if c.asked >= 0 && w.k.asked != c.asked {
				t.Fatalf("asked %d times, want %d", w.k.asked, c.asked)
			}
			if !slices.Equal(w.to.confirmed, []pglogrepl.LSN{110, 210}) {
				t.Fatalf("confirmed %v", w.to.confirmed)
			}
		})
	}
}

// A session that ends with its Kafka transaction open and never asked to
// commit records it in its producer, for this process's next session, and
// in the pipeline's state, and the next session, in any process, tells its
// producer before it reads the position topic (sink/orphan.go). A session
// with nothing unsent leaves the record alone. A session whose connection
// was closed under it (a SIGTERM cancels the query in flight, which
// closes it) records it all the same.
func TestUnendedTransactionKeptForTheNextSession(t *testing.T) {
	ctx := context.Background()
	url, conn := deadLetterDB(t)
	p := testPipeline(t, url, PoisonHalt)
	if err := p.own().SaveSetup(ctx, conn, "public.outbox", nil); err != nil {
		t.Fatal(err)
	}
	next := &fakeKafka{fakeSink: newFakeSink()}
	if err := p.unended().Learn(ctx, conn, next); err != nil || next.unended != nil {
		t.Fatalf("before any: told %v, %v", next.unended, err)
	}
	left := &fakeKafka{fakeSink: newFakeSink(), unsent: &[2]int64{9, 4}}
	p.unended().Remember(conn, left)
	p.unended().Remember(conn, &fakeKafka{fakeSink: newFakeSink()})
	if err := p.unended().Learn(ctx, conn, next); err != nil || !reflect.DeepEqual(next.unended, [][2]int64{{9, 4}}) {
		t.Fatalf("the next session was told %v, %v; want producer 9, epoch 4", next.unended, err)
	}
	if !reflect.DeepEqual(left.unended, [][2]int64{{9, 4}}) {
		t.Fatalf("the producer that left it was told %v; want producer 9, epoch 4", left.unended)
	}

	closed, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	closed.Close(ctx)
	p.unended().Remember(closed, &fakeKafka{fakeSink: newFakeSink(), unsent: &[2]int64{9, 6}})
	next.unended = nil
	if err := p.unended().Learn(ctx, conn, next); err != nil || !reflect.DeepEqual(next.unended, [][2]int64{{9, 6}}) {
		t.Fatalf("after a session whose connection was closed, the next was told %v, %v; want producer 9, epoch 6", next.unended, err)
	}
}
