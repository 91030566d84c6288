package relay

import (
	"context"
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/sink"
)

// fakeSink is a Sink whose acks the test gives, one record at a time and
// in any order, as a broker's acks arrive across partitions. It keeps
// franz-go's rules that the row path relies on: a record over the limit is
// refused before it is handed over, promises of one partition run in
// produce order (a failed record fails the partition's later records with
// it), and after AbortBuffered everything buffered fails and Produce
// answers sink.ErrHalted. Every record is on partition 0 of its topic.
type fakeSink struct {
	max int // the largest record accepted (sink.Size)
	// autoAck acks each record as it is produced, and keeps none.
	autoAck bool

	mu       sync.Mutex
	buffered []*fakeRecord // handed over, neither acked nor failed
	halted   bool
	// delivered are the records acked, in ack order.
	delivered []*kgo.Record
}

type fakeRecord struct {
	rec     *kgo.Record
	promise func(*kgo.Record, error)
}

var _ Sink = (*fakeSink)(nil)

func newFakeSink() *fakeSink { return &fakeSink{max: 1 << 20} }

func (f *fakeSink) Fits(_ context.Context, rec *kgo.Record) error {
	if n := sink.Size(rec); n > f.max {
		return &sink.TooLargeError{Topic: rec.Topic, Size: n, Max: f.max}
	}
	return nil
}

func (f *fakeSink) Produce(ctx context.Context, rec *kgo.Record, promise func(*kgo.Record, error)) error {
	if err := f.Fits(ctx, rec); err != nil {
		return err
	}
	if f.autoAck {
		promise(rec, nil)
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.halted {
		return sink.ErrHalted
	}
	f.buffered = append(f.buffered, &fakeRecord{rec: rec, promise: promise})
	return nil
}

// AbortBuffered fails what is buffered, as franz-go's abort does, after
// the promise that called it returned.
func (f *fakeSink) AbortBuffered() {
	f.mu.Lock()
	f.halted = true
	f.mu.Unlock()
	go f.failAll(kgo.ErrAborting)
}

func (f *fakeSink) failAll(err error) {
	f.mu.Lock()
	recs := f.buffered
	f.buffered = nil
	f.mu.Unlock()
	for _, r := range recs {
		r.promise(r.rec, err)
	}
}

// Flush acks what is buffered, in produce order.
func (f *fakeSink) Flush(context.Context) error {
	for f.pending() > 0 {
		f.ack(0)
	}
	return nil
}

func (f *fakeSink) pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.buffered)
}

// take removes the i-th buffered record (in produce order).
func (f *fakeSink) take(i int) *fakeRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.buffered[i]
	f.buffered = append(f.buffered[:i], f.buffered[i+1:]...)
	return r
}

// ack acknowledges the i-th buffered record.
func (f *fakeSink) ack(i int) {
	r := f.take(i)
	f.mu.Lock()
	f.delivered = append(f.delivered, r.rec)
	f.mu.Unlock()
	r.promise(r.rec, nil)
}

// fail fails the i-th buffered record with err, and with it every later
// buffered record of its topic (its partition), as franz-go does.
func (f *fakeSink) fail(i int, err error) {
	r := f.take(i)
	f.mu.Lock()
	var same []*fakeRecord
	rest := f.buffered[:0]
	for j, b := range f.buffered {
		if j >= i && b.rec.Topic == r.rec.Topic {
			same = append(same, b)
		} else {
			rest = append(rest, b)
		}
	}
	f.buffered = rest
	f.mu.Unlock()
	r.promise(r.rec, err)
	for _, b := range same {
		b.promise(b.rec, err)
	}
}

// acked are the records delivered, in ack order, as
// "topic/key".
func (f *fakeSink) acked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.delivered))
	for i, r := range f.delivered {
		out[i] = r.Topic + "/" + string(r.Key)
	}
	return out
}

// The rest of a broker's Sink, which the row path does not use.
func (f *fakeSink) Resume()                    {}
func (f *fakeSink) Renew() error               { return nil }
func (f *fakeSink) Buffered() int64            { return int64(f.pending()) }
func (f *fakeSink) Ping(context.Context) error { return nil }
func (f *fakeSink) Close()                     {}

// fakeOpener passes Config.Validate; the unit tests build their sessions
// on a fake sink instead of opening one.
type fakeOpener struct{}

func (fakeOpener) Open(SinkUse, *slog.Logger) (Broker, error) {
	return Broker{Sink: newFakeSink()}, nil
}
func (fakeOpener) Validate(Delivery) error { return nil }
func (fakeOpener) Name() string            { return "fake" }
