package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	brokers "github.com/pgoutbox/pgoutbox/broker"
	"github.com/pgoutbox/pgoutbox/migrations"
	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/sink"
)

// demoCmd runs the whole pipeline on a throwaway Postgres and an
// in-process broker: writers insert outbox rows, the relay publishes them,
// a consumer reads them back and prints each with its commit-to-consume
// latency, and a summary closes the run. Everything it starts, it stops.
func demoCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pgoutbox demo", flag.ContinueOnError)
	var f demoFlags
	f.register(fs)
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if f.writers < 1 || f.rate <= 0 || f.perTx < 1 || f.duration <= 0 {
		return errors.New("--writers, --rate, --events-per-tx and --duration must be positive")
	}
	log, err := newLogger(stderr, f.logFormat, f.logLevel, nil)
	if err != nil {
		return err
	}

	fmt.Fprintln(stdout, "starting a throwaway PostgreSQL (wal_level=logical, fsync on)...")
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Fsync: true, Logger: log})
	if err != nil {
		return fmt.Errorf("throwaway postgres: %w", err)
	}
	defer pg.Close()
	fmt.Fprintf(stdout, "postgres   %s\n", pg.URL)

	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(3))
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	defer broker.Close()
	fmt.Fprintf(stdout, "kafka      %s (in-process Kafka-protocol broker)\n", broker.ListenAddrs()[0])

	cfg := relay.Config{CreateSlot: true}
	cfg.Replication.DatabaseURL = pg.URL
	cfg.Sink = &brokers.Kafka{Config: sink.Config{Brokers: broker.ListenAddrs(), CreateTopics: true}}
	cfg.Replication.HeartbeatInterval = 2 * time.Second
	cfg.Defaults()
	topics, err := prepareDemo(ctx, cfg, broker.ListenAddrs())
	if err != nil {
		return err
	}
	r, err := relay.New(cfg, log)
	if err != nil {
		return err
	}
	return f.run(ctx, stdout, r, pg.URL, broker.ListenAddrs(), topics)
}

// demoFlags are demo's flags.
type demoFlags struct {
	duration  time.Duration
	writers   int
	rate      float64
	perTx     int
	logFormat string
	logLevel  string
	config    string
}

func (f *demoFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.duration, "duration", 30*time.Second, "how long events are written")
	fs.IntVar(&f.writers, "writers", 4, "concurrent writers")
	fs.Float64Var(&f.rate, "rate", 20, "transactions per second, all writers together")
	fs.IntVar(&f.perTx, "events-per-tx", 2, "events per transaction")
	fs.StringVar(&f.logFormat, "log-format", "auto", "relay log format: auto, pretty, json or text")
	fs.StringVar(&f.logLevel, "log-level", "warn", "relay log level")
	fs.StringVar(&f.config, "config", "", "file of 'flag = value' lines")
}

// prepareDemo creates the outbox table, the slot and the demo's topics on
// the broker at seeds, and returns the topics. The slot must exist before the first
// event is written: WAL mode publishes what commits after the slot's
// consistent point.
func prepareDemo(ctx context.Context, cfg relay.Config, seeds []string) ([]string, error) {
	conn, err := pgx.Connect(ctx, cfg.Replication.DatabaseURL)
	if err != nil {
		return nil, err
	}
	_, err = migrations.Migrate(ctx, conn, migrations.Options{})
	if err == nil {
		_, err = relay.Setup(ctx, conn, cfg.Replication, true, false)
	}
	conn.Close(context.Background())
	if err != nil {
		return nil, err
	}
	topics := make([]string, len(demoAggregates))
	for i, a := range demoAggregates {
		topics[i] = "outbox.event." + a.typ
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	_, err = kadm.NewClient(admin).CreateTopics(ctx, 3, 1, nil, topics...)
	admin.Close()
	if err != nil {
		return nil, fmt.Errorf("create topics: %w", err)
	}
	return topics, nil
}

// run runs the relay r, the writers on the database at url and a consumer
// of topics on the broker at seeds, until the writers are done and what they wrote
// arrived, then prints the summary.
func (f *demoFlags) run(ctx context.Context, stdout io.Writer, r *relay.Relay, url string, seeds, topics []string) error {
	// The relay outlives the writers by a short drain; the consumer
	// outlives the relay's last publish.
	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRelay()
	relayDone := make(chan error, 1)
	go func() { relayDone <- r.Run(relayCtx) }()

	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer consumer.Close()

	tr := newTracker(stdout)
	fmt.Fprintf(stdout, "\nwriting %.0f transactions/s of %d events from %d writers for %s; Ctrl-C stops early\n\n", f.rate, f.perTx, f.writers, f.duration)
	fmt.Fprintf(stdout, "%-12s %-24s %-12s %-8s %-18s %9s\n", "consumed", "topic", "key", "event", "type", "latency")
	consumeCtx, stopConsuming := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConsuming()
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for consumeCtx.Err() == nil {
			fetches := consumer.PollFetches(consumeCtx)
			now := time.Now()
			fetches.EachRecord(func(rec *kgo.Record) { tr.consumed(rec, now) })
		}
	}()
	if err := f.write(ctx, pool, tr); err != nil {
		return err
	}

	// Wait until everything written arrived, or give up after a while.
	deadline := time.Now().Add(15 * time.Second)
	for !tr.complete() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	stopRelay()
	relayErr := <-relayDone
	stopConsuming()
	<-consumed

	tr.summary(stdout, r.Stats.Published.Load())
	if relayErr != nil {
		return fmt.Errorf("relay: %w", relayErr)
	}
	if !tr.complete() {
		return errors.New("some events did not arrive")
	}
	return nil
}

// write runs the writers for the demo's duration.
func (f *demoFlags) write(ctx context.Context, pool *pgxpool.Pool, tr *tracker) error {
	writeCtx, stopWriting := context.WithTimeout(ctx, f.duration)
	defer stopWriting()
	g, gctx := errgroup.WithContext(writeCtx)
	interval := time.Duration(float64(time.Second) * float64(f.writers) / f.rate)
	for w := 0; w < f.writers; w++ {
		g.Go(func() error { return demoWriter(gctx, pool, tr, w, interval, f.perTx) })
	}
	// Writers stop between transactions, so an error is a real one.
	if err := g.Wait(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

var demoAggregates = []struct{ typ, event string }{
	{"order", "OrderPlaced"}, {"payment", "PaymentCaptured"}, {"ledger", "EntryPosted"},
	{"transfer", "TransferRequested"}, {"donation", "DonationReceived"},
}

// demoWriter commits transactions on a fixed schedule, each inserting
// events for one aggregate, as an application writes its outbox.
func demoWriter(ctx context.Context, pool *pgxpool.Pool, tr *tracker, w int, interval time.Duration, perTx int) error {
	rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	next := time.Now().Add(time.Duration(rng.Int64N(int64(interval))))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(next)):
		}
		next = next.Add(interval)
		agg := demoAggregates[rng.IntN(len(demoAggregates))]
		key := fmt.Sprintf("%s-%d", agg.typ, rng.IntN(50))
		if err := demoTx(ctx, pool, tr, w, rng, agg.typ, key, agg.event, perTx); err != nil {
			return err
		}
	}
}

// demoTx writes one transaction of perTx events. The end of the writing
// time does not interrupt it: a COMMIT cancelled on its way can still
// commit, and its events would arrive without being counted as written.
func demoTx(ctx context.Context, pool *pgxpool.Pool, tr *tracker, w int, rng *rand.Rand, typ, key, event string, perTx int) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	ids := make([]string, 0, perTx)
	for i := 0; i < perTx; i++ {
		var id string
		err := tx.QueryRow(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
VALUES ($1, $2, $3, jsonb_build_object('amount', $4::int, 'currency', 'KRW', 'writer', $5::int)) RETURNING id::text`,
			typ, key, event, rng.IntN(100000), w).Scan(&id)
		if err != nil {
			tx.Rollback(context.Background())
			return err
		}
		ids = append(ids, id)
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	tr.committed(ids, time.Now())
	return nil
}

// tracker pairs each event's commit time with its consume time.
type tracker struct {
	mu        sync.Mutex
	out       io.Writer
	commitAt  map[string]time.Time
	seen      map[string]time.Time // consumed before the commit was recorded
	latencies []time.Duration
	delivered map[string]bool
	dups      int
	written   int
}

func newTracker(out io.Writer) *tracker {
	return &tracker{out: out, commitAt: map[string]time.Time{}, seen: map[string]time.Time{}, delivered: map[string]bool{}}
}

func (t *tracker) committed(ids []string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.written += len(ids)
	for _, id := range ids {
		t.commitAt[id] = at
		if seenAt, ok := t.seen[id]; ok {
			// Published before COMMIT returned to the writer.
			delete(t.seen, id)
			t.latencies = append(t.latencies, max(0, seenAt.Sub(at)))
		}
	}
}

func (t *tracker) consumed(rec *kgo.Record, at time.Time) {
	id, typ := ceAttr(rec.Value, "id"), ceAttr(rec.Value, "type")
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.delivered[id] {
		t.dups++
		return
	}
	t.delivered[id] = true
	c, ok := t.commitAt[id]
	if !ok {
		t.seen[id] = at
		fmt.Fprintf(t.out, "%-12s %-24s %-12s %-8s %-18s %9s\n", at.Format("15:04:05.000"), rec.Topic, rec.Key, shortID(id), typ, "<commit")
		return
	}
	lat := at.Sub(c)
	t.latencies = append(t.latencies, lat)
	fmt.Fprintf(t.out, "%-12s %-24s %-12s %-8s %-18s %9s\n", at.Format("15:04:05.000"), rec.Topic, rec.Key, shortID(id), typ, fmtMs(lat))
}

// shortID is the start of an event id: enough to tell apart the events of
// one transaction, which share a key, a type and often a millisecond.
func shortID(id string) string { return id[:min(len(id), 8)] }

func (t *tracker) complete() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.commitAt {
		if !t.delivered[id] {
			return false
		}
	}
	return true
}

func (t *tracker) summary(out io.Writer, published int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	missing := 0
	for id := range t.commitAt {
		if !t.delivered[id] {
			missing++
		}
	}
	lat := slices.Clone(t.latencies)
	slices.Sort(lat)
	fmt.Fprintf(out, "\nsummary: %d events committed, %d consumed, %d missing, %d duplicates; relay published %d\n",
		t.written, len(t.delivered), missing, t.dups, published)
	if len(lat) > 0 {
		fmt.Fprintf(out, "commit-to-consume latency: p50 %s  p90 %s  p99 %s  max %s  (n=%d)\n",
			fmtMs(quantile(lat, 0.50)), fmtMs(quantile(lat, 0.90)), fmtMs(quantile(lat, 0.99)), fmtMs(lat[len(lat)-1]), len(lat))
	}
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(float64(len(sorted)-1) * q)
	return sorted[i]
}

func fmtMs(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// ceAttr reads the id or type of a structured CloudEvent.
func ceAttr(v []byte, name string) string {
	var ev struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	if err := json.Unmarshal(v, &ev); err != nil {
		return ""
	}
	if name == "id" {
		return ev.ID
	}
	return ev.Type
}
