package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"

	"github.com/pgoutbox/pgoutbox/sink"
)

// kafkaAuth are the flags for SASL and TLS to the brokers.
type kafkaAuth struct {
	mechanism, username, password string
	tls                           tlsFiles
}

func (a *kafkaAuth) register(fs *flag.FlagSet) {
	fs.StringVar(&a.mechanism, "kafka-sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default none)")
	fs.StringVar(&a.username, "kafka-username", "", "SASL username")
	fs.StringVar(&a.password, "kafka-password", "", "SASL password; prefer PGOUTBOX_KAFKA_PASSWORD, which no process listing shows")
	a.tls.register(fs, "kafka-tls", "the brokers")
}

// secrets are the values the logger must mask.
func (a *kafkaAuth) secrets() []string {
	if a.password == "" {
		return nil
	}
	return []string{a.password}
}

// apply sets SASL and TLS on the sink configuration.
func (a *kafkaAuth) apply(cfg *sink.Config) error {
	cfg.SASL = sink.SASL{Mechanism: a.mechanism, Username: a.username, Password: a.password}
	t, err := a.tls.config()
	if err != nil {
		return err
	}
	cfg.TLS = t
	return nil
}

// tlsFiles are the TLS flags of one kind of server: --PREFIX,
// --PREFIX-ca, --PREFIX-cert, --PREFIX-key, --PREFIX-server-name.
type tlsFiles struct {
	prefix                    string
	on                        bool
	caFile, certFile, keyFile string
	serverName                string
}

func (f *tlsFiles) register(fs *flag.FlagSet, prefix, servers string) {
	f.prefix = prefix
	fs.BoolVar(&f.on, prefix, false, "connect to "+servers+" over TLS (1.2 or later); implied by the other --"+prefix+"-* flags")
	fs.StringVar(&f.caFile, prefix+"-ca", "", "PEM file of the CA that signed the certificates of "+servers+" (default: the system's)")
	fs.StringVar(&f.certFile, prefix+"-cert", "", "PEM client certificate, for servers that require mutual TLS")
	fs.StringVar(&f.keyFile, prefix+"-key", "", "PEM key of --"+prefix+"-cert")
	fs.StringVar(&f.serverName, prefix+"-server-name", "", "name to verify the certificates of "+servers+" against (default: the host dialed)")
}

// config is the TLS configuration the flags ask for; nil for none.
func (f *tlsFiles) config() (*tls.Config, error) {
	if !f.on && f.caFile == "" && f.certFile == "" && f.keyFile == "" && f.serverName == "" {
		return nil, nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.serverName}
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, fmt.Errorf("--%s-ca: %w", f.prefix, err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--%s-ca: %s holds no PEM certificate", f.prefix, f.caFile)
		}
	}
	if (f.certFile == "") != (f.keyFile == "") {
		return nil, fmt.Errorf("--%s-cert and --%s-key go together", f.prefix, f.prefix)
	}
	if f.certFile != "" {
		cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--%s-cert/--%s-key: %w", f.prefix, f.prefix, err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
}
