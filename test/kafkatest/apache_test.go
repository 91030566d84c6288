package kafkatest

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Every listener of the shared broker takes records and serves them back:
// plaintext, SCRAM-SHA-256 and -512 over TLS, PLAIN and SCRAM without TLS,
// and the listener behind the fault proxy. The limited user is refused.
func TestKafkaSharedListeners(t *testing.T) {
	start := time.Now()
	b := SharedLocal(t)
	t.Logf("shared broker serving after %v", time.Since(start).Round(time.Millisecond))
	tlsConf := &tls.Config{RootCAs: b.CA.Pool}
	for _, tc := range []struct {
		name    string
		brokers []string
		mech    sasl.Mechanism
		tls     *tls.Config
	}{
		{"plaintext", b.Brokers, nil, nil},
		{"SCRAM-SHA-256 over TLS", b.SASLSSL, scram.Auth{User: User, Pass: Password}.AsSha256Mechanism(), tlsConf},
		{"SCRAM-SHA-512 over TLS", b.SASLSSL, scram.Auth{User: User, Pass: Password}.AsSha512Mechanism(), tlsConf},
		{"PLAIN", b.SASLPlaintext, plain.Auth{User: User, Pass: Password}.AsMechanism(), nil},
		{"SCRAM-SHA-512", b.SASLPlaintext, scram.Auth{User: User, Pass: Password}.AsSha512Mechanism(), nil},
		{"proxied", b.Proxied, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []kgo.Opt{kgo.SeedBrokers(tc.brokers...), kgo.AllowAutoTopicCreation(), kgo.MetadataMinAge(100 * time.Millisecond)}
			if tc.mech != nil {
				opts = append(opts, kgo.SASL(tc.mech))
			}
			if tc.tls != nil {
				opts = append(opts, kgo.DialTLSConfig(tc.tls))
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			topic := uniqueTopic("listener")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := cl.ProduceSync(ctx, records(topic, 3)...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			checkValues(t, Consume(t, b.Brokers, []string{topic}, 3, 20*time.Second), 3)
		})
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.SASLPlaintext...), kgo.AllowAutoTopicCreation(),
		kgo.SASL(scram.Auth{User: LimitedUser, Pass: LimitedPassword}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = cl.ProduceSync(ctx, records(uniqueTopic("refused"), 1)...).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("the limited user's produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

// A broker of the test's own, killed with SIGKILL right after its acks and
// restarted on its data, on the same address, serves every acked record.
func TestKafkaKillKeepsAckedRecords(t *testing.T) {
	start := time.Now()
	b := Start(t, Options{})
	t.Logf("serving after %v", time.Since(start).Round(time.Millisecond))
	addr := b.Brokers[0]
	produce(t, b.Brokers, records("kept", 100)...)
	b.Kill()
	start = time.Now()
	b.Start()
	t.Logf("restarted on its data, serving after %v", time.Since(start).Round(time.Millisecond))
	if b.Brokers[0] != addr {
		t.Fatalf("restarted on %s, want %s", b.Brokers[0], addr)
	}
	checkValues(t, Consume(t, b.Brokers, []string{"kept"}, 100, 30*time.Second), 100)
	b.Stop()
	b.Start()
	checkValues(t, Consume(t, b.Brokers, []string{"kept"}, 100, 30*time.Second), 100)
}
