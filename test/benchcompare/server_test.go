package benchcompare

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/pgoutbox/pgoutbox/bench"
	"github.com/pgoutbox/pgoutbox/test/dbzserver"
)

// Debezium Server's JVM as its run.sh starts it in production: the
// distribution's defaults (no JAVA_OPTS) but a heap as Connect's, not the
// tests' small C1-only JVM.
const serverJVM = "-Xms256M -Xmx2G -XX:+UseG1GC -XX:MaxGCPauseMillis=20"

// tunedServer are the settings Debezium's documentation names for how
// soon a change goes out, as tunedForLatency for Kafka Connect; Debezium
// Server's NATS sink publishes each batch at once.
var tunedServer = map[string]string{"debezium.source.poll.interval.ms": "1"}

// debeziumServer is Debezium Server with its NATS JetStream sink and the
// outbox router at its defaults as a bench.System: a server per run,
// streaming the run's slot, warmed up before it is measured (its JVM
// starts with the run, where a user's has long been running).
func debeziumServer(dbURL, natsURL, name string, extra map[string]string) bench.System {
	return bench.System{Name: name, Warmup: *warmup, Start: func(ctx context.Context, run bench.SystemRun) (bench.Running, error) {
		u, err := url.Parse(dbURL)
		if err != nil {
			return nil, err
		}
		props := map[string]string{
			"debezium.sink.type":                          "nats-jetstream",
			"debezium.sink.nats-jetstream.url":            natsURL,
			"debezium.source.connector.class":             "io.debezium.connector.postgresql.PostgresConnector",
			"debezium.source.database.hostname":           u.Hostname(),
			"debezium.source.database.port":               u.Port(),
			"debezium.source.database.user":               u.User.Username(),
			"debezium.source.database.dbname":             strings.TrimPrefix(u.Path, "/"),
			"debezium.source.plugin.name":                 "pgoutput",
			"debezium.source.slot.name":                   run.Slot,
			"debezium.source.publication.name":            run.Publication,
			"debezium.source.publication.autocreate.mode": "disabled",
			"debezium.source.table.include.list":          run.Table,
			"debezium.source.topic.prefix":                "bench",
			"debezium.source.snapshot.mode":               "no_data",
			"debezium.transforms":                         "outbox",
			"debezium.transforms.outbox.type":             "io.debezium.transforms.outbox.EventRouter",
			"debezium.transforms.outbox.route.by.field":   "aggregatetype",
		}
		for k, v := range extra {
			props[k] = v
		}
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var text strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&text, "%s=%s\n", k, props[k])
		}
		s, err := dbzserver.Launch(text.String(), serverJVM)
		if err != nil {
			return nil, err
		}
		return &serverRun{s: s, name: run.Name}, nil
	}}
}

// serverRun is one run's Debezium Server as a bench.Running.
type serverRun struct {
	s    *dbzserver.Server
	name string
}

func (r *serverRun) Name() string            { return "debezium server " + r.name }
func (r *serverRun) PID() int                { return r.s.PID() }
func (r *serverRun) Exited() <-chan struct{} { return r.s.Exited() }
func (r *serverRun) Err() error              { return r.s.Err() }
func (r *serverRun) Output() string          { return r.s.LogTail(8192) }

// Stop stops the server and removes its directory; its slot stays until
// the bench drops it.
func (r *serverRun) Stop(time.Duration) error {
	r.s.Stop()
	return os.RemoveAll(r.s.Dir)
}

// natsVersion is the version of the nats-server bin, as it prints it.
func natsVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(strings.TrimPrefix(string(out), "nats-server: "))
}
