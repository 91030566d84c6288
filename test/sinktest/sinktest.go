// Package sinktest holds what the tests of the brokers without Kafka's
// client (kinesis, sqs, pulsar) do alike: records handed to a publisher
// and their outcomes, in the order the promises ran.
package sinktest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Producer is a publisher's row path: Produce, then Flush.
type Producer interface {
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) error
	Flush(ctx context.Context) error
}

// Outcomes are promises' answers, in the order they ran.
type Outcomes struct {
	mu   sync.Mutex
	recs []*kgo.Record
	errs []error
}

// Promise is a promise that keeps its answer.
func (o *Outcomes) Promise(r *kgo.Record, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.recs, o.errs = append(o.recs, r), append(o.errs, err)
}

// Got is what the promises answered so far.
func (o *Outcomes) Got() ([]*kgo.Record, []error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.recs), slices.Clone(o.errs)
}

// Produce hands recs to p, waits until each has its outcome, and returns
// them in the order the promises ran; it fails the test when Produce or
// Flush does, or after a minute.
func Produce(t *testing.T, p Producer, recs []*kgo.Record) ([]*kgo.Record, []error) {
	t.Helper()
	o := &Outcomes{}
	ProduceTo(t, p, o, recs)
	return o.Got()
}

// ProduceTo is Produce with the outcomes kept in o.
func ProduceTo(t *testing.T, p Producer, o *Outcomes, recs []*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, r := range recs {
		if err := p.Produce(ctx, r, o.Promise); err != nil {
			t.Fatalf("Produce: %v", err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}
