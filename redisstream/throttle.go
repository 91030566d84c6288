package redisstream

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// throttle pauses writing before the server's memory would fill, as
// Debezium Server's RedisMemoryThreshold does: the limit is the server's
// maxmemory, or memory.limit.mb where the server sets none or a larger
// one; none (maxmemory 0) is no check. Before a batch, it reads INFO
// memory and waits, WaitRetryDelay at a time, while used memory, what
// was written since that reading did not show yet, and the first entry's
// size times buffer.fill.rate reach the limit.
type throttle struct {
	limit     int64 // memory.limit.mb in bytes
	fillRate  int64
	delay     time.Duration
	prevUsed  int64
	accounted int64 // written since used memory last moved
	every     time.Duration
	lastCheck time.Time
	max       int64 // the last reading's limit; 0: none
}

func newThrottle(cfg Config) *throttle {
	return &throttle{limit: int64(cfg.MemoryLimitMB) << 20, fillRate: int64(cfg.BufferFillRate), delay: cfg.WaitRetryDelay,
		every: 100 * time.Millisecond}
}

// wait returns once the batch may be written, or ctx ended. A server
// whose INFO cannot be read is not throttled.
func (t *throttle) wait(ctx context.Context, c redis.UniversalClient, batch []pending) {
	size := int64(0)
	for _, p := range batch {
		size += int64(p.e.size() + len(p.e.stream))
	}
	first := int64(batch[0].e.size() + len(batch[0].e.stream))
	for {
		// Reading INFO before every batch would double a lone event's
		// round trips: with no limit seen, once per every.
		if t.max == 0 && time.Since(t.lastCheck) < t.every {
			return
		}
		t.lastCheck = time.Now()
		used, max, ok := t.read(ctx, c)
		if !ok || max == 0 {
			t.max = 0
			return
		}
		t.max = max
		if used != t.prevUsed {
			t.prevUsed, t.accounted = used, 0
		}
		if used+t.accounted+size+first*t.fillRate < max {
			t.accounted += size
			return
		}
		select {
		case <-time.After(t.delay):
		case <-ctx.Done():
			return
		}
	}
}

// read returns used_memory and the limit that applies.
func (t *throttle) read(ctx context.Context, c redis.UniversalClient) (used, max int64, ok bool) {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, 0, false
	}
	configured := int64(-1)
	for _, line := range strings.Split(info, "\n") {
		k, v, found := strings.Cut(strings.TrimSpace(line), ":")
		if !found {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "used_memory":
			used = n
		case "maxmemory":
			configured = n
		}
	}
	if configured < 0 || t.limit > 0 && configured > t.limit {
		configured = t.limit
	}
	return used, configured, true
}
