package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgoutbox/pgoutbox/bench"
	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/proc"
	"github.com/pgoutbox/pgoutbox/replication"
)

// benchCmd measures commit-to-consume latency and throughput of the relay
// in WAL and polling mode, a drain, and the floor (a bare replication
// reader). Without --database-url and --kafka-brokers it runs on a
// throwaway Postgres (fsync on) and a devbroker process.
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "floor" {
		return benchFloorCmd(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("pgoutbox bench", flag.ContinueOnError)
	var (
		cfg       bench.Config
		url       string
		brokers   string
		natsURL   string
		rabbitURL string
		redisAddr string
		modes     string
		delivery  string
		polls     string
		rates     string
		jsonPath  string
		outDir    string
		config    string
		noFloor   bool
		relayArgs string
		relayBins string
	)
	cfg.EventsPerTx = bench.Range{Min: 1, Max: 1}
	fs.StringVar(&url, "database-url", "", "PostgreSQL to measure, a database of its own (default: a throwaway cluster, fsync on)")
	fs.StringVar(&brokers, "kafka-brokers", "", "Kafka to measure, host:port[,...] (default: a devbroker process)")
	fs.StringVar(&natsURL, "nats-url", "", "measure the relay publishing to this NATS JetStream instead of Kafka (--sink nats-jetstream); each run gets a stream of its own")
	fs.StringVar(&rabbitURL, "rabbitmq-url", "", "measure the relay publishing to this RabbitMQ instead of Kafka (--sink rabbitmq), amqp://user:password@host:port/vhost; each run gets a fanout exchange and a queue named like its topic, deleted after it, and a dead-letter queue, kept")
	fs.StringVar(&redisAddr, "redis-address", "", "measure the relay publishing to this Redis instead of Kafka (--sink redis), host:port; each run gets a stream of its own")
	fs.StringVar(&cfg.Table, "table", "public.outbox", "the outbox table; the bench writes and deletes rows of aggregate types bench_*")
	fs.StringVar(&modes, "modes", "wal,poll", "relay modes to measure under steady load: wal, poll")
	fs.StringVar(&delivery, "delivery", "at-least-once", "the relay's --delivery values to measure each mode and the drain with, comma-separated: at-least-once, exactly-once")
	fs.Float64Var(&cfg.Rate, "rate", 2000, "offered load, events per second (open loop)")
	fs.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long each steady-load run writes")
	fs.IntVar(&cfg.Writers, "writers", 4, "writer connections")
	fs.IntVar(&cfg.Repeat, "repeat", 1, "rounds of every steady-load run, interleaved (each round starts one run later); more than one adds each run's median and range")
	fs.StringVar(&rates, "rates", "", "a sweep: measure every steady-load run, the floor's included, at each of these rates (events/s, comma-separated) instead of --rate, for --duration each")
	fs.Var(&cfg.EventsPerTx, "events-per-tx", "events per transaction: N, or MIN-MAX for each value in turn")
	fs.IntVar(&cfg.Aggregates, "aggregates", 0, "an application's load: create this many aggregate rows, and have each transaction lock one (UPDATE ... WHERE id = $1) before it inserts its events; 0: one INSERT per transaction")
	fs.IntVar(&cfg.PayloadBytes, "payload-bytes", 200, "size of each event's JSON payload")
	fs.StringVar(&polls, "poll-interval", "500ms", "poll intervals to measure in poll mode, comma-separated")
	fs.IntVar(&cfg.BatchSize, "batch-size", 0, "poll mode's --batch-size (default: the relay's)")
	fs.IntVar(&cfg.DrainEvents, "drain-events", 100_000, "backlog of the drain run; 0 skips it")
	fs.IntVar(&cfg.DrainEventsPerTx, "drain-events-per-tx", 10, "events per transaction of the drain backlog")
	fs.BoolVar(&noFloor, "no-floor", false, "skip the bare-reader floor runs")
	fs.StringVar(&relayBins, "relay-bin", "", "measure several pgoutbox binaries side by side, NAME=PATH comma-separated: each relay run and drain is made with each in turn (default: this binary)")
	fs.StringVar(&relayArgs, "relay-args", "", "extra arguments for every `pgoutbox run`, space-separated")
	fs.StringVar(&jsonPath, "json", "", "write the results as JSON to this file")
	fs.StringVar(&outDir, "out", "", "write the latency chart (latency.svg) and the table (results.txt) to this directory")
	fs.StringVar(&config, "config", "", "file of 'flag = value' lines")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if cfg.DrainEvents == 0 {
		cfg.DrainEvents = -1
	}
	cfg.NoFloor = noFloor
	cfg.RelayArgs = strings.Fields(relayArgs)
	if err := parseBenchLists(&cfg, delivery, modes, rates, polls, relayBins); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the pgoutbox binary: %w", err)
	}
	cfg.RelayBin = exe
	cfg.Progress = stderr
	if cfg.Target, err = benchTarget(brokers, natsURL, rabbitURL, redisAddr); err != nil {
		return err
	}
	stop, err := benchServers(ctx, &cfg, url, brokers, exe, stderr)
	if err != nil {
		return err
	}
	defer stop()
	if cfg.Target == nil {
		cfg.Target = bench.Kafka{Brokers: cfg.Brokers}
	}

	rep, err := bench.Run(ctx, cfg)
	if rep == nil {
		return err
	}
	var table bytes.Buffer
	fmt.Fprintf(&table, "pgoutbox bench: %s events/s for %s, %d writers, %s events per transaction%s, %d-byte payloads, into %s; %d CPUs\n\n",
		ratesText(cfg), cfg.Duration, cfg.Writers, cfg.EventsPerTx, aggregatesText(cfg.Aggregates), cfg.PayloadBytes, cfg.Target.Name(), runtime.NumCPU())
	rep.WriteTable(&table)
	stdout.Write(table.Bytes())
	if jsonPath != "" {
		if werr := rep.WriteJSON(jsonPath); werr != nil {
			return errors.Join(err, werr)
		}
	}
	if outDir != "" {
		if werr := writeBenchOut(outDir, rep, cfg, table.Bytes()); werr != nil {
			return errors.Join(err, werr)
		}
	}
	if err == nil && len(rep.Failed) > 0 {
		err = fmt.Errorf("%d of the runs failed", len(rep.Failed))
	}
	return err
}

// benchTarget is where --nats-url, --rabbitmq-url or --redis-address
// have the relay publish; nil for Kafka (--kafka-brokers, else a
// devbroker). More than one of them with --kafka-brokers is refused.
func benchTarget(brokers, natsURL, rabbitURL, redisAddr string) (bench.Target, error) {
	var given []string
	var t bench.Target
	for _, f := range []struct {
		flag, value string
		target      bench.Target
	}{
		{"--kafka-brokers", brokers, nil},
		{"--nats-url", natsURL, bench.NATS{URL: natsURL}},
		{"--rabbitmq-url", rabbitURL, bench.RabbitMQ{URL: rabbitURL}},
		{"--redis-address", redisAddr, bench.Redis{Address: redisAddr}},
	} {
		if f.value != "" {
			given, t = append(given, f.flag), f.target
		}
	}
	if len(given) > 1 {
		return nil, fmt.Errorf("%s: the bench measures one broker at a time; give one of them", strings.Join(given, " and "))
	}
	return t, nil
}

// parseBenchLists reads bench's comma-separated flags into cfg.
func parseBenchLists(cfg *bench.Config, delivery, modes, rates, polls, relayBins string) error {
	for _, d := range strings.Split(delivery, ",") {
		if d = strings.TrimSpace(d); d != "" {
			if d != "at-least-once" && d != "exactly-once" {
				return fmt.Errorf("--delivery: %q: want at-least-once or exactly-once", d)
			}
			cfg.Deliveries = append(cfg.Deliveries, d)
		}
	}
	for _, m := range strings.Split(modes, ",") {
		if m = strings.TrimSpace(m); m != "" {
			if m != "wal" && m != "poll" {
				return fmt.Errorf("--modes: %q: want wal or poll", m)
			}
			cfg.Modes = append(cfg.Modes, m)
		}
	}
	for _, r := range strings.Split(rates, ",") {
		if r = strings.TrimSpace(r); r != "" {
			v, err := strconv.ParseFloat(r, 64)
			if err != nil || v <= 0 {
				return fmt.Errorf("--rates: %q: want a positive number of events per second", r)
			}
			if slices.Contains(cfg.Rates, v) {
				// A run is named for its rate: the second would find the
				// first's slot dropped, as a lost slot.
				return fmt.Errorf("--rates: %s is listed twice; --repeat repeats every run", r)
			}
			cfg.Rates = append(cfg.Rates, v)
		}
	}
	for _, p := range strings.Split(polls, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil {
			return fmt.Errorf("--poll-interval: %w", err)
		}
		cfg.PollIntervals = append(cfg.PollIntervals, d)
	}
	for _, nb := range strings.Split(relayBins, ",") {
		if nb = strings.TrimSpace(nb); nb == "" {
			continue
		}
		name, bin, ok := strings.Cut(nb, "=")
		if !ok || name == "" || bin == "" {
			return fmt.Errorf("--relay-bin: %q: want NAME=PATH", nb)
		}
		cfg.Relays = append(cfg.Relays, bench.Relay{Name: name, Bin: bin})
	}
	return nil
}

// benchServers starts a throwaway PostgreSQL and a devbroker for what url
// and brokers do not name, and sets cfg's; stop stops what it started.
func benchServers(ctx context.Context, cfg *bench.Config, url, brokers, exe string, stderr io.Writer) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if url == "" {
		fmt.Fprintln(stderr, "starting a throwaway PostgreSQL (wal_level=logical, fsync on)...")
		pg, err := pgcluster.Start(ctx, pgcluster.Options{Fsync: true})
		if err != nil {
			return func() {}, fmt.Errorf("throwaway postgres: %w", err)
		}
		stops = append(stops, func() { pg.Close() })
		url = pg.URL
	}
	cfg.DatabaseURL = url
	switch {
	case cfg.Target != nil:
		return stop, nil
	case brokers != "":
		cfg.Brokers = strings.Split(brokers, ",")
		return stop, nil
	}
	bin, err := findDevbroker(exe)
	if err != nil {
		stop()
		return func() {}, err
	}
	d, err := proc.StartDevbroker(ctx, bin, "", "--log-level", "error")
	if err != nil {
		stop()
		return func() {}, err
	}
	stops = append(stops, func() { d.Close() })
	cfg.Brokers = d.Brokers
	fmt.Fprintf(stderr, "devbroker on %s\n", d.Brokers[0])
	return stop, nil
}

func writeBenchOut(dir string, rep *bench.Report, cfg bench.Config, table []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.txt"), table, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "latency.svg"))
	if err != nil {
		return err
	}
	title := fmt.Sprintf("pgoutbox commit-to-consume latency at %s events/s (%d CPUs)", ratesText(cfg), runtime.NumCPU())
	if err := bench.WriteSVG(f, title, rep.Series); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if len(rep.Sweep) == 0 {
		return nil
	}
	f, err = os.Create(filepath.Join(dir, "rates.svg"))
	if err != nil {
		return err
	}
	title = fmt.Sprintf("pgoutbox latency against offered load, relay and floor (%s per transaction%s, %d CPUs)",
		cfg.EventsPerTx, aggregatesText(cfg.Aggregates), runtime.NumCPU())
	if err := bench.WriteRateSVG(f, title, rep.RateSeries()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func ratesText(cfg bench.Config) string {
	if len(cfg.Rates) == 0 {
		return strconv.FormatFloat(cfg.Rate, 'f', -1, 64)
	}
	var s []string
	for _, r := range cfg.Rates {
		s = append(s, strconv.FormatFloat(r, 'f', -1, 64))
	}
	return strings.Join(s, ", ")
}

func aggregatesText(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", each locking one of %d aggregates first", n)
}

// benchFloorCmd is the floor the bench measures the relay against, run by
// the bench as its own process: it streams a slot that exists through the
// relay's receive loop and decoder, and writes "ID UNIXNANO" for every
// inserted row to stdout, without Kafka. It stops at SIGTERM.
func benchFloorCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pgoutbox bench floor", flag.ContinueOnError)
	var cfg replication.Config
	fs.StringVar(&cfg.DatabaseURL, "database-url", "", "PostgreSQL (or PGOUTBOX_DATABASE_URL)")
	fs.StringVar(&cfg.Table, "table", "public.outbox", "the outbox table")
	fs.StringVar(&cfg.Slot, "slot", "", "the slot to stream; it must exist, and is not dropped")
	fs.StringVar(&cfg.Publication, "publication", "pgoutbox_bench", "the publication")
	procsFlag := fs.String("procs", "auto", procsUsage+"; as the relay's, so that both run alike")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if cfg.Slot == "" {
		return errors.New("--slot is required")
	}
	procs, err := parseProcs(*procsFlag)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, "text", "warn", secretsOf(cfg.DatabaseURL))
	if err != nil {
		return err
	}
	setProcs(procs, log)
	return bench.RunFloor(ctx, cfg, stdout, log)
}

// findDevbroker looks for the devbroker command next to pgoutbox, then on
// PATH.
func findDevbroker(exe string) (string, error) {
	p := filepath.Join(filepath.Dir(exe), "devbroker")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	if p, err := osexec.LookPath("devbroker"); err == nil {
		return p, nil
	}
	return "", errors.New("devbroker not found next to pgoutbox or on PATH: run make build, or give --kafka-brokers")
}
