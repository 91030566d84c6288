package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Redis is a Redis server as a Target: each run's events are the entries
// of the stream named like its topic, which the relay creates with its
// first XADD.
type Redis struct{ Address string }

func (r Redis) Name() string    { return "redis" }
func (r Redis) Partitions() int { return 1 }
func (r Redis) Relay() (args, env []string) {
	return []string{"--sink", "redis", "--redis-address", r.Address}, nil
}

func (r Redis) client() *redis.Client {
	// RESP2 and no CLIENT SETINFO, which Redis before 7.2 does not have,
	// as the relay's client.
	return redis.NewClient(&redis.Options{Addr: r.Address, Protocol: 2, DisableIdentity: true,
		ClientName: "pgoutbox-bench", DialTimeout: 10 * time.Second})
}

// Prepare removes the run's streams, should an earlier bench have left
// streams of the same names.
func (r Redis) Prepare(ctx context.Context, topic, deadLetters string) error {
	c := r.client()
	defer c.Close()
	if err := c.Del(ctx, topic, deadLetters).Err(); err != nil {
		return fmt.Errorf("redis: removing %s: %w", topic, err)
	}
	return nil
}

// redisBlock is how long one XREAD waits for entries.
const redisBlock = time.Second

// Consume reads the run's stream from its first entry with XREAD BLOCK,
// each entry stamped with the time its reply arrived. Stop deletes the
// stream (dead letters are in a stream of their own, which stays).
func (r Redis) Consume(topic string, fn func(id string, partition int32, at time.Time)) (func(), error) {
	c := r.client()
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.Ping(ctx).Err(); err != nil {
		cancel()
		c.Close()
		return nil, fmt.Errorf("redis: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		last := "0"
		for ctx.Err() == nil {
			res, err := c.XRead(ctx, &redis.XReadArgs{Streams: []string{topic, last}, Count: 1000, Block: redisBlock}).Result()
			at := time.Now()
			if errors.Is(err, redis.Nil) {
				continue // nothing within redisBlock
			}
			if err != nil {
				// Stopped, or the server is away for a moment: the
				// checker counts what never arrives.
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			for _, s := range res {
				for _, m := range s.Messages {
					last = m.ID
					if id := redisEventID(m.Values); id != "" {
						fn(id, 0, at)
					}
				}
			}
		}
	}()
	return func() {
		cancel()
		c.Close() // ends an XREAD that blocks
		<-done
		d := r.client()
		defer d.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Del(ctx, topic).Err()
	}, nil
}

// redisEventID is the event id of a stream entry as Debezium Server's
// redis sink writes it: in the compact format, one field (the key)
// holding the value, a structured CloudEvent; in the extended format, the
// fields key and value and each header upper-cased, so Debezium's id
// header is field ID. eventID takes it from there.
func redisEventID(fields map[string]any) string {
	var hs []kgo.RecordHeader
	var value string
	for k, v := range fields {
		s, _ := v.(string)
		switch {
		case len(fields) == 1, k == "value":
			value = s
		case strings.EqualFold(k, "id"):
			hs = append(hs, kgo.RecordHeader{Key: "id", Value: []byte(s)})
		}
	}
	return eventID(hs, []byte(value))
}
