package sink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
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

// cachedLimit is a topic's limit as known now, without asking anyone.
func (k *Kafka) cachedLimit(topic string) int {
	if l, ok := (*k.limits.Load())[topic]; ok {
		return l.max
	}
	return k.max
}

// Limit is the largest record topic accepts: the configured maximum, or
// the broker's limit for the topic when that is lower. The broker is asked
// when the topic is first used (and again a minute after it could not
// answer); every other call is a map read.
func (k *Kafka) Limit(ctx context.Context, topic string) int {
	l, ok := (*k.limits.Load())[topic]
	if ok && (l.retryAt.IsZero() || time.Now().Before(l.retryAt)) {
		return l.max
	}
	k.lookupMu.Lock()
	defer k.lookupMu.Unlock()
	if l, ok := (*k.limits.Load())[topic]; ok && (l.retryAt.IsZero() || time.Now().Before(l.retryAt)) {
		return l.max
	}
	k.rememberTopic(topic)
	l = topicLimit{max: k.max}
	broker, err := k.lookupLimit(ctx, topic)
	switch {
	case err != nil:
		l.retryAt = time.Now().Add(limitRetry)
		k.log.Warn("kafka: cannot read the topic's maximum message size; using --max-message-bytes until it can be read",
			"topic", topic, "max_message_bytes", k.max, "err", err)
	case broker > 0 && broker < k.max:
		l.max = broker
		k.log.Info("kafka: the topic accepts smaller records than --max-message-bytes; larger ones are dead-lettered",
			"topic", topic, "max_message_bytes", broker)
	}
	next := make(map[string]topicLimit, len(*k.limits.Load())+1)
	for t, v := range *k.limits.Load() {
		next[t] = v
	}
	next[topic] = l
	k.limits.Store(&next)
	return l.max
}

// lookupLimit is brokerLimit within limitLookup: franz-go waits out a
// broker that takes the connection and never answers (10 s, its request
// overhead), whatever the request's context says. The lookup finishes in
// the background then; Close waits for it.
func (k *Kafka) lookupLimit(ctx context.Context, topic string) (int, error) {
	lctx, cancel := context.WithTimeout(ctx, limitLookup)
	defer cancel()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	k.lookups.Add(1)
	go func() {
		defer k.lookups.Done()
		n, err := k.brokerLimit(lctx, topic)
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
func (k *Kafka) brokerLimit(ctx context.Context, topic string) (int, error) {
	adm := kadm.NewClient(k.client.Load())
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
