package rocketmqtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

var producers atomic.Int64

// newProducer is a producer of s that sends each message to the queue
// its Queue names, shut down when the test ends; extra are more options.
func newProducer(t *testing.T, s *Server, extra ...producer.Option) rocketmq.Producer {
	t.Helper()
	p, err := rocketmq.NewProducer(append([]producer.Option{
		producer.WithNameServer(primitive.NamesrvAddr{s.NameServer()}),
		producer.WithGroupName("rocketmqtest_producer"),
		producer.WithInstanceName(fmt.Sprintf("rocketmqtest-producer-%d-%d", os.Getpid(), producers.Add(1))),
		producer.WithQueueSelector(producer.NewManualQueueSelector()),
		producer.WithSendMsgTimeout(5 * time.Second),
		producer.WithRetry(2)}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown() })
	return p
}

// msg is a message to queue of topic on s's broker.
func msg(s *Server, topic string, queue int, body []byte, tag string, keys []string, props map[string]string) *primitive.Message {
	m := primitive.NewMessage(topic, body)
	m.Queue = &primitive.MessageQueue{Topic: topic, BrokerName: s.BrokerName(), QueueId: queue}
	if tag != "" {
		m.WithTag(tag)
	}
	if keys != nil {
		m.WithKeys(keys)
	}
	for k, v := range props {
		m.WithProperty(k, v)
	}
	return m
}

func send(t *testing.T, p rocketmq.Producer, msgs ...*primitive.Message) *primitive.SendResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := p.SendSync(ctx, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != primitive.SendOK {
		t.Fatalf("sent with status %v: %v", res.Status, res)
	}
	return res
}

// rss is a process's resident memory, from /proc.
func rss(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func TestRocketMQHarnessRoundTrip(t *testing.T) {
	s := Start(t)
	t.Logf("started in %v; name server %s, broker %s", s.Started, s.NameServer(), s.BrokerAddr())

	s.CreateTopic("orders", 4)
	if n := s.Queues("orders"); n != 4 {
		t.Fatalf("orders has %d queues, want 4", n)
	}
	if n := s.Queues("nothing"); n != 0 {
		t.Fatalf("an unknown topic has %d queues", n)
	}
	if m := s.Messages("nothing"); m != nil {
		t.Fatalf("an unknown topic has messages: %v", m)
	}
	if m := s.Messages("orders"); m != nil {
		t.Fatalf("a new topic has messages: %v", m)
	}

	p := newProducer(t, s)
	big := bytes.Repeat([]byte("0123456789"), 1000) // over the client's 4 KiB: compressed
	r1 := send(t, p, msg(s, "orders", 1, []byte("v1"), "created", []string{"k1", "k1b"}, map[string]string{"seq": "1", "type": "order"}))
	r2 := send(t, p, msg(s, "orders", 3, big, "", []string{"k2"}, map[string]string{"seq": "2"}))
	r3 := send(t, p, msg(s, "orders", 1, []byte("v3"), "", nil, nil))
	// A batch: one request, stored as one message per entry.
	send(t, p,
		msg(s, "orders", 2, []byte("b1"), "", []string{"kb1"}, map[string]string{"seq": "b1"}),
		msg(s, "orders", 2, []byte("b2"), "", []string{"kb2"}, map[string]string{"seq": "b2"}))
	// A topic nobody created: made on the first send, through TBW102.
	r5 := send(t, p, msg(s, "auto", 0, []byte("a1"), "", []string{"ka"}, map[string]string{"seq": "a1"}))
	if n := s.Queues("auto"); n != 4 { // the client's default for new topics
		t.Errorf("the auto-created topic has %d queues, want 4", n)
	}

	got := s.Messages("orders")
	type want struct {
		queue  int
		offset int64
		keys   string
		tags   string
		body   []byte
		props  map[string]string
		id     string
		comp   bool
	}
	wants := []want{
		{1, 0, "k1 k1b", "created", []byte("v1"), map[string]string{"seq": "1", "type": "order"}, r1.MsgID, false},
		{1, 1, "", "", []byte("v3"), map[string]string{}, r3.MsgID, false},
		// The Go client gives a batch's messages no UNIQ_KEY: their ID is
		// the broker's (its address and the commit log offset, in hex).
		{2, 0, "kb1", "", []byte("b1"), map[string]string{"seq": "b1"}, "", false},
		{2, 1, "kb2", "", []byte("b2"), map[string]string{"seq": "b2"}, "", false},
		{3, 0, "k2", "", big, map[string]string{"seq": "2"}, r2.MsgID, true},
	}
	if len(got) != len(wants) {
		t.Fatalf("read %d messages, want %d: %+v", len(got), len(wants), got)
	}
	// The broker adds CLUSTER, MSG_REGION and TRACE_ON.
	if want := map[string]string{"KEYS": "k1 k1b", "TAGS": "created", "UNIQ_KEY": r1.MsgID, "seq": "1", "type": "order",
		"CLUSTER": "DefaultCluster", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}; !reflect.DeepEqual(got[0].System, want) {
		t.Errorf("stored properties %v, want %v", got[0].System, want)
	}
	for i, w := range wants {
		m := got[i]
		if m.Topic != "orders" || m.Queue != w.queue || m.Offset != w.offset || m.Keys != w.keys || m.Tags != w.tags ||
			!bytes.Equal(m.Body, w.body) || !reflect.DeepEqual(m.Properties, w.props) || m.Compressed != w.comp {
			t.Errorf("message %d: %+v, want %+v", i, m, w)
		}
		if w.id != "" && (m.MsgID != w.id || m.System["UNIQ_KEY"] != w.id) {
			t.Errorf("message %d: ID %s, UNIQ_KEY %s, want %s", i, m.MsgID, m.System["UNIQ_KEY"], w.id)
		}
		if w.id == "" && (len(m.MsgID) != 32 || m.System["UNIQ_KEY"] != "") {
			t.Errorf("message %d: ID %q, UNIQ_KEY %q, want the broker's", i, m.MsgID, m.System["UNIQ_KEY"])
		}
		if m.System["CLUSTER"] != "DefaultCluster" {
			t.Errorf("message %d: CLUSTER %q", i, m.System["CLUSTER"])
		}
		if !strings.HasPrefix(m.BornHost, "127.0.0.1:") {
			t.Errorf("message %d: born at %s", i, m.BornHost)
		}
		for k, v := range m.Properties {
			if m.System[k] != v {
				t.Errorf("message %d: property %s=%s is not in System %v", i, k, v, m.System)
			}
		}
		if w.keys != "" && m.System["KEYS"] != w.keys {
			t.Errorf("message %d: KEYS %q", i, m.System["KEYS"])
		}
	}

	auto := s.Messages("auto")
	if len(auto) != 1 || auto[0].Topic != "auto" || auto[0].Queue != 0 || string(auto[0].Body) != "a1" ||
		auto[0].Keys != "ka" || !reflect.DeepEqual(auto[0].Properties, map[string]string{"seq": "a1"}) || auto[0].MsgID != r5.MsgID {
		t.Fatalf("auto-created topic: %+v", auto)
	}

	t.Logf("RSS: name server %s, broker %s", rss(s.namesrv.PID()), rss(s.broker.PID()))

	// SIGKILL keeps what was acknowledged: the page cache has it.
	s.Kill()
	s.Restart()
	t.Logf("restarted in %v", s.Started)
	if again := s.Messages("orders"); !reflect.DeepEqual(again, got) {
		t.Fatalf("after a restart, read\n%+v\nwant\n%+v", again, got)
	}
	if again := s.Messages("auto"); !reflect.DeepEqual(again, auto) {
		t.Fatalf("after a restart, the auto-created topic holds\n%+v\nwant\n%+v", again, auto)
	}
	if n := s.Queues("auto"); n != 4 {
		t.Fatalf("after a restart, the auto-created topic has %d queues", n)
	}
	// The producer carries on after the restart.
	send(t, p, msg(s, "orders", 0, []byte("after"), "", nil, nil))
	if after := s.Messages("orders"); len(after) != len(got)+1 || string(after[0].Body) != "after" || after[0].Queue != 0 {
		t.Fatalf("after the restart, read %+v", after)
	}
}

func TestRocketMQHarnessPause(t *testing.T) {
	s := Start(t)
	s.CreateTopic("paused", 1)
	p := newProducer(t, s)
	send(t, p, msg(s, "paused", 0, []byte("before"), "", nil, nil))

	s.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := p.SendSync(ctx, msg(s, "paused", 0, []byte("during"), "", nil, nil))
	cancel()
	if err == nil {
		t.Fatal("a send to a stopped broker succeeded")
	}
	s.Resume()
	send(t, p, msg(s, "paused", 0, []byte("after"), "", nil, nil))
	var bodies []string
	for _, m := range s.Messages("paused") {
		bodies = append(bodies, string(m.Body))
	}
	// The send during the pause timed out on the client's side; the broker
	// may still store it (and the client's retries of it) once it runs
	// again, before or after the next.
	after := 0
	ok := len(bodies) >= 2 && bodies[0] == "before"
	for i := 1; ok && i < len(bodies); i++ {
		switch bodies[i] {
		case "after":
			after++
		case "during":
		default:
			ok = false
		}
	}
	if !ok || after != 1 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		max, err := s.maxOffset(ctx, "paused", 0)
		t.Fatalf("read %q; queues %d, max offset %d (%v)", bodies, s.Queues("paused"), max, err)
	}
	t.Logf("read %q", bodies)
}

// A broker with ACL: the user's signed messages are stored, also to a
// topic the broker creates for them; a wrong secret key, no key or an
// unknown one are refused, saying why, and store nothing; the harness's
// own requests (signed as the admin) work; all of it again after a
// restart.
func TestRocketMQHarnessACL(t *testing.T) {
	s := StartWithACL(t, "rocketmqtest_user", "user-secret")
	t.Logf("started in %v", s.Started)
	s.CreateTopic("acl", 2)
	if n := s.Queues("acl"); n != 2 {
		t.Fatalf("acl has %d queues, want 2", n)
	}
	user := newProducer(t, s, producer.WithCredentials(primitive.Credentials{AccessKey: "rocketmqtest_user", SecretKey: "user-secret"}))
	send(t, user, msg(s, "acl", 1, []byte("v1"), "", []string{"k1"}, map[string]string{"seq": "1"}))
	send(t, user, msg(s, "acl_auto", 0, []byte("a1"), "", []string{"ka"}, nil))
	if n := s.Queues("acl_auto"); n != 4 {
		t.Fatalf("the auto-created topic has %d queues, want 4", n)
	}

	refused := func(name, want string, opts ...producer.Option) {
		t.Helper()
		p := newProducer(t, s, append(opts, producer.WithRetry(0))...)
		for _, topic := range []string{"acl", "acl_refused"} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			res, err := p.SendSync(ctx, msg(s, topic, 0, []byte("no"), "", nil, nil))
			cancel()
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s to %s: %v (%v), want an error saying %q", name, topic, res, err, want)
			}
			t.Logf("%s to %s: %v", name, topic, err)
		}
	}
	check := func() {
		t.Helper()
		refused("a wrong secret key", "check signature failed",
			producer.WithCredentials(primitive.Credentials{AccessKey: "rocketmqtest_user", SecretKey: "wrong"}))
		refused("no key", "username cannot be null")
		refused("an unknown key", "User:nobody is not found",
			producer.WithCredentials(primitive.Credentials{AccessKey: "nobody", SecretKey: "user-secret"}))
		if n := s.Queues("acl_refused"); n != 0 {
			t.Fatalf("a refused send created its topic, with %d queues", n)
		}
	}
	check()
	// The user may send, nothing else: not create a topic.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err := invoke(ctx, s.BrokerAddr(), codeUpdateAndCreateTopic, sign(map[string]string{
		"topic": "acl_user", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
		"perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
	}, nil, credentials{"rocketmqtest_user", "user-secret"}), nil)
	var answer *answerError
	if !errors.As(err, &answer) || answer.code != 16 || !strings.Contains(answer.remark, "User:rocketmqtest_user has no permission") {
		t.Fatalf("the user creating a topic: %v", err)
	}
	t.Logf("the user creating a topic: %v", err)
	if got := s.Messages("acl"); len(got) != 1 || string(got[0].Body) != "v1" || got[0].Queue != 1 || got[0].Properties["seq"] != "1" {
		t.Fatalf("acl holds %+v", got)
	}
	if got := s.Messages("acl_auto"); len(got) != 1 || string(got[0].Body) != "a1" {
		t.Fatalf("acl_auto holds %+v", got)
	}

	// Users and their policies are kept in the store.
	s.Kill()
	s.Restart()
	send(t, user, msg(s, "acl", 0, []byte("v2"), "", nil, nil))
	check()
	if got := s.Messages("acl"); len(got) != 2 || string(got[0].Body) != "v2" || string(got[1].Body) != "v1" {
		t.Fatalf("after a restart, acl holds %+v", got)
	}
}
