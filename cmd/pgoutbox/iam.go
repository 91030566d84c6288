package main

import (
	"errors"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/replication"
)

// applyIAM adds --database-iam-auth to the database URL, where every
// connection of every command reads it (replication.RDSIAMParam). RDS
// takes IAM tokens over TLS only: a URL that turns TLS off is refused.
func (c *common) applyIAM() error {
	if !c.iamAuth {
		if c.iamRegion != "" {
			return errors.New("--database-iam-region needs --database-iam-auth")
		}
		return nil
	}
	cfg, err := pgconn.ParseConfig(c.databaseURL)
	if err != nil {
		return errors.New("--database-url is not a valid connection string")
	}
	if _, done := cfg.RuntimeParams[replication.RDSIAMParam]; done {
		return nil
	}
	if cfg.TLSConfig == nil {
		return errors.New("--database-iam-auth needs TLS, which RDS requires for IAM tokens: set sslmode=verify-full (and sslrootcert to the RDS CA bundle) in --database-url")
	}
	region := c.iamRegion
	if region == "" {
		region = "auto"
	}
	c.databaseURL = withSetting(c.databaseURL, replication.RDSIAMParam, region)
	return nil
}

// withSetting adds key=value to a connection URL or a key=value DSN.
func withSetting(dsn, key, value string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			q := u.Query()
			q.Set(key, value)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " " + key + "=" + value
}
