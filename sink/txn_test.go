package sink

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

// A producer whose transactional id a newer producer initialised is
// fenced by Apache Kafka: its open transaction fails with ErrFenced, and
// nothing it wrote reaches a read_committed reader, while the newer
// producer's transaction does. This is the backstop behind the pipeline's
// lease: a relay that produced while another took the pipeline over.
func TestFencedByNewerProducer(t *testing.T) {
	b := kafkatest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := "fence-" + time.Now().Format("150405.000000")
	cfg := Config{Brokers: b.Brokers, CreateTopics: true, TransactionalID: topic + ".txn", TransactionTimeout: 30 * time.Second}
	newProducer := func() *Kafka {
		t.Helper()
		k := fencedProducer(ctx, t, cfg)
		if err := k.Txn().Begin(); err != nil {
			t.Fatal(err)
		}
		return k
	}
	produce := func(k *Kafka, value string) error {
		t.Helper()
		done := make(chan error, 1)
		if err := k.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(value)}, func(_ *kgo.Record, err error) { done <- err }); err != nil {
			return err
		}
		return <-done
	}

	stale := newProducer()
	if err := produce(stale, "stale-before"); err != nil {
		t.Fatalf("the first producer's record: %v", err)
	}
	fresh := newProducer() // initialises the id again: the stale one is fenced
	if err := produce(fresh, "fresh"); err != nil {
		t.Fatalf("the newer producer's record: %v", err)
	}

	err := stale.Txn().Commit(ctx, func() error { return nil })
	if !Fenced(err) {
		t.Fatalf("the stale producer's commit: %v, want ErrFenced", err)
	}
	if err := fresh.Txn().Commit(ctx, func() error { return nil }); err != nil {
		t.Fatalf("the newer producer's commit: %v", err)
	}

	reader, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var seen []string
	for len(seen) == 0 {
		fs := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed reader saw nothing: %v", ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { seen = append(seen, string(r.Value)) })
	}
	// The newer producer's commit is a marker after every record the stale
	// one wrote, so a second fetch would show nothing more of them.
	if len(seen) != 1 || seen[0] != "fresh" {
		t.Fatalf("read_committed reader saw %q, want only the newer producer's record", seen)
	}
}

// A transaction that an earlier producer of the relay's transactional id
// left open on the position topic, and that the transaction coordinator
// does not track, never ends by itself: every read_committed read of the
// partition waits behind it (seen in the nemesis after broker kills
// during a commit: two relays waited for good). Here one is made as
// KIP-664 describes them: a transactional record written without the
// partition being added to the transaction (the broker's verification
// off), by a transaction that wrote nowhere else. LastCommitted's error
// names it, whose it is, that its outcome cannot be read from Kafka, and
// the command that ends it; once an administrator aborted it (here as kafka-transactions.sh
// does: an abort marker for the producer the broker describes), the read
// goes on. Another producer's open transaction is named as another's.
func TestLastCommittedNamesHangingTransaction(t *testing.T) {
	b := kafkatest.Start(t, kafkatest.Options{Config: map[string]string{"transaction.partition.verification.enable": "false"}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const topic, txnID = "position", "pipeline.txn"
	cfg := Config{Brokers: b.Brokers, TransactionalID: txnID, TransactionTimeout: 30 * time.Second}
	committedPosition(ctx, t, cfg, topic)
	raw := unaddingClient(t, b)
	hang := func(txnID string) {
		t.Helper()
		init := kmsg.NewPtrInitProducerIDRequest()
		init.TransactionalID = &txnID
		init.TransactionTimeoutMillis = 30000
		var resp *kmsg.InitProducerIDResponse
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			var err error
			if resp, err = init.RequestWith(ctx, raw); err == nil {
				err = kerr.ErrorForCode(resp.ErrorCode)
			}
			if err == nil {
				break
			}
			if !errors.Is(err, kerr.ConcurrentTransactions) || time.Now().After(deadline) {
				t.Fatalf("init producer id: %v", err) // the commit's markers are written by then
			}
		}
		produceUnadded(ctx, t, raw, txnID, topic, resp.ProducerID, resp.ProducerEpoch, "hanging")
	}
	waitBehind := func(k *Kafka, want ...string) {
		t.Helper()
		short, cancel := context.WithTimeout(ctx, 4*time.Second)
		defer cancel()
		_, err := k.Topics().LastCommitted(short, topic, []byte("p"))
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Fatalf("last committed behind an open transaction: %v; want it to say %q", err, w)
			}
		}
	}

	// With the position topic known, a new producer's fence ends it: how
	// it ended cannot be known, and a position record is committed only
	// when its transaction is known committed.
	hang(txnID)
	withPosition := cfg
	withPosition.PositionTopic = topic
	rec, err := fencedProducer(ctx, t, withPosition).Topics().LastCommitted(ctx, topic, []byte("p"))
	if err != nil || string(rec.Value) != "committed" {
		t.Fatalf("last committed after a new producer's fence: %v, %v; want the committed record", rec, err)
	}

	hang(txnID)
	k := fencedProducer(ctx, t, cfg) // without the position topic known, nothing is ended
	waitBehind(k, "a transaction stays open", "an earlier producer of this transactional id's transaction",
		"no other partition holds its coordinator's marker",
		"kafka-transactions.sh --bootstrap-server "+strings.Join(b.Brokers, ",")+" abort --topic position --partition 0 --start-offset 4")
	abortOpen(ctx, t, raw, topic)
	rec, err = k.Topics().LastCommitted(ctx, topic, []byte("p"))
	if err != nil || string(rec.Value) != "committed" {
		t.Fatalf("last committed once the open transaction was aborted: %v, %v; want the committed record", rec, err)
	}

	hang("another.txn")
	waitBehind(k, "another producer's transaction", "kafka-transactions.sh")
}

// An orphan's outcome is read where its coordinator did write it: a
// transaction of the relay's producer wrote an event, which the
// coordinator tracked, and its position record, which it did not (as in
// the test above). The coordinator's marker on the event's partition
// decides: LastCommitted ends the orphan with the same marker, and reads
// the orphan's position when the transaction committed, the one before
// when it aborted. Either other marker would be wrong: a commit where the
// coordinator aborted skips the transaction's events for good, an abort
// where it committed sends them again.
func TestLastCommittedEndsOrphanAsItsCoordinatorDecided(t *testing.T) {
	b := kafkatest.Start(t, kafkatest.Options{Config: map[string]string{"transaction.partition.verification.enable": "false"}})
	raw := unaddingClient(t, b)
	for _, commit := range []bool{true, false} {
		name, want := "abort", "committed"
		if commit {
			name, want = "commit", "orphan"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			topic, events, txnID := "position."+name, "events."+name, "pipeline."+name
			cfg := Config{Brokers: b.Brokers, TransactionalID: txnID, TransactionTimeout: 30 * time.Second}
			first := committedPosition(ctx, t, cfg, topic, events)

			begin(t, first)
			produced(ctx, t, first, events, "event")
			id, epoch, err := first.c.load().ProducerID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			produceUnadded(ctx, t, raw, txnID, topic, id, epoch, "orphan")
			if commit {
				err = first.Txn().Commit(ctx, func() error { return nil })
			} else {
				err = first.Txn().Abort(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}

			k := fencedProducer(ctx, t, cfg)
			rec, err := k.Topics().LastCommitted(ctx, topic, []byte("p"))
			if err != nil || rec == nil || string(rec.Value) != want {
				var got string
				if rec != nil {
					got = string(rec.Value)
				}
				t.Fatalf("last committed after the orphan: %q, %v; want %q", got, err, want)
			}
		})
	}
}

// An orphan whose transaction its producer never asked to commit is
// aborted: only the producer's EndTxn commits. Seen in nemesis seed 11:
// the broker was killed while a relay's transaction had records on an
// event partition and the position topic; the restarted coordinator knew
// neither, and the relay's next session waited behind both for good. Here
// the coordinator never learns of them (written without the partitions
// added), and the transaction "fails" before its commit. The process that
// left it knows that once it renews its producer; another process knows
// it when told before it fences (Unended: the relay keeps it in
// PostgreSQL). Either aborts it on both partitions and reads the position
// before it. A process that was not told cannot know how it ended: it
// commits the event (shown, and perhaps sent again: a duplicate, never a
// loss) and aborts the position record (a position is committed only when
// its whole transaction is known to have committed).
func TestLastCommittedAbortsOrphanNeverCommitted(t *testing.T) {
	b := kafkatest.Start(t, kafkatest.Options{Config: map[string]string{"transaction.partition.verification.enable": "false"}})
	raw := unaddingClient(t, b)
	for _, name := range []string{"this process", "another process", "nobody told"} {
		t.Run(name, func(t *testing.T) {
			ctx, cfg, topic, events, k := orphanCase(t, b, name)
			txnID := cfg.TransactionalID
			begin(t, k)
			id, epoch, err := k.c.load().ProducerID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			produceUnadded(ctx, t, raw, txnID, events, id, epoch, "event")
			produceUnadded(ctx, t, raw, txnID, topic, id, epoch, "orphan")
			k.txn.began.Store(time.Now().UnixNano()) // what Produce records for the transaction's first record
			if uid, uepoch, ok := k.Txn().Unsent(); !ok || uid != id || uepoch != epoch {
				t.Fatalf("Unsent = %d, %d, %t; want %d, %d", uid, uepoch, ok, id, epoch)
			}

			reader := k
			switch name {
			case "this process":
				if err := k.Renew(); err != nil { // the session that failed ends; the next one starts
					t.Fatal(err)
				}
			default:
				if reader, err = New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(reader.Close)
				if name == "another process" {
					reader.Txn().Unended(id, epoch)
				}
			}
			if err := reader.Txn().Fence(ctx); err != nil {
				t.Fatal(err)
			}
			rec, err := reader.Topics().LastCommitted(ctx, topic, []byte("p"))
			if err != nil || rec == nil || string(rec.Value) != "committed" {
				t.Fatalf("last committed after the orphan nobody committed: %v, %v; want the record before it", rec, err)
			}
			adm := kadm.NewClient(reader.c.load())
			described, err := adm.DescribeProducers(ctx, kadm.TopicsSet{events: {0: {}}})
			if err != nil {
				t.Fatal(err)
			}
			described.EachProducer(func(p kadm.DescribedProducer) {
				if p.CurrentTxnStartOffset >= 0 {
					t.Errorf("%s/%d: the orphan is still open there (producer id %d, epoch %d, from %d)", p.Topic, p.Partition, p.ProducerID, p.ProducerEpoch, p.CurrentTxnStartOffset)
				}
			})
			// A record after it tells a read_committed reader's end.
			if err := raw.ProduceSync(ctx, &kgo.Record{Topic: events, Key: []byte("p"), Value: []byte("after")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			want := []string{"after"}
			if name == "nobody told" {
				want = []string{"event", "after"}
			}
			var got []string
			for _, r := range kafkatest.Consume(t, b.Brokers, []string{events}, len(want), 20*time.Second) {
				got = append(got, string(r.Value))
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: a read_committed reader sees %q, want %q", events, got, want)
			}
		})
	}
}

// orphanCase is a subtest's own: its position and events topics and
// transactional id named after it, and a producer of cfg that committed
// the record "committed" to the position topic; ctx ends with the test.
func orphanCase(t *testing.T, b *kafkatest.Broker, name string) (ctx context.Context, cfg Config, position, events string, k *Kafka) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	suffix := strings.ReplaceAll(name, " ", "-")
	position, events = "position."+suffix, "events."+suffix
	cfg = Config{Brokers: b.Brokers, TransactionalID: "pipeline." + suffix, TransactionTimeout: 30 * time.Second, PositionTopic: position}
	return ctx, cfg, position, events, committedPosition(ctx, t, cfg, position, events)
}

// committedPosition creates topics, the first the position topic, and
// commits the record "committed" with key "p" to it, by a producer of
// cfg that it returns.
func committedPosition(ctx context.Context, t *testing.T, cfg Config, topics ...string) *Kafka {
	t.Helper()
	k := fencedProducer(ctx, t, cfg)
	for _, tp := range topics {
		if err := k.Topics().EnsureCompactedTopic(ctx, tp); err != nil {
			t.Fatal(err)
		}
	}
	begin(t, k)
	produced(ctx, t, k, topics[0], "committed")
	if err := k.Txn().Commit(ctx, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	// The commit's markers are written after it returns; a record of the
	// next transaction written without the broker's checks must come
	// after them.
	adm := kadm.NewClient(k.c.load())
	for {
		ds, err := adm.DescribeTransactions(ctx, cfg.TransactionalID)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := ds.On(cfg.TransactionalID, nil); err == nil && d.State == "CompleteCommit" {
			return k
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the commit's markers: %v", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// unaddingClient produces before version 12, before transaction version
// 2, where the broker adds the partition to the transaction itself.
func unaddingClient(t *testing.T, b *kafkatest.Broker) *kgo.Client {
	t.Helper()
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(0, 11)
	raw, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.MaxVersions(versions))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	return raw
}

func begin(t *testing.T, k *Kafka) {
	t.Helper()
	if err := k.Txn().Begin(); err != nil {
		t.Fatal(err)
	}
}

// produced produces value with key "p" to topic and waits for its ack.
func produced(ctx context.Context, t *testing.T, k *Kafka, topic, value string) {
	t.Helper()
	done := make(chan error, 1)
	if err := k.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte("p"), Value: []byte(value)}, func(_ *kgo.Record, err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// abortOpen writes an abort marker for every transaction open on partition
// 0 of topic, as kafka-transactions.sh abort does.
func abortOpen(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	adm := kadm.NewClient(cl)
	described, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	described.EachProducer(func(p kadm.DescribedProducer) {
		if p.CurrentTxnStartOffset < 0 {
			return
		}
		resp, err := adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch,
			CoordinatorEpoch: p.CoordinatorEpoch, Topics: kadm.TopicsSet{topic: {0: {}}}})
		resp.EachPartition(func(r kadm.TxnMarkersPartitionResponse) { err = errors.Join(err, r.Err) })
		if err != nil {
			t.Fatalf("abort marker: %v", err)
		}
	})
}

// fencedProducer is a transactional producer of cfg that initialised its
// transactional id, closed when the test ends.
func fencedProducer(ctx context.Context, t *testing.T, cfg Config) *Kafka {
	t.Helper()
	k, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	if err := k.Txn().Fence(ctx); err != nil {
		t.Fatalf("fence: %v", err)
	}
	return k
}

// produceUnadded writes one transactional record for producer id and epoch
// to partition 0 of topic without adding the partition to the transaction:
// a broker that does not verify that takes it, and the coordinator never
// learns of it.
func produceUnadded(ctx context.Context, t *testing.T, cl *kgo.Client, txnID, topic string, id int64, epoch int16, value string) {
	t.Helper()
	rec := kmsg.Record{Key: []byte("p"), Value: []byte(value)}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1) // what follows the length, a varint of 0 above
	now := time.Now().UnixMilli()
	batch := kmsg.RecordBatch{Magic: 2, Attributes: 0x10, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: id, ProducerEpoch: epoch, NumRecords: 1, Records: rec.AppendTo(nil)}
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))                                          // Length: after the offset and itself
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))) // CRC: from the attributes on
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID = &txnID
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("the unadded transactional record: %v", err)
	}
}

// Apache Kafka 4.x holds a transaction's first record while the last
// commit's markers are being written, for its retry backoff (20 ms by
// default, add.partitions.to.txn.retry.backoff.ms; KAFKA-18654): the reason
// for --transaction-settle. A record sent once the coordinator says the
// commit is complete is acked without that hold (Txn.Settled,
// --transaction-settle auto). The broker's backoff is set to 200 ms here, so
// that a held record stands apart from one a busy machine merely delays.
func TestFirstRecordAfterCommitHeld(t *testing.T) {
	const backoff, n = 200 * time.Millisecond, 15
	b := kafkatest.Start(t, kafkatest.Options{Config: map[string]string{
		"add.partitions.to.txn.retry.backoff.ms":     fmt.Sprint(backoff.Milliseconds()),
		"add.partitions.to.txn.retry.backoff.max.ms": "10000",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	topic := "settle-" + time.Now().Format("150405.000000")
	k := fencedProducer(ctx, t, Config{Brokers: b.Brokers, CreateTopics: true, TransactionalID: topic + ".txn", TransactionTimeout: 30 * time.Second})
	commit := func() {
		t.Helper()
		if err := k.Txn().Commit(ctx, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	acked := func(value string) time.Duration {
		t.Helper()
		begin(t, k)
		start := time.Now()
		produced(ctx, t, k, topic, value)
		return time.Since(start)
	}
	held := func(d []time.Duration) int {
		return len(slices.DeleteFunc(slices.Clone(d), func(d time.Duration) bool { return d < backoff }))
	}
	acked("first") // the topic is created
	commit()
	var at, after []time.Duration
	unsettled := 0 // answers that a commit was not complete yet
	for i := range n {
		at = append(at, acked(fmt.Sprint("at once ", i)))
		commit()
	}
	for i := range n {
		asks := 0
		for {
			settled, ok := k.Txn().Settled(ctx)
			if !ok {
				t.Fatal("the coordinator did not tell whether the commit is complete")
			}
			if asks++; settled {
				break
			}
			if asks > 1000 {
				t.Fatal("the commit never completed")
			}
		}
		unsettled += asks - 1
		after = append(after, acked(fmt.Sprint("settled ", i)))
		commit()
	}
	t.Logf("first records acked right after a commit: %v; once settled: %v; %d answers said not yet", at, after, unsettled)
	// Whether a first record sent at once is held is a race with the
	// markers' write: most are on a quiet machine, a third of them on a
	// busy one (measured); none is delayed that long otherwise. One sent
	// once settled is never held, but a machine busy with other tests may
	// stall one for as long.
	if h := held(at); h == 0 {
		t.Errorf("%d of %d first records right after a commit were held for the broker's backoff (%s): the broker no longer holds them", h, n, backoff)
	}
	if h := held(after); h > 1 {
		t.Errorf("%d of %d first records sent once the commit settled took the broker's backoff (%s) or longer: held as if sent at once", h, n, backoff)
	}
	// The coordinator's answer right after a commit is most often that it
	// is not complete (two to seven asks each, measured); Settled must
	// have said so.
	if unsettled == 0 {
		t.Error("Settled said every commit was complete when first asked, right after it")
	}
}
