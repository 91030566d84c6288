package test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	child "github.com/pgoutbox/pgoutbox/proc"
	"github.com/pgoutbox/pgoutbox/test/faultproxy"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/nemesis"
	"github.com/pgoutbox/pgoutbox/test/testbin"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// nemesisKafka starts the Kafka the nemesis runs against, behind fault
// proxies, killable and restartable on its data: as broker names it
// (PGOUTBOX_NEMESIS_BROKER), one Apache Kafka broker (""), a cluster of
// three ("cluster"), or the devbroker (kfake, "devbroker"), which loses a
// transaction open when it is killed (see docs/reliability.md).
func nemesisKafka(t *testing.T, broker string) nemesis.Kafka {
	switch broker {
	case "":
		return startApacheKafka(t)
	case "cluster":
		return startClusterKafka(t)
	case "devbroker":
		return startDevbrokerKafka(t)
	}
	t.Fatalf("PGOUTBOX_NEMESIS_BROKER=%q: want cluster, devbroker or nothing (one Apache Kafka broker)", broker)
	return nil
}

// The nemesis in make test: a few fixed seeds, each for a short run, on
// both deliveries and all three modes. make nemesis runs any seeds for any
// length through the PGOUTBOX_NEMESIS_* variables (nemesisRuns).
func TestNemesis(t *testing.T) {
	broker := os.Getenv("PGOUTBOX_NEMESIS_BROKER")
	var results []nemesis.Result
	for _, run := range nemesisRuns(t) {
		t.Run(fmt.Sprintf("%s/%s/seed-%d", run.Delivery, modeName(run.Mode), run.Seed), func(t *testing.T) {
			results = append(results, runNemesis(t, run, nemesisEnv(t, nemesisKafka(t, broker), true)))
		})
	}
	if os.Getenv("PGOUTBOX_NEMESIS_SEEDS") == "" {
		// The short set stands for the whole nemesis: it draws every
		// kind of fault of one broker.
		checkDrawn(t, results, nemesis.KindsFor(nemesis.ModeAuto, 17, true, false))
	}
	nemesisSummary(t, results)
}

// The nemesis against a cluster of three brokers in make test: two short
// runs on one cluster, exactly-once then at-least-once, whose seeds draw
// each of the cluster's faults once or twice (the faults of the relay and
// of PostgreSQL are TestNemesis's). make nemesis NEMESIS_BROKER=cluster
// runs the cluster's campaign, every fault on both deliveries.
func TestNemesisCluster(t *testing.T) {
	kafka := startClusterKafka(t)
	const d, gap = 20 * time.Second, 4 * time.Second
	var results []nemesis.Result
	for _, run := range []nemesis.Options{
		{Seed: 22, Delivery: nemesis.ExactlyOnce, Mode: nemesis.ModeAuto, Relays: 1, Duration: d, MeanGap: gap,
			Kinds: []nemesis.Kind{nemesis.LeaderKill, nemesis.TwoBrokersDown, nemesis.DiskFull}},
		{Seed: 27, Delivery: nemesis.AtLeastOnce, Mode: nemesis.ModeWAL, Relays: 1, Duration: d, MeanGap: gap,
			Kinds: []nemesis.Kind{nemesis.RollingRestart, nemesis.ControllerKill, nemesis.LeaderKill}},
	} {
		t.Run(fmt.Sprintf("%s/%s/seed-%d", run.Delivery, modeName(run.Mode), run.Seed), func(t *testing.T) {
			kafka.c.DeleteNewTopics(t)
			results = append(results, runNemesis(t, run, nemesisEnv(t, kafka, false)))
		})
	}
	checkDrawn(t, results, nemesis.ClusterKinds)
	nemesisSummary(t, results)
}

// checkDrawn fails the test unless results drew every kind of kinds.
func checkDrawn(t *testing.T, results []nemesis.Result, kinds []nemesis.Kind) {
	t.Helper()
	if len(results) == 0 {
		return
	}
	drawn := map[nemesis.Kind]bool{}
	for _, r := range results {
		for k := range r.Schedule.Counts() {
			drawn[k] = true
		}
	}
	for _, k := range kinds {
		if !drawn[k] {
			t.Errorf("the short set of seeds drew no %s on PostgreSQL %d", k, results[0].Major)
		}
	}
}

// nemesisSummary logs what the runs found, and writes it to
// PGOUTBOX_NEMESIS_OUT/summary.md when that is set.
func nemesisSummary(t *testing.T, results []nemesis.Result) {
	t.Helper()
	summary := nemesis.Summary(results)
	t.Logf("what was run and what it found:\n%s", summary)
	if base := os.Getenv("PGOUTBOX_NEMESIS_OUT"); base != "" {
		if err := os.WriteFile(filepath.Join(base, "summary.md"), []byte(summary), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func modeName(m nemesis.Mode) string {
	if m == "" {
		return "seed-picks"
	}
	return string(m)
}

// nemesisRuns are the runs to make: the short fixed set, or what
// PGOUTBOX_NEMESIS_SEEDS (1,2,3 or 1-10), _DELIVERY (at-least-once,
// exactly-once or both), _MODE (auto, wal, poll; unset: each seed picks),
// _DURATION, _GAP (the mean time between faults), _RELAYS (0: each seed
// picks) and _KINDS (a comma-separated subset of the faults) ask for.
func nemesisRuns(t *testing.T) []nemesis.Options {
	env := func(name string) string { return os.Getenv("PGOUTBOX_NEMESIS_" + name) }
	seeds := env("SEEDS")
	if seeds == "" {
		// Short runs, about a minute each with the servers' start;
		// together the three draw every kind of fault, on 15 as on 18
		// (TestNemesis checks it): seed 7 ten kinds under exactly-once
		// in auto mode with an HA pair, 281 the failover and SIGKILLs
		// while polling, 10 SIGKILL in WAL mode with a pair. make test
		// runs them on 18, where the failover uses failover slots.
		d := 30 * time.Second
		gap := 4 * time.Second
		return []nemesis.Options{
			{Seed: 7, Delivery: nemesis.ExactlyOnce, Mode: nemesis.ModeAuto, Relays: 2, Duration: d, MeanGap: gap},
			{Seed: 281, Delivery: nemesis.AtLeastOnce, Mode: nemesis.ModePoll, Relays: 1, Duration: d, MeanGap: gap},
			{Seed: 10, Delivery: nemesis.AtLeastOnce, Mode: nemesis.ModeWAL, Relays: 2, Duration: d, MeanGap: gap},
		}
	}
	var list []uint64
	for _, f := range strings.Split(seeds, ",") {
		lo, hi, ranged := strings.Cut(strings.TrimSpace(f), "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		b := a
		if err == nil && ranged {
			b, err = strconv.ParseUint(hi, 10, 64)
		}
		if err != nil || b < a {
			t.Fatalf("PGOUTBOX_NEMESIS_SEEDS=%q: want seeds like 1,2,3 or 1-10", seeds)
		}
		for s := a; s <= b; s++ {
			list = append(list, s)
		}
	}
	duration := 2 * time.Minute
	if v := env("DURATION"); v != "" {
		var err error
		if duration, err = time.ParseDuration(v); err != nil {
			t.Fatalf("PGOUTBOX_NEMESIS_DURATION: %v", err)
		}
	}
	var gap time.Duration
	if v := env("GAP"); v != "" {
		var err error
		if gap, err = time.ParseDuration(v); err != nil {
			t.Fatalf("PGOUTBOX_NEMESIS_GAP: %v", err)
		}
	}
	var relays int
	if v := env("RELAYS"); v != "" {
		var err error
		if relays, err = strconv.Atoi(v); err != nil || relays < 0 {
			t.Fatalf("PGOUTBOX_NEMESIS_RELAYS=%q: want a count of relays (0: each seed picks)", v)
		}
	}
	var kinds []nemesis.Kind
	if v := env("KINDS"); v != "" {
		var err error
		if kinds, err = nemesis.ParseKinds(v); err != nil {
			t.Fatal(err)
		}
	}
	deliveries := []nemesis.Delivery{nemesis.AtLeastOnce, nemesis.ExactlyOnce}
	switch v := env("DELIVERY"); v {
	case "", "both":
	case string(nemesis.AtLeastOnce), string(nemesis.ExactlyOnce):
		deliveries = []nemesis.Delivery{nemesis.Delivery(v)}
	default:
		t.Fatalf("PGOUTBOX_NEMESIS_DELIVERY=%q: want at-least-once, exactly-once or both", v)
	}
	mode := nemesis.Mode(env("MODE"))
	switch mode {
	case "", nemesis.ModeAuto, nemesis.ModeWAL, nemesis.ModePoll:
	default:
		t.Fatalf("PGOUTBOX_NEMESIS_MODE=%q: want auto, wal or poll", mode)
	}
	var runs []nemesis.Options
	for _, s := range list {
		for _, d := range deliveries {
			runs = append(runs, nemesis.Options{Seed: s, Delivery: d, Mode: mode, Relays: relays, Duration: duration, MeanGap: gap, Kinds: kinds})
		}
	}
	return runs
}

// nemesisOut is where a run's history, logs and report go:
// PGOUTBOX_NEMESIS_OUT when set (kept), else a directory removed when the
// run passes and kept, with its path in the log, when it fails.
func nemesisOut(t *testing.T, name string) string {
	if base := os.Getenv("PGOUTBOX_NEMESIS_OUT"); base != "" {
		dir, err := filepath.Abs(filepath.Join(base, name))
		if err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir, err := os.MkdirTemp("", "pgoutbox-nemesis-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		}
	})
	return dir
}

// runNemesis runs one seed on env, servers of its own, and fails the test
// with the seed and how to replay it.
func runNemesis(t *testing.T, opts nemesis.Options, env nemesis.Env) nemesis.Result {
	name := fmt.Sprintf("%s-%s-seed-%d", opts.Delivery, modeName(opts.Mode), opts.Seed)
	if opts.Out == "" {
		opts.Out = nemesisOut(t, name)
	}
	opts.Logf = t.Logf
	res, err := nemesis.Run(context.Background(), env, opts)
	if k, ok := env.Kafka.(interface{ saveLogs(dir string) error }); ok {
		if err := k.saveLogs(opts.Out); err != nil {
			t.Logf("saving the brokers' logs: %v", err)
		}
	}
	if err != nil {
		t.Fatalf("seed %d: %v (history in %s)", opts.Seed, err, opts.Out)
	}
	t.Logf("seed %d %s, mode %s, %d relay(s): %d faults %v; %d events in %v, drained in %v; longest stall with no fault active %v",
		res.Seed, res.Delivery, res.Mode, res.Relays, len(res.Schedule.Faults), res.Schedule.Counts(),
		res.Report.Committed, res.Elapsed.Round(time.Second), res.Drain.Round(100*time.Millisecond), res.LongestStall.Round(time.Second))
	t.Logf("seed %d: %v; transactions %v; relays fenced by the other %d times", res.Seed, res.Report, res.Transactions, res.Fenced)
	if res.Delivery == nemesis.AtLeastOnce {
		t.Logf("episodes (at-least-once: what was re-sent against what was in flight):\n%s", res.Report.EpisodeTable())
	}
	for _, e := range res.FaultErrors {
		t.Logf("seed %d: fault not done as planned: %s", res.Seed, e)
	}
	if fails := res.Failures(); len(fails) > 0 {
		for _, f := range fails {
			t.Errorf("seed %d (%s, mode %s): %s", res.Seed, res.Delivery, res.Mode, f)
		}
		for problem, ids := range res.Report.Examples {
			t.Logf("%s: %s", problem, strings.Join(ids, ", "))
		}
		extra := "" // what the schedule's config does not say
		if dir := os.Getenv("PGOUTBOX_PG_BINDIR"); dir != "" {
			extra = " NEMESIS_PG_BINDIR=" + dir
		}
		if _, cluster := env.Kafka.(nemesis.Cluster); cluster {
			extra += " NEMESIS_BROKER=cluster"
		}
		if len(opts.Kinds) > 0 {
			var kinds []string
			for _, k := range opts.Kinds {
				kinds = append(kinds, string(k))
			}
			extra += " NEMESIS_KINDS=" + strings.Join(kinds, ",")
		}
		c := res.Schedule.Config
		t.Errorf("seed %d failed; history, relay logs and report in %s; replay with: make nemesis NEMESIS_SEEDS=%d NEMESIS_DELIVERY=%s NEMESIS_MODE=%s NEMESIS_DURATION=%s NEMESIS_GAP=%s NEMESIS_RELAYS=%d%s",
			res.Seed, res.Dir, res.Seed, res.Delivery, res.Mode, c.Duration, c.MeanGap, c.Relays, extra)
	}
	return res
}

// nemesisEnv starts the PostgreSQL servers of one run, on kafka: a primary
// with a synchronous standby (when standby is set, unless
// PGOUTBOX_NEMESIS_STANDBY=0), and fault proxies in front of both for the
// relays.
func nemesisEnv(t *testing.T, kafka nemesis.Kafka, standby bool) nemesis.Env {
	t.Helper()
	primary := pgcluster.New(t, pgcluster.Options{Settings: map[string]string{
		"max_prepared_transactions": "20",
	}})
	if primary.External() {
		t.Skip("the nemesis stops and fails over its servers: it needs the throwaway cluster, not " + pgcluster.DatabaseURLEnv)
	}
	env := nemesis.Env{Bin: testenv.Bin(t), Primary: primary}
	env.Major = superExec(t, primary.URL)
	if standby && os.Getenv("PGOUTBOX_NEMESIS_STANDBY") != "0" {
		opts := pgcluster.StandbyOptions{Name: "standby1", Slot: "standby1", Synchronous: true}
		if env.Major >= 17 {
			opts = testenv.StandbyForSlotSync()
		}
		env.Standby = pgcluster.NewStandby(t, primary, opts)
		if env.Major >= 17 {
			// The standby is a cold copy on 18, which restarted the
			// primary: a new connection.
			superExec(t, primary.URL, "ALTER SYSTEM SET synchronized_standby_slots = 'standby1'", "SELECT pg_reload_conf()")
		}
	}
	servers := []*pgcluster.Cluster{primary}
	if env.Standby != nil {
		servers = append(servers, env.Standby)
	}
	for _, s := range servers {
		p, err := faultproxy.Forward(fmt.Sprintf("127.0.0.1:%d", s.Port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		env.Links = append(env.Links, p)
	}
	env.Kafka = kafka
	return env
}

// superExec runs statements as the superuser on the server at url and
// returns the server's major version.
func superExec(t *testing.T, url string, sqls ...string) int {
	t.Helper()
	e := &testenv.Env{T: t, URL: url}
	e.Conn = e.Connect()
	for _, s := range sqls {
		if _, err := e.Conn.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return testenv.ServerMajor(t, e.Conn)
}

// devbrokerKafka is the devbroker behind a fault proxy: it listens on a
// port of its own and advertises the proxy's address, so that every
// connection a client makes crosses the proxy. Its data is kept across
// kills; every produced batch is synced before it is acknowledged.
type devbrokerKafka struct {
	bin, listen, dir string
	proxy            *faultproxy.Proxy

	mu sync.Mutex
	p  *child.Devbroker
}

func startDevbrokerKafka(t *testing.T) nemesis.Kafka {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	proxy, err := faultproxy.Forward(listen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	k := &devbrokerKafka{bin: testbin.Build(t, "github.com/pgoutbox/pgoutbox/cmd/devbroker"), listen: listen, dir: t.TempDir(), proxy: proxy}
	t.Cleanup(func() { k.Kill() })
	if err := k.Start(); err != nil {
		t.Fatal(err)
	}
	return k
}

func (k *devbrokerKafka) Brokers() []string            { return []string{k.proxy.Addr()} }
func (k *devbrokerKafka) ReadBrokers() []string        { return k.Brokers() }
func (k *devbrokerKafka) Proxies() []*faultproxy.Proxy { return []*faultproxy.Proxy{k.proxy} }

func (k *devbrokerKafka) Kill() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.p != nil {
		k.p.Kill()
		k.p = nil
	}
	return nil
}

func (k *devbrokerKafka) Start() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.p != nil {
		return nil
	}
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		var p *child.Devbroker
		p, err = child.StartDevbroker(context.Background(), k.bin, k.listen,
			"--data-dir", k.dir, "--advertise", k.proxy.Addr(), "--log-level", "warn")
		if err == nil {
			k.p = p
			return nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	return err
}

// apacheKafka is Apache Kafka (test/kafkatest) for the nemesis: a broker of
// the run's own, which the faults kill and start again on its data; the
// relays reach it through its proxied listener, the checker through its
// own listener.
type apacheKafka struct {
	b    *kafkatest.Broker
	mu   sync.Mutex
	down bool
}

func startApacheKafka(t *testing.T) nemesis.Kafka {
	t.Helper()
	return &apacheKafka{b: kafkatest.Start(t, kafkatest.Options{Proxied: true})}
}

func (k *apacheKafka) Brokers() []string            { return k.b.Proxied }
func (k *apacheKafka) ReadBrokers() []string        { return k.b.Brokers }
func (k *apacheKafka) Proxies() []*faultproxy.Proxy { return []*faultproxy.Proxy{k.b.Proxy} }

// saveLogs writes the broker's log (warnings and errors) to dir.
func (k *apacheKafka) saveLogs(dir string) error {
	return os.WriteFile(filepath.Join(dir, "kafka.log"), []byte(k.b.Log()), 0o644)
}

func (k *apacheKafka) Kill() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.down {
		k.b.Kill()
		k.down = true
	}
	return nil
}

func (k *apacheKafka) Start() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.down {
		k.b.Start()
		k.down = false
	}
	return nil
}

// clusterKafka is a cluster of three Apache Kafka brokers and three
// controllers (kafkatest.StartCluster) for the nemesis: the relays reach
// each broker through a fault proxy of its own, the checker through their
// own listeners; broker 1's data lies on a small disk of its own, which
// kafka-disk-full fills.
type clusterKafka struct {
	c *kafkatest.ApacheCluster
}

// clusterDisk is broker 1's disk: far more than a run of hours writes to
// it, and taken from memory only as it is filled.
const clusterDisk = 1 << 30

func startClusterKafka(t *testing.T) *clusterKafka {
	t.Helper()
	return &clusterKafka{kafkatest.StartCluster(t, kafkatest.ClusterOptions{Proxied: true, Disk: clusterDisk})}
}

func (k *clusterKafka) Brokers() []string            { return k.c.Proxied }
func (k *clusterKafka) ReadBrokers() []string        { return k.c.Brokers }
func (k *clusterKafka) Proxies() []*faultproxy.Proxy { return k.c.Proxies() }

func (k *clusterKafka) Nodes() (brokers, controllers []int32) {
	for _, n := range k.c.Nodes {
		if n.Controller != "" {
			controllers = append(controllers, n.ID)
		} else {
			brokers = append(brokers, n.ID)
		}
	}
	return brokers, controllers
}

// saveLogs writes each node's log (warnings and errors) to dir.
func (k *clusterKafka) saveLogs(dir string) error {
	var errs []error
	for _, n := range k.c.Nodes {
		errs = append(errs, os.WriteFile(filepath.Join(dir, fmt.Sprintf("kafka-%d.log", n.ID)), []byte(n.Log()), 0o644))
	}
	return errors.Join(errs...)
}

// Kill kills every broker that runs.
func (k *clusterKafka) Kill() error {
	brokers, _ := k.Nodes()
	var errs []error
	for _, id := range brokers {
		if n, _ := k.c.Node(id); n.Running() {
			errs = append(errs, k.c.Kill(id))
		}
	}
	return errors.Join(errs...)
}

// Start starts every broker that does not run, side by side, and waits
// until every partition has all its replicas in sync (two minutes at
// most).
func (k *clusterKafka) Start() error {
	brokers, _ := k.Nodes()
	errs := make([]error, len(brokers))
	var wg sync.WaitGroup
	for i, id := range brokers {
		wg.Go(func() { _, errs[i] = k.StartNode(id) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return k.c.WaitInSync(ctx)
}

func (k *clusterKafka) KillNode(id int32) error { return k.c.Kill(id) }
func (k *clusterKafka) StopNode(id int32) error { return k.c.Stop(id) }

func (k *clusterKafka) StartNode(id int32) (bool, error) {
	n, err := k.c.Node(id)
	if err != nil || n.Running() {
		return false, err
	}
	return true, k.c.Start(id)
}

func (k *clusterKafka) Leaders(ctx context.Context, topic string) (map[int32]int32, error) {
	parts, err := k.c.Partitions(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int32{}
	for p, part := range parts {
		out[p] = part.Leader
	}
	return out, nil
}

func (k *clusterKafka) ActiveController(ctx context.Context) (int32, error) {
	return k.c.ActiveController(ctx)
}
func (k *clusterKafka) WaitInSync(ctx context.Context) error { return k.c.WaitInSync(ctx) }
func (k *clusterKafka) ProbeWrite(ctx context.Context, topic string) error {
	return k.c.ProbeWrite(ctx, topic)
}
func (k *clusterKafka) Running(id int32) bool {
	n, err := k.c.Node(id)
	return err == nil && n.Running()
}

func (k *clusterKafka) Disk(full bool) (int32, error) {
	if full {
		return k.c.DiskBroker(), k.c.FillDisk()
	}
	return k.c.DiskBroker(), k.c.FreeDisk()
}
