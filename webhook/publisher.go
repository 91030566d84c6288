package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/inflight"
	"github.com/pgoutbox/pgoutbox/outbox"
)

// Publisher POSTs records to the endpoint. One goroutine produces; the
// requests and promises run on the queue's, one at a time, in order.
type Publisher struct {
	cfg    Config
	log    *slog.Logger
	key    []byte        // the Standard Webhooks key, nil for none
	auth   authenticator // OAuth2's or JWT's, nil for none
	client *http.Client
	// Link is the queue of records between the relay's sessions, and the
	// halt after a failed request: AbortBuffered, Resume, Flush, Buffered,
	// Renew, Close.
	inflight.Link[inflight.BatchConn[pending], *inflight.BatchConn[pending]]

	mu      sync.Mutex
	refused map[[32]byte]*StatusError // records the endpoint refused
	// anyRefused tells refused is not empty: until the endpoint refuses a
	// record, Fits hashes nothing.
	anyRefused atomic.Bool
}

// maxRefused bounds the refusals kept; beyond it the oldest knowledge is
// dropped (the record is then sent once more, and refused again).
const maxRefused = 10_000

// pending is a record waiting to be sent and answered.
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
	p := &Publisher{cfg: cfg, log: log, refused: map[[32]byte]*StatusError{}}
	if cfg.WebhookSecret != "" {
		p.key, _ = webhookKey(cfg.WebhookSecret)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg.TLS
	p.client = &http.Client{Transport: tr, Timeout: cfg.Timeout}
	// The auth servers are asked through the endpoint's transport (its
	// TLS), within Debezium Server's timeouts for them.
	switch {
	case cfg.OAuth2 != nil:
		p.auth = &oauth2Auth{cfg: *cfg.OAuth2, client: &http.Client{Transport: tr, Timeout: oauth2Timeout}}
	case cfg.JWT != nil:
		p.auth = &jwtAuth{cfg: *cfg.JWT, client: &http.Client{Transport: tr, Timeout: jwtTimeout}}
	}
	return p, nil
}

func (p *Publisher) dial(context.Context) (*inflight.BatchConn[pending], error) {
	// A POST per record, one at a time: a batch of one, sent once. With
	// BatchMaxSize, the records that waited while a request was out go in
	// the next, up to BatchMaxSize, all or nothing (so in order).
	n := max(p.cfg.BatchMaxSize, 1)
	b := inflight.Batch[pending]{
		Max: n, Bytes: 1,
		Group: p.group,
		// A dead letter is a request of its own.
		Order: func(pd pending) string {
			if p.group(pd) == groupDeadLetter {
				return groupDeadLetter
			}
			return ""
		},
		Size:    func(pending) int { return 0 },
		Send:    p.send,
		Retries: 1,
		Promise: func(pd pending, err error) { pd.promise(pd.rec, err) },
	}
	return inflight.NewBatchConn(p.cfg.MaxPending, n, b, errClosed, errAfterFailure), nil
}

// The groups of records a request holds: the endpoint's, the dead-letter
// URL's, and those sent nowhere.
const (
	groupEndpoint   = ""
	groupDeadLetter = "dead letter"
	groupNone       = "none"
)

func (p *Publisher) group(pd pending) string {
	switch url := p.target(pd.rec); {
	case pd.rec.Value == nil || url == "":
		return groupNone
	case url == p.cfg.URL:
		return groupEndpoint
	default:
		return groupDeadLetter
	}
}

// identity names a record's request for the refusals.
func identity(url string, r *kgo.Record) [32]byte {
	h := sha256.New()
	h.Write([]byte(url))
	h.Write([]byte{0})
	h.Write(r.Value)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// target is where r goes: the endpoint, or for a dead letter the
// dead-letter URL ("" when there is none).
func (p *Publisher) target(r *kgo.Record) string {
	if p.cfg.DeadLetterTopic != "" && r.Topic == p.cfg.DeadLetterTopic {
		return p.cfg.DeadLetterURL
	}
	return p.cfg.URL
}

// Fits returns *RefusedError for a record the endpoint refused before,
// and *FieldError for a header HTTP cannot carry. It sends nothing.
func (p *Publisher) Fits(_ context.Context, r *kgo.Record) error {
	for _, h := range r.Headers {
		name := p.cfg.HeaderPrefix + strings.ToUpper(h.Key)
		if !validName(name) {
			return &FieldError{What: "header name", Value: name}
		}
		if p.cfg.RawHeaders && bytes.ContainsAny(h.Value, "\r\n\x00") {
			return &FieldError{What: "header value of " + name, Value: string(h.Value)}
		}
	}
	if r.Value == nil || !p.anyRefused.Load() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.refused[identity(p.target(r), r)]; ok {
		return &RefusedError{Err: e}
	}
	return nil
}

// validName tells a header name HTTP takes (a token).
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// Produce queues r; promise is called once with the endpoint's answer or
// the failure, in produce order. Produce blocks while MaxPending records
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

// send POSTs one record, or with BatchMaxSize the records as a JSON
// array, on the queue's goroutine. A refusal of a record is remembered, so
// that it is dead-lettered when it comes again; a refused batch is sent
// again record by record, so that the refusal is blamed on one.
func (p *Publisher) send(ctx context.Context, msgs []pending, _ int) ([]int, error) {
	r := msgs[0].rec
	url := p.target(r)
	if r.Value == nil || url == "" {
		// Tombstones, which Debezium Server's sink does not send; dead
		// letters without a dead-letter URL, which the dead-letter table
		// holds.
		return nil, nil
	}
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = m.rec
	}
	err := p.post(ctx, url, recs, p.cfg.BatchMaxSize > 0 && url == p.cfg.URL)
	var se *StatusError
	if !errors.As(err, &se) || !refusal(se.Status) {
		return nil, err
	}
	if len(recs) == 1 {
		p.refuse(url, r, se)
		return nil, err
	}
	for i, r := range recs {
		if err := p.post(ctx, url, recs[i:i+1], true); err != nil {
			if errors.As(err, &se) && refusal(se.Status) {
				p.refuse(url, r, se)
			}
			failed := make([]int, 0, len(recs)-i)
			for j := i; j < len(recs); j++ {
				failed = append(failed, j)
			}
			return failed, err
		}
	}
	return nil, nil
}

// refuse remembers that the endpoint refused r.
func (p *Publisher) refuse(url string, r *kgo.Record, se *StatusError) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.refused) >= maxRefused {
		clear(p.refused)
	}
	p.refused[identity(url, r)] = se
	p.anyRefused.Store(true)
}

// post sends the request of recs and reads the answer: the value of the
// one record, or as a batch the values as a JSON array, with the first
// record's headers, as Debezium Server's sink sends a batch.
func (p *Publisher) post(ctx context.Context, url string, recs []*kgo.Record, batch bool) error {
	r := recs[0]
	body := r.Value
	if batch {
		n := 1 + len(recs)
		for _, r := range recs {
			n += len(r.Value)
		}
		body = make([]byte, 0, n)
		body = append(body, '[')
		for i, r := range recs {
			if i > 0 {
				body = append(body, ',')
			}
			body = append(body, r.Value...)
		}
		body = append(body, ']')
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return errors.New("webhook: building the request failed (check the URL)")
	}
	req.Header.Set("Content-Type", p.cfg.ContentType)
	seen := map[string]bool{}
	for i := len(r.Headers) - 1; i >= 0; i-- {
		// Debezium Server's sink keeps a header's last value.
		h := r.Headers[i]
		if h.Value == nil || seen[h.Key] {
			continue
		}
		seen[h.Key] = true
		v := string(h.Value)
		if !p.cfg.RawHeaders {
			v = base64.StdEncoding.EncodeToString(h.Value)
		}
		name := p.cfg.HeaderPrefix + strings.ToUpper(h.Key)
		req.Header[name] = append(req.Header[name], v) // as written, not canonicalised
	}
	if p.key != nil {
		p.sign(req, recs, batch, body)
	}
	if p.auth != nil {
		// No token, no request: the record fails, and those after it.
		h, err := p.auth.authorization(ctx)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", h)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		// The error names the URL, which may hold credentials.
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) {
			err = ue.Unwrap()
		}
		return fmt.Errorf("webhook: the request failed: %w", err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // lets the connection be reused
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	se := &StatusError{Status: resp.StatusCode, Body: strings.TrimSpace(string(answer))}
	if p.auth != nil {
		se.token = true
		if resp.StatusCode == http.StatusUnauthorized {
			p.auth.rejected()
		}
	}
	return se
}

// sign sets the Standard Webhooks headers: the message id, the time, and
// the signature of both with the body. The message id is the same each
// time the request is sent: msg_ and the event id, or for a batch msg_,
// its first event's id, - and its count of events.
func (p *Publisher) sign(req *http.Request, recs []*kgo.Record, batch bool, body []byte) {
	id := outbox.EventID(recs[0].Context)
	if id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	msgID := "msg_" + id
	if batch {
		msgID += "-" + strconv.Itoa(len(recs))
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, p.key)
	mac.Write([]byte(msgID + "." + ts + "."))
	mac.Write(body)
	req.Header.Set("webhook-id", msgID)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
}

// Ping has nothing to ask: an endpoint answers POSTs only.
func (p *Publisher) Ping(context.Context) error { return nil }
