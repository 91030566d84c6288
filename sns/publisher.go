package sns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/smithy-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/awsauth"
	"github.com/pgoutbox/pgoutbox/awsbatch"
	"github.com/pgoutbox/pgoutbox/inflight"
)

// Publisher publishes records to their topics. One goroutine produces;
// the requests and promises run on the queue's, one request at a time.
type Publisher struct {
	cfg    Config
	log    *slog.Logger
	client *sdk.Client
	// Link is the queue of records between the relay's sessions, and the
	// halt after a failed request: AbortBuffered, Resume, Flush, Buffered,
	// Renew, Close.
	inflight.Link[inflight.BatchConn[pending], *inflight.BatchConn[pending]]

	refused awsbatch.Refusals // messages SNS refused, blaming them
}

// pending is a record waiting to be published, with what Fits made of
// it.
type pending struct {
	rec     *kgo.Record
	msg     message
	promise func(*kgo.Record, error)
}

// message is a record as SNS takes it.
type message struct {
	topic        string // "" for a dead letter that stays in the table
	attrs        map[string]types.MessageAttributeValue
	group, dedup string // a FIFO topic's
	size         int    // the body's and attributes' bytes
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
	return inflight.NewBatchConn(p.cfg.MaxPending, 8*MaxBatch, p.batch(), errClosed, errAfterFailure), nil
}

// Topic is the ARN destination goes to, as Debezium Server's sink
// resolves it: an ARN as it is; else topic.arn.prefix and the
// destination; else topic.arn; else the destination.
func (p *Publisher) Topic(destination string) string {
	switch {
	case strings.HasPrefix(destination, "arn:"):
		return destination
	case p.cfg.TopicARNPrefix != "":
		return p.cfg.TopicARNPrefix + destination
	case p.cfg.TopicARN != "":
		return p.cfg.TopicARN
	}
	return destination
}

// Fits returns *MessageError for a record SNS would not take and
// *RefusedError for a message SNS refused before. It sends nothing.
func (p *Publisher) Fits(_ context.Context, r *kgo.Record) error {
	_, err := p.message(r)
	return err
}

// message makes r's message, or says why SNS would not take it.
func (p *Publisher) message(r *kgo.Record) (message, error) {
	var m message
	if p.cfg.DeadLetterTopic != "" && r.Topic == p.cfg.DeadLetterTopic {
		if m.topic = p.cfg.DeadLetterARN; m.topic == "" {
			return m, nil // a dead letter that stays in the dead-letter table
		}
	} else {
		m.topic = p.Topic(r.Topic)
		if why := ARNProblem(m.topic); why != "" {
			return m, &MessageError{What: "topic", Value: m.topic, Why: why + ": set topic.arn or topic.arn.prefix (--sns-topic-arn, --sns-topic-arn-prefix), or route the event to an ARN"}
		}
	}
	if len(r.Value) == 0 {
		return m, &MessageError{What: "message", Why: "empty (a tombstone, or a NULL payload): SNS takes no empty message, and Debezium Server's request fails there"}
	}
	if !utf8.Valid(r.Value) {
		return m, &MessageError{What: "message", Why: "not UTF-8 text (the value's format must be text: json, simplestring or cloudevents)"}
	}
	m.size = len(r.Value)
	headers := map[string]string{}
	for _, h := range r.Headers {
		headers[h.Key] = string(h.Value) // the last of a repeated key, as a map keeps it
	}
	if err := m.attributes(headers); err != nil {
		return m, err
	}
	if m.size > MaxMessageBytes {
		return m, &MessageError{What: "message", Why: fmt.Sprintf("%d bytes with its attributes, more than the %d an SNS message takes", m.size, MaxMessageBytes)}
	}
	if fifo(m.topic) {
		var ok bool
		if m.group, ok = headers[p.cfg.GroupHeader]; !ok {
			m.group = p.cfg.GroupID
			if r.Key != nil {
				m.group = string(r.Key)
			}
		}
		if why := awsbatch.CheckID(m.group); why != "" {
			return m, &MessageError{What: "message group", Value: m.group, Why: "a message group has " + why}
		}
		m.dedup = awsbatch.DedupID(r)
		if p.cfg.DedupHeader != "" {
			if id, ok := headers[p.cfg.DedupHeader]; ok {
				m.dedup = id
				if why := awsbatch.CheckID(id); why != "" {
					return m, &MessageError{What: "deduplication id", Value: id, Why: "a deduplication id has " + why}
				}
			}
		}
	}
	return m, p.refused.Check(m.topic, r)
}

// attributes makes headers the message's String attributes, adding
// their bytes to its size.
func (m *message) attributes(headers map[string]string) error {
	if len(headers) == 0 {
		return nil
	}
	if len(headers) > MaxAttributes {
		return &MessageError{What: "headers", Why: fmt.Sprintf("%d, more than the %d message attributes an SNS message carries", len(headers), MaxAttributes)}
	}
	m.attrs = make(map[string]types.MessageAttributeValue, len(headers))
	for k, v := range headers {
		if why := attributeName(k); why != "" {
			return &MessageError{What: "header", Value: k, Why: why}
		}
		if v == "" || !utf8.ValidString(v) {
			return &MessageError{What: "header " + k, Value: v, Why: "an SNS message attribute of type String has a value of UTF-8 text, not empty"}
		}
		m.attrs[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		m.size += len(k) + len("String") + len(v)
	}
	return nil
}

// attributeName says why SNS does not take s as a message attribute's
// name, "" when it does.
func attributeName(s string) string {
	low := strings.ToLower(s)
	switch {
	case s == "" || len(s) > 256:
		return "a message attribute's name has 1 to 256 characters"
	case strings.HasPrefix(low, "aws.") || strings.HasPrefix(low, "amazon."):
		return "a message attribute's name does not start with AWS. or Amazon."
	case s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, ".."):
		return "a message attribute's name neither starts nor ends with a period, nor has two in a row"
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return "a message attribute's name has only letters, digits, hyphens, underscores and periods"
		}
	}
	return ""
}

// Produce queues r; promise is called once with SNS's answer or the
// failure, in produce order. Produce blocks while MaxPending records
// wait, until ctx ends.
func (p *Publisher) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) error {
	m, err := p.message(r)
	if err != nil {
		return err
	}
	if p.Halted() {
		return ErrHalted
	}
	c, err := p.Connect(ctx, p.dial)
	if err != nil {
		return err
	}
	return c.Send(ctx, pending{rec: r, msg: m, promise: promise}, ErrHalted)
}

// batch is how records are sent: one topic's in a request, a FIFO
// topic's group once.
func (p *Publisher) batch() inflight.Batch[pending] {
	return inflight.Batch[pending]{
		Max: MaxBatch, Bytes: MaxMessageBytes,
		Group: func(pd pending) string { return pd.msg.topic },
		Order: func(pd pending) string {
			if fifo(pd.msg.topic) {
				return pd.msg.group
			}
			return "" // a standard topic keeps no order
		},
		Size:    func(pd pending) int { return pd.msg.size },
		Send:    p.send,
		Retries: p.cfg.Retries, Pause: 100 * time.Millisecond,
		Promise: func(pd pending, err error) { pd.promise(pd.rec, err) },
	}
}

// send publishes one request's messages (one topic's) with PublishBatch;
// it returns the places of those SNS did not take, with the last one's
// error. Dead letters without a dead-letter topic are taken as they are:
// the dead-letter table holds them.
func (p *Publisher) send(ctx context.Context, msgs []pending, attempt int) ([]int, error) {
	to := msgs[0].msg.topic
	if to == "" {
		return nil, nil
	}
	entries := make([]types.PublishBatchRequestEntry, len(msgs))
	for j, pd := range msgs {
		e := types.PublishBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), Message: aws.String(string(pd.rec.Value)), MessageAttributes: pd.msg.attrs}
		if fifo(to) {
			e.MessageGroupId = aws.String(pd.msg.group)
			e.MessageDeduplicationId = aws.String(pd.msg.dedup)
		}
		entries[j] = e
	}
	rctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	out, err := p.client.PublishBatch(rctx, &sdk.PublishBatchInput{TopicArn: aws.String(to), PublishBatchRequestEntries: entries})
	if err != nil {
		return nil, requestError(to, err)
	}
	if len(out.Failed)+len(out.Successful) != len(entries) {
		return nil, &RequestError{Topic: to, Err: fmt.Errorf("%d answers for %d messages", len(out.Failed)+len(out.Successful), len(entries))}
	}
	if len(out.Failed) == 0 {
		return nil, nil
	}
	fails := make([]awsbatch.Failure, len(out.Failed))
	recs := make([]*kgo.Record, len(msgs))
	for i, f := range out.Failed {
		fails[i] = awsbatch.Failure{ID: aws.ToString(f.Id), Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault}
	}
	for i, pd := range msgs {
		recs[i] = pd.rec
	}
	failed, last, err := p.refused.Failed(awsbatch.EntryError{Service: "sns", Target: "the topic", Attempts: attempt}, to, recs, fails)
	if err != nil {
		return nil, &RequestError{Topic: to, Err: err}
	}
	p.log.Warn("sns: messages not taken", "topic", to, "failed", len(failed), "of", len(entries), "code", last.Code, "attempt", attempt)
	return failed, last
}

// requestError classifies a request's failure.
func requestError(topic string, err error) *RequestError {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return &RequestError{Topic: topic, Code: ae.ErrorCode(), Err: err}
	}
	return &RequestError{Topic: topic, Err: err}
}

// Ping checks the credentials and that the configured topics exist. A
// topic whose attributes pgoutbox may not read is taken as it is: a
// policy may let it only publish.
func (p *Publisher) Ping(ctx context.Context) error {
	if _, err := p.cfg.Credentials.Retrieve(ctx); err != nil {
		return &awsauth.CredentialsError{Service: "sns", Err: err}
	}
	for _, t := range []string{p.cfg.TopicARN, p.cfg.DeadLetterARN} {
		if t == "" {
			continue
		}
		if _, err := p.client.GetTopicAttributes(ctx, &sdk.GetTopicAttributesInput{TopicArn: aws.String(t)}); err != nil {
			re := requestError(t, err)
			switch re.Code {
			case "AuthorizationError", "AccessDenied", "AccessDeniedException":
				continue
			}
			return re
		}
	}
	return nil
}
