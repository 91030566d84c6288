package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/testenv"
)

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
	e := testenv.New(t)
	ctx := context.Background()
	if _, err := e.Conn.Exec(ctx, `CREATE ROLE rds_replication WITH REPLICATION NOLOGIN;
CREATE ROLE app LOGIN; GRANT rds_replication TO app; `+testenv.AppGrants); err != nil {
		t.Fatal(err)
	}
	e.Setup(e.Config()) // the publication and slot, made by the owner
	ids := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{}`), testenv.NewRow("order", "o-2", "Placed", `{}`))
	out := testenv.StartBinary(t, "run", "--database-url", e.AppURL("app"), "--kafka-brokers", strings.Join(e.Brokers, ","),
		"--probe-interval", "200ms", "--poll-interval", "50ms", "--status-interval", "100ms", "--log-format", "json").Out
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 30*time.Second)
	var fallback []string
	testenv.Eventually(t, 20*time.Second, "the fall back to polling, saying why", func() bool {
		fallback = out.Lines("switching to polling", "rds_replication")
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
	st, ok := e.Status(t)
	if ok || st.Mode != "poll" || !strings.Contains(strings.Join(st.Problems, "\n"), "rds_replication") {
		t.Errorf("status: exit ok %t, mode %s, problems %q; want polling named as a problem with the reason", ok, st.Mode, st.Problems)
	}

	if _, err := e.Conn.Exec(ctx, `ALTER ROLE app REPLICATION`); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the return to the WAL", func() bool {
		return len(out.Lines("switching to WAL")) > 0 && e.Slot("pgoutbox").Active
	})
	more := e.Insert(testenv.NewRow("order", "o-1", "Shipped", `{}`))
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", more, 20*time.Second)
}

// In auto mode, a role that may stream but may not create the publication
// (it does not own the table and has no CREATE on the database) polls; its
// probe checks the publication too, so it never switches to the WAL only to
// fall back 50 ms later: no "switching to WAL" line, however often it
// probes.
func TestProbeDoesNotSwitchWhenPublicationCannotBeCreated(t *testing.T) {
	e := testenv.New(t)
	ctx := context.Background()
	if _, err := e.Conn.Exec(ctx, `CREATE ROLE app LOGIN REPLICATION; `+testenv.AppGrants); err != nil {
		t.Fatal(err)
	}
	ids := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{}`))
	out := testenv.StartBinary(t, "run", "--database-url", e.AppURL("app"), "--kafka-brokers", strings.Join(e.Brokers, ","),
		"--probe-interval", "100ms", "--poll-interval", "50ms", "--log-level", "debug", "--log-format", "json").Out
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 30*time.Second)
	testenv.Eventually(t, 30*time.Second, "ten probes", func() bool {
		return len(out.Lines("the WAL is not available yet", "publication")) >= 10
	})
	for i := 0; i < 5; i++ {
		ids = append(ids, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i), "Placed", `{}`))...)
	}
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 30*time.Second)
	probes := len(out.Lines("the WAL is not available yet"))
	if n := len(out.Lines("switching to WAL")); n != 0 {
		t.Errorf("%d \"switching to WAL\" lines in %d probes, want 0", n, probes)
	}
	if n := len(out.Lines("switching to polling")); n != 1 {
		t.Errorf("%d \"switching to polling\" lines, want the 1 at start", n)
	}
	t.Logf("%d probes, no switch", probes)
}
