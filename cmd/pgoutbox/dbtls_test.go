package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"software.sslmate.com/src/go-pkcs12"
)

// clientFiles writes a self-signed client certificate and its RSA key, in
// each format pgjdbc reads, to dir.
type clientFiles struct {
	dir                              string
	key                              *rsa.PrivateKey
	cert                             *x509.Certificate
	certPEM, certDER, keyPEM, keyPK8 string
}

func newClientFiles(t *testing.T) clientFiles {
	t.Helper()
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "app"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pk8, _ := x509.MarshalPKCS8PrivateKey(key)
	f := clientFiles{dir: dir, key: key, cert: cert}
	f.certPEM = write(t, dir, "app.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	f.certDER = write(t, dir, "app.der", der)
	f.keyPEM = write(t, dir, "app.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk8}))
	f.keyPK8 = write(t, dir, "app.pk8", pk8)
	return f
}

func write(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// encryptedPK8 has openssl encrypt the key (PBES2, openssl's default).
func (f clientFiles) encryptedPK8(t *testing.T, password string, more ...string) string {
	t.Helper()
	if _, err := osexec.LookPath("openssl"); err != nil {
		t.Skip("needs openssl")
	}
	out := filepath.Join(f.dir, "enc"+strings.ReplaceAll(strings.Join(more, ""), " ", "")+".pk8")
	args := append([]string{"pkcs8", "-topk8", "-inform", "PEM", "-in", f.keyPEM, "-outform", "DER", "-out", out, "-passout", "pass:" + password}, more...)
	if b, err := osexec.Command("openssl", args...).CombinedOutput(); err != nil {
		t.Skipf("openssl: %v\n%s", err, b)
	}
	return out
}

func (f clientFiles) p12(t *testing.T, password string) string {
	t.Helper()
	data, err := pkcs12.Modern2023.Encode(f.key, f.cert, nil, password)
	if err != nil {
		t.Fatal(err)
	}
	return write(t, f.dir, "app.p12", data)
}

func tlsURL(params map[string]string) string {
	q := url.Values{"sslmode": {"require"}}
	for k, v := range params {
		q.Set(k, v)
	}
	return "postgres://app@db.example:5432/app?" + q.Encode()
}

// A key pgx cannot read (PKCS-8 DER, encrypted or not, PKCS-12) or a DER
// certificate reaches pgx as PEM in memory; PEM files are left as they
// are; each failure names the setting and the Debezium option, never the
// password.
func TestApplyDBTLS(t *testing.T) {
	f := newClientFiles(t)
	const password = "Key-Pass-9"
	for _, tt := range []struct {
		name      string
		params    map[string]string
		converted bool
		err       string
	}{
		{"PEM key and certificate: pgx reads them", map[string]string{"sslkey": f.keyPEM, "sslcert": f.certPEM}, false, ""},
		{"PKCS-8 DER key", map[string]string{"sslkey": f.keyPK8, "sslcert": f.certPEM}, true, ""},
		{"PKCS-8 DER key, DER certificate", map[string]string{"sslkey": f.keyPK8, "sslcert": f.certDER}, true, ""},
		{"encrypted PKCS-8 DER key, SHA-1 and 3DES", map[string]string{"sslkey": f.encryptedPK8(t, password, "-v1", "PBE-SHA1-3DES"), "sslcert": f.certPEM, "sslpassword": password}, true, ""},
		{"encrypted PKCS-8 DER key, wrong password", map[string]string{"sslkey": f.encryptedPK8(t, password, "-v1", "PBE-SHA1-3DES"), "sslcert": f.certPEM, "sslpassword": "Wrong-Pass-1"},
			false, "sslpassword (database.sslpassword) does not decrypt sslkey (database.sslkey)"},
		{"encrypted PKCS-8 DER key, no password", map[string]string{"sslkey": f.encryptedPK8(t, password, "-v1", "PBE-SHA1-3DES"), "sslcert": f.certPEM},
			false, "is encrypted: set its password in sslpassword (database.sslpassword)"},
		{"encrypted PKCS-8 DER key, PBES2: pgjdbc cannot read it", map[string]string{"sslkey": f.encryptedPK8(t, password), "sslcert": f.certPEM, "sslpassword": password},
			false, "encrypted with PBES2"},
		{"PKCS-12", map[string]string{"sslkey": f.p12(t, password), "sslpassword": password}, true, ""},
		{"PKCS-12, wrong password", map[string]string{"sslkey": f.p12(t, password), "sslpassword": "Wrong-Pass-1"},
			false, "sslpassword (database.sslpassword) does not decrypt sslkey (database.sslkey)"},
		{"missing key", map[string]string{"sslkey": filepath.Join(f.dir, "none.pk8"), "sslcert": f.certPEM}, false, "sslkey (database.sslkey): open "},
		{"missing certificate", map[string]string{"sslkey": f.keyPK8, "sslcert": filepath.Join(f.dir, "none.crt")}, false, "sslcert (database.sslcert): open "},
		{"not a key", map[string]string{"sslkey": f.certDER, "sslcert": f.certPEM}, false, "neither a PEM key, PKCS-12"},
		{"another certificate's key", map[string]string{"sslkey": f.keyPK8, "sslcert": newClientFiles(t).certPEM}, false, "does not go with the certificate"},
		{"DER root certificate", map[string]string{"sslrootcert": f.certDER}, true, ""},
		{"missing root certificate", map[string]string{"sslrootcert": filepath.Join(f.dir, "none.crt")}, false, "sslrootcert (database.sslrootcert): open "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &common{databaseURL: tlsURL(tt.params)}
			before := c.databaseURL
			secrets, err := c.applyDBTLS()
			if pw := tt.params["sslpassword"]; pw != "" && !strings.Contains(strings.Join(secrets, " "), pw) {
				t.Errorf("secrets %q lack the key's password", secrets)
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("want an error with %q, got %v", tt.err, err)
				}
				if strings.Contains(err.Error(), "Pass-") {
					t.Errorf("the error shows a password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (c.databaseURL != before) != tt.converted {
				t.Fatalf("URL %s, converted: %v, want %v", c.databaseURL, c.databaseURL != before, tt.converted)
			}
			if strings.Contains(c.databaseURL, "sslpassword") && tt.converted {
				t.Errorf("the converted URL keeps the password: %s", c.databaseURL)
			}
			u, _ := url.Parse(c.databaseURL)
			q := u.Query()
			if q.Get("sslkey") != "" {
				certPEM, err := os.ReadFile(q.Get("sslcert"))
				if err != nil {
					t.Fatal(err)
				}
				keyPEM, err := os.ReadFile(q.Get("sslkey"))
				if err != nil {
					t.Fatal(err)
				}
				pair, err := tls.X509KeyPair(certPEM, keyPEM)
				if err != nil {
					t.Fatal(err)
				}
				if !pair.Leaf.Equal(f.cert) {
					t.Error("another certificate")
				}
				// pgx reads the files at each connection.
				if again, _ := os.ReadFile(q.Get("sslkey")); string(again) != string(keyPEM) {
					t.Error("the key reads differently the second time")
				}
			}
			if root := q.Get("sslrootcert"); root != "" {
				data, _ := os.ReadFile(root)
				if b, _ := pem.Decode(data); b == nil || b.Type != "CERTIFICATE" {
					t.Errorf("sslrootcert %s is not PEM", root)
				}
			}
		})
	}
}

// pgjdbc's documentation writes keys with PBE-MD5-DES, which openssl 3
// has in its legacy provider only.
func TestApplyDBTLSMD5DES(t *testing.T) {
	f := newClientFiles(t)
	key := f.encryptedPK8(t, "Key-Pass-9", "-v1", "PBE-MD5-DES", "-provider", "legacy", "-provider", "default")
	for pw, want := range map[string]string{"Key-Pass-9": "", "Wrong-Pass-1": "does not decrypt"} {
		c := &common{databaseURL: tlsURL(map[string]string{"sslkey": key, "sslcert": f.certPEM, "sslpassword": pw})}
		_, err := c.applyDBTLS()
		if (want == "" && err != nil) || (want != "" && (err == nil || !strings.Contains(err.Error(), want))) {
			t.Errorf("password %s: %v, want %q", pw, err, want)
		}
	}
}

// The PKCS #12 key derivation, against a vector of RFC 7292's
// implementations (the one OpenSSL and Java compute for "smeg").
func TestPKCS12KDF(t *testing.T) {
	salt := []byte{0x0A, 0x58, 0xCF, 0x64, 0x53, 0x0D, 0x82, 0x3F}
	got := pkcs12KDF("smeg", salt, 1, 1, 24)
	want := []byte{0x8A, 0xAA, 0xE6, 0x29, 0x7B, 0x6C, 0xB0, 0x46, 0x42, 0xAB, 0x5B, 0x07, 0x78, 0x51, 0x28, 0x4E, 0xB7, 0x12, 0x8F, 0x1A, 0x2A, 0x7F, 0xBC, 0xA3}
	if string(got) != string(want) {
		t.Errorf("key % X, want % X", got, want)
	}
	iv := pkcs12KDF("smeg", salt, 1, 2, 8)
	if wantIV := []byte{0x79, 0x99, 0x3D, 0xFE, 0x04, 0x8D, 0x3B, 0x76}; string(iv) != string(wantIV) {
		t.Errorf("IV % X, want % X", iv, wantIV)
	}
}

// A key=value DSN is left to pgx.
func TestApplyDBTLSLeavesDSN(t *testing.T) {
	c := &common{databaseURL: "host=db sslmode=require sslkey=/none.pk8 sslcert=/none.crt"}
	if _, err := c.applyDBTLS(); err != nil || c.databaseURL != "host=db sslmode=require sslkey=/none.pk8 sslcert=/none.crt" {
		t.Errorf("%s, %v", c.databaseURL, err)
	}
}
