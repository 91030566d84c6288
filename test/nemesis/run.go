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
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	res := Result{Seed: opts.Seed, Delivery: opts.Delivery, Mode: opts.Mode, Relays: opts.Relays, Major: env.Major, Dir: opts.Out}
	res.Schedule = NewSchedule(Config{Seed: opts.Seed, Duration: opts.Duration, MeanGap: opts.MeanGap, Kinds: opts.Kinds, Relays: opts.Relays})
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return res, err
	}
	if err := os.WriteFile(filepath.Join(opts.Out, "schedule.txt"), []byte(res.Schedule.String()), 0o644); err != nil {
		return res, err
	}
	logf("nemesis %s: %d relay(s), PostgreSQL %d, %d faults, history in %s", res.Name(), opts.Relays, env.Major, len(res.Schedule.Faults), opts.Out)

	// The database as a user sets it up: the tables, the relays' role, the
	// slot (except in --mode poll), then the application's own table.
	superURL := multiHost(env, "postgres", false)
	if err := setup(ctx, env, superURL, opts); err != nil {
		return res, fmt.Errorf("nemesis: setup: %w", err)
	}
	if c, ok := env.Kafka.(Cluster); ok {
		if err := prepareCluster(ctx, c); err != nil {
			return res, fmt.Errorf("nemesis: creating %s: %w", probeTopic, err)
		}
	}

	start := time.Now()
	h, err := NewHistory(filepath.Join(opts.Out, "history.jsonl"), start)
	if err != nil {
		return res, err
	}
	defer h.Close()
	h.Add(Event{Type: EventRun, Data: map[string]any{"seed": opts.Seed, "delivery": opts.Delivery, "mode": opts.Mode,
		"relays": opts.Relays, "postgres": env.Major, "standby": env.Standby != nil, "duration": opts.Duration.String(),
		"kinds": opts.Kinds, "replay": fmt.Sprintf("PGOUTBOX_NEMESIS_SEEDS=%d PGOUTBOX_NEMESIS_DELIVERY=%s PGOUTBOX_NEMESIS_MODE=%s PGOUTBOX_NEMESIS_DURATION=%s", opts.Seed, opts.Delivery, opts.Mode, opts.Duration)}})
	for i, f := range res.Schedule.Faults {
		h.Add(Event{Type: EventPlanned, Fault: &f, Index: i, Time: start})
	}

	reader, err := NewReader(env.Kafka.ReadBrokers(), eventTopic, deadLetters)
	if err != nil {
		return res, err
	}
	defer reader.Close()
	relays := make([]*relay, opts.Relays)
	args := relayArgs(env, opts)
	for i := range relays {
		if relays[i], err = newRelay(i, env.Bin, args, opts.Out, h); err != nil {
			return res, err
		}
		relays[i].pair = opts.Relays > 1
		defer relays[i].log.Close()
	}
	defer func() {
		for _, r := range relays {
			r.kill()
		}
	}()
	for _, r := range relays {
		if err := r.start(); err != nil {
			return res, err
		}
	}
	mon := startMonitor(superURL, slot, 100*time.Millisecond)
	wcfg := opts.Writer
	wcfg.URL, wcfg.Seed = superURL, opts.Seed
	wcfg.Note = func(msg, detail string) { h.Add(Event{Type: EventNote, Msg: msg, Detail: detail}) }
	writers := StartWriters(wcfg)
	in := newInjector(env, h, relays, slot, env.Major >= 17 && slices.Contains(opts.Kinds, Failover))
	injCtx, stopInjecting := context.WithCancel(ctx)
	defer stopInjecting()
	in.run(injCtx, start, res.Schedule)

	sampler := &soakSampler{env: env, relays: relays, reader: reader, writers: writers, in: in, superURL: superURL, start: start}
	stuck := &stuckWatch{after: opts.StuckAfter, reader: reader, in: in, start: start}
	tick := time.NewTicker(time.Second)
	nextSample := start
	for now := time.Now(); now.Before(start.Add(opts.Duration)); now = <-tick.C {
		if ctx.Err() != nil {
			break
		}
		if why := stuck.check(now, writers.LastCommit()); why != "" && res.Stuck == "" {
			res.Stuck = why
			h.Add(Event{Type: EventNote, Msg: "stuck", Detail: why})
			logf("nemesis %s: %s", res.Name(), why)
			dumpStuck(ctx, env, relays, opts.Out, "running", h)
		}
		if opts.SoakEvery > 0 && !now.Before(nextSample) {
			res.Samples = append(res.Samples, sampler.sample(ctx, now))
			nextSample = now.Add(opts.SoakEvery)
		}
	}
	tick.Stop()

	// The end: the faults finish (they end before Duration), the writers
	// stop and every prepared transaction is resolved, what a fault may
	// have left is healed, and the relays get every event out.
	in.wait()
	writers.Stop()
	h.Add(Event{Type: EventNote, Msg: "writers stopped"})
	if err := in.heal(ctx); err != nil {
		h.Add(Event{Type: EventNote, Msg: "heal", Detail: err.Error()})
	}
	committed, rolledBack, uncertain := writers.Outcome()
	var vanished []string
	if err := withConn(ctx, superURL, func(c *pgx.Conn) error {
		more, gone, err := Resolve(ctx, c, uncertain)
		committed, vanished = append(committed, more...), gone
		return err
	}); err != nil {
		return res, fmt.Errorf("nemesis: resolving uncertain commits: %w", err)
	}
	drainStart := time.Now()
	want := make([]string, 0, len(committed))
	for _, w := range committed {
		want = append(want, w.ID)
	}
	stuck.draining(drainStart)
	for {
		missing := 0
		for _, id := range want {
			if !reader.Has(id) {
				missing++
			}
		}
		now := time.Now()
		if missing == 0 {
			break
		}
		if why := stuck.check(now, now); why != "" {
			if res.Stuck == "" {
				res.Stuck = fmt.Sprintf("%s; %d of %d events never arrived", why, missing, len(want))
				h.Add(Event{Type: EventNote, Msg: "stuck", Detail: res.Stuck})
			}
			dumpStuck(ctx, env, relays, opts.Out, "drain", h)
			break
		}
		if now.Sub(drainStart) > opts.DrainTimeout {
			h.Add(Event{Type: EventNote, Msg: "drain timed out", Detail: fmt.Sprintf("%d of %d events missing", missing, len(want))})
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	res.Drain = time.Since(drainStart)
	res.LongestStall = stuck.longest
	// Late duplicates, then everything a read_committed consumer can see.
	time.Sleep(2 * time.Second)
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	if err := reader.CatchUp(cctx); err != nil {
		h.Add(Event{Type: EventNote, Msg: "catch up", Detail: err.Error()})
	}
	cancel()
	if opts.SoakEvery > 0 {
		res.Samples = append(res.Samples, sampler.sample(ctx, time.Now()))
	}
	for _, r := range relays {
		if _, err := r.term(30 * time.Second); err != nil {
			h.Add(Event{Type: EventNote, Msg: "final stop", Detail: firstLine(err.Error())})
		}
	}
	confirmations := mon.stop()
	published := map[string]time.Time{}
	if err := withConn(ctx, superURL, func(c *pgx.Conn) error {
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
	}); err != nil {
		return res, fmt.Errorf("nemesis: reading published rows: %w", err)
	}
	if err := reader.Err(); err != nil {
		h.Add(Event{Type: EventNote, Msg: "reader", Detail: err.Error()})
	}

	end := time.Now()
	input := Input{Delivery: opts.Delivery, Start: start, Committed: committed, RolledBack: rolledBack,
		Vanished: vanished, Published: published, Records: reader.Records(), Confirmations: confirmations,
		Spans: Spans(h.Events(), end)}
	res.Report = Check(input)
	res.Elapsed = end.Sub(start)
	res.Transactions = writers.Transactions()
	res.WriterErrors, _ = writers.errorsSeen()
	res.FaultErrors = in.errors()
	for _, r := range relays {
		unexpected, fenced := r.exits()
		res.Exits = append(res.Exits, unexpected...)
		res.Fenced += fenced
	}
	if len(res.Samples) > 0 {
		res.Growth = Judge(res.Samples, SoakMetrics)
	}
	if len(res.Failures()) > 0 {
		if err := SaveInput(opts.Out, input); err != nil {
			h.Add(Event{Type: EventNote, Msg: "saving the checker's input", Detail: err.Error()})
		}
	}
	h.Add(Event{Type: EventReport, Data: res})
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(filepath.Join(opts.Out, "report.json"), b, 0o644); err != nil {
		return res, err
	}
	return res, nil
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
