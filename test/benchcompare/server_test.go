package benchcompare

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pgoutbox/pgoutbox/bench"
	"github.com/pgoutbox/pgoutbox/test/dbzserver"
	"github.com/pgoutbox/pgoutbox/test/natstest"
	"github.com/pgoutbox/pgoutbox/test/rabbitmqtest"
	"github.com/pgoutbox/pgoutbox/test/redistest"
)

// Debezium Server's JVM as its run.sh starts it in production: the
// distribution's defaults (no JAVA_OPTS) but a heap as Connect's, not the
// tests' small C1-only JVM.
const serverJVM = "-Xms256M -Xmx2G -XX:+UseG1GC -XX:MaxGCPauseMillis=20"

// tunedServer are the settings Debezium's documentation names for how
// soon a change goes out, as tunedForLatency for Kafka Connect. Debezium
// Server's NATS, RabbitMQ and Redis sinks each write a batch as soon as
// the engine hands it over (NATS publishes it all and then waits for the
// acks, RabbitMQ for the batch's confirms, Redis writes pipelines of
// batch.size entries one after another): none has a setting that waits
// for more records, as Kafka's linger.ms does.
var tunedServer = map[string]string{"debezium.source.poll.interval.ms": "1"}

// serverSink starts the broker of -sink, and returns it as the bench's
// target, Debezium Server's properties for its sink of that type, and
// what the report says of both.
func serverSink(b *testing.B, sink string) (t bench.Target, props map[string]string, where string) {
	switch sink {
	case "nats-jetstream":
		nats := natstest.Start(b)
		return bench.NATS{URL: nats.URL},
			map[string]string{"debezium.sink.type": sink, "debezium.sink.nats-jetstream.url": nats.URL},
			fmt.Sprintf("nats-server %s (JetStream, file storage, a stream per run), Debezium Server %s", natsVersion(natstest.Binary(b)), dbzserver.Version)
	case "rabbitmq":
		s := rabbitmqtest.Start(b, rabbitmqtest.Options{})
		props, err := rabbitmqServerProps(s.URL)
		if err != nil {
			b.Fatal(err)
		}
		return bench.RabbitMQ{URL: s.URL}, props,
			fmt.Sprintf("rabbitmq-server %s (a durable queue per run, bound to a fanout exchange named like the topic, consumed with automatic acks), Debezium Server %s",
				rabbitmqVersion(s.URL), dbzserver.Version)
	case "redis":
		// Redis's own default for its append-only file: fsync every
		// second, off the path of a write.
		s := redistest.Start(b, "--appendfsync", "everysec")
		return bench.Redis{Address: s.Addr},
			map[string]string{"debezium.sink.type": sink, "debezium.sink.redis.address": s.Addr,
				// The compact default writes the key and the payload
				// alone: the event id, in the outbox router's id header,
				// reaches an entry only in the extended format.
				"debezium.sink.redis.message.format": "extended"},
			fmt.Sprintf("redis-server %s (append-only file, fsync every second; a stream per run, read with XREAD BLOCK), Debezium Server %s",
				redisVersion(s), dbzserver.Version)
	}
	b.Fatalf("-sink %q: kafka, nats-jetstream, rabbitmq or redis", sink)
	return nil, nil, ""
}

// rabbitmqServerProps are Debezium Server's settings for its rabbitmq
// sink on the server of amqpURL, as amqp-client's
// ConnectionFactoryConfigurator takes them.
func rabbitmqServerProps(amqpURL string) (map[string]string, error) {
	u, err := amqp.ParseURI(amqpURL)
	if err != nil {
		return nil, err
	}
	const p = "debezium.sink.rabbitmq.connection."
	return map[string]string{
		"debezium.sink.type": "rabbitmq",
		p + "host":           u.Host,
		p + "port":           strconv.Itoa(u.Port),
		p + "username":       u.Username,
		p + "password":       u.Password,
		p + "virtual.host":   u.Vhost,
	}, nil
}

// debeziumServer is Debezium Server with the sink sinkProps configure and
// the outbox router at its defaults as a bench.System: a server per run,
// streaming the run's slot, warmed up before it is measured (its JVM
// starts with the run, where a user's has long been running).
func debeziumServer(dbURL string, sinkProps map[string]string, name string, extra map[string]string) bench.System {
	return bench.System{Name: name, Warmup: *warmup, Start: func(ctx context.Context, run bench.SystemRun) (bench.Running, error) {
		u, err := url.Parse(dbURL)
		if err != nil {
			return nil, err
		}
		props := map[string]string{
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
		for _, m := range []map[string]string{sinkProps, extra} {
			for k, v := range m {
				props[k] = v
			}
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

// rabbitmqVersion is the server's version, as it tells a client.
func rabbitmqVersion(amqpURL string) string {
	c, err := amqp.Dial(amqpURL)
	if err != nil {
		return "?"
	}
	defer c.Close()
	if v, ok := c.Properties["version"].(string); ok {
		return v
	}
	return "?"
}

// redisVersion is the server's redis_version.
func redisVersion(s *redistest.Server) string {
	info, err := s.Client().Info(context.Background(), "server").Result()
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "?"
}

// natsVersion is the version of the nats-server bin, as it prints it.
func natsVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(strings.TrimPrefix(string(out), "nats-server: "))
}
