// Package corpusrun holds what the sink corpora (test/natscompat,
// test/rabbitmqcompat, test/rediscompat) do alike around Debezium Server
// and pgoutbox: pgoutbox run from a properties file, and the wait for a
// process to stream from its slot.
package corpusrun

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/proc"
	"github.com/pgoutbox/pgoutbox/schema"
)

// StartPgoutbox runs bin (pgoutbox) with the properties file props and
// extra flags until the test ends; its output is logged when the test
// failed.
func StartPgoutbox(t *testing.T, bin, props string, extra ...string) *proc.Process {
	t.Helper()
	return startPgoutbox(t, bin, nil, append([]string{"--config", props}, extra...))
}

func startPgoutbox(t *testing.T, bin string, env, flags []string) *proc.Process {
	t.Helper()
	p, err := proc.Start("pgoutbox", bin, append([]string{"run", "--log-format", "json"}, flags...), env, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop(30 * time.Second)
		if t.Failed() {
			t.Logf("pgoutbox's output:\n%s", p.Output())
		}
	})
	return p
}

// FirstRun writes pgoutbox's properties and creates its slot ("pgo") by
// a run with extra flags stopped once it streams: rows written after it
// are in its slot's stream, whoever else publishes them first. It
// returns the properties' file.
func FirstRun(t *testing.T, conn *pgx.Conn, bin, props string, extra ...string) string {
	t.Helper()
	path := WriteFile(t, "pgoutbox.properties", props)
	first := StartPgoutbox(t, bin, path, extra...)
	AwaitSlot(t, conn, "pgo")
	if err := first.Stop(30 * time.Second); err != nil {
		t.Fatalf("pgoutbox's first run: %v\n%s", err, first.Output())
	}
	return path
}

// AwaitSlot waits until a process streams from slot.
func AwaitSlot(t *testing.T, conn *pgx.Conn, slot string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var active bool
		err := conn.QueryRow(context.Background(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active)
		if err == nil && active {
			return
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot %s not streamed from after 2 minutes", slot)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// WriteFile writes text to name in a directory of the test's and returns
// its path.
func WriteFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// StartPgoutboxEnv runs bin (pgoutbox) with env (NAME=value) in its
// environment and no --config, as a Debezium Server configured by its
// environment alone runs.
func StartPgoutboxEnv(t *testing.T, bin string, env []string, extra ...string) *proc.Process {
	t.Helper()
	return startPgoutbox(t, bin, env, extra)
}

// Environment is Debezium Server properties as environment variables, as
// its documentation spells them: capitals, '_' for any other character
// than a letter or a digit.
func Environment(t *testing.T, props string) []string {
	t.Helper()
	kv, err := schema.ParseProperties([]byte(props))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for k, v := range kv {
		name := []byte(strings.ToUpper(k))
		for i, c := range name {
			if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
				name[i] = '_'
			}
		}
		out = append(out, string(name)+"="+v)
	}
	sort.Strings(out)
	return out
}
