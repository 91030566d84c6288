package nemesis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Reader reads the event topic and the dead-letter topic from their start
// for the whole run, as a consumer with isolation.level=read_committed
// does: records of Kafka transactions that aborted, or are still open, are
// not delivered. That is the consumer exactly-once is promised to; under
// at-least-once, where the relay uses no transactions, it reads the same
// as read_uncommitted.
type Reader struct {
	cl         *kgo.Client
	adm        *kadm.Client
	topics     []string
	deadLetter string

	mu       sync.Mutex
	recs     []Record
	ids      map[string]bool
	next     map[string]map[int32]int64 // topic -> partition -> offset after the last one read
	progress time.Time                  // when an id was first read, last
	err      error                      // the last decoding error

	cancel context.CancelFunc
	done   chan struct{}
}

// Isolation is the reader's isolation level.
var Isolation = kgo.ReadCommitted()

// NewReader starts reading topic and deadLetter.
func NewReader(brokers []string, topic, deadLetter string) (*Reader, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topic, deadLetter),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(Isolation),
		// The commit and abort markers move the position past a
		// transaction, so that CatchUp can tell it has read to the end.
		kgo.KeepControlRecords(),
		// The topics may not exist yet: notice them soon once they do.
		kgo.MetadataMinAge(250*time.Millisecond),
	)
	if err != nil {
		return nil, fmt.Errorf("nemesis: reader: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Reader{cl: cl, adm: kadm.NewClient(cl), topics: []string{topic, deadLetter}, deadLetter: deadLetter,
		ids: map[string]bool{}, next: map[string]map[int32]int64{}, progress: time.Now(),
		cancel: cancel, done: make(chan struct{})}
	go r.run(ctx)
	return r, nil
}

func (r *Reader) run(ctx context.Context) {
	defer close(r.done)
	for ctx.Err() == nil {
		fs := r.cl.PollFetches(ctx)
		var batch []Record
		var ends []Record
		var decodeErr error
		now := time.Now()
		fs.EachRecord(func(kr *kgo.Record) {
			ends = append(ends, Record{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset})
			if kr.Attrs.IsControl() {
				return
			}
			rec, err := decode(kr, kr.Topic == r.deadLetter)
			if err != nil {
				decodeErr = err
				return
			}
			rec.Read = now
			batch = append(batch, rec)
		})
		r.mu.Lock()
		for _, e := range ends {
			if r.next[e.Topic] == nil {
				r.next[e.Topic] = map[int32]int64{}
			}
			r.next[e.Topic][e.Partition] = max(r.next[e.Topic][e.Partition], e.Offset+1)
		}
		for _, rec := range batch {
			r.recs = append(r.recs, rec)
			if !r.ids[rec.ID] {
				r.ids[rec.ID] = true
				r.progress = time.Now()
			}
		}
		if decodeErr != nil {
			r.err = decodeErr
		}
		r.mu.Unlock()
	}
}

// decode reads the event id: a CloudEvent's id, or a dead letter's id
// header.
func decode(kr *kgo.Record, deadLetter bool) (Record, error) {
	rec := Record{Key: string(kr.Key), Topic: kr.Topic, DeadLetter: deadLetter, Partition: kr.Partition, Offset: kr.Offset, Time: kr.Timestamp}
	if deadLetter {
		for _, h := range kr.Headers {
			if h.Key == "id" {
				rec.ID = string(h.Value)
			}
		}
	} else {
		var ev struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(kr.Value, &ev); err != nil {
			return rec, fmt.Errorf("nemesis: %s[%d]@%d is not a CloudEvent: %w", kr.Topic, kr.Partition, kr.Offset, err)
		}
		rec.ID = ev.ID
	}
	if rec.ID == "" {
		return rec, fmt.Errorf("nemesis: %s[%d]@%d carries no event id", kr.Topic, kr.Partition, kr.Offset)
	}
	return rec, nil
}

// Seen tells how many distinct ids were read, and when the last new one
// arrived.
func (r *Reader) Seen() (int, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ids), r.progress
}

// Has tells whether id was read.
func (r *Reader) Has(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ids[id]
}

// Records are the records read so far.
func (r *Reader) Records() []Record { return r.RecordsFrom(0) }

// RecordsFrom are the records read so far from the i-th on.
func (r *Reader) RecordsFrom(i int) []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i >= len(r.recs) {
		return nil
	}
	return append([]Record(nil), r.recs[i:]...)
}

// Err is the last record that could not be decoded.
func (r *Reader) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// CatchUp waits until the reader has read everything a read_committed
// consumer can see now: each partition up to its last stable offset.
func (r *Reader) CatchUp(ctx context.Context) error {
	var stable kadm.ListedOffsets
	for {
		var err error
		stable, err = r.adm.ListCommittedOffsets(ctx, r.topics...)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nemesis: listing the last stable offsets: %w", errors.Join(err, ctx.Err()))
		case <-time.After(500 * time.Millisecond):
		}
	}
	for {
		behind := ""
		r.mu.Lock()
		stable.Each(func(o kadm.ListedOffset) {
			if o.Err != nil || o.Offset <= 0 || behind != "" {
				return
			}
			if r.next[o.Topic][o.Partition] < o.Offset {
				behind = fmt.Sprintf("%s[%d] at %d of %d", o.Topic, o.Partition, r.next[o.Topic][o.Partition], o.Offset)
			}
		})
		r.mu.Unlock()
		if behind == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nemesis: reading to the end: %s: %w", behind, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close stops reading.
func (r *Reader) Close() {
	r.cancel()
	<-r.done
	r.cl.Close()
}
