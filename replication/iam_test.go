package replication

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/pgoutbox/pgoutbox/awsauth"
)

// awsEnv gives AWS's chain fixed credentials from the environment and
// nothing else, and forgets the chains loaded before.
func awsEnv(t *testing.T, region string) {
	t.Helper()
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
		"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_REGION": region, "AWS_DEFAULT_REGION": "", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_SHARED_CREDENTIALS_FILE": t.TempDir() + "/none", "AWS_CONFIG_FILE": t.TempDir() + "/none"} {
		t.Setenv(k, v)
	}
	iamCreds.mu.Lock()
	iamCreds.byArea = nil
	iamCreds.mu.Unlock()
}

// Every connection configuration made from a URL with RDSIAMParam has a
// fresh RDS IAM token as its password, for its host, port and user, and
// the region asked (or the host name's); the setting never reaches the
// server.
func TestRDSIAMPassword(t *testing.T) {
	awsEnv(t, "")
	const host = "orders.c9akciq32.eu-central-1.rds.amazonaws.com"
	for _, tt := range []struct{ setting, region string }{{"auto", "eu-central-1"}, {"us-east-2", "us-east-2"}} {
		dsn := "postgres://relay@" + host + ":5432/shop?sslmode=verify-full&" + RDSIAMParam + "=" + tt.setting
		regular, err := ConnConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		repl, err := replicationConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range []struct {
			password string
			params   map[string]string
		}{{regular.Password, regular.RuntimeParams}, {repl.Password, repl.RuntimeParams}} {
			if _, ok := got.params[RDSIAMParam]; ok {
				t.Errorf("%s reaches the server", RDSIAMParam)
			}
			checkToken(t, got.password, host, "relay", tt.region)
		}
	}
}

// checkToken checks that token is the RDS IAM token of user at host:5432
// for region, signed at its own date with the environment's credentials.
func checkToken(t *testing.T, token, host, user, region string) {
	t.Helper()
	u, err := url.Parse("https://" + token)
	if err != nil || u.Host != host+":5432" {
		t.Fatalf("token %q: host %q, %v", token, u.Host, err)
	}
	q := u.Query()
	at, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil || time.Since(at) > time.Minute {
		t.Fatalf("token signed at %q: %v", q.Get("X-Amz-Date"), err)
	}
	if q.Get("Action") != "connect" || q.Get("DBUser") != user || !strings.Contains(q.Get("X-Amz-Credential"), "/"+region+"/rds-db/aws4_request") {
		t.Errorf("token %s: not a connect of %s in %s", token, user, region)
	}
	want, err := awsauth.RDSToken(context.Background(), credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", ""),
		region, host, 5432, user, at)
	if err != nil || want != token {
		t.Errorf("token\n %s\nwant\n %s (%v)", token, want, err)
	}
}

// What cannot make a token is a permanent error that says why.
func TestRDSIAMErrors(t *testing.T) {
	awsEnv(t, "")
	for _, tt := range []struct{ dsn, want string }{
		{"postgres://relay@db.internal:5432/shop?" + RDSIAMParam + "=auto", "no AWS region"},
		{"postgres://relay@a.eu-west-1.rds.amazonaws.com:5432,b.eu-west-1.rds.amazonaws.com:5432/shop?" + RDSIAMParam + "=auto", "one host"},
	} {
		_, err := ConnConfig(tt.dsn)
		var ie *IAMError
		if !errors.As(err, &ie) || !ie.Permanent() || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an IAMError saying %q", tt.dsn, err, tt.want)
		}
	}
	// The environment's region, for a host name that has none.
	awsEnv(t, "ap-south-1")
	cfg, err := ConnConfig("postgres://relay@proxy.internal:5432/shop?" + RDSIAMParam + "=auto")
	if err != nil || !strings.Contains(cfg.Password, "%2Fap-south-1%2Frds-db%2F") {
		t.Errorf("the chain's region: %v", err)
	}
}
