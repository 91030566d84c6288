package rocketmq

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/test/rocketmqtest"
	"github.com/pgoutbox/pgoutbox/test/sinktest"
)

// The key pair a broker with ACL knows (StartWithACL): it may send to
// every topic.
const (
	aclAccessKey = "pgoutbox_acl"
	aclSecretKey = "pgoutbox-acl-secret"
)

// A broker with ACL (RocketMQ 5.3.3's ACL 2.0, which checks the Java
// client's AclClientRPCHook signatures) stores what a publisher with the
// right keys signed: records with headers, in batches of several
// requests, to a topic that exists and to one the broker creates at the
// first message.
func TestACLSigned(t *testing.T) {
	s := rocketmqtest.StartWithACL(t, aclAccessKey, aclSecretKey)
	s.CreateTopic("acl_orders", 2)
	p := publisher(t, s.NameServer(), Config{AccessKey: aclAccessKey, SecretKey: aclSecretKey})
	if err := p.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 300 {
		// Keys and header values beyond ASCII: the body, which the
		// signature covers, holds them.
		recs = append(recs, record("acl_orders", fmt.Sprintf("주문-%d", i%5), fmt.Sprintf(`{"n":%d}`, i),
			"id", fmt.Sprint(i), "eventType", "Placed", "note", "ü €"))
	}
	recs = append(recs, record("acl_created", "k", `{"new":1}`, "id", "new"))
	got, errs := sinktest.Produce(t, p, recs)
	for i, err := range errs {
		if err != nil || got[i] != recs[i] {
			t.Fatalf("promise %d: %v", i, err)
		}
	}
	msgs := s.Messages("acl_orders")
	if len(msgs) != 300 {
		t.Fatalf("%d messages in acl_orders, want 300", len(msgs))
	}
	seen := map[int]bool{}
	for _, m := range msgs {
		var n int
		if _, err := fmt.Sscanf(string(m.Body), `{"n":%d}`, &n); err != nil {
			t.Fatalf("body %q", m.Body)
		}
		want := fmt.Sprintf("주문-%d", n%5)
		if m.Keys != want || m.Queue != pick(want, 2) || seen[n] {
			t.Fatalf("message %d: keys %q queue %d (seen %v), want %q in queue %d", n, m.Keys, m.Queue, seen[n], want, pick(want, 2))
		}
		seen[n] = true
		if m.Properties["id"] != fmt.Sprint(n) || m.Properties["eventType"] != "Placed" || m.Properties["note"] != "ü €" || len(m.Properties) != 3 {
			t.Fatalf("message %d: properties %v", n, m.Properties)
		}
	}
	if q := s.Queues("acl_created"); q != 4 {
		t.Fatalf("the created topic has %d queues, want 4", q)
	}
	if created := s.Messages("acl_created"); len(created) != 1 || string(created[0].Body) != `{"new":1}` || created[0].Properties["id"] != "new" {
		t.Fatalf("acl_created holds %+v", created)
	}
}

// A publisher with a wrong secret key, or with none, fails: nothing is
// stored (nor a topic created), and the error says why.
func TestACLRefused(t *testing.T) {
	s := rocketmqtest.StartWithACL(t, aclAccessKey, aclSecretKey)
	s.CreateTopic("acl_refused", 2)
	for _, c := range []struct {
		name       string
		cfg        Config
		want, hint string
	}{
		{"a wrong secret key", Config{AccessKey: aclAccessKey, SecretKey: "not-" + aclSecretKey}, "check signature failed", "its secret key"},
		{"no keys", Config{}, "username cannot be null", "signed with an access key: set --rocketmq-access-key"},
		{"an unknown access key", Config{AccessKey: "nobody", SecretKey: aclSecretKey}, "User:nobody is not found", "its secret key"},
	} {
		for _, topic := range []string{"acl_refused", "acl_refused_new"} {
			p := publisher(t, s.NameServer(), c.cfg)
			err := tryProduce(p, []*kgo.Record{
				record(topic, "k1", `{"n":1}`, "id", "1"),
				record(topic, "k2", `{"n":2}`, "id", "2"),
			})
			if err == nil {
				t.Fatalf("%s: records to %s counted as sent", c.name, topic)
			}
			t.Logf("%s, to %s: %v", c.name, topic, err)
			if !strings.Contains(err.Error(), "no permission") || !strings.Contains(err.Error(), "access key") ||
				!strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.hint) {
				t.Errorf("%s, to %s: the error %q does not say %q and %q", c.name, topic, err, c.want, c.hint)
			}
		}
	}
	if m := s.Messages("acl_refused"); len(m) != 0 {
		t.Fatalf("refused records stored: %+v", m)
	}
	if q := s.Queues("acl_refused_new"); q != 0 {
		t.Fatalf("a refused record created its topic, with %d queues", q)
	}
	// The right keys, to the same broker, are taken.
	p := publisher(t, s.NameServer(), Config{AccessKey: aclAccessKey, SecretKey: aclSecretKey})
	if err := tryProduce(p, []*kgo.Record{record("acl_refused", "k1", `{"n":3}`, "id", "3")}); err != nil {
		t.Fatal(err)
	}
	if m := s.Messages("acl_refused"); len(m) != 1 || string(m[0].Body) != `{"n":3}` {
		t.Fatalf("acl_refused holds %+v", m)
	}
}
