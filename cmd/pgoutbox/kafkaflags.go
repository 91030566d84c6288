package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/pgoutbox/pgoutbox/sink"
)

// kafkaAuth are the flags for SASL and TLS to the brokers.
type kafkaAuth struct {
	mechanism, username, password string
	tls                           bool
	caFile, certFile, keyFile     string
	serverName                    string
}

func (a *kafkaAuth) register(fs *flag.FlagSet) {
	fs.StringVar(&a.mechanism, "kafka-sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default none)")
	fs.StringVar(&a.username, "kafka-username", "", "SASL username")
	fs.StringVar(&a.password, "kafka-password", "", "SASL password; prefer PGOUTBOX_KAFKA_PASSWORD, which no process listing shows")
	fs.BoolVar(&a.tls, "kafka-tls", false, "connect to the brokers over TLS (1.2 or later); implied by the other --kafka-tls-* flags")
	fs.StringVar(&a.caFile, "kafka-tls-ca", "", "PEM file of the CA that signed the brokers' certificates (default: the system's)")
	fs.StringVar(&a.certFile, "kafka-tls-cert", "", "PEM client certificate, for brokers that require mutual TLS")
	fs.StringVar(&a.keyFile, "kafka-tls-key", "", "PEM key of --kafka-tls-cert")
	fs.StringVar(&a.serverName, "kafka-tls-server-name", "", "name to verify the brokers' certificates against (default: the host dialed)")
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
	if !a.tls && a.caFile == "" && a.certFile == "" && a.keyFile == "" && a.serverName == "" {
		return nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: a.serverName}
	if a.caFile != "" {
		pem, err := os.ReadFile(a.caFile)
		if err != nil {
			return fmt.Errorf("--kafka-tls-ca: %w", err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--kafka-tls-ca: %s holds no PEM certificate", a.caFile)
		}
	}
	if (a.certFile == "") != (a.keyFile == "") {
		return errors.New("--kafka-tls-cert and --kafka-tls-key go together")
	}
	if a.certFile != "" {
		cert, err := tls.LoadX509KeyPair(a.certFile, a.keyFile)
		if err != nil {
			return fmt.Errorf("--kafka-tls-cert/--kafka-tls-key: %w", err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	cfg.TLS = t
	return nil
}
