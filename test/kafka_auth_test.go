package test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

// oauthLifetime is how long the issuer's tokens live: the refresh
// subtest runs three times as long.
const oauthLifetime = 5 * time.Second

// Apache Kafka as production runs it, through the binary: a listener that
// requires a client certificate, and one that takes OAUTHBEARER tokens
// from a token endpoint, checked against the issuer's keys. One broker
// serves every subtest. What is wrong stops run at start with the cause;
// an endpoint that is down is waited for; tokens are refreshed before they
// expire, and nothing is lost across a run longer than their lifetime.
func TestKafkaAuthModes(t *testing.T) {
	e := testenv.New(t)
	is := kafkatest.NewIssuer(t, oauthLifetime)
	b := kafkatest.Start(t, kafkatest.Options{MTLS: true, OAuth: is})
	dir := t.TempDir()
	ca := b.CA.WritePEM(t, dir)
	other := tlstest.New(t)
	otherCA := other.WritePEM(t, t.TempDir())
	cert, key := b.CA.ClientFiles(t, dir, "relay", time.Now().Add(time.Hour))
	expCert, expKey := b.CA.ClientFiles(t, dir, "expired", time.Now().Add(-time.Hour))
	strangerCert, strangerKey := other.ClientFiles(t, dir, "stranger", time.Now().Add(time.Hour))
	mtls := func(more ...string) []string {
		return append([]string{"run", "--database-url", e.URL, "--kafka-brokers", strings.Join(b.MTLS, ","), "--kafka-tls-ca", ca}, more...)
	}
	oauth := func(url string, more ...string) []string {
		return append([]string{"run", "--database-url", e.URL, "--kafka-brokers", strings.Join(b.OAuth, ","), "--kafka-sasl-mechanism", "OAUTHBEARER",
			"--kafka-oauth-token-url", url, "--kafka-oauth-client-id", is.ClientID, "--kafka-oauth-scope", "kafka"}, more...)
	}
	secret := "PGOUTBOX_KAFKA_OAUTH_CLIENT_SECRET=" + is.ClientSecret
	awsIAM := []string{"run", "--database-url", e.URL, "--kafka-brokers", strings.Join(b.OAuth, ","), "--kafka-sasl-mechanism", "AWS_MSK_IAM"}
	awsEnv := func(key, secret string) []string {
		none := filepath.Join(t.TempDir(), "none")
		return []string{"AWS_ACCESS_KEY_ID=" + key, "AWS_SECRET_ACCESS_KEY=" + secret, "AWS_SESSION_TOKEN=", "AWS_PROFILE=",
			"AWS_SHARED_CREDENTIALS_FILE=" + none, "AWS_CONFIG_FILE=" + none, "AWS_EC2_METADATA_DISABLED=true", "AWS_REGION=eu-west-3",
			"AWS_WEB_IDENTITY_TOKEN_FILE=", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=", "AWS_CONTAINER_CREDENTIALS_FULL_URI="}
	}
	for _, tt := range []struct {
		name  string
		env   []string
		args  []string
		code  int // -1: still running when stopped
		wants []string
	}{
		{"mutual TLS: a certificate the broker trusts", nil, mtls("--kafka-tls-cert", cert, "--kafka-tls-key", key), -1, []string{`"msg":"streaming"`}},
		{"mutual TLS: the broker's CA not trusted", nil,
			[]string{"run", "--database-url", e.URL, "--kafka-brokers", strings.Join(b.MTLS, ","), "--kafka-tls-ca", otherCA, "--kafka-tls-cert", cert, "--kafka-tls-key", key},
			1, []string{"TLS certificate is not trusted", "--kafka-tls-ca"}},
		{"mutual TLS: an expired client certificate", nil, mtls("--kafka-tls-cert", expCert, "--kafka-tls-key", expKey), 1,
			[]string{"--kafka-tls-cert: the client certificate", "expired"}},
		{"mutual TLS: a certificate the broker does not trust", nil, mtls("--kafka-tls-cert", strangerCert, "--kafka-tls-key", strangerKey), 1,
			[]string{"refused the TLS handshake", b.MTLS[0], "client certificate"}},
		{"mutual TLS: no client certificate", nil, mtls(), 1, []string{"refused the TLS handshake", "requires a client certificate", "--kafka-tls-cert"}},
		{"OAUTHBEARER: a wrong client secret", []string{"PGOUTBOX_KAFKA_OAUTH_CLIENT_SECRET=Wrong-Client-Secret-8"}, oauth(is.TokenURL()), 1,
			[]string{"OAuth token endpoint " + is.TokenURL() + " refused the client credentials (HTTP 401)", "invalid_client"}},
		// No MSK here: the mechanism reaches a broker that does not offer
		// it, with the chain's credentials; without any, it says so.
		{"AWS_MSK_IAM: a listener without it", awsEnv("AKIDEXAMPLE", "Aws-Secret-Key-4"), awsIAM, 1,
			[]string{"does not offer SASL AWS_MSK_IAM", b.OAuth[0]}},
		{"AWS_MSK_IAM: no credentials", awsEnv("", ""), awsIAM, 1,
			[]string{"AWS credentials for AWS_MSK_IAM"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := 20 * time.Second
			if tt.code == -1 {
				d = 8 * time.Second
			}
			code, out := testenv.RunOnce(t, d, tt.env, append(tt.args, "--log-format", "json")...)
			testenv.ExpectOutput(t, code, tt.code, out, tt.wants, []string{is.ClientSecret, "Wrong-Client-Secret-8", "Aws-Secret-Key-4"})
		})
	}
	// An endpoint that does not answer is waited for, and status names
	// it as the Kafka problem.
	t.Run("OAUTHBEARER: the token endpoint unreachable", func(t *testing.T) {
		r := testenv.StartBinaryEnv(t, []string{secret}, append(oauth("http://127.0.0.1:1/token"), "--log-format", "json")...)
		const want = "OAuth token endpoint http://127.0.0.1:1/token unreachable"
		var st testenv.Status
		testenv.Eventually(t, 20*time.Second, "streaming", func() bool { return strings.Contains(r.Out.String(), `"msg":"streaming"`) })
		testenv.Eventually(t, 20*time.Second, "status naming the token endpoint", func() bool {
			st, _ = e.Status(t)
			return strings.Contains(st.KafkaProblem, want)
		})
		t.Logf("status: kafka: %s", st.KafkaProblem)
		r.Stop(t)
		testenv.ExpectOutput(t, 0, 0, r.Out.String(), []string{want}, []string{is.ClientSecret})
	})
	t.Run("OAUTHBEARER: tokens refreshed before they expire", func(t *testing.T) {
		grants := is.Grants()
		r := testenv.StartBinaryEnv(t, []string{secret}, append(oauth(is.TokenURL()), "--topic", "oauth.events", "--log-format", "json")...)
		testenv.Eventually(t, 20*time.Second, "streaming", func() bool { return strings.Contains(r.Out.String(), `"msg":"streaming"`) })
		// Events throughout three lifetimes of a token: each is
		// delivered, on connections that authenticated again with fresh
		// tokens.
		var ids []string
		end := time.Now().Add(3 * oauthLifetime)
		for i := 0; time.Now().Before(end); i++ {
			ids = append(ids, e.Insert(testenv.NewRow("order", fmt.Sprintf("o-%d", i%5), "Placed", `{"n":1}`))...)
			time.Sleep(100 * time.Millisecond)
		}
		kafkatest.Consume(t, b.Brokers, []string{"oauth.events"}, len(ids), 30*time.Second)
		testenv.AwaitIDs(t, b.Brokers, "oauth.events", ids, 10*time.Second)
		n := is.Grants() - grants
		if n < 3 {
			t.Errorf("%d tokens granted in %v of tokens living %v: not refreshed", n, 3*oauthLifetime, oauthLifetime)
		}
		t.Logf("%d events over %v, %d tokens granted (each living %v)", len(ids), 3*oauthLifetime, n, oauthLifetime)
		r.Stop(t)
		if out := r.Out.String(); strings.Contains(out, "SASL") || strings.Contains(out, `"level":"ERROR"`) {
			t.Errorf("authentication failed on the way:\n%s", out)
		}
	})
}
