package test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// A multi-host --database-url with target_session_attrs=read-write, in
// both forms libpq has: the relay's SQL connection and its replication
// connection go to the server that accepts writes, past a first host that
// is read-only or down, and no line it prints holds the password or the
// whole URL. The read-only server stands in for a hot standby: pgx decides
// by SHOW transaction_read_only, which default_transaction_read_only = on
// turns on as a standby's recovery does. Without target_session_attrs the
// relay takes the first host and fails there, which shows the setting is
// what picks the primary.
func TestMultiHostURLFindsThePrimary(t *testing.T) {
	e := testenv.New(t)
	if e.PG.External() {
		t.Skip("needs throwaway clusters on loopback")
	}
	ctx := context.Background()
	const secret = "Multi-Host-Secret-91"
	readOnly := pgcluster.New(t, pgcluster.Options{Settings: map[string]string{"default_transaction_read_only": "on"}})
	down := pgcluster.New(t)
	if err := down.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	urlForm := fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		secret, readOnly.Port, e.PG.Port)
	keywordForm := fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d user=postgres password=%s dbname=postgres sslmode=disable target_session_attrs=read-write",
		down.Port, e.PG.Port, secret)

	for i, url := range []string{urlForm, keywordForm} {
		p := e.Run(t, "--database-url", url) // the last --database-url wins
		ids := e.InsertN("order", 5)
		testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 60*time.Second)
		testenv.Eventually(t, 30*time.Second, "streaming from the primary's slot", func() bool {
			var active bool
			e.Conn.QueryRow(ctx, "SELECT active FROM pg_replication_slots WHERE slot_name = 'pgoutbox'").Scan(&active)
			return active
		})
		after := e.InsertN("order", 5)
		testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", after, 30*time.Second)
		if err := p.Signal(t, syscall.SIGTERM); err != nil {
			t.Fatalf("form %d: %v\n%s", i, err, p.Out)
		}
		if out := p.Out.String(); strings.Contains(out, secret) || strings.Contains(out, url) {
			t.Fatalf("form %d: the password or the URL was printed:\n%s", i, out)
		}
	}
	roConn := (&testenv.Env{T: t, URL: readOnly.URL}).Connect()
	var slots int
	roConn.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots").Scan(&slots)
	if slots != 0 {
		t.Fatalf("%d slots on the read-only server", slots)
	}

	// Without target_session_attrs the first host is taken, whatever it is.
	noAttrs := strings.Replace(urlForm, "&target_session_attrs=read-write", "", 1)
	code, out := testenv.RunOnce(t, 30*time.Second, nil, "run", "--database-url", noAttrs, "--kafka-brokers", strings.Join(e.Brokers, ","))
	if code == 0 || !strings.Contains(out, "the server is read-only") || !strings.Contains(out, "target_session_attrs=read-write") {
		t.Fatalf("without target_session_attrs: exit %d\n%s", code, out)
	}
	// No host reachable: the error names no secret either.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().(*net.TCPAddr).Port
	l.Close()
	allDown := fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d user=postgres password=%s dbname=postgres sslmode=disable target_session_attrs=read-write",
		down.Port, closed, secret)
	code, out = testenv.RunOnce(t, 4*time.Second, nil, "run", "--database-url", allDown, "--kafka-brokers", strings.Join(e.Brokers, ","), "--log-format", "json")
	if !strings.Contains(out, "reconnecting") || strings.Contains(out, secret) {
		t.Fatalf("with no host reachable: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{"status", "--database-url", keywordForm}, {"migrate", "--database-url", urlForm}} {
		code, out := testenv.RunOnce(t, 30*time.Second, nil, args...)
		if strings.Contains(out, secret) || (args[0] == "migrate" && code != 0) {
			t.Fatalf("%s: exit %d\n%s", args[0], code, out)
		}
	}
}
