package sink

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

func TestMain(m *testing.M) { os.Exit(kafkatest.Main(m).Run()) }

// Apache Kafka's listeners: SASL_SSL (SCRAM over TLS), plaintext, and
// SASL_PLAINTEXT (PLAIN).
func TestTLSAndSASL(t *testing.T) {
	b := kafkatest.SharedLocal(t)
	ca := b.CA
	other := tlstest.New(t)
	brokers := b.SASLSSL
	good := SASL{Mechanism: MechanismScramSHA256, Username: kafkatest.User, Password: kafkatest.Password}

	tests := []struct {
		name    string
		brokers []string
		sasl    SASL
		tls     *tls.Config
		want    string // "" means it must work
		auth    bool   // the error must be ErrAuth: retrying cannot fix it
	}{
		{"right credentials over TLS", brokers, good, &tls.Config{RootCAs: ca.Pool}, "", false},
		{"wrong password", brokers, SASL{Mechanism: MechanismScramSHA256, Username: kafkatest.User, Password: "wrong-pass-123"}, &tls.Config{RootCAs: ca.Pool}, `SASL SCRAM-SHA-256 authentication failed for user "relay" on broker ` + brokers[0], true},
		{"untrusted CA", brokers, good, &tls.Config{RootCAs: other.Pool}, "TLS certificate is not trusted", true},
		{"plaintext to a TLS broker", brokers, good, nil, "requires TLS", true},
		// The documented promise: a TLS or SASL mismatch stops the relay,
		// it is not retried.
		{"TLS to a plaintext broker", b.Brokers, SASL{}, &tls.Config{RootCAs: ca.Pool}, "speaks plaintext, not TLS", true},
		{"TLS and SASL to a plaintext broker", b.Brokers, good, &tls.Config{RootCAs: ca.Pool}, "speaks plaintext, not TLS", true},
		{"no SASL to a SASL broker", b.SASLPlaintext, SASL{}, nil, "requires SASL", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, ctx, err := pinged(t, Config{Brokers: tt.brokers, SASL: tt.sasl, TLS: tt.tls, CreateTopics: true})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ping: %v", err)
				}
				done := make(chan error, 1)
				if err := k.Produce(ctx, &kgo.Record{Topic: "t", Value: []byte("x")}, func(_ *kgo.Record, err error) { done <- err }); err != nil {
					t.Fatal(err)
				}
				if err := <-done; err != nil {
					t.Fatalf("produce: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || errors.Is(err, ErrAuth) != tt.auth {
				t.Fatalf("got %v, want an error saying %q (ErrAuth: %v)", err, tt.want, tt.auth)
			}
			for _, secret := range []string{kafkatest.Password, "wrong-pass-123"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the error shows the password: %v", err)
				}
			}
		})
	}
}

func TestSASLValidation(t *testing.T) {
	for _, s := range []SASL{
		{Mechanism: "GSSAPI", Username: "relay", Password: "Pa55-word-xyz"},
		{Mechanism: MechanismPlain, Username: "relay"},
		{Username: "relay", Password: "Pa55-word-xyz"},
	} {
		c := Config{Brokers: []string{"x:1"}, SASL: s}
		c.Defaults()
		err := c.Validate()
		if err == nil {
			t.Errorf("%+v accepted", s)
		} else if s.Password != "" && strings.Contains(err.Error(), s.Password) {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

// A broker that closes every connection right after the first request, as
// one going down or cut off by a proxy does, is retried: it says nothing
// about the credentials, and a relay starting then must not stop for good.
func TestClosingBrokerIsNotARefusal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var b [64]byte
				c.Read(b[:])
			}()
		}
	}()
	ca := tlstest.New(t)
	tests := []struct {
		name string
		sasl SASL
		tls  *tls.Config
	}{
		{"plaintext", SASL{}, nil},
		{"SASL", SASL{Mechanism: MechanismPlain, Username: "u", Password: "secret-pass-1"}, nil},
		{"TLS", SASL{}, &tls.Config{RootCAs: ca.Pool}},
		{"SASL over TLS", SASL{Mechanism: MechanismScramSHA256, Username: "u", Password: "secret-pass-1"}, &tls.Config{RootCAs: ca.Pool}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := pinged(t, Config{Brokers: []string{ln.Addr().String()}, SASL: tt.sasl, TLS: tt.tls})
			if err == nil || errors.Is(err, ErrAuth) {
				t.Fatalf("got %v, want an error that is not ErrAuth", err)
			}
		})
	}
}

// pinged makes a producer from cfg (a 2 s dial timeout), closed when the
// test ends, and pings it within 10 s: the producer, the ping's context
// and its answer.
func pinged(t *testing.T, cfg Config) (*Kafka, context.Context, error) {
	t.Helper()
	cfg.DialTimeout = 2 * time.Second
	k, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return k, ctx, k.Ping(ctx)
}
