package kafkatest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// The listeners of Options.MTLS and Options.OAuth take records from a
// client with a certificate the CA signed, and from one with a token the
// issuer granted; Kafka checks the token's signature against the
// issuer's keys.
func TestKafkaAuthListeners(t *testing.T) {
	is := NewIssuer(t, time.Minute)
	b := Start(t, Options{MTLS: true, OAuth: is})
	dir := t.TempDir()
	certFile, keyFile := b.CA.ClientFiles(t, dir, "relay", time.Now().Add(time.Hour))
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	token := func(ctx context.Context) (oauth.Auth, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, is.TokenURL(), strings.NewReader(url.Values{"grant_type": {"client_credentials"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(is.ClientID, is.ClientSecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return oauth.Auth{}, err
		}
		defer resp.Body.Close()
		var answer struct {
			AccessToken string `json:"access_token"`
		}
		err = json.NewDecoder(resp.Body).Decode(&answer)
		return oauth.Auth{Token: answer.AccessToken}, err
	}
	for _, tc := range []struct {
		name    string
		brokers []string
		opts    []kgo.Opt
	}{
		{"mutual TLS", b.MTLS, []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: b.CA.Pool, Certificates: []tls.Certificate{cert}})}},
		{"OAUTHBEARER", b.OAuth, []kgo.Opt{kgo.SASL(oauth.Oauth(token))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := kgo.NewClient(append(tc.opts, kgo.SeedBrokers(tc.brokers...), kgo.AllowAutoTopicCreation())...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "auth", Value: []byte(tc.name)}).FirstErr(); err != nil {
				t.Fatalf("produce: %v\n%s", err, b.Log())
			}
		})
	}
	if is.Grants() == 0 {
		t.Error("no token was granted")
	}
}
