package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/inflight"
)

// autoCreateTopic is the topic whose route a broker that creates topics
// gives for one that does not exist yet (TBW102), and autoCreateQueues
// the most queues of such a topic (the Java client's
// defaultTopicQueueNums).
const (
	autoCreateTopic  = "TBW102"
	autoCreateQueues = 4
)

// Publisher publishes records to their topics. One goroutine produces;
// the requests and promises run on the session queue's, one request at a
// time.
type Publisher struct {
	cfg Config
	log *slog.Logger
	ids *ids // the producing goroutine's
	// Link is the session's connections and queue between the relay's
	// sessions, and the halt after a failed request: AbortBuffered,
	// Resume, Flush, Buffered, Renew, Close.
	inflight.Link[session, *session]
}

// pending is a record waiting to be sent, with its queue and its message
// as a batch holds it.
type pending struct {
	rec     *kgo.Record
	promise func(*kgo.Record, error)
	q       queue
	msg     []byte
}

// session is one session's connections, routes and queue of records.
type session struct {
	*inflight.BatchConn[pending]
	p      *Publisher
	routes map[string]topicRoute // by topic; the producing goroutine's
	broken atomic.Bool           // a route was not found: Resume replaces the session

	mu    sync.Mutex
	wires map[string]*wire // by address
}

// topicRoute is a topic's write queues, and whether the broker creates
// the topic at its first message.
type topicRoute struct {
	queues []queue
	auto   bool
}

// New creates a publisher; it connects at the first record.
func New(cfg Config, log *slog.Logger) (*Publisher, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Publisher{cfg: cfg, log: log, ids: newIDs()}, nil
}

func (p *Publisher) dial(context.Context) (*session, error) {
	s := &session{p: p, routes: map[string]topicRoute{}, wires: map[string]*wire{}}
	b := inflight.Batch[pending]{
		Max: MaxBatch, Bytes: p.cfg.MaxMessageBytes,
		Group: func(pd pending) string { return pd.q.addr + "\x00" + pd.rec.Topic + "\x00" + strconv.Itoa(pd.q.id) },
		// A batch is stored whole and in order: a key's messages may
		// share one.
		Order:   func(pending) string { return "" },
		Size:    func(pd pending) int { return len(pd.msg) },
		Send:    s.send,
		Retries: 3, Pause: 100 * time.Millisecond,
		Promise: func(pd pending, err error) { pd.promise(pd.rec, err) },
	}
	// A settle takes what waits, several requests' worth at most.
	s.BatchConn = inflight.NewBatchConn(p.cfg.MaxPending, 8*MaxBatch, b, errClosed, errAfterFailure)
	return s, nil
}

// key is r's key's text, by which its queue is picked.
func key(r *kgo.Record) string { return string(r.Key) }

// Fits returns *FieldError for a topic, key, body or header RocketMQ does
// not take (or Debezium Server's sink fails on), and *TooLargeError for a
// message larger than MaxMessageBytes: the broker refuses a batch whose
// messages, with their properties, are larger than its maxMessageSize. It
// sends nothing.
func (p *Publisher) Fits(_ context.Context, r *kgo.Record) error {
	if why := checkTopic(r.Topic); why != "" {
		return &FieldError{What: "topic", Value: r.Topic, Why: why}
	}
	deadLetter := r.Topic == p.cfg.DeadLetterTopic
	switch {
	case r.Key == nil && !deadLetter:
		return &FieldError{What: "key", Why: "none: a message's queue is picked by its key's text, and Debezium Server's sink fails without one"}
	case !isText(key(r)):
		return &FieldError{What: "key", Value: key(r), Why: "holds a control character RocketMQ separates properties with"}
	case r.Value == nil:
		return &FieldError{What: "message body", Why: "none (a tombstone): RocketMQ takes no message without a body, and Debezium Server's sink fails there"}
	case len(r.Value) == 0:
		return &FieldError{What: "message body", Why: "empty: RocketMQ's client sends no empty body, and Debezium Server's sink fails there"}
	}
	props := len("UNIQ_KEY") + 34 // the id, 32 characters, and separators
	if len(r.Key) > 0 {
		props += len("KEYS") + len(r.Key) + 2
	}
	for _, h := range r.Headers {
		if h.Value == nil {
			continue
		}
		v := string(h.Value)
		switch {
		case systemProperty[h.Key]:
			return &FieldError{What: "header", Value: h.Key, Why: "is one of RocketMQ's system properties, which a user property may not be named (Message.putUserProperty)"}
		case strings.TrimFunc(h.Key, blank) == "" || strings.TrimFunc(v, blank) == "":
			return &FieldError{What: "header", Value: h.Key, Why: "a blank name or value, which RocketMQ's client refuses (Message.putUserProperty)"}
		case !isText(h.Key) || !isText(v):
			return &FieldError{What: "header", Value: h.Key, Why: "holds a control character RocketMQ separates properties with"}
		}
		props += len(h.Key) + len(v) + 2
	}
	if props > maxProperties {
		return &FieldError{What: "message properties", Why: fmt.Sprintf("%d bytes of key and headers: RocketMQ takes at most %d", props, maxProperties)}
	}
	if size := messageOverhead + len(r.Value) + props; size > p.cfg.MaxMessageBytes {
		return &TooLargeError{Topic: r.Topic, Size: size, Max: p.cfg.MaxMessageBytes}
	}
	return nil
}

// blank is what Java's String.trim removes.
func blank(r rune) bool { return r <= ' ' }

// systemProperty are the property names RocketMQ keeps for itself
// (MessageConst.STRING_HASH_SET, client 5.2.0).
var systemProperty = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields(`TRACE_ON MSG_REGION KEYS TAGS WAIT DELAY RETRY_TOPIC REAL_TOPIC REAL_QID TRAN_MSG PGROUP
		MIN_OFFSET MAX_OFFSET BUYER_ID ORIGIN_MESSAGE_ID TRANSFER_FLAG CORRECTION_FLAG MQ2_FLAG RECONSUME_TIME UNIQ_KEY
		MAX_RECONSUME_TIMES CONSUME_START_TIME POP_CK POP_CK_OFFSET 1ST_POP_TIME TRAN_PREPARED_QUEUE_OFFSET DUP_INFO
		EXTEND_UNIQ_INFO INSTANCE_ID CORRELATION_ID REPLY_TO_CLIENT TTL ARRIVE_TIME PUSH_REPLY_TIME CLUSTER MSG_TYPE
		INNER_MULTI_QUEUE_OFFSET TIMER_DELAY_MS TIMER_DELAY_SEC TIMER_DELIVER_MS TIMER_ENQUEUE_MS TIMER_DEQUEUE_MS
		TIMER_ROLL_TIMES TIMER_OUT_MS TIMER_DEL_UNIQKEY TIMER_DELAY_LEVEL __BORNHOST BORN_TIMESTAMP DLQ_ORIGIN_TOPIC
		DLQ_ORIGIN_MESSAGE_ID __CRC32#`) {
		m[n] = true
	}
	return m
}()

// Produce queues r; promise is called once with the broker's answer or
// the failure, in produce order. Produce blocks while MaxPending records
// wait, until ctx ends.
func (p *Publisher) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) error {
	if err := p.Fits(ctx, r); err != nil {
		return err
	}
	if p.Halted() {
		return ErrHalted
	}
	s, err := p.Connect(ctx, p.dial)
	if err != nil {
		return err
	}
	if s.broken.Load() {
		return ErrHalted
	}
	tr, err := s.route(ctx, r.Topic)
	if err != nil {
		s.broken.Store(true) // the next session asks again
		return err
	}
	pd := pending{rec: r, promise: promise, q: tr.queues[pick(key(r), len(tr.queues))], msg: p.message(r)}
	return s.Send(ctx, pd, ErrHalted)
}

// message is r as a batch holds it: its body, and as properties its key
// (KEYS), a message id (UNIQ_KEY) and its headers, the last value of a
// name as Debezium Server's map of them keeps it.
func (p *Publisher) message(r *kgo.Record) []byte {
	props := make([]byte, 0, 64+len(r.Key))
	if len(r.Key) > 0 {
		props = appendProperty(props, "KEYS", key(r))
	}
	props = appendProperty(props, "UNIQ_KEY", p.ids.next(time.Now()))
	for i, h := range r.Headers {
		if h.Value == nil || laterHeader(r.Headers[i+1:], h.Key) {
			continue
		}
		props = appendProperty(props, h.Key, string(h.Value))
	}
	return appendMessage(make([]byte, 0, 22+len(r.Value)+len(props)), r.Value, props)
}

// laterHeader tells a header of name follows among hs.
func laterHeader(hs []kgo.RecordHeader, name string) bool {
	for _, h := range hs {
		if h.Key == name && h.Value != nil {
			return true
		}
	}
	return false
}

// route is topic's write queues, asked of the name servers once per
// session. A topic that does not exist takes TBW102's route, as the Java
// client's, when the broker creates topics.
func (s *session) route(ctx context.Context, topic string) (topicRoute, error) {
	if tr, ok := s.routes[topic]; ok {
		return tr, nil
	}
	tr, err := s.lookup(ctx, topic)
	if err != nil {
		return tr, &RouteError{Topic: topic, Err: err}
	}
	if tr.auto {
		s.p.log.Info("rocketmq: the topic does not exist; its broker creates it at the first message, as for Debezium Server's client",
			"topic", topic, "queues", len(tr.queues))
	}
	s.routes[topic] = tr
	return tr, nil
}

func (s *session) lookup(ctx context.Context, topic string) (topicRoute, error) {
	r, err := s.askRoute(ctx, topic)
	auto := false
	var ae *answerError
	if errors.As(err, &ae) && ae.Code == respTopicNotExist {
		auto = true
		if r, err = s.askRoute(ctx, autoCreateTopic); errors.As(err, &ae) && ae.Code == respTopicNotExist {
			return topicRoute{}, errors.New("the topic does not exist and no broker creates topics (autoCreateTopicEnable): create it (mqadmin updateTopic)")
		}
	}
	if err != nil {
		return topicRoute{}, err
	}
	limit := 0
	if auto {
		limit = autoCreateQueues
	}
	qs, err := r.queues(limit)
	if err != nil {
		return topicRoute{}, err
	}
	if len(qs) == 0 {
		return topicRoute{}, errors.New("no writable queue on a broker with a master")
	}
	return topicRoute{queues: qs, auto: auto}, nil
}

// askRoute asks the name servers for topic's route, each in turn until
// one answers.
func (s *session) askRoute(ctx context.Context, topic string) (*route, error) {
	var errs []error
	for _, addr := range s.p.cfg.NameServers {
		a, err := s.call(ctx, addr, request(codeRoute, map[string]string{"topic": topic}, nil))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if a.Code != respSuccess {
			return nil, &answerError{Code: a.Code, Remark: a.Remark}
		}
		return parseRoute(a.body)
	}
	return nil, errors.Join(errs...)
}

// call sends c to addr, connecting first when the session has no live
// connection there, and waits for the answer at most SendTimeout.
func (s *session) call(ctx context.Context, addr string, c *command) (*command, error) {
	ctx, cancel := context.WithTimeout(ctx, s.p.cfg.SendTimeout)
	defer cancel()
	w, err := s.wire(ctx, addr)
	if err != nil {
		return nil, err
	}
	c.sign(s.p.cfg.AccessKey, s.p.cfg.SecretKey)
	return w.call(ctx, c)
}

// wire is the session's connection to addr.
func (s *session) wire(ctx context.Context, addr string) (*wire, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.wires[addr]; w != nil {
		if w.alive() {
			return w, nil
		}
		w.close()
		delete(s.wires, addr)
	}
	if s.wires == nil {
		return nil, errClosed
	}
	w, err := dialWire(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("rocketmq: connecting to %s: %w", addr, err)
	}
	s.wires[addr] = w
	return w, nil
}

// send writes one request's messages, one queue's, as a batch; a busy
// broker's or one that could not store them durably in time is asked
// again (Batch's Retries), the batch whole.
func (s *session) send(ctx context.Context, msgs []pending, _ int) ([]int, error) {
	first := msgs[0]
	size := 0
	for _, pd := range msgs {
		size += len(pd.msg)
	}
	body := make([]byte, 0, size)
	for _, pd := range msgs {
		body = append(body, pd.msg...)
	}
	ext := map[string]string{
		"a": s.p.cfg.ProducerGroup, "b": first.rec.Topic, "c": autoCreateTopic, "d": strconv.Itoa(autoCreateQueues),
		"e": strconv.Itoa(first.q.id), "f": "0", "g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0",
		"i": string(appendProperty(nil, "WAIT", "true")), "j": "0", "k": "false", "m": "true", "n": first.q.broker,
	}
	a, err := s.call(ctx, first.q.addr, request(codeSendBatch, ext, body))
	if err != nil {
		return nil, &SendError{Topic: first.rec.Topic, Broker: first.q.addr, Err: err}
	}
	switch a.Code {
	case respSuccess:
		return nil, nil
	}
	err = &SendError{Topic: first.rec.Topic, Broker: first.q.addr, Err: &answerError{Code: a.Code, Remark: a.Remark, signed: s.p.cfg.AccessKey != ""}}
	switch a.Code {
	case respSystemBusy, respFlushDisk, respFlushSlave, respSlaveNotAvail:
		all := make([]int, len(msgs))
		for i := range all {
			all[i] = i
		}
		return all, err
	}
	return nil, err
}

// Failed tells a session on which a request failed or a route was not
// found.
func (s *session) Failed() bool { return s.broken.Load() || s.BatchConn.Failed() }

// Close fails what waits and closes the connections.
func (s *session) Close() {
	s.BatchConn.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.wires {
		w.close()
	}
	s.wires = nil
}

// Ping asks the name servers for TBW102's route: one answering, with the
// route or without, is reachable.
func (p *Publisher) Ping(ctx context.Context) error {
	s := &session{p: p, wires: map[string]*wire{}}
	defer func() {
		for _, w := range s.wires {
			w.close()
		}
	}()
	_, err := s.askRoute(ctx, autoCreateTopic)
	var ae *answerError
	if errors.As(err, &ae) && ae.Code == respTopicNotExist {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rocketmq: no name server answers (producer.name.srv.addr, --rocketmq-name-server): %w", err)
	}
	return nil
}
