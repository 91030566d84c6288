package sink

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// client is the franz-go client that the parts of a Kafka sink share:
// the producer's, which Renew replaces, and the options a reader of its
// own is built from.
type client struct {
	cur  atomic.Pointer[kgo.Client]
	opts []kgo.Opt
	log  *slog.Logger
	// hook, when set, is added to the producer's client (a
	// transactional producer's failure hook, hanging.go), not to readers.
	hook func(life context.Context) kgo.Hook
	// life ends when Close begins, stopCur when the client is replaced:
	// what the hook starts stops then. stopCur is used where the client is
	// replaced, by one goroutine.
	life    context.Context
	stop    context.CancelFunc
	stopCur context.CancelFunc
}

func (c *client) load() *kgo.Client { return c.cur.Load() }

// next is a new producer client: the options and the hook. What the hook
// starts stops when the next client replaces this one or Close begins.
func (c *client) next() (*kgo.Client, error) {
	if c.hook == nil {
		return kgo.NewClient(c.opts...)
	}
	life, stop := context.WithCancel(c.life)
	cl, err := kgo.NewClient(append(slices.Clone(c.opts), kgo.WithHooks(c.hook(life)))...)
	if err != nil {
		stop()
		return nil, err
	}
	if c.stopCur != nil {
		c.stopCur()
	}
	c.stopCur = stop
	return cl, nil
}

// readOpts are the client options a reader needs: the brokers and how to
// reach them, nothing of the producer's.
func (c *client) readOpts() []kgo.Opt {
	var out []kgo.Opt
	for _, o := range c.opts {
		switch o.(type) {
		case kgo.ProducerOpt:
			continue
		}
		out = append(out, o)
	}
	return out
}

// scan reads partition of topic from offset from to end (exclusive), every
// record and transaction marker (read_uncommitted), and hands each to fn
// until fn returns false.
func (c *client) scan(ctx context.Context, topic string, partition int32, from, end int64, fn func(*kgo.Record) bool) error {
	if from >= end {
		return nil
	}
	opts := []kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.KeepControlRecords(),
	}
	cl, err := kgo.NewClient(append(c.readOpts(), opts...)...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("kafka: reading %s: %w", topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return fmt.Errorf("kafka: reading %s: %w", topic, ferr)
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if done || r.Offset >= end {
				done = true
				return
			}
			if !fn(r) || r.Offset >= end-1 {
				done = true
			}
		})
		if done {
			return nil
		}
	}
}
