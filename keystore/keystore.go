// Package keystore reads the Java key stores Kafka clients are configured
// with (ssl.truststore.location, ssl.keystore.location): JKS and PKCS12,
// told apart by their content, into what crypto/tls takes.
package keystore

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sort"

	jks "github.com/pavlo-v-chernykh/keystore-go/v4"
	"software.sslmate.com/src/go-pkcs12"
)

// Kind is a store's format.
type Kind string

// The formats.
const (
	PEM    Kind = "PEM"
	JKS    Kind = "JKS"
	PKCS12 Kind = "PKCS12"
	JCEKS  Kind = "JCEKS"
)

// KindOf tells a store's format from its first bytes: JKS and JCEKS by
// their magic numbers, PKCS12 by its DER sequence, PEM by its armour; ""
// for none of them.
func KindOf(data []byte) Kind {
	switch {
	case bytes.HasPrefix(data, []byte{0xfe, 0xed, 0xfe, 0xed}):
		return JKS
	case bytes.HasPrefix(data, []byte{0xce, 0xce, 0xce, 0xce}):
		return JCEKS
	case bytes.Contains(data, []byte("-----BEGIN ")):
		return PEM
	case len(data) > 1 && data[0] == 0x30:
		return PKCS12
	}
	return ""
}

// ErrPassword is a store or key that the password does not open.
var ErrPassword = errors.New("wrong password, or a damaged store")

// TrustStore reads a trust store's certificates: every trusted
// certificate entry, and the chains of key entries, as Java's
// TrustManagerFactory trusts them.
func TrustStore(data []byte, password string) ([]*x509.Certificate, error) {
	switch k := KindOf(data); k {
	case JKS:
		ks, err := loadJKS(data, password)
		if err != nil {
			return nil, err
		}
		var out []*x509.Certificate
		for _, alias := range sortedAliases(ks) {
			var ders [][]byte
			if ks.IsTrustedCertificateEntry(alias) {
				e, err := ks.GetTrustedCertificateEntry(alias)
				if err != nil {
					return nil, err
				}
				ders = append(ders, e.Certificate.Content)
			} else if chain, err := ks.GetPrivateKeyEntryCertificateChain(alias); err == nil && len(chain) > 0 {
				ders = append(ders, chain[0].Content)
			}
			for _, der := range ders {
				c, err := x509.ParseCertificate(der)
				if err != nil {
					return nil, fmt.Errorf("entry %q: %w", alias, err)
				}
				out = append(out, c)
			}
		}
		return out, nil
	case PKCS12:
		certs, err := pkcs12.DecodeTrustStore(data, password)
		if err == nil {
			return certs, nil
		}
		if errors.Is(err, pkcs12.ErrIncorrectPassword) {
			return nil, ErrPassword
		}
		// A PKCS12 store made for keys: its certificates.
		_, cert, cas, err2 := pkcs12.DecodeChain(data, password)
		if err2 != nil {
			return nil, fmt.Errorf("PKCS12: %w", err)
		}
		return append([]*x509.Certificate{cert}, cas...), nil
	default:
		return nil, unsupported(k)
	}
}

// KeyStore reads a key store's private key and its certificate chain.
// keyPassword opens a JKS store's key (Kafka's ssl.key.password); ""
// takes the store's password, as keytool makes them.
func KeyStore(data []byte, password, keyPassword string) (tls.Certificate, error) {
	if keyPassword == "" {
		keyPassword = password
	}
	switch k := KindOf(data); k {
	case JKS:
		ks, err := loadJKS(data, password)
		if err != nil {
			return tls.Certificate{}, err
		}
		var keyAliases []string
		for _, alias := range sortedAliases(ks) {
			if ks.IsPrivateKeyEntry(alias) {
				keyAliases = append(keyAliases, alias)
			}
		}
		if len(keyAliases) != 1 {
			return tls.Certificate{}, fmt.Errorf("JKS: %d private key entries; one, please", len(keyAliases))
		}
		e, err := ks.GetPrivateKeyEntry(keyAliases[0], []byte(keyPassword))
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("JKS key %q: %w", keyAliases[0], ErrPassword)
		}
		key, err := x509.ParsePKCS8PrivateKey(e.PrivateKey)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("JKS key %q: %w", keyAliases[0], err)
		}
		var chain [][]byte
		for _, c := range e.CertificateChain {
			chain = append(chain, c.Content)
		}
		return certificate(key, chain)
	case PKCS12:
		key, cert, cas, err := pkcs12.DecodeChain(data, password)
		if errors.Is(err, pkcs12.ErrIncorrectPassword) {
			return tls.Certificate{}, ErrPassword
		}
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("PKCS12: %w", err)
		}
		chain := [][]byte{cert.Raw}
		for _, c := range cas {
			chain = append(chain, c.Raw)
		}
		return certificate(key, chain)
	default:
		return tls.Certificate{}, unsupported(k)
	}
}

func certificate(key any, chain [][]byte) (tls.Certificate, error) {
	if len(chain) == 0 {
		return tls.Certificate{}, errors.New("a private key without its certificate")
	}
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return tls.Certificate{}, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return tls.Certificate{}, fmt.Errorf("a private key of type %T", key)
	}
	return tls.Certificate{Certificate: chain, PrivateKey: signer, Leaf: leaf}, nil
}

func loadJKS(data []byte, password string) (jks.KeyStore, error) {
	ks := jks.New(jks.WithMinPasswordLen(0), jks.WithCaseExactAliases())
	if err := ks.Load(bytes.NewReader(data), []byte(password)); err != nil {
		return ks, fmt.Errorf("JKS: %w: %v", ErrPassword, err)
	}
	return ks, nil
}

func sortedAliases(ks jks.KeyStore) []string {
	a := ks.Aliases()
	sort.Strings(a)
	return a
}

func unsupported(k Kind) error {
	if k == JCEKS {
		return errors.New("a JCEKS store: convert it to PKCS12 (keytool -importkeystore -deststoretype PKCS12)")
	}
	return errors.New("not a JKS or PKCS12 store")
}
