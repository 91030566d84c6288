package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/pgoutbox/pgoutbox/test/redistest"
)

// TestRedisTarget runs the Redis target against a real redis-server:
// Prepare removes what an earlier bench left in the run's streams, and
// entries written as the relays write them (compact and extended, before
// and after Consume starts) all reach the consumer, each once with its
// event id; stop deletes the run's stream.
func TestRedisTarget(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client()
	ctx := context.Background()
	target := Redis{Address: s.Addr}
	const topic, dlq = "outbox.event.bench_target", "bench_target.dlq"
	for _, stream := range []string{topic, dlq} {
		if err := c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []string{"agg-0", `{"id":"left-over"}`}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := target.Prepare(ctx, topic, dlq); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, topic, dlq).Val(); n != 0 {
		t.Fatalf("%d of the run's streams left after Prepare", n)
	}

	checkConsume(t, target, topic, func(i int) string {
		id := testEventID(i)
		if err := c.XAdd(ctx, &redis.XAddArgs{Stream: topic, Values: entryForms(id, i)[i%2]}).Err(); err != nil {
			t.Fatal(err)
		}
		return id
	})
	if n, err := c.Exists(ctx, topic).Result(); err != nil || n != 0 {
		t.Errorf("stream %s after stop: %d keys (%v), want it deleted", topic, n, err)
	}
}

// entryForms are an event as each relay the bench measures writes it, as
// XADD's field and value pairs: pgoutbox's compact entry (the key holding
// the structured CloudEvent) and Debezium Server's extended one (key,
// value and the headers upper-cased, the outbox router's id among them,
// JSON in its schema envelope, and a value that holds an "id" of its own).
func entryForms(id string, i int) [][]string {
	key := fmt.Sprintf("agg-%d", i)
	return [][]string{
		{key, `{"specversion":"1.0","id":"` + id + `","source":"/bench","type":"t","data":{"id":"not-this"}}`},
		{"key", `{"schema":{"type":"string","optional":false},"payload":"` + key + `"}`,
			"value", `{"schema":{"type":"string","optional":true},"payload":"{\"id\":\"not-this\"}"}`,
			"ID", `{"schema":{"type":"string","optional":false},"payload":"` + id + `"}`,
			"__DEBEZIUM.CONTEXT.TASKID", `{"schema":{"type":"string","optional":false},"payload":"0"}`},
	}
}
