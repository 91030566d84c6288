package awsauth

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// The signer RDSToken uses gives the signatures AWS publishes for its
// Signature Version 4 test suite (aws-sig-v4-test-suite: get-vanilla and
// get-vanilla-query-order-key-case, credentials AKIDEXAMPLE, 2015-08-30
// 12:36:00 UTC, service "service") and for its presigned-URL example of
// the S3 documentation ("Authenticating Requests: Using Query
// Parameters", examplebucket/test.txt, 2013-05-24, 86400 s).
func TestSigV4Vectors(t *testing.T) {
	ctx := context.Background()
	suite := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	at := time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)
	for _, tt := range []struct{ name, url, signature string }{
		{"get-vanilla", "https://example.amazonaws.com/", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
		{"get-vanilla-query-order-key-case", "https://example.amazonaws.com/?Param2=value2&Param1=value1", "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
	} {
		req, _ := http.NewRequest(http.MethodGet, tt.url, nil)
		if err := v4.NewSigner().SignHTTP(ctx, suite, req, emptyHash, "service", "us-east-1", at); err != nil {
			t.Fatal(err)
		}
		if got := req.Header.Get("Authorization"); !strings.HasSuffix(got, "Signature="+tt.signature) {
			t.Errorf("%s: %s, want signature %s", tt.name, got, tt.signature)
		}
	}
	s3 := aws.Credentials{AccessKeyID: "AKIAIOSFODNN7EXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
	req, _ := http.NewRequest(http.MethodGet, "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Expires=86400", nil)
	got, _, err := v4.NewSigner().PresignHTTP(ctx, s3, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	const want = "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
	if got != want {
		t.Errorf("presigned:\n got %s\nwant %s", got, want)
	}
}

// An RDS IAM token with fixed credentials and time is the one AWS's own
// SDKs give for the same input (botocore's test_generate_db_auth_token:
// akid/skid, 2016-11-07 17:39:33 UTC).
func TestRDSToken(t *testing.T) {
	creds := credentials.NewStaticCredentialsProvider("akid", "skid", "")
	got, err := RDSToken(context.Background(), creds, "us-east-1", "prod-instance.us-east-1.rds.amazonaws.com", 3306, "someusername",
		time.Date(2016, 11, 7, 17, 39, 33, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	const want = "prod-instance.us-east-1.rds.amazonaws.com:3306/?Action=connect&DBUser=someusername&X-Amz-Algorithm=AWS4-HMAC-SHA256" +
		"&X-Amz-Credential=akid%2F20161107%2Fus-east-1%2Frds-db%2Faws4_request&X-Amz-Date=20161107T173933Z&X-Amz-Expires=900" +
		"&X-Amz-SignedHeaders=host&X-Amz-Signature=d1138cdbc0ca63eec012ec0fc6c2267e03642168f5884a7795320d4c18374c61"
	if got != want {
		t.Errorf("token:\n got %s\nwant %s", got, want)
	}
	// A session token (temporary credentials) is signed into the URL.
	withSession, err := RDSToken(context.Background(), credentials.NewStaticCredentialsProvider("akid", "skid", "sess/ion+1"), "us-east-1",
		"prod-instance.us-east-1.rds.amazonaws.com", 3306, "someusername", time.Date(2016, 11, 7, 17, 39, 33, 0, time.UTC))
	if err != nil || !strings.Contains(withSession, "X-Amz-Security-Token=sess%2Fion%2B1") {
		t.Errorf("with a session token: %s %v", withSession, err)
	}
	if _, err := RDSToken(context.Background(), creds, "", "db.example", 5432, "u", time.Now()); err == nil || !strings.Contains(err.Error(), "no AWS region") {
		t.Errorf("no region: %v", err)
	}
}

func TestRegionOf(t *testing.T) {
	for host, want := range map[string]string{
		"mydb.c1fycpveg7nf.eu-west-1.rds.amazonaws.com":         "eu-west-1",
		"cluster-x.cluster-abc.cn-north-1.rds.amazonaws.com.cn": "cn-north-1",
		"db.internal.example":                                   "",
	} {
		if got := RegionOf(host); got != want {
			t.Errorf("%s: %q, want %q", host, got, want)
		}
	}
}

// The default chain's shared files: a profile named by Config.Profile,
// with its region; the environment's keys come first when no profile is
// named.
func TestCredentialsChain(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	conf := filepath.Join(dir, "config")
	if err := os.WriteFile(creds, []byte("[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = default-secret\n\n[relay]\naws_access_key_id = AKIDRELAY\naws_secret_access_key = relay-secret\naws_session_token = relay-session\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("[profile relay]\nregion = eu-central-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_CONFIG_FILE", conf)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	ctx := context.Background()
	check := func(cfg Config, key, token, region string) {
		t.Helper()
		p, r, err := cfg.Credentials(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c, err := p.Retrieve(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.AccessKeyID != key || c.SessionToken != token || r != region {
			t.Errorf("%+v: key %s token %q region %q, want %s %q %q", cfg, c.AccessKeyID, c.SessionToken, r, key, token, region)
		}
	}
	check(Config{}, "AKIDDEFAULT", "", "")
	check(Config{Profile: "relay"}, "AKIDRELAY", "relay-session", "eu-central-1")
	check(Config{Profile: "relay", Region: "us-west-2"}, "AKIDRELAY", "relay-session", "us-west-2")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
	check(Config{}, "AKIDENV", "", "")
	if _, _, err := (Config{Profile: "nobody"}).Credentials(ctx); err == nil || !strings.Contains(err.Error(), `"nobody"`) {
		t.Errorf("a missing profile: %v", err)
	}
}
