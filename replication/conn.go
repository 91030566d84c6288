package replication

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Connection poolers (PgBouncer) between pgoutbox and the server. Each
// error says what to change.
var (
	// ErrPooler means the pooler is set up in a way pgoutbox cannot work
	// through.
	ErrPooler error = &sentinel{"pgoutbox connects through a connection pooler", true, false}
	// ErrPoolerReplication means the pooler refused a replication
	// connection: auto mode polls instead.
	ErrPoolerReplication error = &sentinel{"pgoutbox connects through a connection pooler", true, true}
)

// pgxParams are the connection string's settings that pgx reads itself and
// a server (or a pooler) does not know: they must not reach a startup
// message.
var pgxParams = []string{"default_query_exec_mode", "statement_cache_capacity", "description_cache_capacity"}

// ConnConfig parses databaseURL for pgoutbox's own connections (every one
// but the replication connection). Unless the URL says otherwise, it sets
// ConnectTimeout and pgx's cache_describe query mode: a statement's
// parameter and result types are asked once per connection, and each
// execution is sent whole (parse, bind, execute) as an unnamed statement in
// one round trip, so nothing of it outlives its transaction on the server.
// pgx's default mode prepares named statements and keeps them per
// connection, which a transaction pooler breaks: the next transaction may
// run on a server connection that lacks the statement, or one where
// another client prepared the same name ("prepared statement stmtcache_...
// already exists"). A default_query_exec_mode in the URL is kept, and
// checked against a pooler (CheckPooler).
func ConnConfig(databaseURL string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, errors.New("parse database URL: invalid connection string") // pgx may echo the password
	}
	if err := applyIAM(&cfg.Config); err != nil {
		return nil, err
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = ConnectTimeout
	}
	if !strings.Contains(databaseURL, "default_query_exec_mode") {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	return cfg, nil
}

// TLSError is a server whose TLS certificate the connection does not
// trust: another CA than sslrootcert's, another host name than the URL's
// under sslmode=verify-full, or a certificate out of its dates. Retrying
// cannot fix it, and pgoutbox never falls back to a connection without
// TLS.
type TLSError struct{ Err error }

func (e *TLSError) Error() string {
	return "the database server's TLS certificate is not trusted (check sslrootcert, sslmode and the host name of --database-url): " + e.Err.Error()
}

func (e *TLSError) Unwrap() error   { return e.Err }
func (e *TLSError) Permanent() bool { return true }

// Untrusted tells whether a connection failed on the server's
// certificate (another CA than sslrootcert's, another host name, out of
// its dates): retrying cannot fix it.
func Untrusted(err error) bool {
	var (
		verify    *tls.CertificateVerificationError
		authority x509.UnknownAuthorityError
		host      x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &authority) || errors.As(err, &host) || errors.As(err, &invalid)
}

// tlsRefused marks a connection error that is the server's certificate
// failing verification.
func tlsRefused(err error) error {
	if Untrusted(err) {
		return &TLSError{Err: err}
	}
	return err
}

// Pooled tells whether conn reaches the server through a connection
// pooler: the server process that answers is not the one whose key the
// connection received when it opened. PgBouncer, as other poolers, makes
// up its own keys, and in transaction pooling may run each transaction on
// another server connection, so nothing a session sets (an advisory lock,
// a prepared statement, a setting) can be relied on there.
func Pooled(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var pid int64
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return false, fmt.Errorf("look for a connection pooler: %w", err)
	}
	return uint32(pid) != conn.PgConn().PID(), nil
}

// CheckPooler checks that conn, which goes through a pooler, can carry
// pgoutbox's statements: a query mode that keeps no statement across round
// trips, and transactions (PgBouncer's statement pooling refuses them). A
// problem is ErrPooler with the setting to change.
func CheckPooler(ctx context.Context, conn *pgx.Conn) error {
	switch mode := conn.Config().DefaultQueryExecMode; mode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeDescribeExec:
		return fmt.Errorf("%w, and --database-url sets default_query_exec_mode=%s, which needs its statements to stay on one server connection: "+
			"drop that setting (pgoutbox then uses cache_describe), or set it to cache_describe, exec or simple_protocol", ErrPooler, strings.ReplaceAll(mode.String(), " ", "_"))
	}
	tx, err := conn.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, "SELECT 1")
		if err == nil {
			err = tx.Commit(ctx)
		} else {
			_ = tx.Rollback(ctx)
		}
	}
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) || conn.IsClosed() {
			return fmt.Errorf("%w, and it refuses transactions (%v): PgBouncer's statement pooling does; set pool_mode = transaction or session for pgoutbox's database or user", ErrPooler, err)
		}
		return err
	}
	return nil
}

// PoolerRefusedReplication is the error of a replication connection that a
// pooler refused: it names the cause and what to change.
func PoolerRefusedReplication(err error) error {
	return fmt.Errorf("%w, which refused the replication connection (%v): PgBouncer before 1.23 does not pass replication connections. "+
		"Point --database-url at the server itself, not the pooler, to stream the WAL, or run --mode poll", ErrPoolerReplication, err)
}
