package replication

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/awsauth"
)

// RDSIAMParam is the connection string setting that makes every
// connection pgoutbox opens authenticate with an RDS IAM token in place
// of a password (pgoutbox run --database-iam-auth adds it): a fresh token
// per connection, since one opens connections for 15 minutes only. Its
// value is the region the token is signed for; "auto" takes the region
// from the host name (name.id.REGION.rds.amazonaws.com), else from AWS's
// chain (AWS_REGION, the profile's). It is pgoutbox's own and never
// reaches the server. The setting rides in the URL because the URL is
// what every connection of every command is made from.
const RDSIAMParam = "pgoutbox_rds_iam"

// IAMError is an RDS IAM token that could not be made: no credentials,
// no region, several hosts. It never shows a token.
type IAMError struct{ Err error }

func (e *IAMError) Error() string   { return "RDS IAM authentication: " + e.Err.Error() }
func (e *IAMError) Unwrap() error   { return e.Err }
func (e *IAMError) Permanent() bool { return true }

// iamCreds are AWS's default chain's credentials, loaded once per region
// asked: the chain caches what it retrieves and refreshes it before it
// expires, so the connections after the first ask no endpoint.
var iamCreds struct {
	mu     sync.Mutex
	byArea map[string]iamChain
}

type iamChain struct {
	creds  aws.CredentialsProvider
	region string
}

// tokenTimeout bounds getting credentials for a token.
const tokenTimeout = 30 * time.Second

// applyIAM puts a fresh RDS IAM token in cfg's password when the
// connection string asks for one (RDSIAMParam), and removes the setting.
func applyIAM(cfg *pgconn.Config) error {
	region, ok := cfg.RuntimeParams[RDSIAMParam]
	if !ok {
		return nil
	}
	delete(cfg.RuntimeParams, RDSIAMParam)
	for _, fb := range cfg.Fallbacks {
		if fb.Host != cfg.Host || fb.Port != cfg.Port {
			return &IAMError{errors.New("a token is signed for one host: give --database-url one host")}
		}
	}
	if region == "auto" || region == "" {
		region = awsauth.RegionOf(cfg.Host)
	}
	ctx, cancel := context.WithTimeout(context.Background(), tokenTimeout)
	defer cancel()
	chain, err := iamChainFor(ctx, region)
	if err != nil {
		return &IAMError{err}
	}
	if region == "" {
		region = chain.region
	}
	token, err := awsauth.RDSToken(ctx, chain.creds, region, cfg.Host, cfg.Port, cfg.User, time.Now())
	if err != nil {
		return &IAMError{err}
	}
	cfg.Password = token
	return nil
}

// iamChainFor is the default chain loaded for region ("": the chain's).
func iamChainFor(ctx context.Context, region string) (iamChain, error) {
	iamCreds.mu.Lock()
	defer iamCreds.mu.Unlock()
	if c, ok := iamCreds.byArea[region]; ok {
		return c, nil
	}
	creds, chainRegion, err := awsauth.Config{Region: region}.Credentials(ctx)
	if err != nil {
		return iamChain{}, err
	}
	if _, err := creds.Retrieve(ctx); err != nil {
		return iamChain{}, fmt.Errorf("AWS credentials: %w", err)
	}
	if iamCreds.byArea == nil {
		iamCreds.byArea = map[string]iamChain{}
	}
	c := iamChain{creds, chainRegion}
	iamCreds.byArea[region] = c
	return c, nil
}
