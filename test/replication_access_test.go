package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

var appGrants = `GRANT SELECT, UPDATE ON outbox TO app; GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox_state TO app;
GRANT SELECT, INSERT, UPDATE ON pgoutbox_dead_letter TO app; GRANT SELECT, INSERT, UPDATE ON pgoutbox_lease TO app;
` + grantHeartbeatSQL("app")

// A role that has replication only through membership in a role with
// REPLICATION, as rds_replication grants it on Amazon RDS. PostgreSQL
// itself refuses such a role a replication connection ("must be superuser
// or replication role to start walsender"): the attribute is not
// inherited. The relay finds that out by trying, polls, and says why in
// terms of what the role has: the membership does not carry REPLICATION
// here, so it does not suggest the GRANT the role already has. Once the
// role may stream, the probe's own replication connection sees it and the
// relay returns to the WAL.
func TestReplicationThroughMembershipIsTried(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.conn.Exec(ctx, `CREATE ROLE rds_replication WITH REPLICATION NOLOGIN;
CREATE ROLE app LOGIN; GRANT rds_replication TO app; `+appGrants); err != nil {
		t.Fatal(err)
	}
	e.setup(e.config()) // the publication and slot, made by the owner
	ids := e.insert(row{"order", "o-1", "Placed", `{}`}, row{"order", "o-2", "Placed", `{}`})
	out := startBinary(t, "run", "--database-url", e.appURL("app"), "--kafka-brokers", strings.Join(e.brokers, ","),
		"--probe-interval", "200ms", "--poll-interval", "50ms", "--status-interval", "100ms", "--log-format", "json").out
	awaitIDs(t, e.brokers, "outbox.event.order", ids, 30*time.Second)
	var fallback []string
	eventually(t, 20*time.Second, "the fall back to polling, saying why", func() bool {
		fallback = out.lines("switching to polling", "rds_replication")
		return len(fallback) > 0
	})
	line := fallback[0]
	for _, want := range []string{"does not pass REPLICATION on through membership", `ALTER ROLE \"app\" REPLICATION;`} {
		if !strings.Contains(line, want) {
			t.Errorf("the reason lacks %q: %s", want, line)
		}
	}
	if strings.Contains(line, "GRANT rds_replication TO") {
		t.Errorf("the reason suggests a grant the role already has: %s", line)
	}
	st, ok := e.status(t)
	if ok || st.Mode != "poll" || !strings.Contains(strings.Join(st.Problems, "\n"), "rds_replication") {
		t.Errorf("status: exit ok %t, mode %s, problems %q; want polling named as a problem with the reason", ok, st.Mode, st.Problems)
	}

	if _, err := e.conn.Exec(ctx, `ALTER ROLE app REPLICATION`); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the return to the WAL", func() bool {
		return len(out.lines("switching to WAL")) > 0 && e.slot("pgoutbox").Active
	})
	more := e.insert(row{"order", "o-1", "Shipped", `{}`})
	awaitIDs(t, e.brokers, "outbox.event.order", more, 20*time.Second)
}

// In auto mode, a role that may stream but may not create the publication
// (it does not own the table and has no CREATE on the database) polls; its
// probe checks the publication too, so it never switches to the WAL only to
// fall back 50 ms later: no "switching to WAL" line, however often it
// probes.
func TestProbeDoesNotSwitchWhenPublicationCannotBeCreated(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.conn.Exec(ctx, `CREATE ROLE app LOGIN REPLICATION; `+appGrants); err != nil {
		t.Fatal(err)
	}
	ids := e.insert(row{"order", "o-1", "Placed", `{}`})
	out := startBinary(t, "run", "--database-url", e.appURL("app"), "--kafka-brokers", strings.Join(e.brokers, ","),
		"--probe-interval", "100ms", "--poll-interval", "50ms", "--log-level", "debug", "--log-format", "json").out
	awaitIDs(t, e.brokers, "outbox.event.order", ids, 30*time.Second)
	eventually(t, 30*time.Second, "ten probes", func() bool {
		return len(out.lines("the WAL is not available yet", "publication")) >= 10
	})
	for i := 0; i < 5; i++ {
		ids = append(ids, e.insert(row{"order", fmt.Sprint("o-", i), "Placed", `{}`})...)
	}
	awaitIDs(t, e.brokers, "outbox.event.order", ids, 30*time.Second)
	probes := len(out.lines("the WAL is not available yet"))
	if n := len(out.lines("switching to WAL")); n != 0 {
		t.Errorf("%d \"switching to WAL\" lines in %d probes, want 0", n, probes)
	}
	if n := len(out.lines("switching to polling")); n != 1 {
		t.Errorf("%d \"switching to polling\" lines, want the 1 at start", n)
	}
	t.Logf("%d probes, no switch", probes)
}
