package debezium

import (
	"slices"
	"strings"
	"testing"
)

const pgConnector = `"connector.class": "io.debezium.connector.postgresql.PostgresConnector"`

// The producer settings of both forms give run's flags; what would weaken
// the guarantees, and what pgoutbox cannot read, is refused naming the key
// as the file writes it; no refusal shows a secret.
func TestProducerSettings(t *testing.T) {
	type want map[string]string // flag -> value; "" value: must be absent
	for _, tt := range []struct {
		name    string
		conf    map[string]string // producer settings, by the producer's name
		want    want
		refused []string // keys (producer names) whose refusal must show
		ignored []string
	}{
		{"compression and producer settings", map[string]string{"compression.type": "zstd", "compression.zstd.level": "9", "compression.gzip.level": "5",
			"linger.ms": "20", "request.timeout.ms": "45000", "client.id": "orders-relay", "max.request.size": "2097152", "acks": "all",
			"enable.idempotence": "true", "max.in.flight.requests.per.connection": "5", "batch.size": "65536"},
			want{"kafka-compression": "zstd", "kafka-compression-level": "9", "linger": "20ms", "kafka-request-timeout": "45000ms",
				"kafka-client-id": "orders-relay", "max-message-bytes": "2097152", "kafka-max-request-bytes": "2097152"}, nil, []string{"batch.size"}},
		{"gzip's default level", map[string]string{"compression.type": "GZIP", "compression.gzip.level": "-1"},
			want{"kafka-compression": "gzip", "kafka-compression-level": ""}, nil, nil},
		{"acks Kafka refuses", map[string]string{"acks": "2"}, nil, []string{"acks"}, nil},
		{"idempotence Kafka refuses", map[string]string{"enable.idempotence": "maybe"}, nil, []string{"enable.idempotence"}, nil},
		{"none in flight", map[string]string{"max.in.flight.requests.per.connection": "0"}, nil, []string{"max.in.flight.requests.per.connection"}, nil},
		{"an unknown codec", map[string]string{"compression.type": "brotli"}, nil, []string{"compression.type"}, nil},
		{"a level out of range", map[string]string{"compression.type": "lz4", "compression.lz4.level": "18"}, nil, []string{"compression.lz4.level"}, nil},
		{"SCRAM over TLS with PEM stores", map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
			"sasl.jaas.config":    `org.apache.kafka.common.security.scram.ScramLoginModule required username="relay" password="S3cret;\"x=";`,
			"ssl.truststore.type": "PEM", "ssl.truststore.location": "/etc/kafka/ca.pem", "ssl.keystore.type": "PEM", "ssl.keystore.location": "/etc/kafka/client.pem"},
			want{"kafka-tls": "true", "kafka-sasl-mechanism": "SCRAM-SHA-512", "kafka-username": "relay", "kafka-password": `S3cret;"x=`,
				"kafka-tls-ca": "/etc/kafka/ca.pem", "kafka-tls-cert": "/etc/kafka/client.pem", "kafka-tls-key": "/etc/kafka/client.pem"}, nil, nil},
		{"SASL settings without SASL", map[string]string{"security.protocol": "SSL", "sasl.mechanism": "PLAIN"},
			want{"kafka-tls": "true", "kafka-sasl-mechanism": ""}, nil, []string{"sasl.mechanism"}},
		{"a JKS trust store (Kafka's default type)", map[string]string{"security.protocol": "SSL", "ssl.truststore.location": "/etc/kafka/truststore.jks",
			"ssl.truststore.password": "S3cret-store"},
			want{"kafka-tls": "true", "kafka-tls-ca": "/etc/kafka/truststore.jks", "kafka-tls-ca-password": "S3cret-store"}, nil, nil},
		{"a PKCS12 key store and a JKS key", map[string]string{"security.protocol": "SSL", "ssl.keystore.type": "pkcs12", "ssl.keystore.location": "/etc/kafka/client.p12",
			"ssl.keystore.password": "S3cret-p12", "ssl.key.password": "S3cret-key"},
			want{"kafka-tls-cert": "/etc/kafka/client.p12", "kafka-tls-cert-password": "S3cret-p12", "kafka-tls-key-password": "S3cret-key", "kafka-tls-key": ""}, nil, nil},
		{"another store type", map[string]string{"security.protocol": "SSL", "ssl.keystore.type": "BCFKS", "ssl.keystore.location": "/etc/kafka/client.bcfks"},
			nil, []string{"ssl.keystore.type"}, nil},
		{"an encrypted key", map[string]string{"security.protocol": "SSL", "ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem", "ssl.key.password": "S3cret-key"},
			nil, []string{"ssl.key.password"}, nil},
		{"Kerberos", map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI",
			"sasl.jaas.config": `com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;`}, nil, []string{"sasl.mechanism"}, nil},
		{"the wrong login module", map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
			"sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="relay" password="S3cret";`}, nil, []string{"sasl.jaas.config"}, nil},
		{"OAUTHBEARER", map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
			"sasl.login.callback.handler.class":   "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
			"sasl.oauthbearer.token.endpoint.url": "https://idp.example/oauth2/token",
			"sasl.jaas.config":                    `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="relay" clientSecret="S3cret" scope="kafka";`},
			want{"kafka-sasl-mechanism": "OAUTHBEARER", "kafka-oauth-token-url": "https://idp.example/oauth2/token", "kafka-oauth-client-id": "relay",
				"kafka-oauth-client-secret": "S3cret", "kafka-oauth-scope": "kafka"}, nil, nil},
		{"OAUTHBEARER's unsecured tokens", map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
			"sasl.jaas.config": `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="relay";`},
			nil, []string{"sasl.mechanism"}, nil},
		{"AWS MSK IAM", map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "AWS_MSK_IAM",
			"sasl.client.callback.handler.class": "software.amazon.msk.auth.iam.IAMClientCallbackHandler",
			"sasl.jaas.config":                   `software.amazon.msk.auth.iam.IAMLoginModule required awsProfileName="relay" awsRoleArn="arn:aws:iam::123456789012:role/relay";`},
			want{"kafka-tls": "true", "kafka-sasl-mechanism": "AWS_MSK_IAM", "kafka-aws-profile": "relay", "kafka-aws-role-arn": "arn:aws:iam::123456789012:role/relay"}, nil, nil},
		{"an unknown protocol", map[string]string{"security.protocol": "TLS"}, nil, []string{"security.protocol"}, nil},
	} {
		for _, form := range []struct{ name, prefix string }{{"connect", connectProducer}, {"server", serverProducer}} {
			t.Run(tt.name+"/"+form.name, func(t *testing.T) {
				var data string
				if form.name == "connect" {
					var b strings.Builder
					b.WriteString("{" + pgConnector)
					for k, v := range tt.conf {
						b.WriteString(`, "` + form.prefix + k + `": ` + quoteJSON(v))
					}
					data = b.String() + "}"
				} else {
					data = "debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n"
					for k, v := range tt.conf {
						data += form.prefix + k + "=" + strings.ReplaceAll(v, `\`, `\\`) + "\n"
					}
				}
				tr, ok, err := Read([]byte(data))
				if !ok {
					t.Fatalf("not read: %v", err)
				}
				if len(tt.refused) == 0 && err != nil {
					t.Fatalf("refused: %v", err)
				}
				for _, k := range tt.refused {
					if err == nil || !strings.Contains(err.Error(), form.prefix+k+": ") {
						t.Errorf("%s not refused: %v", form.prefix+k, err)
					}
				}
				for _, secret := range []string{"S3cret"} {
					if err != nil && strings.Contains(err.Error(), secret) {
						t.Errorf("the refusal shows a secret: %v", err)
					}
				}
				for flag, v := range tt.want {
					got, ok := settingOf(tr, flag)
					if v == "" && ok || v != "" && got != v {
						t.Errorf("--%s %q (set %v), want %q", flag, got, ok, v)
					}
				}
				for _, k := range tt.ignored {
					found := false
					for _, ig := range tr.Ignored {
						found = found || strings.HasPrefix(ig, form.prefix+k)
					}
					if !found {
						t.Errorf("%s not among the ignored %q", form.prefix+k, tr.Ignored)
					}
				}
			})
		}
	}
}

func quoteJSON(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

func TestParseJAAS(t *testing.T) {
	e, err := parseJAAS(`org.apache.kafka.common.security.plain.PlainLoginModule required
  username="relay" password="a \"quoted\" ;=pass" flag=bare;`)
	if err != nil {
		t.Fatal(err)
	}
	if e.class != plainLoginModule || e.options["username"] != "relay" || e.options["password"] != `a "quoted" ;=pass` || e.options["flag"] != "bare" {
		t.Errorf("%+v", e)
	}
	for _, bad := range []string{"", "x", "x required", `x required a="b"`, `x always a="b";`, `x required a="b;`, `x required ="b";`, `x required a b;`} {
		if _, err := parseJAAS(bad); err == nil {
			t.Errorf("%q accepted", bad)
		} else if strings.Contains(err.Error(), `"b"`) {
			t.Errorf("%q: the error shows a value: %v", bad, err)
		}
	}
}

func FuzzParseJAAS(f *testing.F) {
	f.Add(`org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";`)
	f.Add(`x optional a=b c="d\"e";`)
	f.Fuzz(func(t *testing.T, s string) {
		e, err := parseJAAS(s)
		if err == nil && e.class == "" {
			t.Errorf("%q: no class and no error", s)
		}
	})
}

// Settings that weaken what pgoutbox promises, which Kafka's producer
// runs (acks 0 or 1, idempotence off, more than five requests in flight),
// run with pgoutbox's stronger ones, each named in a warning.
func TestWeakerProducerSettingsRunStronger(t *testing.T) {
	for _, tt := range []struct{ key, value, warning string }{
		{"acks", "1", "acks=1 runs as acks=all"},
		{"acks", "0", "acks=0 runs as acks=all"},
		{"enable.idempotence", "FALSE", "enable.idempotence=false runs idempotent"},
		{"max.in.flight.requests.per.connection", "10", "max.in.flight.requests.per.connection=10 runs with 5"},
	} {
		for _, form := range []struct{ name, prefix, data string }{
			{"connect", connectProducer, "{" + pgConnector + `, "` + connectProducer + tt.key + `": "` + tt.value + `"}`},
			{"server", serverProducer, "debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" + serverProducer + tt.key + "=" + tt.value + "\n"},
		} {
			tr, ok, err := Read([]byte(form.data))
			if !ok || err != nil {
				t.Fatalf("%s %s=%s: %v %v", form.name, tt.key, tt.value, ok, err)
			}
			if !slices.ContainsFunc(tr.Warnings, func(w string) bool { return strings.Contains(w, form.prefix+tt.warning) }) {
				t.Errorf("%s %s=%s: warnings %q, want one with %q", form.name, tt.key, tt.value, tr.Warnings, form.prefix+tt.warning)
			}
		}
	}
}
