package bench

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// checkConsume has target consume topic while write puts events 0 to 299
// on it, half before Consume starts and half after, and checks that every
// id write returned arrives once, from partition 0, and nothing else does.
func checkConsume(t *testing.T, target Target, topic string, write func(i int) (id string)) {
	t.Helper()
	want := map[string]bool{}
	put := func(from, to int) {
		for i := from; i < to; i++ {
			want[write(i)] = true
		}
	}
	got := make(chan string, 1000)
	put(0, 150) // waiting for a consumer
	stop, err := target.Consume(topic, func(id string, partition int32, _ time.Time) {
		if partition != 0 {
			t.Errorf("event %s from partition %d", id, partition)
		}
		got <- id
	})
	if err != nil {
		t.Fatal(err)
	}
	put(150, 300)
	seen := map[string]int{}
	timeout := time.After(30 * time.Second)
	for total := 0; total < len(want); total++ {
		select {
		case id := <-got:
			seen[id]++
		case <-timeout:
			stop()
			t.Fatalf("%d of %d events consumed after 30 s", total, len(want))
		}
	}
	stop()
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("event %s consumed %d times", id, seen[id])
		}
	}
	if len(seen) != len(want) || len(got) != 0 {
		t.Errorf("%d ids consumed, want %d; %d more after: %v", len(seen), len(want), len(got), seen)
	}
}

// testEventID is event i's id, a uuid as the bench's.
func testEventID(i int) string { return fmt.Sprintf("00000000-0000-0000-0000-%012d", i) }

// The relay's command line, which ps shows to every user, carries no URL:
// the database's and the broker's, with their passwords, go through the
// environment, where pgoutbox run reads them.
func TestRelayCommandHidesURLs(t *testing.T) {
	for _, target := range []Target{
		Kafka{Brokers: []string{"127.0.0.1:9092"}},
		NATS{URL: "nats://bench:natssecret@127.0.0.1:4222"},
		RabbitMQ{URL: "amqp://bench:amqpsecret@127.0.0.1:5672/"},
		Redis{Address: "127.0.0.1:6379"},
	} {
		t.Run(target.Name(), func(t *testing.T) {
			cfg := Config{DatabaseURL: "postgres://bench:pgsecret@127.0.0.1:5432/db", Table: "public.outbox", Target: target}
			args, env := relayCommand(cfg, "bench_wal_x", "wal", 0, exactlyOnce)
			for _, a := range args {
				if strings.Contains(a, "secret") || strings.Contains(a, "://") {
					t.Errorf("argument %q on the command line", a)
				}
			}
			want := []string{"PGOUTBOX_DATABASE_URL=postgres://bench:pgsecret@127.0.0.1:5432/db"}
			switch tg := target.(type) {
			case NATS:
				want = append(want, "PGOUTBOX_NATS_URL="+tg.URL)
			case RabbitMQ:
				want = append(want, "PGOUTBOX_RABBITMQ_URL="+tg.URL)
			}
			if !slices.Equal(env, want) {
				t.Errorf("environment %q, want %q", env, want)
			}
			if !slices.Contains(args, "--delivery") || !slices.Contains(args, "--slot") {
				t.Errorf("arguments %q lack the run's own flags", args)
			}
		})
	}
}
