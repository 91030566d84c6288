package rocketmq

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestFrameRoundTrip(t *testing.T) {
	c := request(codeSendBatch, map[string]string{"a": "g", "b": "orders"}, []byte("body"))
	c.Opaque = 7
	f, err := appendFrame(nil, c)
	if err != nil {
		t.Fatal(err)
	}
	if n := binary.BigEndian.Uint32(f); int(n) != len(f)-4 {
		t.Fatalf("length %d, frame of %d", n, len(f)-4)
	}
	if mark := binary.BigEndian.Uint32(f[4:]); mark>>24 != 0 {
		t.Fatalf("header encoding %d, want 0 (JSON)", mark>>24)
	}
	got, err := readFrame(bytes.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	if got.Code != codeSendBatch || got.Opaque != 7 || got.ExtFields["b"] != "orders" || string(got.body) != "body" ||
		got.Language != "GO" || got.Version != version || got.Serialize != "JSON" {
		t.Fatalf("read back %+v", got)
	}
}

func TestParseFrameRefuses(t *testing.T) {
	for name, f := range map[string][]byte{
		"short":         {0, 0},
		"not JSON":      append([]byte{0, 0, 0, 2}, 'x', 'y'),
		"long header":   {0, 0, 0, 9, '{', '}'},
		"rocketmq type": {1, 0, 0, 2, '{', '}'},
	} {
		if _, err := parseFrame(f); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// A route as a name server writes it: brokerAddrs keyed by bare numbers.
const routeBody = `{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.2:10911",1:"10.0.0.3:10911"},"brokerName":"broker-b","cluster":"c"},` +
	`{"brokerAddrs":{1:"10.0.0.5:10911"},"brokerName":"broker-c","cluster":"c"},` +
	`{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a","cluster":"c","note":"{0:\"x\"}"}],` +
	`"filterServerTable":{},"queueDatas":[{"brokerName":"broker-b","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2},` +
	`{"brokerName":"broker-c","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4},` +
	`{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":3},` +
	`{"brokerName":"broker-r","perm":4,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}`

func TestRouteQueues(t *testing.T) {
	r, err := parseRoute([]byte(routeBody))
	if err != nil {
		t.Fatal(err)
	}
	qs, err := r.queues(0)
	if err != nil {
		t.Fatal(err)
	}
	// By broker name; broker-c has no master, broker-r no write permission.
	want := []queue{{"broker-a", "10.0.0.1:10911", 0}, {"broker-a", "10.0.0.1:10911", 1}, {"broker-a", "10.0.0.1:10911", 2},
		{"broker-b", "10.0.0.2:10911", 0}, {"broker-b", "10.0.0.2:10911", 1}}
	if len(qs) != len(want) {
		t.Fatalf("queues %v, want %v", qs, want)
	}
	for i := range want {
		if qs[i] != want[i] {
			t.Fatalf("queues %v, want %v", qs, want)
		}
	}
	if qs, _ := r.queues(1); len(qs) != 2 {
		t.Fatalf("limited to one a broker: %v", qs)
	}
	r.OrderTopicConf = "broker-b:3;broker-a:1"
	qs, _ = r.queues(0)
	if len(qs) != 4 || qs[0] != (queue{"broker-b", "10.0.0.2:10911", 0}) || qs[3] != (queue{"broker-a", "10.0.0.1:10911", 0}) {
		t.Fatalf("orderTopicConf's queues %v", qs)
	}
	r.OrderTopicConf = ""
	r.Mapping = map[string]json.RawMessage{"broker-a": json.RawMessage(`{}`)}
	if _, err := r.queues(0); err == nil {
		t.Fatal("a static topic: no error")
	}
}

func TestQuoteKeys(t *testing.T) {
	for in, want := range map[string]string{
		`{0:"a",1:"b"}`:               `{"0":"a","1":"b"}`,
		`{ 0 : "a" , -1: "b"}`:        `{ "0" : "a" , "-1": "b"}`,
		`{"k":[0,1],"n":12}`:          `{"k":[0,1],"n":12}`,
		`{"s":"{0:\"x\",1:2}"}`:       `{"s":"{0:\"x\",1:2}"}`,
		`{"s":"a\\",0:"b"}`:           `{"s":"a\\","0":"b"}`,
		`[{0:{1:"x"}},{"a":{2:"y"}}]`: `[{"0":{"1":"x"}},{"a":{"2":"y"}}]`,
	} {
		if got := string(quoteKeys([]byte(in))); got != want {
			t.Errorf("quoteKeys(%s) = %s, want %s", in, got, want)
		}
	}
}

// Java's String.hashCode, and SelectMessageQueueByHash's remainder made
// positive: the hashes are what Java 17 printed for these strings.
func TestPick(t *testing.T) {
	for _, c := range []struct {
		key  string
		n    int
		want int
	}{
		{"hello", 4, 99162322 % 4},
		{"Hello World", 4, 862545276 % 4}, // -862545276
		{"Hello World", 3, 862545276 % 3},
		{"polygenelubricants", 3, 2}, // Integer.MIN_VALUE % 3 is -2
		{"polygenelubricants", 4, 0},
		{"", 5, 0},
		{"주문-42", 7, 1700230191 % 7},
		{"café-7", 5, 1367835765 % 5}, // -1367835765
	} {
		if got := pick(c.key, c.n); got != c.want {
			t.Errorf("pick(%q, %d) = %d, want %d", c.key, c.n, got, c.want)
		}
	}
}

func TestAppendMessage(t *testing.T) {
	props := appendProperty(appendProperty(nil, "KEYS", "k1"), "eventType", "Created")
	m := appendMessage(nil, []byte(`{"a":1}`), props)
	if got := binary.BigEndian.Uint32(m); int(got) != len(m) {
		t.Fatalf("size %d, message of %d", got, len(m))
	}
	if bl := binary.BigEndian.Uint32(m[16:]); bl != 7 || string(m[20:27]) != `{"a":1}` {
		t.Fatalf("body %d %q", bl, m[20:27])
	}
	if pl := binary.BigEndian.Uint16(m[27:]); int(pl) != len(props) || string(m[29:]) != "KEYS\x01k1\x02eventType\x01Created\x02" {
		t.Fatalf("properties %d %q", pl, m[29:])
	}
}

// The signature of AclClientRPCHook: the header fields' values in the
// order of their names (AccessKey among them), then the body, HMAC-SHA1.
func TestSign(t *testing.T) {
	c := request(codeRoute, map[string]string{"topic": "orders", "b": "x"}, []byte("body"))
	c.sign("ak", "sk")
	if c.ExtFields["AccessKey"] != "ak" {
		t.Fatalf("AccessKey %q", c.ExtFields["AccessKey"])
	}
	// printf 'akxordersbody' | openssl dgst -sha1 -hmac sk -binary | base64
	if got, want := c.ExtFields["Signature"], "sNTuVfMc+TCN8cXvQvkyYqXqT38="; got != want {
		t.Fatalf("Signature %s, want %s", got, want)
	}
	n := request(codeRoute, nil, nil)
	n.sign("", "")
	if n.ExtFields != nil {
		t.Fatal("signed without a key")
	}
}

func TestIDs(t *testing.T) {
	g := newIDs()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.Local)
	a, b := g.next(now), g.next(now)
	if len(a) != 32 || a == b || strings.ToUpper(a) != a || a[:28] != b[:28] {
		t.Fatalf("ids %s %s", a, b)
	}
	ms := now.Sub(time.Date(2026, 11, 1, 0, 0, 0, 0, time.Local)).Milliseconds()
	if got := a[20:28]; got != strings.ToUpper(hex8(uint32(ms))) {
		t.Fatalf("time part %s, want %s", got, hex8(uint32(ms)))
	}
}

func hex8(v uint32) string {
	const digits = "0123456789ABCDEF"
	b := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		b[i] = digits[v&0xF]
		v >>= 4
	}
	return string(b)
}

func TestCheckTopic(t *testing.T) {
	for topic, ok := range map[string]bool{
		"orders": true, "outbox_event_order": true, "a%b|c-d": true,
		"outbox.event.order": false, "": false, strings.Repeat("x", 128): false, "TBW102": false, "SCHEDULE_TOPIC_XXXX": false,
	} {
		if got := checkTopic(topic) == ""; got != ok {
			t.Errorf("checkTopic(%q) ok %v, want %v", topic, got, ok)
		}
	}
}

func FuzzParseFrame(f *testing.F) {
	c := request(codeRoute, map[string]string{"topic": "t"}, []byte(routeBody))
	fr, _ := appendFrame(nil, c)
	f.Add(fr[4:])
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseFrame(b)
		if err != nil {
			return
		}
		_, _ = parseRoute(c.body)
	})
}

func FuzzQuoteKeys(f *testing.F) {
	f.Add([]byte(routeBody))
	f.Add([]byte(`{"s":"a\\",0:"b"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out := quoteKeys(b)
		if json.Valid(b) && !json.Valid(out) {
			t.Fatalf("valid JSON %q made invalid: %q", b, out)
		}
		if json.Valid(b) && !bytes.Equal(out, b) {
			t.Fatalf("valid JSON %q changed: %q", b, out)
		}
	})
}
