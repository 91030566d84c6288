package sink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// limitLookup bounds asking the broker for a topic's limit. The first
// record of each topic waits for it, and a relay renews its lease between
// records: a lookup as long as the lease's time to live let the lease lapse
// while the broker was away (nemesis seed 39: 5 s against a 5 s lease, and
// the other relay took over and sent the batch again).
const limitLookup = time.Second

// limitRetry is how long a topic whose limit could not be read uses the
// configured limit before the broker is asked again.
const limitRetry = time.Minute

// topicLimit is the largest record a topic accepts, as learned.
type topicLimit struct {
	max     int
	retryAt time.Time // zero once the broker answered
}

// limits are the topics' maximum message sizes, as learned from the
// broker: read on every record, written once per topic (copy on write).
type limits struct {
	c       *client
	max     int // the configured maximum
	learned atomic.Pointer[map[string]topicLimit]
	mu      sync.Mutex     // one lookup at a time; serializes writers
	lookups sync.WaitGroup // lookups that outlived their wait
	written *writtenTopics // each topic looked up is one written to (hanging.go)
}

func newLimits(c *client, max int, written *writtenTopics) *limits {
	l := &limits{c: c, max: max, written: written}
	l.learned.Store(&map[string]topicLimit{})
	return l
}

// forget drops what was learned, so that it is read again.
func (l *limits) forget() {
	l.mu.Lock()
	l.learned.Store(&map[string]topicLimit{})
	l.mu.Unlock()
}

// Size is an upper bound of a record's encoded size in a batch of its own,
// which is what the broker compares with its message.max.bytes.
func Size(r *kgo.Record) int {
	const batchOverhead, recordOverhead, headerOverhead = 61, 21, 10
	n := batchOverhead + recordOverhead + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += headerOverhead + len(h.Key) + len(h.Value)
	}
	return n
}

// cached is a topic's limit as known now, without asking anyone.
func (l *limits) cached(topic string) int {
	if t, ok := (*l.learned.Load())[topic]; ok {
		return t.max
	}
	return l.max
}

// get is the largest record topic accepts: the configured maximum, or
// the broker's limit for the topic when that is lower. The broker is asked
// when the topic is first used (and again a minute after it could not
// answer); every other call is a map read.
func (l *limits) get(ctx context.Context, topic string) int {
	t, ok := (*l.learned.Load())[topic]
	if ok && (t.retryAt.IsZero() || time.Now().Before(t.retryAt)) {
		return t.max
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := (*l.learned.Load())[topic]; ok && (t.retryAt.IsZero() || time.Now().Before(t.retryAt)) {
		return t.max
	}
	l.written.add(topic)
	t = topicLimit{max: l.max}
	broker, err := l.lookup(ctx, topic)
	switch {
	case err != nil:
		t.retryAt = time.Now().Add(limitRetry)
		l.c.log.Warn("kafka: cannot read the topic's maximum message size; using --max-message-bytes until it can be read",
			"topic", topic, "max_message_bytes", l.max, "err", err)
	case broker > 0 && broker < l.max:
		t.max = broker
		l.c.log.Info("kafka: the topic accepts smaller records than --max-message-bytes; larger ones are dead-lettered",
			"topic", topic, "max_message_bytes", broker)
	}
	next := make(map[string]topicLimit, len(*l.learned.Load())+1)
	for name, v := range *l.learned.Load() {
		next[name] = v
	}
	next[topic] = t
	l.learned.Store(&next)
	return t.max
}

// lookup is brokerLimit within limitLookup: franz-go waits out a
// broker that takes the connection and never answers (10 s, its request
// overhead), whatever the request's context says. The lookup finishes in
// the background then; Close waits for it.
func (l *limits) lookup(ctx context.Context, topic string) (int, error) {
	lctx, cancel := context.WithTimeout(ctx, limitLookup)
	defer cancel()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	l.lookups.Add(1)
	go func() {
		defer l.lookups.Done()
		n, err := l.brokerLimit(lctx, topic)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		return r.n, r.err
	case <-lctx.Done():
		return 0, fmt.Errorf("no answer within %v: %w", limitLookup, lctx.Err())
	}
}

// brokerLimit reads the topic's max.message.bytes, or the broker's
// message.max.bytes for a topic that does not exist yet (it is created
// with that default); 0 when neither is reported.
func (l *limits) brokerLimit(ctx context.Context, topic string) (int, error) {
	adm := kadm.NewClient(l.c.load())
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return 0, err
	}
	rc, err := rcs.On(topic, nil)
	if err == nil && rc.Err == nil {
		// Set on the topic itself: that is the limit. Otherwise the
		// broker's message.max.bytes is (kfake reports Kafka's default
		// for the topic then, not the broker's setting).
		if n, ok := configInt(rc.Configs, "max.message.bytes", kmsg.ConfigSourceDynamicTopicConfig); ok {
			return n, nil
		}
	} else if rc.Err != nil && !errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
		return 0, rc.Err
	}
	brokers, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		return 0, err
	}
	for _, b := range brokers {
		if b.Err != nil {
			return 0, b.Err
		}
		if n, ok := configInt(b.Configs, "message.max.bytes"); ok {
			return n, nil
		}
	}
	if n, ok := configInt(rc.Configs, "max.message.bytes"); ok {
		return n, nil
	}
	return 0, nil
}

// configInt reads a positive integer config, from one of sources if any
// are given.
func configInt(cs []kadm.Config, key string, sources ...kmsg.ConfigSource) (int, bool) {
	for _, c := range cs {
		if c.Key == key && c.Value != nil && (len(sources) == 0 || slices.Contains(sources, c.Source)) {
			n, err := strconv.Atoi(*c.Value)
			return n, err == nil && n > 0
		}
	}
	return 0, false
}
