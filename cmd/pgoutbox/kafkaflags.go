package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pgoutbox/pgoutbox/awsauth"
	"github.com/pgoutbox/pgoutbox/keystore"
	"github.com/pgoutbox/pgoutbox/sink"
)

// kafkaAuth are the flags for SASL and TLS to the brokers.
type kafkaAuth struct {
	mechanism, username, password string
	oauth                         sink.OAuth
	oauthExtensions               string
	aws                           awsauth.Config
	tls                           tlsFiles
}

func (a *kafkaAuth) register(fs *flag.FlagSet) {
	fs.StringVar(&a.mechanism, "kafka-sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM (default none)")
	fs.StringVar(&a.username, "kafka-username", "", "SASL username (PLAIN, SCRAM)")
	fs.StringVar(&a.password, "kafka-password", "", "SASL password; prefer PGOUTBOX_KAFKA_PASSWORD, which no process listing shows")
	fs.StringVar(&a.oauth.TokenURL, "kafka-oauth-token-url", "", "OAUTHBEARER: the OAuth 2 token endpoint that grants tokens to the client credentials (Kafka's sasl.oauthbearer.token.endpoint.url)")
	fs.StringVar(&a.oauth.ClientID, "kafka-oauth-client-id", "", "OAUTHBEARER: the client id")
	fs.StringVar(&a.oauth.ClientSecret, "kafka-oauth-client-secret", "", "OAUTHBEARER: the client secret; prefer PGOUTBOX_KAFKA_OAUTH_CLIENT_SECRET")
	fs.StringVar(&a.oauth.Scope, "kafka-oauth-scope", "", "OAUTHBEARER: the scope asked for (default none)")
	fs.StringVar(&a.oauthExtensions, "kafka-oauth-extensions", "", "OAUTHBEARER: SASL extensions, key=value,... (Confluent Cloud: logicalCluster=lkc-...,identityPoolId=pool-...)")
	fs.StringVar(&a.aws.Profile, "kafka-aws-profile", "", "AWS_MSK_IAM: the shared files' profile (default AWS_PROFILE, else default); credentials come from AWS's default chain")
	fs.StringVar(&a.aws.RoleARN, "kafka-aws-role-arn", "", "AWS_MSK_IAM: a role to assume with the chain's credentials")
	fs.StringVar(&a.aws.RoleSessionName, "kafka-aws-role-session-name", "", "AWS_MSK_IAM: the assumed role's session name (default pgoutbox)")
	fs.StringVar(&a.aws.STSRegion, "kafka-aws-sts-region", "", "AWS_MSK_IAM: the region of the STS endpoint the role is assumed at (default the chain's)")
	a.tls.register(fs, "kafka-tls", "the brokers")
}

// secrets are the values the logger must mask.
func (a *kafkaAuth) secrets() []string {
	out := a.tls.secrets()
	for _, s := range []string{a.password, a.oauth.ClientSecret} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// apply sets SASL and TLS on the sink configuration. For AWS_MSK_IAM it
// reads AWS's shared files; it asks no endpoint.
func (a *kafkaAuth) apply(ctx context.Context, cfg *sink.Config) error {
	cfg.SASL = sink.SASL{Mechanism: a.mechanism, Username: a.username, Password: a.password}
	t, err := a.tls.config()
	if err != nil {
		return err
	}
	cfg.TLS = t
	mech := strings.ToUpper(a.mechanism)
	oauthSet := a.oauth.TokenURL != "" || a.oauth.ClientID != "" || a.oauth.ClientSecret != "" || a.oauth.Scope != "" || a.oauthExtensions != ""
	awsSet := a.aws != awsauth.Config{}
	switch {
	case oauthSet && mech != sink.MechanismOAuthBearer:
		return errors.New("--kafka-oauth-* need --kafka-sasl-mechanism OAUTHBEARER")
	case awsSet && mech != sink.MechanismAWSMSKIAM:
		return errors.New("--kafka-aws-* need --kafka-sasl-mechanism AWS_MSK_IAM")
	case mech == sink.MechanismOAuthBearer:
		if a.oauth.TokenURL == "" {
			return errors.New("--kafka-sasl-mechanism OAUTHBEARER needs --kafka-oauth-token-url")
		}
		o := a.oauth
		if o.Extensions, err = keyValues(a.oauthExtensions); err != nil {
			return fmt.Errorf("--kafka-oauth-extensions: %w", err)
		}
		cfg.SASL.OAuth = &o
	case mech == sink.MechanismAWSMSKIAM:
		creds, _, err := a.aws.Credentials(ctx)
		if err != nil {
			return fmt.Errorf("--kafka-sasl-mechanism AWS_MSK_IAM: %w", err)
		}
		// Credentials the chain cannot give are said at start, not at the
		// first broker connection; they are cached and refreshed from then on.
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if _, err := creds.Retrieve(rctx); err != nil {
			return fmt.Errorf("--kafka-sasl-mechanism AWS_MSK_IAM: %w", &sink.AWSCredentialsError{Err: err})
		}
		cfg.SASL.AWS = creds
	}
	return nil
}

// keyValues reads "k=v,k=v".
func keyValues(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q: want key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// registerProducer registers the producer settings a user may change;
// acks and idempotence are not among them (sink.Config).
func registerProducer(fs *flag.FlagSet, cfg *sink.Config) {
	fs.StringVar(&cfg.Compression, "kafka-compression", sink.CompressionNone, "codec Kafka batches are compressed with: none, gzip, snappy, lz4 or zstd (Kafka's compression.type)")
	fs.IntVar(&cfg.CompressionLevel, "kafka-compression-level", 0, "the codec's level as Kafka's producer takes it: gzip 1-9, lz4 1-17, zstd -131072-22 (default: the codec's)")
	fs.IntVar(&cfg.MaxRequestBytes, "kafka-max-request-bytes", 0, "the most one produce request to a broker holds; at least --max-message-bytes (default 100 MiB, the broker's socket.request.max.bytes)")
	fs.DurationVar(&cfg.RequestTimeout, "kafka-request-timeout", 10*time.Second, "how long a broker may take to answer a produce request")
	fs.StringVar(&cfg.ClientID, "kafka-client-id", "pgoutbox", "the Kafka client id, which broker quotas and logs name")
}

// tlsFiles are the TLS flags of one kind of server: --PREFIX,
// --PREFIX-ca, --PREFIX-cert, --PREFIX-key, --PREFIX-server-name, and the
// passwords of Java stores given as --PREFIX-ca and --PREFIX-cert.
type tlsFiles struct {
	prefix                    string
	on                        bool
	caFile, certFile, keyFile string
	serverName                string
	caPassword, certPassword  string
	keyPassword               string
}

func (f *tlsFiles) register(fs *flag.FlagSet, prefix, servers string) {
	f.prefix = prefix
	fs.BoolVar(&f.on, prefix, false, "connect to "+servers+" over TLS (1.2 or later); implied by the other --"+prefix+"-* flags")
	fs.StringVar(&f.caFile, prefix+"-ca", "", "PEM file of the CA that signed the certificates of "+servers+", or a Java trust store (JKS or PKCS12) of it (default: the system's)")
	fs.StringVar(&f.certFile, prefix+"-cert", "", "PEM client certificate, for servers that require mutual TLS; or a Java key store (JKS or PKCS12) with the key and its chain")
	fs.StringVar(&f.keyFile, prefix+"-key", "", "PEM key of --"+prefix+"-cert")
	fs.StringVar(&f.serverName, prefix+"-server-name", "", "name to verify the certificates of "+servers+" against (default: the host dialed)")
	fs.StringVar(&f.caPassword, prefix+"-ca-password", "", "the password of a trust store given as --"+prefix+"-ca (Kafka's ssl.truststore.password)")
	fs.StringVar(&f.certPassword, prefix+"-cert-password", "", "the password of a key store given as --"+prefix+"-cert (Kafka's ssl.keystore.password)")
	fs.StringVar(&f.keyPassword, prefix+"-key-password", "", "the password of the key in a JKS key store, when not the store's (Kafka's ssl.key.password)")
}

// secrets are the store passwords, which logs mask.
func (f *tlsFiles) secrets() []string {
	var out []string
	for _, s := range []string{f.caPassword, f.certPassword, f.keyPassword} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// config is the TLS configuration the flags ask for; nil for none.
func (f *tlsFiles) config() (*tls.Config, error) {
	if !f.on && f.caFile == "" && f.certFile == "" && f.keyFile == "" && f.serverName == "" {
		return nil, nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.serverName}
	if f.caFile != "" {
		data, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, fmt.Errorf("--%s-ca: %w", f.prefix, err)
		}
		t.RootCAs = x509.NewCertPool()
		if keystore.KindOf(data) == keystore.PEM {
			if !t.RootCAs.AppendCertsFromPEM(data) {
				return nil, fmt.Errorf("--%s-ca: %s holds no PEM certificate", f.prefix, f.caFile)
			}
		} else {
			certs, err := keystore.TrustStore(data, f.caPassword)
			if err != nil {
				return nil, fmt.Errorf("--%s-ca %s (with --%s-ca-password): %w", f.prefix, f.caFile, f.prefix, err)
			}
			for _, c := range certs {
				t.RootCAs.AddCert(c)
			}
		}
	}
	if f.certFile != "" {
		cert, err := f.clientCert()
		if err != nil {
			return nil, err
		}
		// A server refuses an expired certificate with an alert that
		// does not say why; say it here.
		switch now := time.Now(); {
		case now.After(cert.Leaf.NotAfter):
			return nil, fmt.Errorf("--%s-cert: the client certificate %s (%s) expired on %s", f.prefix, f.certFile, cert.Leaf.Subject, cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
		case now.Before(cert.Leaf.NotBefore):
			return nil, fmt.Errorf("--%s-cert: the client certificate %s (%s) is not valid before %s", f.prefix, f.certFile, cert.Leaf.Subject, cert.Leaf.NotBefore.UTC().Format(time.RFC3339))
		}
		t.Certificates = []tls.Certificate{cert}
	} else if f.keyFile != "" {
		return nil, fmt.Errorf("--%s-cert and --%s-key go together", f.prefix, f.prefix)
	}
	return t, nil
}

// clientCert reads --PREFIX-cert: a PEM certificate with its PEM key, or
// a Java key store.
func (f *tlsFiles) clientCert() (tls.Certificate, error) {
	data, err := os.ReadFile(f.certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--%s-cert: %w", f.prefix, err)
	}
	if keystore.KindOf(data) != keystore.PEM {
		if f.keyFile != "" {
			return tls.Certificate{}, fmt.Errorf("--%s-cert %s is a key store, which holds the key: leave out --%s-key", f.prefix, f.certFile, f.prefix)
		}
		cert, err := keystore.KeyStore(data, f.certPassword, f.keyPassword)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("--%s-cert %s (with --%s-cert-password, --%s-key-password): %w", f.prefix, f.certFile, f.prefix, f.prefix, err)
		}
		return cert, nil
	}
	if f.keyFile == "" {
		return tls.Certificate{}, fmt.Errorf("--%s-cert and --%s-key go together", f.prefix, f.prefix)
	}
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--%s-cert/--%s-key: %w", f.prefix, f.prefix, err)
	}
	return cert, nil
}
