package sink

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// AWS_MSK_IAM's first message is what aws-msk-iam-auth sends: a SigV4
// presigned kafka-cluster:Connect for the broker's host, in the broker
// name's region, with the credentials the chain gives. Its signature is
// the one AWS's SigV4 signer computes for the same request and time (the
// signer TestSigV4Vectors checks against AWS's published vectors, package
// awsauth). MSK itself is out of reach here.
func TestMSKIAMChallenge(t *testing.T) {
	const host = "b-1.demo.abc123.c2.kafka.eu-west-3.amazonaws.com"
	for _, session := range []string{"", "FwoGZXIvYXdzE+session/token=="} {
		creds := credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", session)
		mech, err := SASL{Mechanism: MechanismAWSMSKIAM, AWS: creds}.mechanism()
		if err != nil {
			t.Fatal(err)
		}
		_, first, err := mech.Authenticate(context.Background(), host+":9098")
		if err != nil {
			t.Fatal(err)
		}
		var msg map[string]string
		if err := json.Unmarshal(first, &msg); err != nil {
			t.Fatalf("%s: %v", first, err)
		}
		at, err := time.Parse("20060102T150405Z", msg["x-amz-date"])
		if err != nil {
			t.Fatalf("x-amz-date %q: %v", msg["x-amz-date"], err)
		}
		for k, want := range map[string]string{
			"version": "2020_10_22", "host": host, "user-agent": "pgoutbox", "action": "kafka-cluster:Connect",
			"x-amz-algorithm": "AWS4-HMAC-SHA256", "x-amz-expires": "300", "x-amz-signedheaders": "host",
			"x-amz-credential": "AKIDEXAMPLE/" + at.Format("20060102") + "/eu-west-3/kafka-cluster/aws4_request",
		} {
			if msg[k] != want {
				t.Errorf("%s: %q, want %q", k, msg[k], want)
			}
		}
		if msg["x-amz-security-token"] != session {
			t.Errorf("x-amz-security-token %q, want %q", msg["x-amz-security-token"], session)
		}
		req, _ := http.NewRequest(http.MethodGet, "https://"+host+"/?"+url.Values{"Action": {"kafka-cluster:Connect"}, "X-Amz-Expires": {"300"}}.Encode(), nil)
		c, _ := creds.Retrieve(context.Background())
		signed, _, err := v4.NewSigner().PresignHTTP(context.Background(), c, req,
			"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "kafka-cluster", "eu-west-3", at)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(signed)
		if want := u.Query().Get("X-Amz-Signature"); msg["x-amz-signature"] != want || want == "" {
			t.Errorf("session %q: signature %s, AWS's signer gives %s", session, msg["x-amz-signature"], want)
		}
	}
}

// Credentials the chain cannot give fail the authentication with a
// permanent error saying so.
func TestMSKIAMWithoutCredentials(t *testing.T) {
	none := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{}, errors.New("no EC2 IMDS role found")
	})
	mech, err := SASL{Mechanism: MechanismAWSMSKIAM, AWS: none}.mechanism()
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = mech.Authenticate(context.Background(), "b-1.demo.kafka.us-east-1.amazonaws.com:9098")
	var ce *AWSCredentialsError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "AWS credentials for AWS_MSK_IAM: no EC2 IMDS role found") {
		t.Fatalf("%v", err)
	}
	h := &Health{mechanism: MechanismAWSMSKIAM}
	if got := h.explain(context.Background(), err); !errors.Is(got, ErrAuth) {
		t.Errorf("explained as %v, want ErrAuth", got)
	}
}
