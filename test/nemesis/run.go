package nemesis

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options configure one run.
type Options struct {
	Seed     uint64
	Delivery Delivery
	// Mode is the relays' --mode ("": PickMode(Seed)).
	Mode Mode
	// Relays is the number of relay processes (0: PickRelays(Seed)).
	Relays int
	// Duration is how long the writers write and the faults come; MeanGap
	// the mean time between faults.
	Duration, MeanGap time.Duration
	// Kinds are the faults to draw from (nil: KindsFor the mode and the
	// servers).
	Kinds  []Kind
	Writer WriterConfig
	// StuckAfter fails the run when no event was delivered for this long
	// while events wait and no fault is active (default 45 s: the relay
	// backs off at most 30 s between reconnections).
	StuckAfter time.Duration
	// DrainTimeout bounds the wait for every event after the writers
	// stopped (default 3 min).
	DrainTimeout time.Duration
	// Out is the directory the history, the relays' logs and the report
	// are written to; it is created.
	Out string
	// SoakEvery samples the relays' resources this often (0: no soak
	// sampling).
	SoakEvery time.Duration
	// Logf reports progress (the test's t.Logf).
	Logf func(format string, args ...any)
}

// Result is what one run did and found.
type Result struct {
	Seed     uint64   `json:"seed"`
	Delivery Delivery `json:"delivery"`
	Mode     Mode     `json:"mode"`
	Relays   int      `json:"relays"`
	Major    int      `json:"postgres"`
	Schedule Schedule `json:"schedule"`
	Report   Report   `json:"report"`
	// Stuck says when the relays made no progress while events waited
	// and no fault was active.
	Stuck string `json:"stuck,omitempty"`
	// Exits are relay exits the harness did not cause; Fenced counts
	// those of a relay of a pair fenced by the other (exactly-once).
	Exits  []string `json:"unexpected_exits,omitempty"`
	Fenced int      `json:"fenced_exits,omitempty"`
	// FaultErrors are faults that could not be done or undone.
	FaultErrors  []string       `json:"fault_errors,omitempty"`
	Transactions map[string]int `json:"transactions"`
	WriterErrors int            `json:"writer_errors"`
	// Elapsed is the run's length, from the start to the end of the
	// check; Drain how long the events took to arrive once the writers
	// stopped.
	Elapsed, Drain time.Duration `json:"-"`
	// LongestStall is the longest time without a new event while events
	// waited and no fault was active (checked every second).
	LongestStall time.Duration `json:"longest_stall_ns"`
	Dir          string        `json:"-"`
	Samples      []Sample      `json:"-"`
	Growth       []Growth      `json:"growth,omitempty"`
}

// Failures are what fails the run, one line each.
func (r Result) Failures() []string {
	var out []string
	if !r.Report.Valid(r.Delivery) {
		out = append(out, r.Report.String())
	}
	if r.Stuck != "" {
		out = append(out, "stuck: "+r.Stuck)
	}
	// The same exit again and again (a relay restarted into the same
	// refusal) is one line.
	seen := map[string]int{}
	var order []string
	for _, e := range r.Exits {
		if seen[e] == 0 {
			order = append(order, e)
		}
		seen[e]++
	}
	for _, e := range order {
		out = append(out, fmt.Sprintf("relay exited on its own (%d times): %s", seen[e], e))
	}
	for _, g := range r.Growth {
		if g.Grows {
			out = append(out, "grows without bound: "+g.String())
		}
	}
	return out
}

// Name is how a run is named in logs: delivery, mode, seed.
func (r Result) Name() string { return fmt.Sprintf("%s/%s/seed-%d", r.Delivery, r.Mode, r.Seed) }

const (
	slot        = "pgoutbox"
	eventTopic  = "outbox.event.account"
	deadLetters = slot + ".dlq"
)

// Run runs one seed against env: sets the database up, starts the relays
// and the writers, injects the schedule's faults, stops the writers, heals
// everything, waits for the events and checks them. The error is for what
// kept the run from happening; what the run found is in the Result.
func Run(ctx context.Context, env Env, opts Options) (Result, error) {
	opts = opts.withDefaults(env)
	res := Result{Seed: opts.Seed, Delivery: opts.Delivery, Mode: opts.Mode, Relays: opts.Relays, Major: env.Major, Dir: opts.Out}
	res.Schedule = NewSchedule(Config{Seed: opts.Seed, Duration: opts.Duration, MeanGap: opts.MeanGap, Kinds: opts.Kinds, Relays: opts.Relays})
	r := &runner{env: env, opts: opts, res: &res, superURL: multiHost(env, "postgres", false)}
	defer r.close()
	if err := r.prepare(ctx); err != nil {
		return res, err
	}
	if err := r.startAll(ctx); err != nil {
		return res, err
	}
	r.watch(ctx)
	committed, rolledBack, vanished, err := r.windDown(ctx)
	if err != nil {
		return res, err
	}
	r.drain(ctx, committed)
	input, err := r.collect(ctx)
	if err != nil {
		return res, err
	}
	input.Committed, input.RolledBack, input.Vanished = committed, rolledBack, vanished
	err = r.report(input)
	return res, err
}

// withDefaults fills what opts leaves to the seed, the mode and the
// servers.
func (opts Options) withDefaults(env Env) Options {
	if opts.Mode == "" {
		opts.Mode = PickMode(opts.Seed)
	}
	if opts.Relays == 0 {
		opts.Relays = PickRelays(opts.Seed)
	}
	if opts.Kinds == nil {
		_, cluster := env.Kafka.(Cluster)
		opts.Kinds = KindsFor(opts.Mode, env.Major, env.Standby != nil, cluster)
	}
	if opts.StuckAfter == 0 {
		opts.StuckAfter = 45 * time.Second
	}
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = 3 * time.Minute
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	return opts
}

// runner is one run under way: what it started, which close stops, and
// the result it fills in.
type runner struct {
	env      Env
	opts     Options
	res      *Result
	superURL string // the database, directly, as its owner

	start         time.Time
	h             *History
	reader        *Reader
	relays        []*relay
	mon           *monitor
	writers       *Writers
	in            *injector
	stopInjecting context.CancelFunc
	sampler       *soakSampler
	stuck         *stuckWatch
}

// prepare writes the schedule and sets the database up as a user does:
// the tables, the relays' role, the slot (except in --mode poll), then
// the application's own table; on a cluster, the probe topic.
func (r *runner) prepare(ctx context.Context) error {
	opts := r.opts
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(opts.Out, "schedule.txt"), []byte(r.res.Schedule.String()), 0o644); err != nil {
		return err
	}
	opts.Logf("nemesis %s: %d relay(s), PostgreSQL %d, %d faults, history in %s", r.res.Name(), opts.Relays, r.env.Major, len(r.res.Schedule.Faults), opts.Out)
	if err := setup(ctx, r.env, r.superURL, opts); err != nil {
		return fmt.Errorf("nemesis: setup: %w", err)
	}
	if c, ok := r.env.Kafka.(Cluster); ok {
		if err := prepareCluster(ctx, c); err != nil {
			return fmt.Errorf("nemesis: creating %s: %w", probeTopic, err)
		}
	}
	return nil
}

// startAll starts the history, the reader, the relays, the monitor of
// confirmations, the writers and the schedule's faults.
func (r *runner) startAll(ctx context.Context) error {
	env, opts := r.env, r.opts
	r.start = time.Now()
	var err error
	if r.h, err = NewHistory(filepath.Join(opts.Out, "history.jsonl"), r.start); err != nil {
		return err
	}
	r.h.Add(Event{Type: EventRun, Data: map[string]any{"seed": opts.Seed, "delivery": opts.Delivery, "mode": opts.Mode,
		"relays": opts.Relays, "postgres": env.Major, "standby": env.Standby != nil, "duration": opts.Duration.String(),
		"kinds": opts.Kinds, "replay": fmt.Sprintf("PGOUTBOX_NEMESIS_SEEDS=%d PGOUTBOX_NEMESIS_DELIVERY=%s PGOUTBOX_NEMESIS_MODE=%s PGOUTBOX_NEMESIS_DURATION=%s", opts.Seed, opts.Delivery, opts.Mode, opts.Duration)}})
	for i, f := range r.res.Schedule.Faults {
		r.h.Add(Event{Type: EventPlanned, Fault: &f, Index: i, Time: r.start})
	}
	if r.reader, err = NewReader(env.Kafka.ReadBrokers(), eventTopic, deadLetters); err != nil {
		return err
	}
	args := relayArgs(env, opts)
	for i := 0; i < opts.Relays; i++ {
		rl, err := newRelay(i, env.Bin, args, opts.Out, r.h)
		if err != nil {
			return err
		}
		rl.pair = opts.Relays > 1
		r.relays = append(r.relays, rl)
	}
	for _, rl := range r.relays {
		if err := rl.start(); err != nil {
			return err
		}
	}
	r.mon = startMonitor(r.superURL, slot, 100*time.Millisecond)
	wcfg := opts.Writer
	wcfg.URL, wcfg.Seed = r.superURL, opts.Seed
	wcfg.Note = func(msg, detail string) { r.h.Add(Event{Type: EventNote, Msg: msg, Detail: detail}) }
	r.writers = StartWriters(wcfg)
	r.in = newInjector(env, r.h, r.relays, slot, env.Major >= 17 && slices.Contains(opts.Kinds, Failover))
	var injCtx context.Context
	injCtx, r.stopInjecting = context.WithCancel(ctx)
	r.in.run(injCtx, r.start, r.res.Schedule)
	r.sampler = &soakSampler{env: env, relays: r.relays, reader: r.reader, writers: r.writers, in: r.in, superURL: r.superURL, start: r.start}
	r.stuck = &stuckWatch{after: opts.StuckAfter, reader: r.reader, in: r.in, start: r.start}
	return nil
}

// watch waits out the run's duration, once a second telling a relay that
// is stuck and, with SoakEvery, sampling the resources.
func (r *runner) watch(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	nextSample := r.start
	for now := time.Now(); now.Before(r.start.Add(r.opts.Duration)); now = <-tick.C {
		if ctx.Err() != nil {
			break
		}
		if why := r.stuck.check(now, r.writers.LastCommit()); why != "" && r.res.Stuck == "" {
			r.res.Stuck = why
			r.h.Add(Event{Type: EventNote, Msg: "stuck", Detail: why})
			r.opts.Logf("nemesis %s: %s", r.res.Name(), why)
			dumpStuck(ctx, r.env, r.relays, r.opts.Out, "running", r.h)
		}
		if r.opts.SoakEvery > 0 && !now.Before(nextSample) {
			r.res.Samples = append(r.res.Samples, r.sampler.sample(ctx, now))
			nextSample = now.Add(r.opts.SoakEvery)
		}
	}
}

// windDown ends the run: the faults finish (they end before Duration),
// the writers stop and every prepared transaction is resolved, and what a
// fault may have left is healed. It returns the writers' outcome.
func (r *runner) windDown(ctx context.Context) (committed, rolledBack []Written, vanished []string, err error) {
	r.in.wait()
	r.writers.Stop()
	r.h.Add(Event{Type: EventNote, Msg: "writers stopped"})
	if err := r.in.heal(ctx); err != nil {
		r.h.Add(Event{Type: EventNote, Msg: "heal", Detail: err.Error()})
	}
	committed, rolledBack, uncertain := r.writers.Outcome()
	if err := withConn(ctx, r.superURL, func(c *pgx.Conn) error {
		more, gone, err := Resolve(ctx, c, uncertain)
		committed, vanished = append(committed, more...), gone
		return err
	}); err != nil {
		return nil, nil, nil, fmt.Errorf("nemesis: resolving uncertain commits: %w", err)
	}
	return committed, rolledBack, vanished, nil
}

// drain waits until every committed event was read, the relays are stuck
// or DrainTimeout passed.
func (r *runner) drain(ctx context.Context, committed []Written) {
	drainStart := time.Now()
	want := make([]string, 0, len(committed))
	for _, w := range committed {
		want = append(want, w.ID)
	}
	r.stuck.draining(drainStart)
	for {
		missing := 0
		for _, id := range want {
			if !r.reader.Has(id) {
				missing++
			}
		}
		now := time.Now()
		if missing == 0 {
			break
		}
		if why := r.stuck.check(now, now); why != "" {
			if r.res.Stuck == "" {
				r.res.Stuck = fmt.Sprintf("%s; %d of %d events never arrived", why, missing, len(want))
				r.h.Add(Event{Type: EventNote, Msg: "stuck", Detail: r.res.Stuck})
			}
			dumpStuck(ctx, r.env, r.relays, r.opts.Out, "drain", r.h)
			break
		}
		if now.Sub(drainStart) > r.opts.DrainTimeout {
			r.h.Add(Event{Type: EventNote, Msg: "drain timed out", Detail: fmt.Sprintf("%d of %d events missing", missing, len(want))})
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	r.res.Drain = time.Since(drainStart)
	r.res.LongestStall = r.stuck.longest
}

// collect reads what the run left: the late records, a last sample, the
// relays' final stop, the confirmations and the rows marked published.
// The checker's input it returns lacks the writers' outcome.
func (r *runner) collect(ctx context.Context) (Input, error) {
	// Late duplicates, then everything a read_committed consumer can see.
	time.Sleep(2 * time.Second)
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	if err := r.reader.CatchUp(cctx); err != nil {
		r.h.Add(Event{Type: EventNote, Msg: "catch up", Detail: err.Error()})
	}
	cancel()
	if r.opts.SoakEvery > 0 {
		r.res.Samples = append(r.res.Samples, r.sampler.sample(ctx, time.Now()))
	}
	for _, rl := range r.relays {
		if _, err := rl.term(30 * time.Second); err != nil {
			r.h.Add(Event{Type: EventNote, Msg: "final stop", Detail: firstLine(err.Error())})
		}
	}
	confirmations := r.mon.stop()
	published, err := publishedRows(ctx, r.superURL)
	if err != nil {
		return Input{}, fmt.Errorf("nemesis: reading published rows: %w", err)
	}
	if err := r.reader.Err(); err != nil {
		r.h.Add(Event{Type: EventNote, Msg: "reader", Detail: err.Error()})
	}
	return Input{Delivery: r.opts.Delivery, Start: r.start, Published: published, Records: r.reader.Records(),
		Confirmations: confirmations}, nil
}

// publishedRows are the outbox rows marked published, with when.
func publishedRows(ctx context.Context, url string) (map[string]time.Time, error) {
	published := map[string]time.Time{}
	err := withConn(ctx, url, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, "SELECT id::text, published_at FROM outbox WHERE published_at IS NOT NULL")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var at time.Time
			if err := rows.Scan(&id, &at); err != nil {
				return err
			}
			published[id] = at
		}
		return rows.Err()
	})
	return published, err
}

// report checks the run's input and fills the result in, saving the
// input when the run failed, and writes report.json.
func (r *runner) report(input Input) error {
	res := r.res
	end := time.Now()
	input.Spans = Spans(r.h.Events(), end)
	res.Report = Check(input)
	res.Elapsed = end.Sub(r.start)
	res.Transactions = r.writers.Transactions()
	res.WriterErrors, _ = r.writers.errorsSeen()
	res.FaultErrors = r.in.errors()
	for _, rl := range r.relays {
		unexpected, fenced := rl.exits()
		res.Exits = append(res.Exits, unexpected...)
		res.Fenced += fenced
	}
	if len(res.Samples) > 0 {
		res.Growth = Judge(res.Samples, SoakMetrics)
	}
	if len(res.Failures()) > 0 {
		if err := SaveInput(r.opts.Out, input); err != nil {
			r.h.Add(Event{Type: EventNote, Msg: "saving the checker's input", Detail: err.Error()})
		}
	}
	r.h.Add(Event{Type: EventReport, Data: *res})
	b, _ := json.MarshalIndent(*res, "", "  ")
	return os.WriteFile(filepath.Join(r.opts.Out, "report.json"), b, 0o644)
}

// close stops what the run started and is still going, in the reverse
// order: the faults, the relays, their logs, the reader, the history.
func (r *runner) close() {
	if r.stopInjecting != nil {
		r.stopInjecting()
	}
	for _, rl := range r.relays {
		rl.kill()
	}
	for i := len(r.relays) - 1; i >= 0; i-- {
		r.relays[i].log.Close()
	}
	if r.reader != nil {
		r.reader.Close()
	}
	if r.h != nil {
		r.h.Close()
	}
}

// dumpStuck writes every running relay's goroutines to dir, and what the
// broker holds at the end of the position topic (whole records: the rows
// each transaction carried) and of the events' topics.
func dumpStuck(ctx context.Context, env Env, relays []*relay, dir, when string, h *History) {
	for _, r := range relays {
		if err := r.dumpGoroutines(ctx, dir, when); err != nil {
			h.Add(Event{Type: EventNote, Msg: "goroutine dump", Detail: err.Error()})
		}
	}
	if err := dumpTopic(ctx, env.Kafka.ReadBrokers(), slot+".position", filepath.Join(dir, "position-topic-"+when+".txt"), 1<<16); err != nil {
		h.Add(Event{Type: EventNote, Msg: "position topic dump", Detail: err.Error()})
	}
	if err := dumpTopic(ctx, env.Kafka.ReadBrokers(), eventTopic, filepath.Join(dir, "event-topic-"+when+".txt"), 400); err != nil {
		h.Add(Event{Type: EventNote, Msg: "event topic dump", Detail: err.Error()})
	}
}

// multiHost is a URL to the primary and the standby, whichever accepts
// writes; through the links for the relays, directly otherwise.
func multiHost(env Env, user string, linked bool) string {
	var hosts []string
	if linked {
		for _, p := range env.Links {
			hosts = append(hosts, p.Addr())
		}
	} else {
		hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", env.Primary.Port))
		if env.Standby != nil {
			hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", env.Standby.Port))
		}
	}
	return fmt.Sprintf("postgres://%s@%s/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=3", user, strings.Join(hosts, ","))
}

// relayArgs are the flags every relay runs with: the mode and delivery of
// the run, and timeouts that let it notice a cut link within seconds.
func relayArgs(env Env, opts Options) []string {
	args := []string{
		"--database-url", multiHost(env, role, true),
		"--kafka-brokers", strings.Join(env.Kafka.Brokers(), ","),
		"--mode", string(opts.Mode),
		"--delivery", string(opts.Delivery),
		"--receive-timeout", "5s",
		"--probe-interval", "2s",
		"--poll-interval", "100ms",
		"--heartbeat-interval", "1s",
		"--shutdown-timeout", "10s",
	}
	if env.Major >= 17 && env.Standby != nil {
		args = append(args, "--slot-failover")
	}
	return args
}

// setup migrates the database, creates the relays' role and, outside
// --mode poll, the publication and the slot, with pgoutbox's own commands,
// as the owner of the tables.
func setup(ctx context.Context, env Env, url string, opts Options) error {
	run := func(args ...string) error {
		out, err := exec.CommandContext(ctx, env.Bin, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("pgoutbox %s: %w\n%s", strings.Join(args[:2], " "), err, out)
		}
		return nil
	}
	if err := run("migrate", "--database-url", url); err != nil {
		return err
	}
	if err := withConn(ctx, url, func(c *pgx.Conn) error {
		if _, err := c.Exec(ctx, fmt.Sprintf(`CREATE ROLE %[1]s LOGIN REPLICATION;
GRANT SELECT, UPDATE ON outbox TO %[1]s;
GRANT SELECT ON ALL SEQUENCES IN SCHEMA public TO %[1]s;
GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox_state TO %[1]s;
GRANT SELECT, INSERT, UPDATE ON pgoutbox_dead_letter TO %[1]s;
GRANT SELECT, INSERT, UPDATE ON pgoutbox_lease TO %[1]s;
DO $$DECLARE f regprocedure; BEGIN
  FOR f IN SELECT oid::regprocedure FROM pg_proc WHERE proname = 'pg_logical_emit_message' LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %%s TO %[1]s', f);
  END LOOP; END$$`, role)); err != nil {
			return err
		}
		return SetupWriters(ctx, c)
	}); err != nil {
		return err
	}
	if opts.Mode == ModePoll {
		return nil
	}
	args := []string{"slot", "create", "--database-url", url}
	if env.Major >= 17 && env.Standby != nil {
		args = append(args, "--failover")
	}
	return run(args...)
}

func withConn(ctx context.Context, url string, fn func(*pgx.Conn) error) error {
	var last error
	for attempt := 0; attempt < 20; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := pgx.Connect(cctx, url)
		cancel()
		if err != nil {
			last = err
			time.Sleep(500 * time.Millisecond)
			continue
		}
		err = fn(c)
		c.Close(context.Background())
		return err
	}
	return last
}

// stuckWatch tells a relay that makes no progress: no new event read for
// after, while events wait (a commit newer than the last event read) and no
// fault is active (counting from the last fault's end).
type stuckWatch struct {
	after  time.Duration
	reader *Reader
	in     *injector
	start  time.Time
	drain  time.Time
	// longest is the longest time seen without a new event while events
	// waited and no fault was active: how long recovering took at worst.
	longest time.Duration
}

func (s *stuckWatch) draining(at time.Time) { s.drain = at }

func (s *stuckWatch) check(now, lastCommit time.Time) string {
	_, progress := s.reader.Seen()
	quiet, lastEnd := s.in.quiet()
	if !quiet || !lastCommit.After(progress) {
		return ""
	}
	since := later(later(progress, lastEnd), s.start)
	s.longest = max(s.longest, now.Sub(since))
	if now.Sub(since) < s.after {
		return ""
	}
	return fmt.Sprintf("no event delivered for %v at %.0fs (last new event at %.1fs, last fault undone at %.1fs)",
		now.Sub(since).Round(time.Second), now.Sub(s.start).Seconds(), progress.Sub(s.start).Seconds(), lastEnd.Sub(s.start).Seconds())
}

// soakSampler reads the soak's resources.
type soakSampler struct {
	env      Env
	relays   []*relay
	reader   *Reader
	writers  *Writers
	in       *injector
	superURL string
	start    time.Time

	read    int // records read up to the previous sample
	written int // commits seen up to the previous sample
	// Events committed and not yet read, and read before their commit
	// was recorded.
	commits, reads map[string]time.Time
}

func (s *soakSampler) sample(ctx context.Context, now time.Time) Sample {
	out := Sample{T: Seconds(now.Sub(s.start).Seconds())}
	for _, r := range s.relays {
		rss, fds, gor := math.NaN(), math.NaN(), math.NaN()
		if pid := r.pid(); pid != 0 {
			if a, b, err := processReading(pid); err == nil {
				rss, fds = a, b
			}
			if m, err := r.scrape(ctx); err == nil {
				if v, ok := m["go_goroutines"]; ok {
					gor = v
				}
			}
		}
		out.RSS, out.FDs, out.Goroutines = append(out.RSS, rss), append(out.FDs, fds), append(out.Goroutines, gor)
	}
	out.RetainedWAL = retainedWAL(ctx, s.in.currentPrimary().URL, slot)
	if s.commits == nil {
		s.commits, s.reads = map[string]time.Time{}, map[string]time.Time{}
	}
	fresh, n := s.writers.CommittedFrom(s.written)
	s.written = n
	var lat []float64
	match := func(committed, read time.Time) {
		lat = append(lat, float64(read.Sub(committed))/float64(time.Millisecond))
	}
	for _, w := range fresh {
		if read, ok := s.reads[w.ID]; ok {
			match(w.Committed, read)
			delete(s.reads, w.ID)
		} else {
			s.commits[w.ID] = w.Committed
		}
	}
	recs := s.reader.RecordsFrom(s.read)
	s.read += len(recs)
	for _, r := range recs {
		if at, ok := s.commits[r.ID]; ok {
			match(at, r.Read)
			delete(s.commits, r.ID)
		} else if _, ok := s.reads[r.ID]; !ok {
			// Read before its writer recorded the commit; or a
			// duplicate, which the prune below forgets.
			s.reads[r.ID] = r.Read
		}
	}
	for id, at := range s.reads {
		if now.Sub(at) > time.Minute {
			delete(s.reads, id)
		}
	}
	slices.Sort(lat)
	out.LatencyP50, out.LatencyP99 = percentile(lat, 0.5), percentile(lat, 0.99)
	return out
}
