package keystore

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"software.sslmate.com/src/go-pkcs12"
)

// stores makes, in dir, a CA, a client key and certificate it signed,
// and the stores Java's keytool makes of them: client.p12 (PKCS12 as
// OpenSSL and keytool write it, AES), client.jks (JKS, its key under a
// password of its own), trust.jks and trust.p12 (the CA alone).
func stores(t *testing.T) (dir string, ca, leaf *x509.Certificate) {
	t.Helper()
	if _, err := exec.LookPath("keytool"); err != nil {
		t.Fatal("keytool (Java) is needed: make deps installs it")
	}
	dir = t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	ca, _ = x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "client"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	leaf, _ = x509.ParseCertificate(der)
	p12, err := pkcs12.Modern.Encode(key, leaf, []*x509.Certificate{ca}, "store-pass")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("client.p12", p12)
	write("ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	keytool := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("keytool", args...).CombinedOutput(); err != nil {
			t.Fatalf("keytool %v: %v\n%s", args, err, out)
		}
	}
	keytool("-importkeystore", "-noprompt", "-srckeystore", filepath.Join(dir, "client.p12"), "-srcstoretype", "PKCS12", "-srcstorepass", "store-pass",
		"-destkeystore", filepath.Join(dir, "client.jks"), "-deststoretype", "JKS", "-deststorepass", "jks-pass", "-destkeypass", "key-pass")
	for _, typ := range []string{"JKS", "PKCS12"} {
		name := map[string]string{"JKS": "trust.jks", "PKCS12": "trust.p12"}[typ]
		keytool("-importcert", "-noprompt", "-alias", "ca", "-file", filepath.Join(dir, "ca.pem"), "-keystore", filepath.Join(dir, name),
			"-storetype", typ, "-storepass", "trust-pass")
	}
	return dir, ca, leaf
}

// The stores keytool writes open with their passwords: the trust stores
// give the CA, the key stores the key and its chain, a JKS key under its
// own password (Kafka's ssl.key.password); a wrong password says so.
func TestStores(t *testing.T) {
	dir, ca, leaf := stores(t)
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for name, want := range map[string]Kind{"client.p12": PKCS12, "client.jks": JKS, "trust.jks": JKS, "trust.p12": PKCS12, "ca.pem": PEM} {
		if k := KindOf(read(name)); k != want {
			t.Errorf("%s: kind %s, want %s", name, k, want)
		}
	}
	for _, name := range []string{"trust.jks", "trust.p12"} {
		certs, err := TrustStore(read(name), "trust-pass")
		if err != nil || len(certs) != 1 || !certs[0].Equal(ca) {
			t.Errorf("%s: %d certificates, %v", name, len(certs), err)
		}
		if _, err := TrustStore(read(name), "wrong-pass"); !errors.Is(err, ErrPassword) {
			t.Errorf("%s with a wrong password: %v", name, err)
		}
	}
	for _, tc := range []struct{ name, pass, keyPass string }{{"client.p12", "store-pass", ""}, {"client.jks", "jks-pass", "key-pass"}} {
		c, err := KeyStore(read(tc.name), tc.pass, tc.keyPass)
		if err != nil || !c.Leaf.Equal(leaf) || len(c.Certificate) != 2 {
			t.Errorf("%s: %v (%d certificates)", tc.name, err, len(c.Certificate))
		}
		if _, err := KeyStore(read(tc.name), "wrong-pass", ""); !errors.Is(err, ErrPassword) {
			t.Errorf("%s with a wrong password: %v", tc.name, err)
		}
	}
	if _, err := KeyStore(read("client.jks"), "jks-pass", ""); !errors.Is(err, ErrPassword) {
		t.Errorf("a JKS key under its own password, opened with the store's: %v", err)
	}
	if _, err := TrustStore([]byte{0xce, 0xce, 0xce, 0xce, 0}, "x"); err == nil {
		t.Error("a JCEKS store read")
	}
}
