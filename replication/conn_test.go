package replication

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgoutbox's own connections keep no named statement on the server unless
// the URL asks for a query mode; the replication connection never sends
// pgx's own settings to the server, which refuses them at startup
// (PgBouncer: "unsupported startup parameter").
func TestConnConfig(t *testing.T) {
	for _, c := range []struct {
		url  string
		mode pgx.QueryExecMode
	}{
		{"postgres://relay@db/app", pgx.QueryExecModeCacheDescribe},
		{"postgres://relay@db/app?default_query_exec_mode=cache_statement", pgx.QueryExecModeCacheStatement},
		{"postgres://relay@db/app?default_query_exec_mode=simple_protocol", pgx.QueryExecModeSimpleProtocol},
		{"host=db user=relay dbname=app default_query_exec_mode=exec", pgx.QueryExecModeExec},
	} {
		cfg, err := ConnConfig(c.url)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		if cfg.DefaultQueryExecMode != c.mode {
			t.Errorf("%s: query mode %v, want %v", c.url, cfg.DefaultQueryExecMode, c.mode)
		}
		if cfg.ConnectTimeout != ConnectTimeout {
			t.Errorf("%s: connect timeout %s", c.url, cfg.ConnectTimeout)
		}
		sep := "&"
		if !strings.HasPrefix(c.url, "postgres://") {
			sep = " "
		} else if !strings.Contains(c.url, "?") {
			sep = "?"
		}
		rcfg, err := replicationConfig(c.url + sep + "statement_cache_capacity=10")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pgxParams {
			if v, ok := rcfg.RuntimeParams[p]; ok {
				t.Errorf("%s: the replication connection sends %s=%s", c.url, p, v)
			}
		}
	}
	if cfg, err := ConnConfig("postgres://relay@db/app?connect_timeout=3"); err != nil || cfg.ConnectTimeout != 3*time.Second {
		t.Fatalf("the URL's connect_timeout: %v, %v", cfg.ConnectTimeout, err)
	}
	if _, err := ConnConfig("postgres://relay:secret@db:port/app"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("a bad URL: %v", err)
	}
}
