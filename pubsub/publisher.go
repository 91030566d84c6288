package pubsub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/pgoutbox/pgoutbox/inflight"
)

// scope is the OAuth 2.0 scope publishing takes.
const scope = "https://www.googleapis.com/auth/pubsub"

// Publisher publishes records to their topics. One goroutine produces;
// the requests and promises run on the queue's, one request at a time.
type Publisher struct {
	cfg     Config
	log     *slog.Logger
	base    string // the API's root: https://pubsub.googleapis.com, a region's, an emulator's
	project string
	tokens  oauth2.TokenSource // nil for an emulator
	client  *http.Client
	// Link is the queue of records between the relay's sessions, and the
	// halt after a failed request: AbortBuffered, Resume, Flush, Buffered,
	// Renew, Close.
	inflight.Link[inflight.BatchConn[pending], *inflight.BatchConn[pending]]
}

// pending is a record waiting to be published.
type pending struct {
	rec     *kgo.Record
	promise func(*kgo.Record, error)
}

// New creates a publisher, reading Google's application default
// credentials (none for an emulator); it sends nothing until the first
// record.
func New(cfg Config, log *slog.Logger) (*Publisher, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Publisher{cfg: cfg, log: log, project: cfg.ProjectID, base: "https://pubsub.googleapis.com",
		client: &http.Client{Timeout: cfg.Timeout}}
	switch {
	case cfg.Address != "":
		p.base = "http://" + cfg.Address
	case cfg.Region != "":
		p.base = "https://" + cfg.Region + "-pubsub.googleapis.com"
	}
	if cfg.Address == "" {
		creds, err := google.FindDefaultCredentials(context.Background(), scope)
		if err != nil {
			return nil, &CredentialsError{Err: err}
		}
		p.tokens = creds.TokenSource
		if p.project == "" {
			p.project = creds.ProjectID
		}
	}
	if p.project == "" {
		return nil, errors.New("pubsub: no project: set project.id (--pubsub-project), or use credentials that name one")
	}
	return p, nil
}

func (p *Publisher) dial(context.Context) (*inflight.BatchConn[pending], error) {
	// A settle takes what waits, several requests' worth at most.
	return inflight.NewBatchConn(p.cfg.MaxPending, 4*p.cfg.CountThreshold, p.batch(), errClosed, errAfterFailure), nil
}

// orderingKey is r's ordering key, "" without ordering.
func (p *Publisher) orderingKey(r *kgo.Record) string {
	switch {
	case !p.cfg.Ordering:
		return ""
	case p.cfg.OrderingKey != "":
		return p.cfg.OrderingKey
	case r.Key == nil:
		return p.cfg.NullKey
	}
	return string(r.Key)
}

// attributes are r's headers as Pub/Sub's (a name's last value, as
// Debezium Server's map of them keeps).
func attributes(r *kgo.Record) map[string]string {
	var out map[string]string
	for _, h := range r.Headers {
		if h.Value == nil {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[h.Key] = string(h.Value)
	}
	return out
}

// size is r's share of a request: its data, ordering key and attributes.
func (p *Publisher) size(r *kgo.Record) int {
	n := len(r.Value) + len(p.orderingKey(r))
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// Fits returns *FieldError for a message Pub/Sub does not take. It sends
// nothing.
func (p *Publisher) Fits(_ context.Context, r *kgo.Record) error {
	attrs := attributes(r)
	for k, v := range attrs {
		if len(k) > maxAttributeKey || len(v) > maxAttributeValue {
			return &FieldError{Topic: r.Topic, Why: fmt.Sprintf("attribute %.40q: a name has at most 256 bytes, a value 1024", k)}
		}
	}
	switch {
	case TopicProblem(r.Topic) != "":
		return &FieldError{Topic: r.Topic, Why: TopicProblem(r.Topic)}
	case len(r.Value) == 0 && len(attrs) == 0:
		return &FieldError{Topic: r.Topic, Why: "no data and no attributes (a tombstone without headers), which Pub/Sub does not take"}
	case len(attrs) > maxAttributes:
		return &FieldError{Topic: r.Topic, Why: fmt.Sprintf("%d attributes: Pub/Sub takes at most 100", len(attrs))}
	case len(p.orderingKey(r)) > maxOrderingKey:
		return &FieldError{Topic: r.Topic, Why: "an ordering key of more than 1024 bytes"}
	case p.size(r) > maxMessageBytes:
		return &FieldError{Topic: r.Topic, Why: fmt.Sprintf("%d bytes: Pub/Sub takes at most 10 MB", p.size(r))}
	}
	return nil
}

// TopicProblem says why Pub/Sub does not take name as a topic's, "" when
// it does: 3 to 255 of letters, digits and - _ . ~ + %, a letter first,
// not starting with goog.
func TopicProblem(name string) string {
	if len(name) < 3 || len(name) > 255 {
		return "a topic's name has 3 to 255 characters"
	}
	if c := name[0]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') || strings.HasPrefix(name, "goog") {
		return "a topic's name starts with a letter, not with goog"
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.~+%", c) >= 0) {
			return "a topic's name has only letters, digits and - _ . ~ + %"
		}
	}
	return ""
}

// Produce queues r; promise is called once with Pub/Sub's answer or the
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

// batch is how records are published: a topic's in a request, which
// Pub/Sub takes whole or not at all, so an ordering key's messages may
// share one.
func (p *Publisher) batch() inflight.Batch[pending] {
	return inflight.Batch[pending]{
		Max: p.cfg.CountThreshold, Bytes: p.cfg.ByteThreshold,
		Group:   func(pd pending) string { return pd.rec.Topic },
		Order:   func(pending) string { return "" },
		Size:    func(pd pending) int { return p.size(pd.rec) },
		Send:    func(ctx context.Context, msgs []pending, _ int) ([]int, error) { return nil, p.publish(ctx, msgs) },
		Retries: 1,
		Promise: func(pd pending, err error) { pd.promise(pd.rec, err) },
	}
}

// message is a message of a publish request, as the REST API has it.
type message struct {
	Data        []byte            `json:"data,omitempty"`
	Attributes  map[string]string `json:"attributes,omitempty"`
	OrderingKey string            `json:"orderingKey,omitempty"`
}

// publish sends one topic's messages in one request.
func (p *Publisher) publish(ctx context.Context, msgs []pending) error {
	topic := msgs[0].rec.Topic
	req := struct {
		Messages []message `json:"messages"`
	}{Messages: make([]message, len(msgs))}
	for i, pd := range msgs {
		req.Messages[i] = message{Data: pd.rec.Value, Attributes: attributes(pd.rec), OrderingKey: p.orderingKey(pd.rec)}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return &PublishError{Topic: topic, Err: err}
	}
	u := p.base + "/v1/projects/" + url.PathEscape(p.project) + "/topics/" + url.PathEscape(topic) + ":publish"
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return &PublishError{Topic: topic, Err: err}
	}
	hr.Header.Set("Content-Type", "application/json")
	if p.tokens != nil {
		tok, err := p.tokens.Token()
		if err != nil {
			return &CredentialsError{Err: err}
		}
		tok.SetAuthHeader(hr)
	}
	resp, err := p.client.Do(hr)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL says nothing the topic does not
		}
		return &PublishError{Topic: topic, Err: err}
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode == http.StatusOK {
		var out struct{ MessageIds []string }
		if err := json.Unmarshal(answer, &out); err != nil || len(out.MessageIds) != len(msgs) {
			return &PublishError{Topic: topic, Err: fmt.Errorf("%d message ids for %d messages", len(out.MessageIds), len(msgs))}
		}
		return nil
	}
	var e struct {
		Error struct{ Message, Status string }
	}
	_ = json.Unmarshal(answer, &e)
	return &PublishError{Topic: topic, Status: resp.StatusCode, Err: fmt.Errorf("%s %s", e.Error.Status, e.Error.Message)}
}

// Ping asks the credentials for a token: topics are named by the
// records, and a role may let pgoutbox only publish to them.
func (p *Publisher) Ping(context.Context) error {
	if p.tokens == nil {
		return nil
	}
	if _, err := p.tokens.Token(); err != nil {
		return &CredentialsError{Err: err}
	}
	return nil
}
