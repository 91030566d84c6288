package kafkatest

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

// authListeners are the listeners of Options.MTLS and Options.OAuth, on
// free ports of their own; it sets their addresses on b.
func (b *Broker) authListeners(opts Options) ([]listener, error) {
	n := 0
	if opts.MTLS {
		n++
	}
	if opts.OAuth != nil {
		n++
	}
	if n == 0 {
		return nil, nil
	}
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	var ls []listener
	add := func(name, protocol string) []string {
		l := listener{name: name, protocol: protocol, port: ports[len(ls)]}
		ls = append(ls, l)
		return []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(l.port))}
	}
	if opts.MTLS {
		b.MTLS = add("MTLS", "SSL")
	}
	if opts.OAuth != nil {
		b.OAuth = add("OAUTH", "SASL_PLAINTEXT")
	}
	return ls, nil
}

// authSettings adds the settings of the listeners authListeners made:
// MTLS requires a client certificate that Broker.CA signed (the
// principal is the certificate's subject, User:CN=...); OAUTH takes
// OAUTHBEARER tokens the issuer signed, checked against its JWKS with no
// clock skew allowed, and has a client authenticate again before its
// token expires (connections.max.reauth.ms), as a broker that enforces
// token lifetimes does.
func (b *Broker) authSettings(opts Options, conf map[string]string) error {
	if opts.MTLS {
		if b.CA == nil {
			b.CA = tlstest.New(nopTB{})
		}
		keystore, err := b.writeKeystore("mtls-broker.pem")
		if err != nil {
			return err
		}
		conf["listener.name.mtls.ssl.keystore.type"] = "PEM"
		conf["listener.name.mtls.ssl.keystore.location"] = keystore
		conf["listener.name.mtls.ssl.truststore.type"] = "PEM"
		conf["listener.name.mtls.ssl.truststore.location"] = b.CA.WritePEM(nopTB{}, b.Dir)
		conf["listener.name.mtls.ssl.client.auth"] = "required"
	}
	if is := opts.OAuth; is != nil {
		const prefix = "listener.name.oauth.oauthbearer."
		conf["listener.name.oauth.sasl.enabled.mechanisms"] = "OAUTHBEARER"
		conf[prefix+"sasl.jaas.config"] = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;"
		conf[prefix+"sasl.server.callback.handler.class"] = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
		conf[prefix+"sasl.oauthbearer.jwks.endpoint.url"] = is.JWKSURL()
		conf[prefix+"sasl.oauthbearer.clock.skew.seconds"] = "0"
		conf[prefix+"sasl.oauthbearer.expected.issuer"] = "pgoutbox-test-issuer"
		conf[prefix+"sasl.oauthbearer.expected.audience"] = OAuthAudience
		conf[prefix+"connections.max.reauth.ms"] = "60000"
		if _, ok := conf["sasl.enabled.mechanisms"]; !ok {
			conf["sasl.enabled.mechanisms"] = "OAUTHBEARER"
		}
		// Kafka 4 fetches only the URLs this allows (CVE-2025-27817).
		b.jvm = append(append([]string(nil), b.jvm...), "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="+is.JWKSURL())
	}
	return nil
}

// writeKeystore writes the broker's key and certificate, as a PEM key
// store, to name in its directory.
func (b *Broker) writeKeystore(name string) (string, error) {
	key, err := x509.MarshalPKCS8PrivateKey(b.CA.Server.PrivateKey)
	if err != nil {
		return "", err
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})
	for _, der := range b.CA.Server.Certificate {
		data = append(data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	path := filepath.Join(b.Dir, name)
	return path, os.WriteFile(path, data, 0o600)
}
