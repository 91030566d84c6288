package awsauth

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// RDSTokenLifetime is how long an RDS IAM token opens connections: RDS
// refuses it 15 minutes after it was signed. A connection opened with it
// stays open.
const RDSTokenLifetime = 15 * time.Minute

// emptyHash is SHA-256 of no bytes: the token's request has no body.
const emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// RDSToken is the IAM authentication token of user on the database at
// host:port, signed at now with creds for region: the URL of a GET of
// Action=connect&DBUser=user presigned with SigV4 for the service rds-db,
// without its scheme, which RDS and Aurora take as the password. It is a
// credential for 15 minutes: never log it.
func RDSToken(ctx context.Context, creds aws.CredentialsProvider, region, host string, port uint16, user string, now time.Time) (string, error) {
	if region == "" {
		return "", fmt.Errorf("RDS IAM token for %s: no AWS region (set AWS_REGION, or the profile's region)", host)
	}
	c, err := creds.Retrieve(ctx)
	if err != nil {
		return "", fmt.Errorf("AWS credentials for the RDS IAM token: %w", err)
	}
	endpoint := "https://" + net.JoinHostPort(host, strconv.Itoa(int(port))) + "/"
	q := url.Values{"Action": {"connect"}, "DBUser": {user}, "X-Amz-Expires": {strconv.Itoa(int(RDSTokenLifetime / time.Second))}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"?"+q.Encode(), nil)
	if err != nil {
		return "", fmt.Errorf("RDS IAM token for %s: %w", host, err)
	}
	signed, _, err := v4.NewSigner().PresignHTTP(ctx, c, req, emptyHash, "rds-db", region, now.UTC())
	if err != nil {
		return "", fmt.Errorf("RDS IAM token for %s: %w", host, err)
	}
	return strings.TrimPrefix(signed, "https://"), nil
}

// RegionOf is the region an RDS endpoint's name holds
// (name.id.REGION.rds.amazonaws.com, .amazonaws.com.cn in China), "" for
// another name (a proxy, a custom DNS name).
func RegionOf(host string) string {
	for _, suffix := range []string{".rds.amazonaws.com", ".rds.amazonaws.com.cn"} {
		if rest, ok := strings.CutSuffix(host, suffix); ok {
			if i := strings.LastIndexByte(rest, '.'); i >= 0 {
				return rest[i+1:]
			}
		}
	}
	return ""
}
