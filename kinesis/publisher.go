package kinesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/awsauth"
	"github.com/pgoutbox/pgoutbox/inflight"
)

// Publisher writes records to their streams. One goroutine produces; the
// requests and promises run on the queue's, one request at a time.
type Publisher struct {
	cfg    Config
	log    *slog.Logger
	client *sdk.Client
	// Link is the queue of records between the relay's sessions, and the
	// halt after a failed request: AbortBuffered, Resume, Flush, Buffered,
	// Renew, Close.
	inflight.Link[inflight.BatchConn[pending], *inflight.BatchConn[pending]]
}

// pending is a record waiting to be written.
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
	return &Publisher{cfg: cfg, log: log, client: sdk.New(opts)}, nil
}

func (p *Publisher) dial(context.Context) (*inflight.BatchConn[pending], error) {
	// A settle takes what waits, several requests' worth at most.
	return inflight.NewBatchConn(p.cfg.MaxPending, 4*p.cfg.BatchSize, p.batch(), errClosed, errAfterFailure), nil
}

// partitionKey is r's partition key: its key's text, or NullKey.
func (p *Publisher) partitionKey(r *kgo.Record) string {
	if r.Key == nil {
		return p.cfg.NullKey
	}
	return string(r.Key)
}

// Fits returns *FieldError for a stream name or partition key Kinesis
// does not take and *TooLargeError for a record larger than it takes. It
// sends nothing.
func (p *Publisher) Fits(_ context.Context, r *kgo.Record) error {
	if why := streamName(r.Topic); why != "" {
		return &FieldError{What: "stream name", Value: r.Topic, Why: why}
	}
	key := p.partitionKey(r)
	switch n := utf8.RuneCountInString(key); {
	case !utf8.ValidString(key):
		return &FieldError{What: "partition key", Value: key, Why: "not UTF-8 text (the key's format must be json or simplestring)"}
	case n == 0:
		return &FieldError{What: "partition key", Value: key, Why: "empty: Kinesis takes 1 to 256 characters"}
	case n > maxPartitionKey:
		return &FieldError{What: "partition key", Value: key, Why: "longer than the 256 characters Kinesis takes (with JSON keys, debezium.format.key.schemas.enable=false shortens it)"}
	}
	if size := len(r.Value) + len(key); size > p.cfg.MaxRecordBytes {
		return &TooLargeError{Stream: r.Topic, Size: size, Max: p.cfg.MaxRecordBytes}
	}
	return nil
}

// streamName says why Kinesis does not take name as a stream's, "" when
// it does: 1 to 128 of a-z, A-Z, 0-9, '_', '.' and '-'.
func streamName(name string) string {
	if name == "" || len(name) > 128 {
		return "a stream name has 1 to 128 characters"
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return "a stream name has only letters, digits, '_', '.' and '-'"
		}
	}
	return ""
}

// Produce queues r; promise is called once with Kinesis's answer or the
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

// batch is how records are written: one stream's in a request, each
// partition key once.
func (p *Publisher) batch() inflight.Batch[pending] {
	return inflight.Batch[pending]{
		Max: p.cfg.BatchSize, Bytes: MaxRequestBytes,
		Group: func(pd pending) string { return pd.rec.Topic },
		Order: func(pd pending) string { return p.partitionKey(pd.rec) },
		Size:  func(pd pending) int { return len(pd.rec.Value) + len(p.partitionKey(pd.rec)) },
		Send:  p.put, Retries: p.cfg.Retries, Pause: 100 * time.Millisecond,
		Promise: func(pd pending, err error) { pd.promise(pd.rec, err) },
	}
}

// put writes one request's records (one stream's) with PutRecords; it
// returns the places of those Kinesis did not write, with the last one's
// error.
func (p *Publisher) put(ctx context.Context, msgs []pending, attempt int) ([]int, error) {
	stream := msgs[0].rec.Topic
	entries := make([]types.PutRecordsRequestEntry, len(msgs))
	for j, pd := range msgs {
		data := pd.rec.Value
		if data == nil {
			data = []byte{} // a tombstone: empty data, as Debezium Server writes it
		}
		entries[j] = types.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(p.partitionKey(pd.rec))}
	}
	rctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	out, err := p.client.PutRecords(rctx, &sdk.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
	if err != nil {
		return nil, requestError(stream, err)
	}
	if len(out.Records) != len(entries) {
		return nil, &RequestError{Stream: stream, Err: fmt.Errorf("%d results for %d records", len(out.Records), len(entries))}
	}
	var failed []int
	var last types.PutRecordsResultEntry
	for j, res := range out.Records {
		if res.ErrorCode != nil {
			failed, last = append(failed, j), res
		}
	}
	if failed == nil {
		return nil, nil
	}
	p.log.Warn("kinesis: entries not written", "stream", stream, "failed", len(failed), "of", len(entries),
		"code", aws.ToString(last.ErrorCode), "attempt", attempt)
	return failed, &EntryError{Stream: stream, Code: aws.ToString(last.ErrorCode), Message: aws.ToString(last.ErrorMessage), Attempts: attempt}
}

// requestError classifies a request's failure.
func requestError(stream string, err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return &RequestError{Stream: stream, Code: ae.ErrorCode(), Err: err}
	}
	return &RequestError{Stream: stream, Err: err}
}

// Ping asks the credentials chain for credentials: streams are named by
// the records, and a policy may let pgoutbox only write to them.
func (p *Publisher) Ping(ctx context.Context) error {
	if _, err := p.cfg.Credentials.Retrieve(ctx); err != nil {
		return &awsauth.CredentialsError{Service: "kinesis", Err: err}
	}
	return nil
}
