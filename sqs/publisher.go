package sqs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/awsauth"
	"github.com/pgoutbox/pgoutbox/awsbatch"
	"github.com/pgoutbox/pgoutbox/inflight"
)

// Publisher sends records to the queue. One goroutine produces; the
// requests and promises run on the queue's, one request at a time.
type Publisher struct {
	cfg    Config
	log    *slog.Logger
	client *sdk.Client
	// Link is the queue of records between the relay's sessions, and the
	// halt after a failed request: AbortBuffered, Resume, Flush, Buffered,
	// Renew, Close.
	inflight.Link[inflight.BatchConn[pending], *inflight.BatchConn[pending]]

	mu      sync.Mutex
	limits  map[string]int    // each queue's MaximumMessageSize, once read
	refused awsbatch.Refusals // messages SQS refused, blaming them
}

// pending is a record waiting to be sent.
type pending struct {
	rec     *kgo.Record
	promise func(*kgo.Record, error)
}

// New creates a publisher; it sends nothing until the first record.
func New(cfg Config, log *slog.Logger) (*Publisher, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := sdk.Options{Region: cfg.Region, Credentials: cfg.Credentials}
	if cfg.Endpoint != "" {
		opts.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	return &Publisher{cfg: cfg, log: log, client: sdk.New(opts), limits: map[string]int{}}, nil
}

func (p *Publisher) dial(context.Context) (*inflight.BatchConn[pending], error) {
	// A settle takes what waits, several requests' worth at most.
	return inflight.NewBatchConn(p.cfg.MaxPending, 8*MaxBatch, p.batch(), errClosed, errAfterFailure), nil
}

// target is the queue r goes to: the queue, or for a dead letter the
// dead-letter queue ("" when there is none).
func (p *Publisher) target(r *kgo.Record) string {
	if p.cfg.DeadLetterTopic != "" && r.Topic == p.cfg.DeadLetterTopic {
		return p.cfg.DeadLetterURL
	}
	return p.cfg.QueueURL
}

// group is r's message group on a FIFO queue.
func (p *Publisher) group(r *kgo.Record) string {
	if p.cfg.GroupByKey && len(r.Key) > 0 {
		return string(r.Key)
	}
	return p.cfg.GroupID
}

// limit is the largest body queueURL takes.
func (p *Publisher) limit(queueURL string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n, ok := p.limits[queueURL]; ok {
		return n
	}
	return p.cfg.MaxMessageBytes
}

// Fits returns *FieldError for a body or message group SQS does not take,
// *TooLargeError for a body larger than the queue takes, and
// *RefusedError for a message SQS refused before. It sends nothing.
func (p *Publisher) Fits(_ context.Context, r *kgo.Record) error {
	to := p.target(r)
	if to == "" {
		return nil // a dead letter that stays in the dead-letter table
	}
	if len(r.Value) == 0 {
		return &FieldError{What: "message body", Why: "empty (a tombstone, or a NULL payload as text): SQS takes no empty message, and Debezium Server's request fails there"}
	}
	if why := bodyText(r.Value); why != "" {
		return &FieldError{What: "message body", Value: string(r.Value), Why: why}
	}
	if max := p.limit(to); len(r.Value) > max {
		return &TooLargeError{Size: len(r.Value), Max: max}
	}
	if fifo(to) {
		if why := awsbatch.CheckID(p.group(r)); why != "" {
			return &FieldError{What: "message group", Value: p.group(r), Why: "a message group has " + why}
		}
	}
	return p.refused.Check(to, r)
}

// bodyText says why SQS does not take b as a body, "" when it does: UTF-8
// of XML's characters (#x9, #xA, #xD, #x20 to #xD7FF, #xE000 to #xFFFD,
// #x10000 to #x10FFFF).
func bodyText(b []byte) string {
	for len(b) > 0 {
		c, n := utf8.DecodeRune(b)
		switch {
		case c == utf8.RuneError && n == 1:
			return "not UTF-8 text (the value's format must be json, simplestring or cloudevents)"
		case c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) || (c >= 0xE000 && c <= 0xFFFD) || c >= 0x10000:
		default:
			return fmt.Sprintf("holds U+%04X, which SQS does not take", c)
		}
		b = b[n:]
	}
	return ""
}

// Produce queues r; promise is called once with SQS's answer or the
// failure, in produce order. Produce blocks while MaxPending records
// wait, until ctx ends.
func (p *Publisher) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) error {
	if err := p.Fits(ctx, r); err != nil {
		return err
	}
	if p.Halted() {
		return ErrHalted
	}
	c, err := p.Connect(ctx, p.dial)
	if err != nil {
		return err
	}
	return c.Send(ctx, pending{rec: r, promise: promise}, ErrHalted)
}

// batch is how records are sent: one queue's in a request, a FIFO
// queue's group once, up to the queue's size limit (read by Ping, before
// the first record).
func (p *Publisher) batch() inflight.Batch[pending] {
	return inflight.Batch[pending]{
		Max: MaxBatch, Bytes: p.limit(p.cfg.QueueURL),
		Group: func(pd pending) string { return p.target(pd.rec) },
		Order: func(pd pending) string {
			if to := p.target(pd.rec); to != "" && fifo(to) {
				return p.group(pd.rec)
			}
			return "" // a standard queue keeps no order
		},
		Size:    func(pd pending) int { return len(pd.rec.Value) },
		Send:    p.send,
		Retries: p.cfg.Retries, Pause: 100 * time.Millisecond,
		Promise: func(pd pending, err error) { pd.promise(pd.rec, err) },
	}
}

// send sends one request's messages (one queue's) with SendMessageBatch;
// it returns the places of those SQS did not take, with the last one's
// error. Dead letters without a dead-letter queue are taken as they are:
// the dead-letter table holds them.
func (p *Publisher) send(ctx context.Context, msgs []pending, attempt int) ([]int, error) {
	to := p.target(msgs[0].rec)
	if to == "" {
		return nil, nil
	}
	entries := make([]types.SendMessageBatchRequestEntry, len(msgs))
	for j, pd := range msgs {
		e := types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(string(pd.rec.Value))}
		if fifo(to) {
			e.MessageGroupId = aws.String(p.group(pd.rec))
			e.MessageDeduplicationId = aws.String(awsbatch.DedupID(pd.rec))
		}
		entries[j] = e
	}
	rctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	out, err := p.client.SendMessageBatch(rctx, &sdk.SendMessageBatchInput{QueueUrl: aws.String(to), Entries: entries})
	if err != nil {
		return nil, requestError(err)
	}
	if len(out.Failed)+len(out.Successful) != len(entries) {
		return nil, &RequestError{Err: fmt.Errorf("%d answers for %d messages", len(out.Failed)+len(out.Successful), len(entries))}
	}
	if len(out.Failed) == 0 {
		return nil, nil
	}
	fails := make([]awsbatch.Failure, len(out.Failed))
	for i, f := range out.Failed {
		fails[i] = awsbatch.Failure{ID: aws.ToString(f.Id), Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault}
	}
	failed, last, err := p.refused.Failed(awsbatch.EntryError{Service: "sqs", Target: "the queue", Attempts: attempt}, to, records(msgs), fails)
	if err != nil {
		return nil, &RequestError{Err: err}
	}
	p.log.Warn("sqs: messages not taken", "failed", len(failed), "of", len(entries), "code", last.Code, "attempt", attempt)
	return failed, last
}

// records are msgs' records.
func records(msgs []pending) []*kgo.Record {
	out := make([]*kgo.Record, len(msgs))
	for i, pd := range msgs {
		out[i] = pd.rec
	}
	return out
}

// requestError classifies a request's failure.
func requestError(err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return &RequestError{Code: ae.ErrorCode(), Err: err}
	}
	return &RequestError{Err: err}
}

// Ping checks the credentials and reads each queue's MaximumMessageSize,
// the largest body it takes. A queue whose attributes pgoutbox may not
// read keeps MaxMessageBytes: a policy may let it only send.
func (p *Publisher) Ping(ctx context.Context) error {
	if _, err := p.cfg.Credentials.Retrieve(ctx); err != nil {
		return &awsauth.CredentialsError{Service: "sqs", Err: err}
	}
	for _, q := range []string{p.cfg.QueueURL, p.cfg.DeadLetterURL} {
		if q == "" {
			continue
		}
		out, err := p.client.GetQueueAttributes(ctx, &sdk.GetQueueAttributesInput{QueueUrl: aws.String(q),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameMaximumMessageSize}})
		if err != nil {
			re := requestError(err).(*RequestError)
			if re.Code == "AccessDenied" || re.Code == "AccessDeniedException" {
				continue
			}
			return re
		}
		if n, err := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameMaximumMessageSize)]); err == nil && n > 0 {
			p.mu.Lock()
			p.limits[q] = n
			p.mu.Unlock()
		}
	}
	return nil
}
