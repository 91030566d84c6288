package compat

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/connecttest"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/registrytest"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

// ParallelEnv names how many cases run at once (default 8): each holds a
// Debezium task, a pgoutbox or two and their connections while it waits.
const ParallelEnv = "PGOUTBOX_COMPAT_PARALLEL"

// CasesEnv names a regular expression: only the cases whose names it
// matches run (all by default).
const CasesEnv = "PGOUTBOX_COMPAT_CASES"

// SkipEnv names a regular expression: the cases whose names it matches
// do not run.
const SkipEnv = "PGOUTBOX_COMPAT_SKIP"

// Every case of testdata/cases, Debezium 3.6.1 (Kafka Connect standalone)
// against pgoutbox on one PostgreSQL and one Apache Kafka: the records must
// be equal, or differ only as the case's deliberate differences say.
func TestCorpus(t *testing.T) {
	cases, err := LoadCases(filepath.Join("testdata", "cases"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		env  string
		keep bool
	}{{CasesEnv, true}, {SkipEnv, false}} {
		re := os.Getenv(f.env)
		if re == "" {
			continue
		}
		match, err := regexp.Compile(re)
		if err != nil {
			t.Fatalf("%s: %v", f.env, err)
		}
		cases = slices.DeleteFunc(cases, func(c Case) bool { return match.MatchString(c.Name) != f.keep })
	}
	if len(cases) == 0 {
		t.Fatalf("no case matches %s=%q and %s=%q", CasesEnv, os.Getenv(CasesEnv), SkipEnv, os.Getenv(SkipEnv))
	}
	begin := time.Now()
	pg := pgcluster.New(t, pgcluster.Options{Settings: map[string]string{
		"max_replication_slots": "300", "max_wal_senders": "300", "max_connections": "600",
	}})
	// Records whose timestamp a column sets may be decades old: the
	// broker's time-based retention would delete them before they are
	// read back (seen as end offsets with nothing to fetch).
	kafka := kafkatest.Start(t, kafkatest.Options{Config: map[string]string{"log.retention.ms": "-1"}})
	// Apicurio Registry, and its converters in the worker, when a case
	// uses them.
	var registryAPI string
	var plugins, classPath []string
	registries := map[string]string{}
	for _, c := range cases {
		if k := c.RegistryKey(); k != "" && registries[k] == "" {
			registries[k] = registrytest.Start(t, registrytest.Options{Properties: c.Registry}).URL + "/apis/registry/v2"
		}
	}
	if slices.ContainsFunc(cases, Case.UsesRegistry) {
		reg := registrytest.Start(t, registrytest.Options{})
		registryAPI = reg.URL + "/apis/registry/v2"
		dir, err := registrytest.PluginDir()
		if err != nil {
			t.Fatal(err)
		}
		plugins = append(plugins, dir)
		if slices.ContainsFunc(cases, Case.UsesCloudEventsAvro) {
			classPath = append(classPath, filepath.Join(dir, "apicurio-converter", "*"))
		}
	}
	connect := connecttest.Start(t, connecttest.Options{Brokers: kafka.Brokers, Plugins: plugins, ClassPath: classPath})
	t.Logf("Kafka Connect answered %.1fs after its JVM started; servers ready %.1fs after the test began",
		connect.Started.Seconds(), time.Since(begin).Seconds())
	env := &Env{AdminURL: pg.URL, Brokers: kafka.Brokers, Connect: connect, RegistryAPI: registryAPI, Registries: registries,
		Bin: testbin.Build(t, "github.com/pgoutbox/pgoutbox/cmd/pgoutbox")}

	parallel := 8
	if s := os.Getenv(ParallelEnv); s != "" {
		if parallel, err = strconv.Atoi(s); err != nil || parallel < 1 {
			t.Fatalf("%s=%q: want a positive number", ParallelEnv, s)
		}
	}
	env.Dir = t.TempDir()
	// The cases run side by side (t.Parallel would hold them to
	// -test.parallel, the number of cores), then report one by one.
	results := make([]Result, len(cases))
	slots := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	corpus := time.Now()
	for i, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			results[i] = env.Run(c)
		}()
	}
	wg.Wait()
	t.Logf("%d cases in %.1fs (%d at a time); the whole test %.1fs", len(cases), time.Since(corpus).Seconds(), parallel, time.Since(begin).Seconds())
	for _, res := range results {
		t.Run(res.Case.Name, func(t *testing.T) { report(t, res) })
	}
}

// report fails the test with the case's problems and what each side
// wrote and printed.
func report(t *testing.T, res Result) {
	t.Helper()
	t.Logf("%.1fs; debezium %d records, %s", res.Took.Seconds(), len(res.Debezium.Records), sideCounts(res))
	for _, p := range res.Pgoutbox {
		for _, topic := range p.Topics {
			t.Logf("%s: topic %s", p.Name, topic)
		}
	}
	if res.Equal() {
		return
	}
	for _, p := range res.Problems {
		t.Error(p)
	}
	show := func(s Side) {
		var sb strings.Builder
		_ = WriteRecords(&sb, s.Records)
		t.Logf("%s (%s*): %d records\n%s", s.Name, s.Prefix, len(s.Records), sb.String())
		if s.Output != "" {
			t.Logf("%s printed:\n%s", s.Name, tail(s.Output, 6000))
		}
	}
	show(res.Debezium)
	for _, p := range res.Pgoutbox {
		show(p)
	}
}

func sideCounts(res Result) string {
	var parts []string
	for _, p := range res.Pgoutbox {
		parts = append(parts, fmt.Sprintf("%s %d", p.Name, len(p.Records)))
	}
	return strings.Join(parts, ", ")
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
