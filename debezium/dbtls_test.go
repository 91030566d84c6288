package debezium

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The database.ssl* options become the URL's settings as pgjdbc reads
// them: its default files under ~/.postgresql, no server check under
// require, no client certificate with NonValidatingFactory.
func TestDatabaseTLSOptions(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	dot := filepath.Join(home, ".postgresql")
	for _, tt := range []struct {
		name    string
		options string
		want    map[string]string // the URL's query; "-" for absent
		refused string
	}{
		{"verify-full with its CA", `"database.sslmode": "verify-full", "database.sslrootcert": "/etc/ssl/rds-ca.pem"`,
			map[string]string{"sslmode": "verify-full", "sslrootcert": "/etc/ssl/rds-ca.pem", "sslkey": "-"}, ""},
		{"verify-ca, any case, without a CA", `"database.sslmode": " Verify-CA "`,
			map[string]string{"sslmode": "verify-ca", "sslrootcert": filepath.Join(dot, "root.crt")}, ""},
		{"require does not check the server", `"database.sslmode": "require", "database.sslrootcert": "/ca.pem"`,
			map[string]string{"sslmode": "require", "sslrootcert": ""}, ""},
		{"prefer, the default", `"database.sslrootcert": "/ca.pem"`,
			map[string]string{"sslmode": "-", "sslrootcert": "-"}, ""},
		{"disable reads no file", `"database.sslmode": "disable", "database.sslkey": "/k.pk8"`,
			map[string]string{"sslmode": "disable", "sslkey": "-"}, ""},
		{"PKCS-8 key with its certificate and password", `"database.sslmode": "verify-full", "database.sslrootcert": "/ca.pem",
  "database.sslcert": "/c.crt", "database.sslkey": "/c.pk8", "database.sslpassword": "s3cret"`,
			map[string]string{"sslcert": "/c.crt", "sslkey": "/c.pk8", "sslpassword": "s3cret"}, ""},
		{"key without a certificate: pgjdbc's default one", `"database.sslmode": "require", "database.sslkey": "/c.pk8"`,
			map[string]string{"sslcert": filepath.Join(dot, "postgresql.crt"), "sslkey": "/c.pk8"}, ""},
		{"PKCS-12 holds its certificate", `"database.sslmode": "require", "database.sslkey": "/c.p12", "database.sslcert": "/c.crt", "database.sslpassword": "pw"`,
			map[string]string{"sslcert": "-", "sslkey": "/c.p12", "sslpassword": "pw"}, ""},
		{"certificate without a key or pgjdbc's default key: none", `"database.sslmode": "require", "database.sslcert": "/c.crt"`,
			map[string]string{"sslcert": "-", "sslkey": "-"}, ""},
		{"LibPQFactory", `"database.sslmode": "verify-full", "database.sslfactory": "org.postgresql.ssl.LibPQFactory", "database.sslrootcert": "/ca.pem"`,
			map[string]string{"sslmode": "verify-full", "sslrootcert": "/ca.pem"}, ""},
		{"NonValidatingFactory sends no certificate", `"database.sslmode": "require", "database.sslfactory": "org.postgresql.ssl.NonValidatingFactory", "database.sslkey": "/c.pk8"`,
			map[string]string{"sslmode": "require", "sslkey": "-"}, ""},
		{"NonValidatingFactory under verify-full", `"database.sslmode": "verify-full", "database.sslfactory": "org.postgresql.ssl.NonValidatingFactory"`,
			nil, "database.sslfactory: org.postgresql.ssl.NonValidatingFactory with sslmode=verify-full"},
		{"another factory", `"database.sslfactory": "org.postgresql.ssl.SingleCertValidatingFactory"`,
			nil, "database.sslfactory: \"org.postgresql.ssl.SingleCertValidatingFactory\": a Java socket factory"},
		{"a mode Debezium does not know", `"database.sslmode": "verify_full"`, nil, `database.sslmode: "verify_full"`},
		{"tcpKeepAlive true", `"database.tcpKeepAlive": "TRUE"`, map[string]string{"sslmode": "-"}, ""},
		{"tcpKeepAlive yes", `"database.tcpKeepAlive": "yes"`, nil, `database.tcpKeepAlive: "yes"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conf := `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "database.hostname": "db.example", "database.dbname": "app", ` + tt.options + `}`
			tr, err := translateConnect(t, conf)
			if tt.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("want a refusal with %q, got %v", tt.refused, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := settingOf(tr, "database-url")
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			for k, want := range tt.want {
				got, ok := q[k]
				switch {
				case want == "-" && ok:
					t.Errorf("%s=%q in %s, want none", k, got, raw)
				case want != "-" && (!ok || got[0] != want):
					t.Errorf("%s=%q in %s, want %q", k, got, raw, want)
				}
			}
		})
	}
}

// tcpKeepAlive=false is named among the ignored options, with why.
func TestTCPKeepAliveFalseIgnored(t *testing.T) {
	tr, err := translateConnect(t, `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "database.tcpKeepAlive": "false"}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(tr.Ignored, ","), "database.tcpKeepAlive=false (") {
		t.Errorf("ignored: %v", tr.Ignored)
	}
}

// pgjdbc's default key file is used when it exists.
func TestDefaultClientKey(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	key := filepath.Join(home, ".postgresql", "postgresql.pk8")
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := translateConnect(t, `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "database.hostname": "h", "database.dbname": "d",
  "database.sslmode": "require", "database.sslcert": "/c.crt"}`)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := settingOf(tr, "database-url")
	if u, _ := url.Parse(raw); u.Query().Get("sslkey") != key || u.Query().Get("sslcert") != "/c.crt" {
		t.Errorf("database-url %s, want sslkey=%s and sslcert=/c.crt", raw, key)
	}
}

// A client key pgjdbc cannot read as its file's name makes it read it is
// refused, as Debezium's connector fails on it; a file that cannot be read
// is left to the start.
func TestDatabaseKeyFiles(t *testing.T) {
	dir := t.TempDir()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pk8 := func(k any) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	file := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	pemOf := func(typ string, der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}) }
	for _, tt := range []struct {
		name, key, more, refused string
	}{
		{"PKCS-8 PEM RSA key", file("rsa.key", pemOf("PRIVATE KEY", pk8(rsaKey))), "", ""},
		{"PKCS-8 PEM EC key", file("ec.key", pemOf("PRIVATE KEY", pk8(ecKey))), "", "an EC key, which pgjdbc reads as RSA"},
		{"PKCS-8 PEM EC key, pemKeyAlgorithm EC", file("ec2.pem", pemOf("PRIVATE KEY", pk8(ecKey))), `, "database.pemKeyAlgorithm": "EC"`, ""},
		{"PKCS-1 PEM key", file("rsa1.pem", pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey))), "", "an unencrypted PKCS-8 PEM key (BEGIN PRIVATE KEY)"},
		{"PKCS-8 DER key", file("rsa.pk8", pk8(rsaKey)), "", ""},
		{"PEM in a .pk8", file("pem.pk8", pemOf("PRIVATE KEY", pk8(rsaKey))), "", "a PEM key, which pgjdbc reads as PKCS-8 DER"},
		{"missing file", filepath.Join(dir, "none.key"), "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := translateConnect(t, `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "database.hostname": "h", "database.dbname": "d",
  "database.sslmode": "require", "database.sslcert": "/c.crt", "database.sslkey": "`+tt.key+`"`+tt.more+`}`)
			switch {
			case tt.refused == "" && err != nil:
				t.Fatal(err)
			case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), "database.sslkey: "+tt.key+": ") || !strings.Contains(err.Error(), tt.refused)):
				t.Fatalf("want a refusal of database.sslkey with %q, got %v", tt.refused, err)
			}
		})
	}
}
