package test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
	"software.sslmate.com/src/go-pkcs12"
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
	js := javaStores(t, dir, ca, cert, key)
	storePasswords := []string{"PGOUTBOX_KAFKA_TLS_CA_PASSWORD=Trust-Pass-1", "PGOUTBOX_KAFKA_TLS_CERT_PASSWORD=Jks-Pass-2", "PGOUTBOX_KAFKA_TLS_KEY_PASSWORD=Key-Pass-3"}
	javaMTLS := func(certFile string) []string {
		return []string{"run", "--database-url", e.URL, "--kafka-brokers", strings.Join(b.MTLS, ","), "--kafka-tls-ca", js.trustJKS, "--kafka-tls-cert", certFile}
	}
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
		// Java's stores, as Kafka clients keep them: a JKS trust store, a
		// JKS key store whose key has a password of its own, a PKCS12 one.
		{"mutual TLS: Java stores, JKS", storePasswords, javaMTLS(js.clientJKS), -1, []string{`"msg":"streaming"`}},
		{"mutual TLS: Java stores, PKCS12", []string{"PGOUTBOX_KAFKA_TLS_CA_PASSWORD=Trust-Pass-1", "PGOUTBOX_KAFKA_TLS_CERT_PASSWORD=P12-Pass-4"},
			javaMTLS(js.clientP12), -1, []string{`"msg":"streaming"`}},
		{"mutual TLS: a key store's wrong password", []string{"PGOUTBOX_KAFKA_TLS_CA_PASSWORD=Trust-Pass-1", "PGOUTBOX_KAFKA_TLS_CERT_PASSWORD=Wrong-Pass-5"},
			javaMTLS(js.clientP12), 1, []string{"--kafka-tls-cert " + js.clientP12, "wrong password"}},
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
			testenv.ExpectOutput(t, code, tt.code, out, tt.wants, []string{is.ClientSecret, "Wrong-Client-Secret-8", "Aws-Secret-Key-4",
				"Trust-Pass-1", "Jks-Pass-2", "Key-Pass-3", "P12-Pass-4", "Wrong-Pass-5"})
		})
	}
	// The same stores named as Debezium Server's Kafka sink names them
	// (Kafka's default store type, JKS, for the trust store), given to
	// run --config.
	t.Run("mutual TLS: Java stores in a Debezium Server configuration", func(t *testing.T) {
		host, port, user, db := testenv.DebeziumDB(t, e)
		props := filepath.Join(t.TempDir(), "application.properties")
		conf := "debezium.sink.type=kafka\n" +
			"debezium.sink.kafka.producer.bootstrap.servers=" + strings.Join(b.MTLS, ",") + "\n" +
			"debezium.sink.kafka.producer.key.serializer=org.apache.kafka.common.serialization.StringSerializer\n" +
			"debezium.sink.kafka.producer.value.serializer=org.apache.kafka.common.serialization.StringSerializer\n" +
			"debezium.sink.kafka.producer.security.protocol=SSL\n" +
			"debezium.sink.kafka.producer.ssl.truststore.location=" + js.trustJKS + "\n" +
			"debezium.sink.kafka.producer.ssl.truststore.password=${TRUST_PASSWORD}\n" +
			"debezium.sink.kafka.producer.ssl.keystore.type=JKS\n" +
			"debezium.sink.kafka.producer.ssl.keystore.location=" + js.clientJKS + "\n" +
			"debezium.sink.kafka.producer.ssl.keystore.password=${KEYSTORE_PASSWORD}\n" +
			"debezium.sink.kafka.producer.ssl.key.password=${KEY_PASSWORD}\n" +
			"debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
			"debezium.source.database.hostname=" + host + "\ndebezium.source.database.port=" + port + "\n" +
			"debezium.source.database.user=" + user + "\ndebezium.source.database.dbname=" + db + "\n" +
			"debezium.source.topic.prefix=shop\ndebezium.source.plugin.name=pgoutput\ndebezium.source.slot.name=java_stores\n" +
			"debezium.source.table.include.list=public.outbox\ndebezium.source.snapshot.mode=no_data\n" +
			"debezium.transforms=outbox\ndebezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n"
		if err := os.WriteFile(props, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		env := []string{"TRUST_PASSWORD=Trust-Pass-1", "KEYSTORE_PASSWORD=Jks-Pass-2", "KEY_PASSWORD=Key-Pass-3"}
		code, out := testenv.RunOnce(t, 8*time.Second, env, "run", "--config", props, "--log-format", "json")
		testenv.ExpectOutput(t, code, -1, out, []string{`"msg":"streaming"`}, []string{"Trust-Pass-1", "Jks-Pass-2", "Key-Pass-3"})
	})
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

// javaFiles are Java stores of the harness CA's PEM files.
type javaFiles struct{ trustJKS, clientJKS, clientP12 string }

// javaStores writes, with Java's keytool, a JKS trust store of ca
// (Trust-Pass-1), and of the client's cert and key a PKCS12 key store
// (P12-Pass-4, AES as keytool and OpenSSL 3 write it) and a JKS one
// (Jks-Pass-2, the key under Key-Pass-3).
func javaStores(t *testing.T, dir, ca, cert, key string) javaFiles {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(ca)
	block, _ := pem.Decode(caPEM)
	caCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	f := javaFiles{filepath.Join(dir, "trust.jks"), filepath.Join(dir, "client.jks"), filepath.Join(dir, "client.p12")}
	p12, err := pkcs12.Modern.Encode(pair.PrivateKey, pair.Leaf, []*x509.Certificate{caCert}, "P12-Pass-4")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.clientP12, p12, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-importcert", "-noprompt", "-alias", "ca", "-file", ca, "-keystore", f.trustJKS, "-storetype", "JKS", "-storepass", "Trust-Pass-1"},
		{"-importkeystore", "-noprompt", "-srckeystore", f.clientP12, "-srcstoretype", "PKCS12", "-srcstorepass", "P12-Pass-4",
			"-destkeystore", f.clientJKS, "-deststoretype", "JKS", "-deststorepass", "Jks-Pass-2", "-destkeypass", "Key-Pass-3"},
	} {
		if out, err := exec.Command("keytool", args...).CombinedOutput(); err != nil {
			t.Fatalf("keytool %v: %v\n%s", args, err, out)
		}
	}
	return f
}
