package redisstream

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
)

// checker builds records' entries and checks them against the server on
// the producer goroutine, and keeps what it learned of the server for as
// long as the writer lasts.
type checker struct {
	client                     redis.UniversalClient
	log                        *slog.Logger
	format, nullKey, nullValue string
	maxEntryBytes              int

	// The record checked last, as it was, and its entry (producer
	// goroutine only).
	checked recordShape
	entry   entry

	// What the producer goroutine learned of the server (lookup); the
	// writer goroutine reads seen.
	mu      sync.Mutex
	maxBulk int
	seen    map[string]string // stream -> its last entry id when first met ("0-0": none)
}

func newChecker(cfg Config, client redis.UniversalClient, log *slog.Logger) *checker {
	return &checker{client: client, log: log, format: cfg.Format, nullKey: cfg.NullKey, nullValue: cfg.NullValue,
		maxEntryBytes: cfg.MaxEntryBytes, seen: map[string]string{}}
}

// check builds r's entry and checks it against the server: its size, and
// its stream's key, which must hold a stream or nothing.
func (c *checker) check(ctx context.Context, r *kgo.Record) (entry, error) {
	var e entry
	if shape := shapeOf(r); c.checked == shape {
		// The relay asks Fits, then Produce, of the same record.
		e = c.entry
	} else {
		e = entryOf(r, c.format, c.nullKey, c.nullValue)
		c.checked, c.entry = shape, e
	}
	maxBulk, err := c.lookup(ctx, e.stream)
	if err != nil {
		return e, err
	}
	if len(e.stream) > maxBulk {
		return e, &TooLargeError{Stream: e.stream, Part: "the stream's name", Size: len(e.stream), Max: maxBulk}
	}
	for i, f := range e.fields {
		if len(f) > maxBulk {
			part := "a field's name"
			if i%2 == 1 {
				part = "the value of field " + e.fields[i-1][:min(len(e.fields[i-1]), 64)]
			}
			return e, &TooLargeError{Stream: e.stream, Part: part, Size: len(f), Max: maxBulk}
		}
	}
	if m := c.maxEntryBytes; m > 0 && e.size() > m {
		return e, &TooLargeError{Stream: e.stream, Part: "the entry", Size: e.size(), Max: m}
	}
	return e, nil
}

// lookup returns the server's proto-max-bulk-len and learns stream's last
// entry, once per stream: a key of another type is a *WrongTypeError.
func (c *checker) lookup(ctx context.Context, stream string) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.maxBulk == 0 {
		// A server that refuses CONFIG (an ACL, a managed service) keeps
		// the default.
		v, err := c.client.ConfigGet(ctx, "proto-max-bulk-len").Result()
		if err != nil && !isReplyErr(err) {
			return 0, classify("", err)
		}
		c.maxBulk = defaultMaxBulk
		if n, err := strconv.Atoi(v["proto-max-bulk-len"]); err == nil && n > 0 {
			c.maxBulk = n
		}
	}
	if _, ok := c.seen[stream]; ok {
		return c.maxBulk, nil
	}
	msgs, err := c.client.XRevRangeN(ctx, stream, "+", "-", 1).Result()
	switch ce := classify(stream, err); {
	case err == nil:
	case !isReplyErr(err):
		return 0, ce
	case errors.As(ce, new(*WrongTypeError)):
		return 0, ce
	default:
		// A user whose ACL lets it add entries but not read them: a lost
		// reply cannot be looked for, and its batch is sent again.
		c.log.Warn("redis: the stream cannot be read; a batch whose reply is lost will be written again", "stream", stream, "err", err)
	}
	c.seen[stream] = "0-0"
	if len(msgs) == 1 {
		c.seen[stream] = msgs[0].ID
	}
	return c.maxBulk, nil
}

// seenID is stream's last entry id when check first met it ("0-0": none,
// "": not met).
func (c *checker) seenID(stream string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[stream]
}

// recordShape is what of a record its entry is built from, by identity:
// the relay may give Produce the record Fits refused with new parts (a
// dead letter whose large values it cut), whose entry must be built again.
type recordShape struct {
	r            *kgo.Record
	topic        string
	key, value   *byte
	nKey, nValue int
	headers      *kgo.RecordHeader
	nHeaders     int
}

func shapeOf(r *kgo.Record) recordShape {
	return recordShape{r: r, topic: r.Topic, key: first(r.Key), nKey: len(r.Key),
		value: first(r.Value), nValue: len(r.Value), headers: first(r.Headers), nHeaders: len(r.Headers)}
}

// first is s's first element, which names its backing array; nil when s
// is empty.
func first[T any](s []T) *T {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}
