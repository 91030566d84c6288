package inflight

import (
	"context"
	"time"
)

// Batch says how a broker whose requests carry several messages, each
// answered on its own (Kinesis's PutRecords, SQS's SendMessageBatch),
// writes the messages a batched Queue settles together, in order.
//
// A request holds messages of one Group (a stream, a queue) and each
// Order key at most once: an entry the broker did not write is sent
// again, alone, while the key's later messages wait, so that they are
// never written ahead of it.
type Batch[T any] struct {
	// Max is the most messages in a request; Bytes the most their Size
	// may add up to.
	Max, Bytes int
	// Group names what a message's request is for; Order its key, whose
	// messages are written in order ("" for none: a message that keeps no
	// order with the others).
	Group, Order func(T) string
	// Size is a message's share of Bytes.
	Size func(T) int
	// Send writes one request's messages. It returns the places (in
	// msgs) of those the broker did not write, with an error saying why
	// (the attempt'th), or an error alone when the broker refused the
	// request whole or did not answer.
	Send func(ctx context.Context, msgs []T, attempt int) (failed []int, err error)
	// Retries is how many times a request's unwritten messages are sent
	// before it counts as failed; between attempts a pause doubles from
	// Pause to 20 times it.
	Retries int
	Pause   time.Duration
	// Promise runs a message's promise: nil once it and every message
	// before it were written.
	Promise func(msg T, err error)
	// Failed runs when a request failed, before the promises that say so.
	Failed func()
}

// Settle writes items in requests and runs their promises in order, each
// as soon as it and every item before it were written. After a request
// failed, the items it did not write get its error and every other item
// not yet promised gets after (written or not, it would overtake one that
// was not).
func (b Batch[T]) Settle(ctx context.Context, items []T, after error) {
	written := make([]bool, len(items))
	taken := make([]bool, len(items))
	next := 0 // the first item whose promise has not run
	for next < len(items) {
		req := b.request(items, taken, next)
		err := b.write(ctx, items, req, written)
		for next < len(items) && written[next] {
			b.Promise(items[next], nil)
			next++
		}
		if err == nil {
			continue
		}
		b.Failed()
		inReq := make([]bool, len(items))
		for _, i := range req {
			inReq[i] = true
		}
		for i := next; i < len(items); i++ {
			if inReq[i] && !written[i] {
				b.Promise(items[i], err)
			} else {
				b.Promise(items[i], after)
			}
		}
		return
	}
}

// request picks the next request's items: from the first not yet taken,
// those of its group in order, each order key once, while the request
// has room. An item of a key already in the request stays for a later
// one, and so do the key's items after it.
func (b Batch[T]) request(items []T, taken []bool, from int) []int {
	for taken[from] {
		from++
	}
	group := b.Group(items[from])
	keys := map[string]bool{}
	var out []int
	size := 0
	for i := from; i < len(items) && len(out) < b.Max; i++ {
		if taken[i] || b.Group(items[i]) != group {
			continue
		}
		key := b.Order(items[i])
		if key != "" && keys[key] {
			continue
		}
		n := b.Size(items[i])
		if len(out) > 0 && size+n > b.Bytes {
			break
		}
		size += n
		if key != "" {
			keys[key] = true
		}
		taken[i] = true
		out = append(out, i)
	}
	return out
}

// write sends the items of req, marking each in written once the broker
// wrote it, and sends those it did not write again until all are or
// Retries attempts have failed.
func (b Batch[T]) write(ctx context.Context, items []T, req []int, written []bool) error {
	pause := b.Pause
	for attempt := 1; ; attempt++ {
		msgs := make([]T, len(req))
		for j, i := range req {
			msgs[j] = items[i]
		}
		failed, err := b.Send(ctx, msgs, attempt)
		if err != nil && failed == nil {
			return err
		}
		left := make([]int, 0, len(failed))
		isFailed := make(map[int]bool, len(failed))
		for _, j := range failed {
			isFailed[j] = true
			left = append(left, req[j])
		}
		for j, i := range req {
			if !isFailed[j] {
				written[i] = true
			}
		}
		if len(left) == 0 {
			return nil
		}
		if attempt >= b.Retries {
			return err
		}
		req = left
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return ctx.Err()
		}
		pause = min(2*pause, 20*b.Pause)
	}
}
