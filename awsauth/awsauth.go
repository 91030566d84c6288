// Package awsauth is authentication to AWS services: credentials from
// AWS's default chain (the environment, the shared files and their
// profiles, a web identity token file, the container and instance
// endpoints), optionally through an assumed role, and the IAM token an
// RDS or Aurora database takes as a password.
package awsauth

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/logging"
)

// Config chooses the credentials.
type Config struct {
	// Profile is a profile of the shared files (~/.aws/credentials and
	// ~/.aws/config); empty: AWS_PROFILE, else "default".
	Profile string
	// Region is the region of the signatures and of STS; empty: the
	// chain's (AWS_REGION, the profile's region).
	Region string
	// RoleARN, when set, is a role assumed with the chain's credentials;
	// RoleSessionName names its sessions (default "pgoutbox").
	RoleARN, RoleSessionName string
	// STSRegion is the region of the STS endpoint the role is assumed
	// at; empty: Region.
	STSRegion string
}

// Credentials are the credentials cfg asks for, cached and refreshed
// before they expire, and the region the chain names ("" when none). It
// reads the shared files now; it asks no endpoint until credentials are
// first retrieved.
func (c Config) Credentials(ctx context.Context) (aws.CredentialsProvider, string, error) {
	// The SDK's own logger writes plain lines to stderr (the instance
	// endpoint's fallbacks, say); what matters reaches the caller as the
	// error, logged by pgoutbox's logger.
	opts := []func(*config.LoadOptions) error{config.WithLogger(logging.Nop{})}
	if c.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(c.Profile))
	}
	if c.Region != "" {
		opts = append(opts, config.WithRegion(c.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		var missing config.SharedConfigProfileNotExistError
		if errors.As(err, &missing) {
			return nil, "", fmt.Errorf("AWS profile %q is in neither shared file (~/.aws/credentials, ~/.aws/config)", c.Profile)
		}
		return nil, "", fmt.Errorf("AWS configuration: %w", err)
	}
	if cfg.Credentials == nil {
		return nil, "", errors.New("AWS's default chain gives no credentials")
	}
	if c.RoleARN == "" {
		return cfg.Credentials, cfg.Region, nil
	}
	stsCfg := cfg.Copy()
	if c.STSRegion != "" {
		stsCfg.Region = c.STSRegion
	}
	name := c.RoleSessionName
	if name == "" {
		name = "pgoutbox"
	}
	role := stscreds.NewAssumeRoleProvider(sts.NewFromConfig(stsCfg), c.RoleARN, func(o *stscreds.AssumeRoleOptions) {
		o.RoleSessionName = name
	})
	return aws.NewCredentialsCache(role), cfg.Region, nil
}

// CredentialsError is a credentials chain that gives none, to a
// publisher of Service ("kinesis", "sqs", "sns").
type CredentialsError struct {
	Service string
	Err     error
}

func (e *CredentialsError) Error() string {
	return e.Service + ": no AWS credentials (the environment, a shared file's profile, credentials.profile, a role): " + e.Err.Error()
}

func (e *CredentialsError) Unwrap() error { return e.Err }

// Permanent: the chain does not change while pgoutbox runs.
func (e *CredentialsError) Permanent() bool { return true }
