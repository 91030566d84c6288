// Package benchcompare puts one application's load through pgoutbox and
// through Debezium side by side, on the same PostgreSQL and the same
// Apache Kafka, in one run: `make bench-compare`. It is a benchmark, not
// a test (go test runs it only with -bench), and it lives in the test
// harness, which starts Kafka and Kafka Connect; the measuring is
// pgoutbox bench's (package bench), with Debezium plugged in as a
// bench.System.
package benchcompare

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/bench"
	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/connecttest"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

var (
	outDir   = flag.String("out", "", "write results.txt, results.json, latency.svg and rates.svg here (default: bench-compare-out in the module)")
	rates    = flag.String("rates", "500,2000,4000", "offered rates, events/s, comma-separated")
	duration = flag.Duration("duration", 30*time.Second, "how long each steady-load run writes")
	drain    = flag.Int("drain-events", 100_000, "backlog of the drain runs; 0 skips them")
	warmup   = flag.Duration("warmup", 30*time.Second, "load put through Debezium, and half as long through pgoutbox at each delivery, before the measured runs, to let the JVMs compile their hot code; 0 skips it")
	systems  = flag.String("systems", "pgoutbox,poll,debezium", "what to run: pgoutbox (both deliveries), poll (500ms), debezium (defaults and tuned), comma-separated")
	repeat   = flag.Int("repeat", 3, "rounds of every steady-load run at each rate, interleaved; the tables give the median and range")
	sinkFlag = flag.String("sink", "kafka", "where both sides publish: kafka (pgoutbox beside Debezium on Kafka Connect, one Apache Kafka broker), or nats-jetstream, rabbitmq or redis (pgoutbox --sink SINK beside Debezium Server's sink of that type, one nats-server, rabbitmq-server or redis-server)")
)

// Debezium's PostgreSQL connector as a user configures it for an outbox:
// pgoutput, the publication and slot given, the outbox table only, no
// snapshot of rows written before, the outbox event router at its
// defaults (topic outbox.event.<aggregatetype>, key aggregateid, value
// payload, the event id in header id).
func debeziumConfig(dbURL string, run bench.SystemRun) (map[string]string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, err
	}
	return map[string]string{
		"connector.class":                  "io.debezium.connector.postgresql.PostgresConnector",
		"tasks.max":                        "1",
		"database.hostname":                u.Hostname(),
		"database.port":                    u.Port(),
		"database.user":                    u.User.Username(),
		"database.dbname":                  strings.TrimPrefix(u.Path, "/"),
		"plugin.name":                      "pgoutput",
		"slot.name":                        run.Slot,
		"publication.name":                 run.Publication,
		"publication.autocreate.mode":      "disabled",
		"table.include.list":               run.Table,
		"topic.prefix":                     "bench",
		"snapshot.mode":                    "no_data",
		"transforms":                       "outbox",
		"transforms.outbox.type":           "io.debezium.transforms.outbox.EventRouter",
		"transforms.outbox.route.by.field": "aggregatetype",
	}, nil
}

// tunedForLatency are the settings Debezium's documentation names for how
// soon a change goes out: poll.interval.ms (default 500: how long the task
// waits for changes before it hands a batch to Kafka Connect) and the
// producer's linger.ms (Kafka's producer waits 5 ms by default for a batch
// to fill), overridden per connector. max.batch.size and max.queue.size
// (2048 and 8192) bound a batch and the queue, which this load never fills.
var tunedForLatency = map[string]string{
	"poll.interval.ms":            "1",
	"producer.override.linger.ms": "0",
}

// connectJVM are the JVM options Kafka's own scripts start Connect with
// (kafka-run-class.sh and connect-standalone.sh: a 2 GiB heap at most, G1
// with 20 ms pauses), not the test harness's small C1-only JVM: Debezium is
// measured as it runs in production.
//
// connecttest also starts the worker with OpenTelemetry's SDK
// autoconfigured, for the corpus's tracing case; otel.sdk.disabled turns
// it off, as a worker of a user who does not trace runs.
var connectJVM = []string{"-Xms256M", "-Xmx2G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
	"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
	"-Dotel.sdk.disabled=true"}

// BenchmarkCompare is `make bench-compare`: one run, whatever b.N.
func BenchmarkCompare(b *testing.B) {
	b.StopTimer()
	if b.N > 1 {
		b.Skip("one run is the measurement; run with -benchtime 1x")
	}
	ctx := context.Background()
	want := map[string]bool{}
	for _, s := range strings.Split(*systems, ",") {
		want[strings.TrimSpace(s)] = true
	}
	var rs []float64
	for _, r := range strings.Split(*rates, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
		if err != nil || v <= 0 {
			b.Fatalf("-rates: %q", r)
		}
		rs = append(rs, v)
	}
	dir := *outDir
	if dir == "" {
		root, err := testbin.ModuleRoot()
		if err != nil {
			b.Fatal(err)
		}
		dir = filepath.Join(root, "bench-compare-out")
	}

	bin := testbin.Build(b, "github.com/pgoutbox/pgoutbox/cmd/pgoutbox")
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Fsync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Close()
	cfg := bench.Config{
		DatabaseURL: pg.URL, RelayBin: bin,
		Rates: rs, Duration: *duration, Writers: 4, Aggregates: 200, EventsPerTx: bench.Range{Min: 1, Max: 3},
		PayloadBytes: 200, DrainEvents: *drain, DrainEventsPerTx: 10,
		PollIntervals: []time.Duration{500 * time.Millisecond},
		Deliveries:    []string{"at-least-once", "exactly-once"},
		Progress:      os.Stderr, Repeat: *repeat,
	}
	if *drain <= 0 {
		cfg.DrainEvents = -1
	}
	switch {
	case want["pgoutbox"] && want["poll"]:
		cfg.Modes = []string{"wal", "poll"}
	case want["pgoutbox"]:
		cfg.Modes = []string{"wal"}
	case want["poll"]:
		cfg.Modes = []string{"poll"}
	default:
		cfg.NoRelay = true
	}
	var where string
	switch *sinkFlag {
	case "kafka":
		kafka := kafkatest.Start(b, kafkatest.Options{JVMOptions: kafkatest.ScriptJVM})
		cfg.Brokers = kafka.Brokers
		where = fmt.Sprintf("Apache Kafka %s (one broker, with its start scripts' JVM options), Kafka Connect standalone with Debezium %s", kafkatest.Version, connecttest.DebeziumVersion)
		if want["debezium"] {
			stop := connectSystems(b, ctx, &cfg, kafka.Brokers, pg.URL, rs[0])
			defer stop()
		}
		if want["pgoutbox"] && *warmup > 0 {
			warmBroker(ctx, b, cfg, rs[0])
		}
	default:
		target, props, w := serverSink(b, *sinkFlag)
		cfg.Target, where = target, w
		// None of these sinks has transactions: exactly-once is refused.
		cfg.Deliveries = []string{"at-least-once"}
		if want["debezium"] {
			cfg.Systems = []bench.System{
				debeziumServer(pg.URL, props, "debezium", nil),
				debeziumServer(pg.URL, props, "debezium tuned", tunedServer),
			}
		}
	}
	if cfg.NoRelay && len(cfg.Systems) == 0 {
		b.Fatalf("-systems %q: nothing to run", *systems)
	}

	rep, err := bench.Run(ctx, cfg)
	if rep == nil {
		b.Fatal(err)
	}
	var text bytes.Buffer
	fmt.Fprintf(&text, "pgoutbox and Debezium side by side: %s events/s for %s each, %d rounds interleaved, 4 writers, 1-3 events per transaction, each locking one of 200 aggregates first, 200-byte payloads; PostgreSQL %s (fsync on), %s; %d CPUs\n\n",
		*rates, *duration, cfg.Repeat, serverVersion(ctx, pg.URL), where, runtime.NumCPU())
	writeSummary(&text, rep)
	fmt.Fprintln(&text, "\nevery run:")
	rep.WriteTable(&text)
	// go test keeps a benchmark's stdout only in part.
	os.Stderr.Write(text.Bytes())
	if werr := writeOut(dir, rep, text.Bytes(), *rates); werr != nil {
		b.Fatal(werr)
	}
	if err != nil {
		b.Fatal(err)
	}
	if len(rep.Failed) > 0 {
		b.Errorf("%d runs failed", len(rep.Failed))
	}
}

// connectSystems starts a Kafka Connect worker, puts Debezium's connector
// on it at its defaults and tuned for latency into cfg's systems, stops
// the worker's JVM while the others run, and warms it up; stop ends it.
func connectSystems(b *testing.B, ctx context.Context, cfg *bench.Config, brokers []string, dbURL string, rate float64) (stop func()) {
	worker := connecttest.Start(b, connecttest.Options{Brokers: brokers, JVMOptions: connectJVM,
		// Kafka's connect-standalone.properties.
		Worker: map[string]string{"offset.flush.interval.ms": "10000"}})
	fmt.Fprintf(os.Stderr, "Kafka Connect standalone up in %s\n", worker.Started.Round(time.Millisecond))
	cfg.Systems = []bench.System{
		debezium(worker, dbURL, "debezium", nil),
		debezium(worker, dbURL, "debezium tuned", tunedForLatency),
	}
	if *warmup > 0 {
		// The JVM compiles Debezium's and Connect's hot code during its
		// first minute of load; a production worker has long done so.
		fmt.Fprintf(os.Stderr, "warming Kafka Connect up: %s of the load at %.0f events/s, not measured\n", *warmup, rate)
		w := *cfg
		w.Rates, w.Duration, w.DrainEvents, w.NoFloor, w.NoRelay = []float64{rate}, *warmup, -1, true, true
		w.Systems = cfg.Systems[:1]
		if _, err := bench.Run(ctx, w); err != nil {
			b.Fatalf("warm-up: %v", err)
		}
	}
	// The worker's JVM, idle, still takes CPU (its threads, the garbage
	// collector) from the system measured beside it: it is stopped while
	// anything but Debezium runs, and keeps what it compiled.
	pid, err := workerPID(worker)
	if err != nil {
		b.Fatal(err)
	}
	paused := false
	cfg.BeforeRun = func(sys string) {
		deb := strings.HasPrefix(sys, "debezium")
		if deb == paused {
			sig := syscall.SIGSTOP
			if deb {
				sig = syscall.SIGCONT
			}
			if err := syscall.Kill(pid, sig); err != nil {
				b.Fatalf("kafka connect's JVM: %v", err)
			}
			paused = !deb
		}
	}
	return func() {
		if paused {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
}

// warmBroker puts the load through pgoutbox at each delivery before the
// measured runs, as connectSystems does through Debezium. Without it the
// first measured run, pgoutbox's at 500 events/s right after Debezium's
// warm-up, had the machine 74% idle against 98% in the two rounds after it
// (something in the broker or PostgreSQL still busy); with it the warm-up's
// run was the one at 89%, and the measured ones had 94 to 98%.
func warmBroker(ctx context.Context, b *testing.B, cfg bench.Config, rate float64) {
	b.Helper()
	d := *warmup / 2
	fmt.Fprintf(os.Stderr, "warming the broker up with pgoutbox: %s of the load at %.0f events/s per delivery, not measured\n", d, rate)
	cfg.Rates, cfg.Duration, cfg.DrainEvents, cfg.NoFloor, cfg.Repeat = []float64{rate}, d, -1, true, 1
	cfg.Modes, cfg.Systems, cfg.NoRelay = []string{"wal"}, nil, false
	if _, err := bench.Run(ctx, cfg); err != nil {
		b.Fatalf("warm-up: %v", err)
	}
}

// debezium is Debezium's connector on worker as a bench.System: a
// connector per run, added over the REST API, with extra settings over
// debeziumConfig.
func debezium(w *connecttest.Worker, dbURL, name string, extra map[string]string) bench.System {
	return bench.System{Name: name, Start: func(ctx context.Context, run bench.SystemRun) (bench.Running, error) {
		conf, err := debeziumConfig(dbURL, run)
		if err != nil {
			return nil, err
		}
		for k, v := range extra {
			conf[k] = v
		}
		pid, err := workerPID(w)
		if err != nil {
			return nil, err
		}
		if err := w.Create(ctx, run.Name, conf); err != nil {
			return nil, err
		}
		c := &connector{w: w, name: run.Name, pid: pid, exited: make(chan struct{}), stop: make(chan struct{})}
		go c.watch()
		return c, nil
	}}
}

// connector is one run's connector on the shared worker: it "exits" when
// its task fails, and stops when it is deleted. Its process is the
// worker's JVM.
type connector struct {
	w      *connecttest.Worker
	name   string
	pid    int
	exited chan struct{}
	stop   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	err    error
	done   sync.WaitGroup
}

func (c *connector) Name() string            { return "debezium connector " + c.name }
func (c *connector) PID() int                { return c.pid }
func (c *connector) Exited() <-chan struct{} { return c.exited }
func (c *connector) Output() string          { return c.w.LogOf(c.name) }

func (c *connector) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// watch asks for the connector's status every second until it stops or
// fails.
func (c *connector) watch() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := c.w.Status(ctx, c.name)
		cancel()
		if err == nil && st.Failed() != "" {
			c.mu.Lock()
			c.err = fmt.Errorf("%s failed: %s", c.Name(), firstLines(st.Failed(), 5))
			c.mu.Unlock()
			close(c.exited)
			return
		}
	}
}

// Stop deletes the connector; its slot and offsets stay, so that a
// connector of the same name resumes where it stopped (the drain).
func (c *connector) Stop(timeout time.Duration) error {
	var err error
	c.once.Do(func() {
		close(c.stop)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		err = c.w.Delete(ctx, c.name)
	})
	return err
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// workerPID finds the worker's JVM: the process whose command line names
// the worker's directory.
func workerPID(w *connecttest.Worker) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(cmd, []byte("ConnectStandalone")) && bytes.Contains(cmd, []byte(w.Dir)) {
			return pid, nil
		}
	}
	return 0, errors.New("the Kafka Connect worker's process is not in /proc")
}

func serverVersion(ctx context.Context, dbURL string) string {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return "?"
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "?"
	}
	return v
}

func cpuText(s bench.Spread) string {
	if s.Min == s.Max {
		return fmt.Sprintf("%.3f", s.Median)
	}
	return fmt.Sprintf("%.3f (%.3f-%.3f)", s.Median, s.Min, s.Max)
}

func idleText(s bench.Spread) string {
	if s.Min == s.Max {
		return fmt.Sprintf("%.0f", s.Median)
	}
	return fmt.Sprintf("%.0f (%.0f-%.0f)", s.Median, s.Min, s.Max)
}

// system names a run for the side-by-side table.
func system(label string) string {
	switch label {
	case "wal":
		return "pgoutbox at-least-once"
	case "wal exactly-once":
		return "pgoutbox exactly-once"
	case "poll 500ms":
		return "polling every 500 ms"
	case "poll 500ms exactly-once":
		return "polling every 500 ms, exactly-once"
	case "debezium":
		return "Debezium, router at defaults"
	case "debezium tuned":
		return "Debezium, tuned for latency"
	case "floor":
		return "bare replication reader (floor)"
	}
	return label
}

// writeSummary writes the side-by-side table: per rate and system the
// latency and CPU seconds per 1,000 events (the median over the rounds,
// and their range), the peak RSS and the checker's counts over every
// round; the drains; and pgoutbox's ratios to Debezium at each rate.
func writeSummary(w *bytes.Buffer, rep *bench.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rate/s\tsystem\trounds\tevents\tp50 ms\tp99 ms\tcpu s/1000 events\tpeak rss MB\tlost\tdup\torder\tidle %\t")
	var order []float64
	for _, s := range rep.Summary {
		if !slices.Contains(order, s.Rate) {
			order = append(order, s.Rate)
		}
	}
	for _, s := range rep.Summary {
		var events, lost, dup, disorder int
		var rss float64
		for _, r := range rep.Runs {
			if r.Rate == s.Rate && r.Label() == s.Run {
				events += r.Events
				lost, dup, disorder = lost+r.Missing, dup+r.Dups, disorder+r.OrderViolations
				rss = max(rss, r.RelayPeakRSSMB)
			}
		}
		for _, f := range rep.Floors {
			if f.Rate == s.Rate && s.Run == "floor" {
				events += f.Events
				lost += f.Committed - f.Events
			}
		}
		cpu := bench.Spread{Median: s.CPUUSPerEvent.Median / 1000, Min: s.CPUUSPerEvent.Min / 1000, Max: s.CPUUSPerEvent.Max / 1000}
		rssText, dupText, orderText := fmt.Sprintf("%.1f", rss), strconv.Itoa(dup), strconv.Itoa(disorder)
		if s.Run == "floor" {
			rssText, dupText, orderText = "-", "-", "-"
		}
		fmt.Fprintf(tw, "%.0f\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t\n", s.Rate, system(s.Run), s.Rounds, events,
			s.P50, s.P99, cpuText(cpu), rssText, lost, dupText, orderText, idleText(s.IdleCPUPct))
	}
	tw.Flush()
	if len(rep.Drains) > 0 {
		fmt.Fprintln(w, "\ndrain of a committed backlog, from a standing start:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "system\tevents\tseconds\tevents/s\tcpu s/1000 events\tpeak rss MB\tlost\tdup\t")
		for _, d := range rep.Drains {
			label := d.System
			if label == "" {
				label = "wal"
				if d.Delivery == "exactly-once" {
					label = "wal exactly-once"
				}
			}
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%.3f\t%.1f\t%d\t%d\t\n", system(label), d.Events, d.Seconds, d.EventsPerS,
				d.CPUUSPerEvent/1000, d.RelayPeakRSSMB, d.Missing, d.Dups)
		}
		if rep.Floor != nil && rep.Floor.DrainEventsPerS > 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t%.0f\t-\t-\t-\t-\t\n", "bare replication reader (floor)", rep.Floor.DrainEventsPerS)
		}
		tw.Flush()
	}
	writeRatios(w, rep, order)
}

// writeRatios writes pgoutbox's figures over Debezium's, from the
// medians of their rounds: below 1 is pgoutbox ahead for latency, CPU and
// memory; above 1 for the drain rate. "apart" says whether the two p99s'
// ranges over the rounds do not overlap, which a lead needs to be one.
func writeRatios(w *bytes.Buffer, rep *bench.Report, rates []float64) {
	ratio := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	peak := func(rate float64, label string) float64 {
		var v float64
		for _, r := range rep.Runs {
			if r.Rate == rate && r.Label() == label {
				v = max(v, r.RelayPeakRSSMB)
			}
		}
		return v
	}
	fmt.Fprintln(w, "\npgoutbox / Debezium, medians over the rounds (latency, CPU and memory: below 1 is pgoutbox ahead):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rate/s\tpgoutbox\tDebezium\tp50\tp99\tp99 ranges apart\tcpu/event\tpeak rss\t")
	for _, rate := range rates {
		for _, p := range []string{"wal", "wal exactly-once"} {
			for _, d := range []string{"debezium", "debezium tuned"} {
				pr, dr := rep.Find(rate, p), rep.Find(rate, d)
				if pr == nil || dr == nil {
					continue
				}
				apart := "no"
				if !pr.P99.Overlaps(dr.P99) {
					apart = "yes"
				}
				fmt.Fprintf(tw, "%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", rate, strings.TrimPrefix(system(p), "pgoutbox "), strings.TrimPrefix(system(d), "Debezium, "),
					ratio(pr.P50.Median, dr.P50.Median), ratio(pr.P99.Median, dr.P99.Median), apart,
					ratio(pr.CPUUSPerEvent.Median, dr.CPUUSPerEvent.Median), ratio(peak(rate, p), peak(rate, d)))
			}
		}
		// Exactly-once's tail against at-least-once's, and the relay's
		// CPU against the bare reader's.
		alo, eos, fl := rep.Find(rate, "wal"), rep.Find(rate, "wal exactly-once"), rep.Find(rate, "floor")
		if alo != nil && eos != nil {
			fmt.Fprintf(tw, "%.0f\texactly-once\tat-least-once\t%s\t%s\t\t%s\t\t\n", rate,
				ratio(eos.P50.Median, alo.P50.Median), ratio(eos.P99.Median, alo.P99.Median), ratio(eos.CPUUSPerEvent.Median, alo.CPUUSPerEvent.Median))
		}
		if alo != nil && fl != nil {
			fmt.Fprintf(tw, "%.0f\tat-least-once\tbare reader\t%s\t%s\t\t%s\t\t\n", rate,
				ratio(alo.P50.Median, fl.P50.Median), ratio(alo.P99.Median, fl.P99.Median), ratio(alo.CPUUSPerEvent.Median, fl.CPUUSPerEvent.Median))
		}
	}
	tw.Flush()
	var dz []bench.Drain
	var pg []bench.Drain
	for _, d := range rep.Drains {
		if d.System != "" {
			dz = append(dz, d)
		} else {
			pg = append(pg, d)
		}
	}
	for _, p := range pg {
		for _, d := range dz {
			fmt.Fprintf(w, "drain, %s / %s: %s times the rate, %s of the CPU per event\n", system(map[bool]string{true: "wal exactly-once", false: "wal"}[p.Delivery == "exactly-once"]),
				system(d.System), ratio(p.EventsPerS, d.EventsPerS), ratio(p.CPUUSPerEvent, d.CPUUSPerEvent))
		}
	}
}

// writeOut writes the table, the JSON and the charts into dir.
func writeOut(dir string, rep *bench.Report, text []byte, rates string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.txt"), text, 0o644); err != nil {
		return err
	}
	if err := rep.WriteJSON(filepath.Join(dir, "results.json")); err != nil {
		return err
	}
	write := func(name string, fn func(f *os.File) error) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if err := write("latency.svg", func(f *os.File) error {
		return bench.WriteSVG(f, fmt.Sprintf("commit-to-consume latency, pgoutbox and Debezium, at %s events/s (%d CPUs)", rates, runtime.NumCPU()), rep.Series)
	}); err != nil {
		return err
	}
	if len(rep.Sweep) == 0 {
		return nil
	}
	return write("rates.svg", func(f *os.File) error {
		return bench.WriteRateSVG(f, fmt.Sprintf("latency against offered load: pgoutbox, Debezium, polling and the floor (%d CPUs)", runtime.NumCPU()), rep.RateSeries())
	})
}
