package testenv

import (
	"context"

	"github.com/jackc/pglogrepl"
)

// CommitProbe is a second slot on the outbox's publication, read without
// consuming, that tells tests the exact commit end LSNs of transactions:
// the positions the relay may confirm. Bounds taken from
// pg_current_wal_lsn() are not exact, because a heartbeat may legitimately
// land between such a reading and the next commit.
type CommitProbe struct {
	e    *Env
	name string
}

// NewCommitProbe creates the probe's slot (commit_probe, dropped when the
// test ends): transactions committed from now on are in it.
func NewCommitProbe(e *Env) *CommitProbe {
	e.T.Helper()
	p := &CommitProbe{e: e, name: "commit_probe"}
	if _, err := e.Conn.Exec(context.Background(), "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", p.name); err != nil {
		e.T.Fatalf("probe slot: %v", err)
	}
	e.T.Cleanup(func() {
		e.Conn.Exec(context.Background(), "SELECT pg_drop_replication_slot($1)", p.name)
	})
	return p
}

// Commits returns the commit end LSN of every transaction with outbox rows
// committed since the probe was created, in commit order.
func (p *CommitProbe) Commits() []pglogrepl.LSN {
	p.e.T.Helper()
	rows, err := p.e.Conn.Query(context.Background(), `
SELECT lsn::text FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL,
  'proto_version', '1', 'publication_names', 'pgoutbox')
WHERE get_byte(data, 0) = ascii('C')`, p.name)
	if err != nil {
		p.e.T.Fatalf("peek: %v", err)
	}
	defer rows.Close()
	var out []pglogrepl.LSN
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			p.e.T.Fatal(err)
		}
		lsn, err := pglogrepl.ParseLSN(s)
		if err != nil {
			p.e.T.Fatal(err)
		}
		out = append(out, lsn)
	}
	if err := rows.Err(); err != nil {
		p.e.T.Fatal(err)
	}
	return out
}
