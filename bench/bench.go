package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/proc"
)

// Config configures a bench run.
type Config struct {
	// DatabaseURL and Brokers are the Postgres and Kafka under test. The
	// bench writes rows of aggregate types bench_* to Table and deletes
	// them between runs; use a database of its own.
	DatabaseURL string
	Brokers     []string
	// Target is where the relays publish, when not Kafka on Brokers.
	Target Target
	// RelayBin is the pgoutbox binary, run as `pgoutbox run` per run.
	RelayBin string
	// Relays, when set, are several pgoutbox binaries to measure side by
	// side instead of RelayBin (the floor still runs RelayBin): every
	// relay run and drain is made once per binary, in turn, so that two
	// builds meet the same machine at nearly the same time.
	Relays []Relay
	// Systems are relays other than pgoutbox (Debezium on Kafka Connect,
	// in the side-by-side harness), measured under the same steady load
	// and drain as a WAL run, after the pgoutbox runs of each rate.
	Systems []System
	// NoRelay skips pgoutbox's own runs and drains: only the Systems
	// (and the floor) are measured.
	NoRelay bool
	// Table is the outbox table (default public.outbox), migrated first.
	Table string
	// Modes are the relay modes measured under steady load: wal, poll.
	Modes []string
	// Deliveries are the relay's --delivery values each mode is measured
	// with, and the drain too: at-least-once (default), exactly-once.
	Deliveries []string
	// PollIntervals are the poll intervals measured in poll mode
	// (default 500ms).
	PollIntervals []time.Duration
	// BatchSize, when positive, is passed to poll runs as --batch-size.
	BatchSize int
	// Rate is the offered load in events per second (default 2000),
	// for Duration (default 30s), written by Writers connections
	// (default 4), EventsPerTx events per transaction (default 1; a
	// range takes its values in turn), each event's payload PayloadBytes
	// of JSON (default 200).
	Rate         float64
	Duration     time.Duration
	Writers      int
	EventsPerTx  Range
	PayloadBytes int
	// Rates, when set, is a sweep: every steady-load run, the floor's
	// included, is measured at each of these rates in turn, for Duration
	// each, instead of at Rate.
	Rates []float64
	// Aggregates, when positive, makes the load application-shaped: the
	// bench creates a table of that many aggregate rows, and each
	// transaction first locks its aggregate's row (UPDATE ... WHERE id =
	// $1), then inserts its events for that aggregate, then commits, a
	// round trip each. Zero writes each transaction as one INSERT.
	Aggregates int
	// DrainEvents is the backlog of the drain run (default 100,000;
	// negative skips it), committed DrainEventsPerTx per transaction
	// (default 10).
	DrainEvents      int
	DrainEventsPerTx int
	// NoFloor skips the floor runs.
	NoFloor bool
	// RelayArgs are extra arguments for every `pgoutbox run`.
	RelayArgs []string
	// Repeat is how many rounds of the steady-load runs each rate gets
	// (default 1); each round runs every system once, starting one step
	// later than the round before (Report.Summary has the median and
	// spread).
	Repeat int
	// BeforeRun, when set, is called before each run and drain with what
	// is about to run: "pgoutbox", a System's name, or "floor". A harness
	// uses it to keep the others quiet (pause a JVM that is not measured).
	BeforeRun func(system string)
	// Progress receives a line every ProgressEvery (default 2s) while a
	// run lasts; nil discards.
	Progress      io.Writer
	ProgressEvery time.Duration
}

func (c *Config) defaults() {
	if c.Table == "" {
		c.Table = "public.outbox"
	}
	if len(c.Modes) == 0 {
		c.Modes = []string{"wal", "poll"}
	}
	if len(c.Deliveries) == 0 {
		c.Deliveries = []string{atLeastOnce}
	}
	if len(c.PollIntervals) == 0 {
		c.PollIntervals = []time.Duration{500 * time.Millisecond}
	}
	if c.Rate == 0 {
		c.Rate = 2000
	}
	if c.Duration == 0 {
		c.Duration = 30 * time.Second
	}
	if c.Writers == 0 {
		c.Writers = 4
	}
	if c.EventsPerTx == (Range{}) {
		c.EventsPerTx = Range{1, 1}
	}
	if c.PayloadBytes == 0 {
		c.PayloadBytes = 200
	}
	if c.DrainEvents == 0 {
		c.DrainEvents = 100_000
	}
	if c.DrainEventsPerTx == 0 {
		c.DrainEventsPerTx = 10
	}
	if c.Repeat <= 0 {
		c.Repeat = 1
	}
	if c.Target == nil && len(c.Brokers) > 0 {
		c.Target = Kafka{Brokers: c.Brokers}
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.ProgressEvery == 0 {
		c.ProgressEvery = 2 * time.Second
	}
}

func (c *Config) validate() error {
	switch {
	case c.DatabaseURL == "":
		return errors.New("database URL is required")
	case c.Target == nil:
		return errors.New("kafka brokers or another target are required")
	case c.RelayBin == "":
		return errors.New("the pgoutbox binary is required")
	case c.Rate <= 0 || c.Duration <= 0 || c.Writers < 1 || c.PayloadBytes < 0 || c.DrainEventsPerTx < 1 || c.Aggregates < 0:
		return errors.New("rate, duration, writers and events per transaction must be positive")
	}
	if err := c.EventsPerTx.validate(); err != nil {
		return fmt.Errorf("events per transaction %s: %w", c.EventsPerTx, err)
	}
	for _, r := range c.rates() {
		if r <= 0 {
			return fmt.Errorf("rate %g: must be positive", r)
		}
		if r/c.EventsPerTx.Mean()*c.Duration.Seconds() < 1 {
			return fmt.Errorf("rate %g × duration is less than one transaction", r)
		}
	}
	for _, m := range c.Modes {
		if m != "wal" && m != "poll" {
			return fmt.Errorf("mode %q: want wal or poll", m)
		}
	}
	for _, r := range c.Relays {
		if r.Name == "" || r.Bin == "" {
			return errors.New("each relay binary needs a name and a path")
		}
	}
	for _, d := range c.Deliveries {
		if d != atLeastOnce && d != exactlyOnce {
			return fmt.Errorf("delivery %q: want %s or %s", d, atLeastOnce, exactlyOnce)
		}
	}
	for _, p := range c.PollIntervals {
		if p <= 0 {
			return fmt.Errorf("poll interval %s: must be positive", p)
		}
	}
	if _, err := outbox.ParseTable(c.Table); err != nil {
		return err
	}
	return nil
}

// Relay is a named pgoutbox binary.
type Relay struct {
	Name string
	Bin  string

	system *System // a System's runs, not pgoutbox's
}

// System is a relay other than `pgoutbox run`. Start makes it publish
// the rows of aggregate type run.Name from run.Table to topic
// outbox.event.<run.Name> (Debezium's outbox router's default), keyed by
// aggregate id, with the row's id in the record's "id" header or as its
// CloudEvent id, streaming slot run.Slot of publication run.Publication
// (it creates the slot; the bench drops it); it returns once started, not
// necessarily streaming. The returned process's CPU time and peak RSS are
// the system's: a process that serves several runs (a JVM) reports its
// peak over its life.
type System struct {
	Name  string
	Start func(ctx context.Context, run SystemRun) (Running, error)
	// Warmup, when set, is how long each run puts load through the
	// system, unmeasured, before it is measured: a process that starts
	// for each run (a JVM) compiles its hot code meanwhile, as a
	// long-running one has done.
	Warmup time.Duration
}

// SystemRun is what a System is started for.
type SystemRun struct {
	Name, Slot, Publication, Table string
}

// Running is a started relay: a *proc.Process, or a System's.
type Running interface {
	Name() string
	PID() int
	// Exited is closed when it stopped; Err and Output then say why.
	Exited() <-chan struct{}
	Err() error
	Output() string
	// Stop stops it, within timeout; it may be called more than once.
	Stop(timeout time.Duration) error
}

var _ Running = (*proc.Process)(nil)

// relays are the binaries each relay run is made with; the empty name is
// RelayBin alone.
func (c *Config) relays() []Relay {
	if len(c.Relays) > 0 {
		return c.Relays
	}
	return []Relay{{Bin: c.RelayBin}}
}

// rates are the offered rates of the steady-load runs.
func (c *Config) rates() []float64 {
	if len(c.Rates) > 0 {
		return c.Rates
	}
	return []float64{c.Rate}
}

// The relay's --delivery values.
const (
	atLeastOnce = "at-least-once"
	exactlyOnce = "exactly-once"
)

// publication is the publication the bench's slots stream.
const publication = "pgoutbox_bench"

type bencher struct {
	cfg    Config
	table  outbox.Table // cfg.Table, parsed
	suffix string       // keeps this run's slots and topics apart from others'
	db     *database
	round  int // the steady-load round running now (Config.Repeat)
}

// Run measures what cfg asks for and returns the report. A run that fails
// is listed in Report.Failed and the others go on; Run returns an error
// only when nothing could be measured or ctx ended.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	table, _ := outbox.ParseTable(cfg.Table) // checked by validate
	b := &bencher{cfg: cfg, table: table, suffix: strconv.FormatUint(rand.Uint64()%1e6, 36)}
	db, err := openDatabase(ctx, cfg, table, b.suffix)
	if err != nil {
		return nil, err
	}
	b.db = db
	defer db.close()

	rep := &Report{}
	if err := b.steadyRuns(ctx, rep); err != nil {
		return rep, err
	}
	rep.Summary = summarize(rep.Runs, rep.Floors)
	if len(rep.Floors) > 0 {
		rep.Floor = &rep.Floors[0]
	}
	if len(cfg.rates()) > 1 {
		rep.Sweep = buildSweep(rep.Summary)
	}
	if err := b.drains(ctx, rep); err != nil {
		return rep, err
	}
	if len(rep.Drains) > 0 {
		rep.Drain = &rep.Drains[0]
	}
	if len(rep.Runs) == 0 && rep.Drain == nil && rep.Floor == nil {
		return rep, fmt.Errorf("nothing could be measured: %s", strings.Join(rep.Failed, "; "))
	}
	return rep, nil
}

// failed lists a run that could not be measured, and says so.
func (b *bencher) failed(rep *Report, what string, err error) {
	rep.Failed = append(rep.Failed, what+": "+err.Error())
	fmt.Fprintf(b.cfg.Progress, "%s FAILED: %v\n", what, err)
}

// steadyRuns measures every step at each rate, Repeat rounds of them; it
// returns an error only when ctx ended.
func (b *bencher) steadyRuns(ctx context.Context, rep *Report) error {
	cfg := b.cfg
	seriesName := func(label string, rate float64) string {
		if len(cfg.rates()) > 1 {
			return fmt.Sprintf("%s at %g/s", label, rate)
		}
		return label
	}
	for _, rate := range cfg.rates() {
		steps := b.steps()
		for round := range cfg.Repeat {
			b.round = round
			// Each round starts one step later than the one before, so
			// that a machine that drifts (warms up, gets busier) weighs
			// on every system alike.
			for i := range steps {
				st := steps[(i+round)%len(steps)]
				if cfg.BeforeRun != nil {
					cfg.BeforeRun(st.system)
				}
				if st.floor {
					fl, lat, err := b.floorRun(ctx, rate)
					if ctx.Err() != nil {
						return ctx.Err()
					}
					if err != nil {
						b.failed(rep, seriesName("floor", rate), err)
						continue
					}
					fl.Round = round
					rep.Floors = append(rep.Floors, *fl)
					if round == 0 {
						rep.Series = append(rep.Series, Series{Name: seriesName("floor (bare reader)", rate), Latencies: lat})
					}
					continue
				}
				run, lat, err := b.loadRun(ctx, st.relay, st.mode, st.poll, rate, st.delivery)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil {
					b.failed(rep, seriesName(st.label, rate), err)
					continue
				}
				run.Round = round
				rep.Runs = append(rep.Runs, run)
				if round == 0 {
					rep.Series = append(rep.Series, Series{Name: seriesName(run.Label(), rate), Latencies: lat})
				}
			}
		}
	}
	return nil
}

// drains measures each delivery's drain with each relay, then each other
// system's; it returns an error only when ctx ended.
func (b *bencher) drains(ctx context.Context, rep *Report) error {
	cfg := b.cfg
	if cfg.DrainEvents <= 0 {
		return nil
	}
	for i, delivery := range cfg.Deliveries {
		if cfg.NoRelay {
			break
		}
		for j, rl := range cfg.relays() {
			if cfg.BeforeRun != nil {
				cfg.BeforeRun("pgoutbox")
			}
			// The floor drains once, beside the first delivery's drain.
			d, floorEPS, err := b.drainRun(ctx, rl, delivery, i == 0 && j == 0 && !cfg.NoFloor)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				b.failed(rep, withRelay("drain "+delivery, rl.Name), err)
				continue
			}
			rep.Drains = append(rep.Drains, *d)
			if rep.Floor != nil && floorEPS > 0 {
				rep.Floor.DrainEventsPerS = floorEPS
			}
		}
	}
	for _, sys := range cfg.Systems {
		if cfg.BeforeRun != nil {
			cfg.BeforeRun(sys.Name)
		}
		d, _, err := b.drainRun(ctx, Relay{Name: sys.Name, system: &sys}, "", false)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			b.failed(rep, "drain "+sys.Name, err)
			continue
		}
		rep.Drains = append(rep.Drains, *d)
	}
	return nil
}

// step is one steady-load run of a round: a pgoutbox relay in a mode and
// delivery, another system, or the floor.
type step struct {
	relay    Relay
	mode     string
	poll     time.Duration
	delivery string
	floor    bool
	label    string // the run's label, for a failure
	system   string // what runs: "pgoutbox", a System's name, or "floor"
}

// steps lists one round's runs at a rate, in the order the first round
// takes them: pgoutbox's, the other systems', the floor.
func (b *bencher) steps() []step {
	cfg := b.cfg
	var out []step
	for _, mode := range cfg.Modes {
		if cfg.NoRelay {
			break
		}
		intervals := []time.Duration{0}
		if mode == "poll" {
			intervals = cfg.PollIntervals
		}
		for _, pi := range intervals {
			for _, delivery := range cfg.Deliveries {
				for _, rl := range cfg.relays() {
					out = append(out, step{relay: rl, mode: mode, poll: pi, delivery: delivery,
						label: withRelay(runLabel(mode, pi, delivery), rl.Name), system: "pgoutbox"})
				}
			}
		}
	}
	for _, sys := range cfg.Systems {
		out = append(out, step{relay: Relay{Name: sys.Name, system: &sys}, mode: "wal", label: sys.Name, system: sys.Name})
	}
	if !cfg.NoFloor {
		out = append(out, step{floor: true, label: "floor", system: "floor"})
	}
	return out
}

// name makes a slot, pipeline and aggregate type name for a run.
func (b *bencher) name(label string) string { return "bench_" + slug(label) + "_" + b.suffix }

// startRelay starts `pgoutbox run` for pipeline name.
func (b *bencher) startRelay(ctx context.Context, rl Relay, name, mode string, poll time.Duration, delivery string) (Running, error) {
	if rl.system != nil {
		b.db.track(name)
		return rl.system.Start(ctx, SystemRun{Name: name, Slot: name, Publication: publication, Table: b.cfg.Table})
	}
	args, env := relayCommand(b.cfg, name, mode, poll, delivery)
	b.db.track(name)
	return proc.Start(withRelay("pgoutbox run --mode "+mode, rl.Name), rl.Bin, args, env, nil)
}

// relayCommand is the command line and the environment of `pgoutbox run`
// for pipeline name. URLs, which may hold passwords, go through the
// environment: a command line is visible to every user of the machine.
func relayCommand(cfg Config, name, mode string, poll time.Duration, delivery string) (args, env []string) {
	env = []string{"PGOUTBOX_DATABASE_URL=" + cfg.DatabaseURL}
	args = []string{"run",
		"--table", cfg.Table,
		"--slot", name,
		"--publication", publication,
		"--mode", mode,
		"--log-format", "json", "--log-level", "warn",
	}
	if mode == "poll" {
		args = append(args, "--poll-interval", poll.String())
		if cfg.BatchSize > 0 {
			args = append(args, "--batch-size", strconv.Itoa(cfg.BatchSize))
		}
	}
	if delivery == exactlyOnce {
		args = append(args, "--delivery", exactlyOnce)
	}
	targetArgs, targetEnv := cfg.Target.Relay()
	args = append(args, targetArgs...)
	args = append(args, cfg.RelayArgs...)
	return args, append(env, targetEnv...)
}

// gone explains a child's exit that came before the work was done: even a
// clean exit is an error then.
func gone(p Running) error {
	if err := p.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%s exited early; output:\n%s", p.Name(), p.Output())
}

// warmup writes one-event transactions every 100ms, each for an aggregate
// of its own, until one has arrived on each of partitions: then the relay
// streams (in WAL mode its slot exists), the topic exists and the consumer
// reads every partition of it. A consumer of a topic created moments
// before can start reading a partition late (Apache Kafka 4.4: 0.74 s,
// while the partition that carried the first warm-up event was read at
// once), which the first measured events would wait out. Warm-up events
// are not measured.
func (b *bencher) warmup(ctx context.Context, w *writer, tr *tracker, relay Running, partitions int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for i := 0; tr.state().warmParts < partitions; i++ {
		if time.Now().After(deadline) {
			return fmt.Errorf("warm-up events arrived on %d of %d partitions within %s of starting the relay; relay output:\n%s",
				tr.state().warmParts, partitions, timeout, relay.Output())
		}
		if _, err := w.tx(ctx, "warmup-"+strconv.Itoa(i), 1, true); err != nil {
			return fmt.Errorf("warm-up insert: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-relay.Exited():
			return gone(relay)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// load runs the open-loop schedule at rate events per second through
// writers and reports progress. relay is the process under test (the relay
// or the floor): the load stops if it exits.
func (b *bencher) load(ctx context.Context, label string, rate float64, ws []*writer, tr *tracker, relay Running) (Schedule, []time.Duration, error) {
	k := b.cfg.EventsPerTx
	s := NewSchedule(time.Now().Add(50*time.Millisecond), rate/k.Mean(), b.cfg.Duration)
	shape := "one INSERT each"
	if b.cfg.Aggregates > 0 {
		shape = fmt.Sprintf("each locks one of %d aggregates first", b.cfg.Aggregates)
	}
	fmt.Fprintf(b.cfg.Progress, "%s: %.0f events/s (%s per transaction, %s; %d writers, %d-byte payloads) for %s\n",
		label, rate, k, shape, len(ws), b.cfg.PayloadBytes, b.cfg.Duration)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopProgress := b.progress(ctx, label, tr, s.Start)
	defer stopProgress()
	var relayGone atomic.Bool
	if relay != nil {
		go func() {
			select {
			case <-relay.Exited():
				relayGone.Store(true)
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	lags, err := RunOpenLoop(ctx, s, len(ws), func(ctx context.Context, worker int, slot Slot) error {
		var err error
		if b.cfg.Aggregates > 0 {
			_, err = ws[worker].appTx(ctx, aggregateOf(slot.Index, b.cfg.Aggregates), k.At(slot.Index))
		} else {
			_, err = ws[worker].tx(ctx, aggregateKey(slot.Index%64), k.At(slot.Index), false)
		}
		return err
	})
	if relayGone.Load() {
		return s, nil, gone(relay)
	}
	return s, lags, err
}

// warmLoad puts load at rate through relay for d, of warm-up events the
// run does not measure, then gives it a second to catch up.
func warmLoad(ctx context.Context, progress io.Writer, label string, rate float64, d time.Duration, ws []*writer, relay Running) error {
	fmt.Fprintf(progress, "%s: warming up for %s at %.0f events/s, not measured\n", label, d, rate)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-relay.Exited():
			cancel()
		case <-ctx.Done():
		}
	}()
	s := NewSchedule(time.Now(), rate, d)
	_, err := RunOpenLoop(ctx, s, len(ws), func(ctx context.Context, worker int, slot Slot) error {
		_, err := ws[worker].tx(ctx, "warmup-"+strconv.Itoa(slot.Index%64), 1, true)
		return err
	})
	select {
	case <-relay.Exited():
		return gone(relay)
	case <-time.After(time.Second):
	}
	return err
}

// progress prints a line every ProgressEvery until the returned func is called.
func (b *bencher) progress(ctx context.Context, label string, tr *tracker, start time.Time) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(b.cfg.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			st := tr.state()
			lat := Summarize(tr.latencies())
			fmt.Fprintf(b.cfg.Progress, "  %-10s %5.1fs  committed %7d  consumed %7d  p50 %s ms  p99 %s ms\n",
				label, time.Since(start).Seconds(), st.committed, st.delivered, fmtFig(lat.P50), fmtFig(lat.P99))
		}
	}()
	return func() { cancel(); <-done }
}

// waitAll waits until every committed event was consumed, or timeout.
func waitAll(ctx context.Context, tr *tracker, relay Running, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		st := tr.state()
		if st.delivered >= st.committed {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d events did not arrive within %s", st.committed-st.delivered, st.committed, timeout)
		}
		var exited <-chan struct{}
		if relay != nil {
			exited = relay.Exited()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return gone(relay)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// runName names a run's slot, pipeline, topic and aggregate type; in a
// sweep, per rate.
func (b *bencher) runName(label string, rate float64) string {
	if len(b.cfg.rates()) > 1 {
		label += " " + strconv.FormatFloat(rate, 'f', -1, 64)
	}
	if b.round > 0 {
		// A round's run is a pipeline of its own: the slot of the round
		// before is dropped, and its state and offsets would find it lost.
		label += " round " + strconv.Itoa(b.round)
	}
	return b.name(label)
}

// window measures, over a run, a process's CPU time and the machine's idle
// CPU.
type window struct {
	pid    int
	cpu0   time.Duration
	fine   bool // cpu0 is from the threads' schedstat, else /proc/PID/stat
	times0 CPUTimes
}

func startWindow(pid int) (*window, error) {
	w := &window{pid: pid}
	var err error
	if w.cpu0, err = ReadThreadsCPU(pid); err == nil {
		w.fine = true
	} else {
		u, err := ReadUsage(pid)
		if err != nil {
			return nil, err
		}
		w.cpu0 = u.CPU
	}
	if w.times0, err = ReadCPUTimes(); err != nil {
		return nil, err
	}
	return w, nil
}

// end returns the process's CPU microseconds per event over the window and
// the percentage of the machine's CPU time that was idle.
func (w *window) end(events int) (usPerEvent, idlePct float64, err error) {
	var cpu time.Duration
	if w.fine {
		cpu, err = ReadThreadsCPU(w.pid)
	} else {
		var u Usage
		u, err = ReadUsage(w.pid)
		cpu = u.CPU
	}
	if err != nil {
		return 0, 0, err
	}
	t1, err := ReadCPUTimes()
	if err != nil {
		return 0, 0, err
	}
	if events > 0 {
		usPerEvent = round(float64(cpu-w.cpu0)/float64(time.Microsecond)/float64(events), 1)
	}
	return usPerEvent, round(IdlePercent(w.times0, t1), 1), nil
}

// loadRun measures the relay in one mode under the steady load at rate.
func (b *bencher) loadRun(ctx context.Context, rl Relay, mode string, poll time.Duration, rate float64, delivery string) (Result, []time.Duration, error) {
	label := withRelay(runLabel(mode, poll, delivery), rl.Name)
	var system string
	if rl.system != nil {
		label, system, rl.Name = rl.Name, rl.Name, ""
	}
	name := b.runName(label, rate)
	run := Result{Mode: mode, Delivery: delivery, Relay: rl.Name, System: system, PollIntervalMS: float64(poll) / float64(time.Millisecond), Rate: rate,
		EventsPerTx: b.cfg.EventsPerTx, Aggregates: b.cfg.Aggregates}
	if err := b.db.clearRows(ctx); err != nil {
		return run, nil, err
	}
	topic := "outbox.event." + name
	if err := b.cfg.Target.Prepare(ctx, topic, name+".dlq"); err != nil {
		return run, nil, err
	}
	tr := newTracker()
	stop, err := b.cfg.Target.Consume(topic, tr.consumedFrom)
	if err != nil {
		return run, nil, err
	}
	defer stop()
	ws, err := openWriters(ctx, b.cfg.DatabaseURL, b.table, b.db.aggTable, name, b.cfg.Writers, b.cfg.PayloadBytes, tr)
	if err != nil {
		return run, nil, err
	}
	defer closeWriters(ws)

	relay, err := b.startRelay(ctx, rl, name, mode, poll, delivery)
	if err != nil {
		return run, nil, err
	}
	// A finished run's slot would hold back WAL for the runs after it.
	defer b.db.dropSlot(context.WithoutCancel(ctx), name)
	defer relay.Stop(30 * time.Second)
	if err := b.warmup(ctx, ws[0], tr, relay, b.cfg.Target.Partitions(), 30*time.Second+4*poll); err != nil {
		return run, nil, err
	}
	if rl.system != nil && rl.system.Warmup > 0 {
		if err := warmLoad(ctx, b.cfg.Progress, label, rate, rl.system.Warmup, ws, relay); err != nil {
			return run, nil, err
		}
	}
	win, err := startWindow(relay.PID())
	if err != nil {
		return run, nil, fmt.Errorf("reading the relay's resource use: %w", err)
	}
	s, lags, err := b.load(ctx, label, rate, ws, tr, relay)
	if err != nil {
		return run, nil, err
	}
	if err := waitAll(ctx, tr, relay, 15*time.Second+4*poll); err != nil {
		return run, nil, err
	}
	st := tr.state()
	usPerEvent, idle, werr := win.end(st.delivered)
	usage, uerr := ReadUsage(relay.PID())
	if err := relay.Stop(30 * time.Second); err != nil {
		return run, nil, err
	}
	if err := errors.Join(werr, uerr); err != nil {
		return run, nil, fmt.Errorf("reading the relay's resource use: %w", err)
	}
	lat := tr.latencies()
	run.Events, run.Committed = st.delivered, st.committed
	if span := st.lastConsume.Sub(s.Start).Seconds(); span > 0 {
		run.ThroughputEPS = round(float64(st.delivered)/span, 1)
	}
	run.Latency = Summarize(lat)
	run.RelayCPUS = round(usage.CPU.Seconds(), 2)
	run.RelayCPUUSPerEvent = usPerEvent
	run.IdleCPUPct = idle
	run.RelayPeakRSSMB = round(float64(usage.PeakRSS)/(1<<20), 1)
	run.Lag = Summarize(lags)
	run.Early, run.Missing, run.Dups, run.OrderViolations = st.early, st.committed-st.delivered, st.dups, st.outOfOrder
	fmt.Fprintf(b.cfg.Progress, "%s: %d events, p50 %s ms, p99 %s ms, relay cpu %.2f s (%.1f us per event), machine idle %.0f%%, peak rss %.1f MB\n",
		label, run.Events, fmtFig(run.Latency.P50), fmtFig(run.Latency.P99), run.RelayCPUS, usPerEvent, idle, run.RelayPeakRSSMB)
	return run, lat, nil
}

// floorRun puts the same steady load at rate on the floor reader instead
// of the relay.
func (b *bencher) floorRun(ctx context.Context, rate float64) (*Floor, []time.Duration, error) {
	name := b.runName("floor", rate)
	if err := b.db.clearRows(ctx); err != nil {
		return nil, nil, err
	}
	if err := b.db.createSlot(ctx, name); err != nil {
		return nil, nil, err
	}
	defer b.db.dropSlot(context.WithoutCancel(ctx), name)
	tr := newTracker()
	ws, err := openWriters(ctx, b.cfg.DatabaseURL, b.table, b.db.aggTable, name, b.cfg.Writers, b.cfg.PayloadBytes, tr)
	if err != nil {
		return nil, nil, err
	}
	defer closeWriters(ws)
	fp, err := b.startFloor(name, tr.consumed)
	if err != nil {
		return nil, nil, err
	}
	defer fp.Stop(30 * time.Second)
	if err := b.warmup(ctx, ws[0], tr, fp, 1, 30*time.Second); err != nil {
		return nil, nil, err
	}
	win, err := startWindow(fp.PID())
	if err != nil {
		return nil, nil, fmt.Errorf("reading the floor's resource use: %w", err)
	}
	_, _, err = b.load(ctx, "floor", rate, ws, tr, fp)
	if err == nil {
		err = waitAll(ctx, tr, fp, 15*time.Second)
	}
	if err != nil {
		return nil, nil, err
	}
	st, lat := tr.state(), tr.latencies()
	usPerEvent, idle, werr := win.end(st.delivered)
	if err := fp.Stop(30 * time.Second); err != nil {
		return nil, nil, err
	}
	if werr != nil {
		return nil, nil, fmt.Errorf("reading the floor's resource use: %w", werr)
	}
	fl := &Floor{Method: floorMethod, Rate: rate, EventsPerTx: b.cfg.EventsPerTx, Aggregates: b.cfg.Aggregates,
		Events: st.delivered, Committed: st.committed, Latency: Summarize(lat), CPUUSPerEvent: usPerEvent, IdleCPUPct: idle}
	fmt.Fprintf(b.cfg.Progress, "floor: %d events, p50 %s ms, p99 %s ms, %.1f us cpu per event, machine idle %.0f%%\n",
		fl.Events, fmtFig(fl.Latency.P50), fmtFig(fl.Latency.P99), usPerEvent, idle)
	return fl, lat, nil
}

// drainRun commits a backlog while the relay is stopped, then times the
// relay, and then the bare reader, publishing all of it from a standing
// start: process start (or connect) to the last event received.
func (b *bencher) drainRun(ctx context.Context, rl Relay, delivery string, withFloor bool) (*Drain, float64, error) {
	n, k := b.cfg.DrainEvents, b.cfg.DrainEventsPerTx
	name := b.name(withRelay("drain "+delivery, rl.Name))
	floorSlot := b.name("floordrain")
	d := &Drain{Mode: "wal", Delivery: delivery, Relay: rl.Name, EventsPerTx: k}
	if rl.system != nil {
		name = b.name("drain " + rl.Name)
		d.Relay, d.System = "", rl.Name
	}
	if err := b.db.clearRows(ctx); err != nil {
		return nil, 0, err
	}
	topic := "outbox.event." + name
	if err := b.cfg.Target.Prepare(ctx, topic, name+".dlq"); err != nil {
		return nil, 0, err
	}
	tr := newTracker()
	stop, err := b.cfg.Target.Consume(topic, tr.consumedFrom)
	if err != nil {
		return nil, 0, err
	}
	defer stop()
	ws, err := openWriters(ctx, b.cfg.DatabaseURL, b.table, "", name, b.cfg.Writers, b.cfg.PayloadBytes, tr)
	if err != nil {
		return nil, 0, err
	}
	defer closeWriters(ws)

	// A first start creates the relay's slot; then the relay stops.
	relay, err := b.startRelay(ctx, rl, name, "wal", 0, delivery)
	if err != nil {
		return nil, 0, err
	}
	err = b.warmup(ctx, ws[0], tr, relay, b.cfg.Target.Partitions(), 30*time.Second)
	if stopErr := relay.Stop(30 * time.Second); err == nil {
		err = stopErr
	}
	if err != nil {
		return nil, 0, err
	}
	if withFloor {
		if err := b.db.createSlot(ctx, floorSlot); err != nil {
			return nil, 0, err
		}
	}

	fmt.Fprintf(b.cfg.Progress, "drain: committing a backlog of %d events (%d per transaction, %d writers) with the relay stopped\n", n, k, len(ws))
	start := time.Now()
	backlog, err := commitBacklog(ctx, ws, n, k)
	if err != nil {
		return nil, 0, err
	}
	d.BacklogInsertEPS = round(float64(n)/time.Since(start).Seconds(), 0)
	d.Events = len(backlog)

	// The relay drains it.
	t0 := time.Now()
	relay, err = b.startRelay(ctx, rl, name, "wal", 0, delivery)
	if err != nil {
		return nil, 0, err
	}
	defer relay.Stop(30 * time.Second)
	// A System's process may have served runs before: its CPU time is
	// counted from here.
	win, err := startWindow(relay.PID())
	if err != nil {
		return nil, 0, fmt.Errorf("reading the relay's resource use: %w", err)
	}
	stopProgress := b.progress(ctx, "drain", tr, t0)
	err = waitAll(ctx, tr, relay, 5*time.Minute)
	stopProgress()
	if err != nil {
		return nil, 0, err
	}
	st := tr.state()
	usPerEvent, _, werr := win.end(st.delivered)
	usage, uerr := ReadUsage(relay.PID())
	if err := relay.Stop(30 * time.Second); err != nil {
		return nil, 0, err
	}
	if err := errors.Join(werr, uerr); err != nil {
		return nil, 0, err
	}
	secs := st.lastConsume.Sub(t0).Seconds()
	d.Seconds = round(secs, 3)
	d.EventsPerS = round(float64(d.Events)/secs, 0)
	d.RelayCPUS = round(usPerEvent*float64(st.delivered)/1e6, 2)
	d.CPUUSPerEvent = usPerEvent
	d.Missing, d.Dups, d.OrderViolations = st.committed-st.delivered, st.dups, st.outOfOrder
	d.RelayPeakRSSMB = round(float64(usage.PeakRSS)/(1<<20), 1)
	fmt.Fprintf(b.cfg.Progress, "drain (%s): relay published %d events in %.2f s = %.0f events/s\n", d.label(), d.Events, secs, d.EventsPerS)

	if !withFloor {
		return d, 0, nil
	}
	if err := b.drainFloor(ctx, floorSlot, backlog, d); err != nil {
		return nil, 0, err
	}
	return d, d.FloorEventsPerS, nil
}

// commitBacklog commits n events, k per transaction, from the writers at
// once, and returns their ids.
func commitBacklog(ctx context.Context, ws []*writer, n, k int) (map[string]struct{}, error) {
	txs := (n + k - 1) / k
	backlog := make(map[string]struct{}, n)
	var next atomic.Int64
	errs := make(chan error, len(ws))
	idsCh := make(chan []string, 1024)
	for _, w := range ws {
		go func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= txs {
					errs <- nil
					return
				}
				ids, err := w.tx(ctx, "agg-"+strconv.Itoa(i%64), min(k, n-i*k), false)
				if err != nil {
					errs <- err
					return
				}
				idsCh <- ids
			}
		}()
	}
	var werr error
	for running := len(ws); running > 0; {
		select {
		case ids := <-idsCh:
			for _, id := range ids {
				backlog[id] = struct{}{}
			}
		case err := <-errs:
			running--
			werr = errors.Join(werr, err)
		}
	}
	for len(idsCh) > 0 {
		for _, id := range <-idsCh {
			backlog[id] = struct{}{}
		}
	}
	return backlog, werr
}

// drainFloor has the floor reader drain the same backlog from its own
// slot, timed like the relay: from its process start to the last event.
func (b *bencher) drainFloor(ctx context.Context, slot string, backlog map[string]struct{}, d *Drain) error {
	var got atomic.Int64
	var last atomic.Int64
	t0 := time.Now()
	fp, err := b.startFloor(slot, func(id string, at time.Time) {
		if _, ok := backlog[id]; ok {
			got.Add(1)
			last.Store(at.UnixNano())
		}
	})
	if err != nil {
		return err
	}
	defer fp.Stop(30 * time.Second)
	deadline := time.Now().Add(5 * time.Minute)
	for int(got.Load()) < d.Events && time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-fp.Exited():
			return gone(fp)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := fp.Stop(30 * time.Second); err != nil {
		return err
	}
	if int(got.Load()) < d.Events {
		return fmt.Errorf("floor: %d of %d backlog events arrived", got.Load(), d.Events)
	}
	fsecs := time.Unix(0, last.Load()).Sub(t0).Seconds()
	d.FloorSeconds = round(fsecs, 3)
	d.FloorEventsPerS = round(float64(d.Events)/fsecs, 0)
	d.RatioToFloor = round(d.EventsPerS/d.FloorEventsPerS, 3)
	fmt.Fprintf(b.cfg.Progress, "drain: bare reader received them in %.2f s = %.0f events/s\n", fsecs, d.FloorEventsPerS)
	return nil
}
