package test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/testenv"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

// serverTLS writes ca's server certificate and key where the postgres
// user reads them, and returns the settings that turn TLS on.
func serverTLS(t *testing.T, ca *tlstest.CA) map[string]string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgoutbox-pgtls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	key, err := x509.MarshalPKCS8PrivateKey(ca.Server.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Server.Certificate[0]}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		t.Fatal(err)
	}
	// PostgreSQL reads its key only if its own user owns it.
	cred, err := pgcluster.Credential()
	if err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		if err := os.Chown(keyFile, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return map[string]string{"ssl": "on", "ssl_cert_file": certFile, "ssl_key_file": keyFile}
}

// A PostgreSQL with TLS and a test CA: sslmode=verify-full with the CA
// that signed its certificate streams; with another CA, run stops at
// start saying the server's certificate is not trusted, and never falls
// back to a connection without TLS.
func TestPostgresTLSVerifyFull(t *testing.T) {
	ca := tlstest.New(t)
	e := testenv.New(t, pgcluster.Options{Settings: serverTLS(t, ca)})
	if e.PG.External() {
		t.Skip("needs the throwaway cluster's TLS settings")
	}
	rightCA := ca.WritePEM(t, t.TempDir())
	wrongCA := tlstest.New(t).WritePEM(t, t.TempDir())
	url := func(rootCert string) string {
		return strings.Replace(e.URL, "sslmode=disable", "sslmode=verify-full&sslrootcert="+rootCert, 1)
	}
	// RDS is out of reach: a role whose password the server checks in
	// clear shows that every command sends a token made per connection,
	// which the server refuses here, and that no line shows it.
	hba := filepath.Join(e.PG.Dir, "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hba, append([]byte("hostssl all iam_user 127.0.0.1/32 password\n"), old...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Conn.Exec(context.Background(), "CREATE ROLE iam_user LOGIN PASSWORD 'Not-A-Token-1'; SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	iamURL := strings.Replace(url(rightCA), "postgres://postgres@", "postgres://iam_user@", 1)
	awsEnv := []string{"AWS_ACCESS_KEY_ID=AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY=Aws-Secret-Key-4", "AWS_SESSION_TOKEN=", "AWS_PROFILE=",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent", "AWS_CONFIG_FILE=/nonexistent"}
	for _, tt := range []struct {
		name, cmd string
		url       string
		more      []string
		code      int
		wants     []string
	}{
		{"IAM token: run", "run", iamURL, []string{"--database-iam-auth", "--database-iam-region", "eu-west-1"}, 1,
			[]string{`password authentication failed for user "iam_user"`}},
		{"IAM token: migrate", "migrate", iamURL, []string{"--database-iam-auth", "--database-iam-region", "eu-west-1"}, 1,
			[]string{`password authentication failed for user "iam_user"`}},
		{"IAM token: without TLS", "run", strings.Replace(iamURL, "sslmode=verify-full", "sslmode=disable", 1), []string{"--database-iam-auth"}, 1,
			[]string{"--database-iam-auth needs TLS"}},
		{"IAM token: no region", "run", iamURL, []string{"--database-iam-auth"}, 1,
			[]string{"RDS IAM authentication", "no AWS region"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{tt.cmd, "--database-url", tt.url}, tt.more...)
			if tt.cmd == "run" {
				args = append(args, "--kafka-brokers", strings.Join(e.Brokers, ","), "--log-format", "json")
			}
			code, out := testenv.RunOnce(t, 20*time.Second, append(awsEnv, "AWS_REGION="), args...)
			testenv.ExpectOutput(t, code, tt.code, out, tt.wants, []string{"Amz", "Aws-Secret-Key-4"})
		})
	}
	for _, tt := range []struct {
		name  string
		url   string
		code  int
		wants []string
	}{
		{"the CA that signed the server's certificate", url(rightCA), -1, []string{`"msg":"streaming"`}},
		{"another CA", url(wrongCA), 1, []string{"the database server's TLS certificate is not trusted", "unknown authority"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out := testenv.RunOnce(t, 8*time.Second, nil, "run", "--database-url", tt.url, "--kafka-brokers", strings.Join(e.Brokers, ","), "--log-format", "json")
			testenv.ExpectOutput(t, code, tt.code, out, tt.wants, nil)
		})
	}
}
