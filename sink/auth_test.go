package sink

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testCA is a throwaway certificate authority and a broker certificate for
// 127.0.0.1 that it signed.
type testCA struct {
	pool   *x509.CertPool
	server tls.Certificate
}

func newTestCA(t *testing.T) testCA {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pgoutbox test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "broker"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testCA{pool: pool, server: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
}

// secureBroker requires TLS and SASL/SCRAM-SHA-256 with user relay.
func secureBroker(t *testing.T, ca testCA) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{ca.server}, MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(), kfake.Superuser(MechanismScramSHA256, "relay", "s3cret-Kafka-pass"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func TestTLSAndSASL(t *testing.T) {
	ca := newTestCA(t)
	other := newTestCA(t)
	brokers := secureBroker(t, ca)
	plainBroker, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer plainBroker.Close()
	good := SASL{Mechanism: MechanismScramSHA256, Username: "relay", Password: "s3cret-Kafka-pass"}

	tests := []struct {
		name    string
		brokers []string
		sasl    SASL
		tls     *tls.Config
		want    string // "" means it must work
		auth    bool   // the error must be ErrAuth: retrying cannot fix it
	}{
		{"right credentials over TLS", brokers, good, &tls.Config{RootCAs: ca.pool}, "", false},
		{"wrong password", brokers, SASL{Mechanism: MechanismScramSHA256, Username: "relay", Password: "wrong-pass-123"}, &tls.Config{RootCAs: ca.pool}, "SASL authentication", true},
		{"untrusted CA", brokers, good, &tls.Config{RootCAs: other.pool}, "TLS certificate is not trusted", true},
		{"plaintext to a TLS broker", brokers, good, nil, "requires TLS", true},
		{"TLS to a plaintext broker", plainBroker.ListenAddrs(), SASL{}, &tls.Config{RootCAs: ca.pool}, "TLS listener", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := New(Config{Brokers: tt.brokers, SASL: tt.sasl, TLS: tt.tls, CreateTopics: true, DialTimeout: 2 * time.Second}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = k.Ping(ctx)
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
			for _, secret := range []string{"s3cret-Kafka-pass", "wrong-pass-123"} {
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
