package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

const password = "S3cretPassw0rd"

// withUser returns dbURL connecting as user, with password if not empty.
func withUser(t *testing.T, dbURL, user, password string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(user)
	if password != "" {
		u.User = url.UserPassword(user, password)
	}
	return u.String()
}

func exec(t *testing.T, dbURL string, sql ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range sql {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// step is one command of a scenario and what it must print.
type step struct {
	args   []string // --database-url is appended
	code   int
	stdout []string
	stderr []string
	check  func(t *testing.T, stdout string)
}

func runSteps(t *testing.T, dbURL string, steps []step) {
	t.Helper()
	for _, s := range steps {
		args := append(append([]string{}, s.args...), "--database-url", dbURL)
		code, stdout, stderr := runCLI(t, time.Minute, args...)
		if code != s.code {
			t.Errorf("%v: exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", s.args, code, s.code, stdout, stderr)
		}
		contains(t, strings.Join(s.args, " ")+" stdout", stdout, s.stdout...)
		contains(t, strings.Join(s.args, " ")+" stderr", stderr, s.stderr...)
		if s.check != nil {
			s.check(t, stdout)
		}
	}
}

func TestNoSecretsInOutput(t *testing.T) {
	pg := pgcluster.NewDatabase(t)
	broker := kafkatest.New(t)
	dead := "postgres://postgres:" + password + "@127.0.0.1:1/x"
	badPort := "postgres://postgres:" + password + "@127.0.0.1:notaport/x"
	live := withUser(t, pg, "postgres", password) // trust authentication accepts it
	relayArgs := []string{"run", "--kafka-brokers", strings.Join(broker.Brokers, ","), "--log-format", "json", "--log-level", "debug"}
	tests := []struct {
		name    string
		args    []string
		timeout time.Duration
		stdout  string // proves the command got far enough
		stderr  string
	}{
		{"migrate unreachable", []string{"migrate", "--database-url", dead}, time.Minute, "", "connect"},
		{"migrate bad url", []string{"migrate", "--database-url", badPort}, time.Minute, "", "not a valid connection string"},
		{"slot create unreachable", []string{"slot", "create", "--database-url", dead}, time.Minute, "", "connect"},
		{"run unreachable", append(relayArgs, "--database-url", dead), 3 * time.Second, "", "reconnecting"},
		{"run bad url", append(relayArgs, "--database-url", badPort), 3 * time.Second, "", ""},
		{"slot status live", []string{"slot", "status", "--log-level", "debug", "--database-url", live}, time.Minute, "does not exist", ""},
		{"migrate live", []string{"migrate", "--log-level", "debug", "--database-url", live}, time.Minute, "migrated", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stdout, stderr := runCLI(t, tt.timeout, tt.args...)
			if strings.Contains(stdout+stderr, password) {
				t.Errorf("password in output\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
			contains(t, "stdout", stdout, tt.stdout)
			contains(t, "stderr", stderr, tt.stderr)
		})
	}
}

var versionRE = regexp.MustCompile(`migrated to version (\d+)`)

func TestMigrate(t *testing.T) {
	pg := pgcluster.NewDatabase(t)
	var versions []string
	remember := func(t *testing.T, stdout string) {
		m := versionRE.FindStringSubmatch(stdout)
		if m == nil {
			t.Fatalf("no version in %q", stdout)
		}
		versions = append(versions, m[1])
	}
	runSteps(t, pg, []step{
		{args: []string{"migrate"}, stdout: []string{"public.outbox", "pgoutbox_state"}, check: remember},
		{args: []string{"migrate"}, check: remember},
	})
	if len(versions) != 2 || versions[0] != versions[1] || versions[0] == "0" {
		t.Errorf("versions %q, want the same non-zero version twice", versions)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, table := range []string{"outbox", "pgoutbox_state"} {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables
WHERE table_schema = 'public' AND table_name = $1`, table).Scan(&n)
		if err != nil || n != 1 {
			t.Errorf("table %s: count %d, err %v", table, n, err)
		}
	}
}

func checkStatusJSON(t *testing.T, stdout string) {
	t.Helper()
	var st map[string]any
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	for _, k := range []string{"slot", "exists", "active", "confirmed_flush_lsn", "restart_lsn", "retained_wal_bytes"} {
		if _, ok := st[k]; !ok {
			t.Errorf("status --json has no %q: %s", k, stdout)
		}
	}
	if st["exists"] != true || st["slot"] != "pgoutbox" || st["active"] != false {
		t.Errorf("status --json: %s", stdout)
	}
	if lsn, _ := st["confirmed_flush_lsn"].(string); lsn == "" || lsn == "0/0" {
		t.Errorf("confirmed_flush_lsn %q", lsn)
	}
}

// status and dlq on a database pgoutbox never ran against say what to run.
func TestStatusBeforeMigrate(t *testing.T) {
	runSteps(t, pgcluster.NewDatabase(t), []step{
		{args: []string{"status"}, code: 1, stderr: []string{"pgoutbox's own tables are missing", "run pgoutbox migrate"}},
		{args: []string{"status", "--json"}, code: 1, stderr: []string{"run pgoutbox migrate"}},
		{args: []string{"dlq", "list"}, code: 1, stderr: []string{"run pgoutbox migrate"}},
		{args: []string{"migrate"}},
		{args: []string{"status"}, code: 1, stderr: []string{`no pipeline "pgoutbox": pgoutbox run has not started it yet`}},
	})
}

func TestSlotLifecycle(t *testing.T) {
	runSteps(t, pgcluster.NewDatabase(t), []step{
		{args: []string{"migrate"}},
		{args: []string{"slot", "create"}, stdout: []string{"publication pgoutbox created", "slot pgoutbox created at "}},
		{args: []string{"slot", "create"}, stdout: []string{"publication pgoutbox already covers", "slot pgoutbox already exists"}},
		{args: []string{"slot", "status"}, stdout: []string{"confirmed_flush_lsn ", "retained WAL ", "restart_lsn "}},
		{args: []string{"slot", "status", "--json"}, check: checkStatusJSON},
		{args: []string{"slot", "drop"}, stdout: []string{"slot pgoutbox dropped", "publication pgoutbox dropped"}},
		{args: []string{"slot", "status"}, code: 1, stdout: []string{"slot pgoutbox does not exist"}},
		{args: []string{"slot", "drop"}, code: 1, stderr: []string{"does not exist"}},
		{args: []string{"slot", "create"}, stdout: []string{"slot pgoutbox created at "}},
	})
}

func TestSlotWithoutLogicalWAL(t *testing.T) {
	pg := pgcluster.New(t, pgcluster.Options{WALLevel: "replica"})
	runSteps(t, pg.URL, []step{
		{args: []string{"migrate"}},
		{args: []string{"slot", "create"}, code: 1, stderr: []string{`wal_level is "replica"`, "wal_level = logical"}},
		{args: []string{"slot", "status"}, code: 1, stdout: []string{"does not exist", "problem: wal_level", "wal_level = logical"}},
	})
}

func TestSlotWithoutReplicationRole(t *testing.T) {
	pg := pgcluster.New(t)
	runSteps(t, pg.URL, []step{{args: []string{"migrate"}}})
	exec(t, pg.URL, "CREATE ROLE app LOGIN", "GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox_state TO app")
	runSteps(t, withUser(t, pg.URL, "app", ""), []step{
		{args: []string{"slot", "create"}, code: 1, stderr: []string{`role "app" lacks the REPLICATION attribute`, `ALTER ROLE "app" REPLICATION`}},
		{args: []string{"slot", "status"}, code: 1, stdout: []string{"problem: role \"app\" lacks", "ALTER ROLE"}},
	})
}

// A team's own outbox polled by its status column before migrate added
// txid: the error names the one column missing, and what adds it.
func TestPollingColumnsMissingNamed(t *testing.T) {
	dbURL := pgcluster.NewDatabase(t)
	exec(t, dbURL, `CREATE TABLE outbox_event (id bigserial PRIMARY KEY, aggregate_type text NOT NULL,
  aggregate_id text NOT NULL, event_type text NOT NULL, payload text NOT NULL,
  status varchar(20) NOT NULL DEFAULT 'PENDING')`,
		`INSERT INTO outbox_event (aggregate_type, aggregate_id, event_type, payload) VALUES ('Order', 'o-1', 'OrderCreated', '{}')`)
	broker := kafkatest.New(t)
	poll := []string{"run", "--mode", "poll", "--kafka-brokers", strings.Join(broker.Brokers, ","), "--table", "outbox_event",
		"--column-aggregate-type", "aggregate_type", "--column-aggregate-id", "aggregate_id", "--column-type", "event_type",
		"--column-order", "id", "--column-status", "status", "--status-pending", "PENDING", "--status-published", "SENT"}
	runSteps(t, dbURL, []step{
		{args: poll, code: 1, stderr: []string{"public.outbox_event lacks txid\n", "pgoutbox migrate adds them"}},
	})
}

// A second pipeline on the same database, started with the default
// publication, is refused without touching the first one's: the error
// offers a publication of its own, and with one it starts.
func TestSecondPipelineOwnPublication(t *testing.T) {
	dbURL := pgcluster.NewDatabase(t)
	for _, tbl := range []string{"orders_outbox", "payments_outbox"} {
		exec(t, dbURL, `CREATE TABLE `+tbl+` (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL,
  aggregateid text NOT NULL, type text NOT NULL, payload jsonb NOT NULL)`)
	}
	runSteps(t, dbURL, []step{
		{args: []string{"migrate", "--table", "orders_outbox"}},
		{args: []string{"slot", "create", "--table", "orders_outbox", "--slot", "orders"}, stdout: []string{"publication pgoutbox created for public.orders_outbox"}},
		{args: []string{"slot", "create", "--table", "payments_outbox", "--slot", "payments"}, code: 1,
			stderr: []string{"publication pgoutbox also publishes public.orders_outbox", "give this one a publication of its own (--publication)"}},
		{args: []string{"slot", "create", "--table", "payments_outbox", "--slot", "payments", "--publication", "payments"},
			stdout: []string{"publication payments created for public.payments_outbox", "slot payments created at "}},
	})
	var tables string
	scalar(t, dbURL, &tables, `SELECT string_agg(pubname || ':' || tablename, ' ' ORDER BY pubname) FROM pg_publication_tables`)
	if tables != "payments:payments_outbox pgoutbox:orders_outbox" {
		t.Fatalf("publications: %s", tables)
	}
}

// Polling's use of a team's own table is checked before anything is
// published: a mark that fails after Kafka acked would send the same rows
// again at every start. Each configuration below stops with what is wrong,
// nothing reaches Kafka, and the pending rows stay pending.
func TestPollingColumnsUnfitRefusedBeforePublishing(t *testing.T) {
	broker := kafkatest.New(t)
	const event = `aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL, payload text NOT NULL`
	mapping := []string{"run", "--mode", "poll", "--kafka-brokers", strings.Join(broker.Brokers, ","), "--table", "ev",
		"--column-aggregate-type", "aggregate_type", "--column-aggregate-id", "aggregate_id", "--column-type", "event_type"}
	tests := []struct {
		name    string
		ddl     []string // ev's table and what it needs; two rows are inserted before migrate
		pending string   // the status of a pending row
		flags   []string
		role    bool // run as a role that may read ev but not update it
		want    []string
		notWant string
		// published is how many records reach Kafka: none where the
		// check before publishing sees the problem; one per row, once,
		// where only the mark itself can. The relay then keeps trying to
		// mark them, without polling, for runFor, and is stopped.
		published int64
		runFor    time.Duration
		// fix, run halfway through runFor, puts the table right: the
		// rows published before are then marked, and not sent again.
		fix string
		// seq: ev has a seq of its own, numbering each aggregate's
		// events, and four rows, two of each aggregate.
		seq bool
		// migrate is what migrate says of the table; nil: it succeeds.
		migrate []string
		// migrateNote is what migrate, given the mapping too, says on
		// stdout of the rows run will stop on.
		migrateNote []string
	}{
		{
			name: "timestamp order column",
			ddl: []string{`CREATE TABLE ev (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), ` + event + `,
  status varchar(50) NOT NULL DEFAULT 'NEW', created_at timestamp NOT NULL DEFAULT now(), sent_at timestamp)`},
			pending: "NEW",
			flags:   []string{"--column-status", "status", "--status-pending", "NEW", "--status-published", "SENT", "--column-processed-at", "sent_at", "--column-order", "created_at"},
			want:    []string{"polling cannot use the outbox table as configured: its order column created_at is timestamp without time zone", "bigserial or identity id (--column-order)"},
		},
		{
			// The hint for rows without seq offers only what --column-order
			// can take; created_at can still number them.
			name: "rows without seq and no integer id",
			ddl: []string{`CREATE TABLE ev (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), ` + event + `,
  status varchar(50) NOT NULL DEFAULT 'NEW', created_at timestamp NOT NULL DEFAULT now(), sent_at timestamp)`},
			pending: "NEW",
			flags:   []string{"--column-status", "status", "--status-pending", "NEW", "--status-published", "SENT", "--column-processed-at", "sent_at"},
			want:    []string{`2 rows of public.ev that polling must publish have no seq`, `Number them before every other row`, `ORDER BY "created_at" DESC`},
			notWant: "--column-order created_at",
			migrateNote: []string{`public.ev: run will stop before it publishes anything: 2 rows of public.ev that polling must publish have no seq`,
				`ORDER BY "created_at" DESC`},
		},
		{
			name: "processed-at column of another type",
			ddl: []string{`CREATE TABLE ev (id bigserial PRIMARY KEY, ` + event + `,
  status text NOT NULL DEFAULT 'PENDING', processed_at bigint)`},
			pending: "PENDING",
			flags:   []string{"--column-order", "id", "--column-status", "status", "--status-pending", "PENDING", "--status-published", "PUBLISHED", "--column-processed-at", "processed_at"},
			want:    []string{`marking a row published would fail: column "processed_at" is of type bigint but expression is of type timestamp with time zone`, "--column-processed-at"},
		},
		{
			name: "published value the enum lacks",
			ddl: []string{`CREATE TYPE ev_status AS ENUM ('PENDING', 'PUBLISHED')`, `CREATE TABLE ev (id bigserial PRIMARY KEY, ` + event + `,
  status ev_status NOT NULL DEFAULT 'PENDING')`},
			pending: "PENDING",
			flags:   []string{"--column-order", "id", "--column-status", "status", "--status-pending", "PENDING", "--status-published", "SENT"},
			want:    []string{`invalid input value for enum ev_status: "SENT"`, "--status-published"},
		},
		{
			name: "published value longer than the column",
			ddl: []string{`CREATE TABLE ev (id bigserial PRIMARY KEY, ` + event + `,
  status varchar(4) NOT NULL DEFAULT 'NEW')`},
			pending: "NEW",
			flags:   []string{"--column-order", "id", "--column-status", "status", "--status-pending", "NEW", "--status-published", "PUBLISHED"},
			want:    []string{"value too long for type character varying(4)"},
		},
		{
			// A CHECK constraint is only evaluated on a row: the two rows
			// are published, the mark is refused, and the relay keeps
			// trying to mark them instead of publishing them again at
			// every poll.
			name: "published value a CHECK constraint refuses",
			ddl: []string{`CREATE TABLE ev (id bigserial PRIMARY KEY, ` + event + `,
  status text NOT NULL DEFAULT 'NEW' CHECK (status IN ('NEW', 'SENT', 'FAILED')))`},
			pending:   "NEW",
			flags:     []string{"--column-order", "id", "--column-status", "status", "--status-pending", "NEW", "--status-published", "PUBLISHED"},
			want:      []string{"2 rows published before are not marked yet, and nothing more is polled until they are", "violates check constraint", "ev_status_check"},
			published: 2,
			runFor:    10 * time.Second,
			fix:       `ALTER TABLE ev DROP CONSTRAINT ev_status_check`,
		},
		{
			// Polling marks rows by their order value: by a seq shared by
			// each aggregate's first event it would mark both of them after
			// publishing one (a batch of one row shows it). Such a seq,
			// kept by migrate as the table's own, is refused by both.
			name: "a seq of the table's own, per aggregate",
			ddl: []string{`CREATE TABLE ev (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), ` + event + `,
  status text NOT NULL DEFAULT 'NEW', seq int NOT NULL, UNIQUE (aggregate_id, seq))`},
			seq:     true,
			pending: "NEW",
			flags:   []string{"--column-status", "status", "--status-pending", "NEW", "--status-published", "SENT", "--batch-size", "1"},
			migrate: []string{"its order column seq is neither an identity or serial column nor unique by an index of its own", "it would mark rows it never sent"},
			want:    []string{"its order column seq is neither an identity or serial column nor unique by an index of its own"},
		},
		{
			name: "a txid of the table's own",
			ddl: []string{`CREATE TABLE ev (id bigserial PRIMARY KEY, ` + event + `,
  status text NOT NULL DEFAULT 'NEW', txid text NOT NULL DEFAULT 'T-' || random())`},
			pending: "NEW",
			flags:   []string{"--column-order", "id", "--column-status", "status", "--status-pending", "NEW", "--status-published", "SENT"},
			migrate: []string{"its column txid is text, not the writing transaction (xid8) pgoutbox migrate adds"},
			want:    []string{"its column txid is text, not the writing transaction (xid8) pgoutbox migrate adds"},
		},
		{
			name:    "role without UPDATE on the table",
			ddl:     []string{`CREATE TABLE ev (id bigserial PRIMARY KEY, ` + event + `, status text NOT NULL DEFAULT 'NEW')`},
			pending: "NEW",
			flags:   []string{"--column-order", "id", "--column-status", "status", "--status-pending", "NEW", "--status-published", "SENT"},
			role:    true,
			want:    []string{"this role may not update public.ev, and polling marks the rows it published", `GRANT UPDATE ON "public"."ev"`},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dbURL := pgcluster.NewDatabase(t)
			typ := fmt.Sprintf("unfit%d", i)
			exec(t, dbURL, tt.ddl...)
			rows := 2
			if tt.seq {
				rows = 4
				exec(t, dbURL, fmt.Sprintf(`INSERT INTO ev (aggregate_type, aggregate_id, event_type, payload, seq)
  VALUES ('%s', 'a-1', 'Created', '{}', 1), ('%[1]s', 'a-2', 'Created', '{}', 1), ('%[1]s', 'a-1', 'Paid', '{}', 2), ('%[1]s', 'a-2', 'Paid', '{}', 2)`, typ))
			} else {
				exec(t, dbURL, fmt.Sprintf(`INSERT INTO ev (aggregate_type, aggregate_id, event_type, payload) VALUES ('%s', 'a-1', 'Created', '{}'), ('%[1]s', 'a-2', 'Created', '{}')`, typ))
			}
			migrate := step{args: []string{"migrate", "--table", "ev"}}
			if tt.migrate != nil {
				migrate.code, migrate.stderr = 1, tt.migrate
			}
			runSteps(t, dbURL, []step{migrate})
			if tt.migrateNote != nil {
				runSteps(t, dbURL, []step{{args: append([]string{"migrate", "--table", "ev"}, tt.flags...), stdout: tt.migrateNote}})
			}
			runURL := dbURL
			if tt.role {
				role := fmt.Sprintf("reader_%d_%d", i, time.Now().UnixNano())
				exec(t, dbURL, `CREATE ROLE `+role+` LOGIN`,
					`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO `+role,
					`GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO `+role,
					`REVOKE UPDATE ON ev FROM `+role)
				t.Cleanup(func() {
					exec(t, dbURL, `DROP OWNED BY `+role)
					exec(t, dbURL, `DROP ROLE `+role)
				})
				runURL = withUser(t, dbURL, role, "")
			}
			runFor, wantCode := time.Minute, 1
			if tt.runFor != 0 {
				runFor, wantCode = tt.runFor, 0
			}
			if tt.fix != "" {
				fixed := make(chan struct{})
				defer func() { <-fixed }()
				go func() {
					defer close(fixed)
					time.Sleep(runFor / 2)
					conn, err := pgx.Connect(context.Background(), dbURL)
					if err == nil {
						_, err = conn.Exec(context.Background(), tt.fix)
						conn.Close(context.Background())
					}
					if err != nil {
						t.Errorf("%s: %v", tt.fix, err)
					}
				}()
			}
			code, _, stderr := runCLI(t, runFor, append(append(append([]string{}, mapping...), tt.flags...), "--database-url", runURL)...)
			if code != wantCode {
				t.Errorf("run: exit code %d, want %d\n%s", code, wantCode, stderr)
			}
			contains(t, "run stderr", stderr, tt.want...)
			if tt.notWant != "" && strings.Contains(stderr, tt.notWant) {
				t.Errorf("run stderr offers %q:\n%s", tt.notWant, stderr)
			}
			if n := topicRecords(t, broker.Brokers, "outbox.event."+typ); n != tt.published {
				t.Errorf("%d records reached Kafka before the relay stopped, want %d", n, tt.published)
			}
			var pending int
			scalar(t, dbURL, &pending, `SELECT count(*) FROM ev WHERE status::text = $1`, tt.pending)
			want := rows
			if tt.fix != "" {
				want = 0
			}
			if pending != want {
				t.Errorf("%d rows still %s, want %d", pending, tt.pending, want)
			}
		})
	}
}

// onceEach checks that topic holds one record of each key and no other.
func onceEach(t *testing.T, brokers []string, topic string, keys ...string) {
	t.Helper()
	got := map[string]int{}
	for _, r := range kafkatest.Consume(t, brokers, []string{topic}, len(keys), 20*time.Second) {
		got[string(r.Key)]++
	}
	n := topicRecords(t, brokers, topic)
	for _, k := range keys {
		if got[k] != 1 {
			t.Errorf("%d records in %s, by key %v; want %v once each", n, topic, got, keys)
			return
		}
	}
	if n != int64(len(keys)) {
		t.Errorf("%d records in %s, by key %v; want %v once each", n, topic, got, keys)
	}
}

// scalar runs query on dbURL and scans its one value into dest.
func scalar(t *testing.T, dbURL string, dest any, query string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(context.Background(), query, args...).Scan(dest); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// topicRecords is how many records topic holds; 0 when it does not exist.
func topicRecords(t *testing.T, brokers []string, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			n += o.Offset
		}
	})
	return n
}

// Two databases of one cluster, each with a pipeline of the same slot
// name (slot names are the cluster's): the second is told whose slot it
// is and to take its own, by every command, and nothing it runs streams
// or drops the first one's slot. PostgreSQL itself would drop it from
// there, and auto mode used to poll forever.
func TestSlotOfAnotherDatabase(t *testing.T) {
	first, second := pgcluster.NewDatabase(t), pgcluster.NewDatabase(t)
	u, err := url.Parse(first)
	if err != nil {
		t.Fatal(err)
	}
	firstDB := strings.TrimPrefix(u.Path, "/")
	slot := fmt.Sprintf("shared_%d", time.Now().UnixNano()%1e9)
	broker := kafkatest.New(t)
	runSteps(t, first, []step{
		{args: []string{"migrate"}},
		{args: []string{"slot", "create", "--slot", slot}, stdout: []string{"slot " + slot + " created at "}},
	})
	elsewhere := "slot " + slot + " is database " + firstDB + "'s, another pipeline's (slot names are the cluster's); give this pipeline a slot of its own (--slot)"
	runSteps(t, second, []step{
		{args: []string{"migrate"}},
		{args: []string{"slot", "create", "--slot", slot}, code: 1, stderr: []string{elsewhere}},
		{args: []string{"slot", "status", "--slot", slot}, code: 1, stderr: []string{elsewhere}},
		{args: []string{"slot", "drop", "--slot", slot}, code: 1, stderr: []string{elsewhere}},
		{args: []string{"run", "--slot", slot, "--kafka-brokers", strings.Join(broker.Brokers, ",")}, code: 1, stderr: []string{elsewhere}},
		{args: []string{"status", "--slot", slot}, code: 1, stderr: []string{`no pipeline "` + slot + `" here: the replication slot belongs to another database: ` + elsewhere}},
		{args: []string{"slot", "create", "--slot", slot + "_b", "--publication", "pgoutbox_b"}, stdout: []string{"slot " + slot + "_b created at "}},
	})
	conn, err := pgx.Connect(context.Background(), first)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var db string
	if err := conn.QueryRow(context.Background(), `SELECT database::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&db); err != nil || db != firstDB {
		t.Fatalf("the first pipeline's slot: database %q, %v", db, err)
	}
}

// A team's table that marked its rows with a published_at of its own:
// migrate says how many rows that mark leaves unpublished and how to send
// them; a first start with --snapshot-mode initial, polling or streaming
// the WAL, sends exactly those, then what commits later, each once.
func TestTableWithItsOwnPublishedAt(t *testing.T) {
	for _, first := range [][]string{
		{"--column-published", "published_at", "--column-order", "id"},
		{"--mode", "poll", "--snapshot-mode", "initial", "--column-order", "id"},
		{"--snapshot-mode", "initial"},
	} {
		t.Run(strings.Join(first, " "), func(t *testing.T) {
			dbURL := pgcluster.NewDatabase(t)
			typ := fmt.Sprintf("ownmark%d", time.Now().UnixNano()%1e6)
			exec(t, dbURL, `CREATE TABLE outbox (id bigserial PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL,
  type text NOT NULL, payload jsonb NOT NULL, published_at timestamptz)`,
				fmt.Sprintf(`INSERT INTO outbox (aggregatetype, aggregateid, type, payload, published_at)
  SELECT '%s', 'a-' || g, 'Created', '{}', CASE WHEN g <= 2 THEN now() END FROM generate_series(1, 5) g`, typ))
			broker := kafkatest.New(t)
			slot := fmt.Sprintf("ownmark_%d", time.Now().UnixNano()%1e9)
			runSteps(t, dbURL, []step{{args: []string{"migrate"}, stdout: []string{
				"public.outbox: 3 rows written before pgoutbox have no published_at, which the table already had (2 have one)",
				"--column-published published_at", "--column-order <the table's identity or serial id>"}}})
			args := []string{"run", "--kafka-brokers", strings.Join(broker.Brokers, ","), "--database-url", dbURL, "--slot", slot}
			code, _, stderr := runCLI(t, 6*time.Second, append(args, first...)...)
			if code != 0 || first[0] != "--column-published" && !strings.Contains(stderr, "published the rows already in the table") {
				t.Fatalf("first start: exit %d\n%s", code, stderr)
			}
			exec(t, dbURL, fmt.Sprintf(`INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('%s', 'a-6', 'Created', '{}')`, typ))
			if code, _, stderr := runCLI(t, 8*time.Second, args...); code != 0 {
				t.Fatalf("second start: exit %d\n%s", code, stderr)
			}
			onceEach(t, broker.Brokers, "outbox.event."+typ, "a-3", "a-4", "a-5", "a-6")
		})
	}
}

// A created_at of the table's own that holds epoch milliseconds is not
// the event time: left to the default, the events go out with the commit
// time instead of every one being dead-lettered; named with --column-time,
// run refuses it before it starts.
func TestEpochCreatedAt(t *testing.T) {
	dbURL := pgcluster.NewDatabase(t)
	typ := fmt.Sprintf("epoch%d", time.Now().UnixNano()%1e6)
	exec(t, dbURL, `CREATE TABLE outbox (id bigserial PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL,
  type text NOT NULL, payload jsonb NOT NULL, created_at bigint NOT NULL DEFAULT (extract(epoch FROM now()) * 1000)::bigint)`)
	broker := kafkatest.New(t)
	runSteps(t, dbURL, []step{{args: []string{"migrate"}}})
	exec(t, dbURL, fmt.Sprintf(`INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('%s', 'a-1', 'Created', '{}')`, typ))
	args := []string{"run", "--mode", "poll", "--kafka-brokers", strings.Join(broker.Brokers, ","), "--database-url", dbURL}
	if code, _, stderr := runCLI(t, 5*time.Second, args...); code != 0 || strings.Contains(stderr, "dead-lettered") {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	r := kafkatest.Consume(t, broker.Brokers, []string{"outbox.event." + typ}, 1, 20*time.Second)[0]
	var ce struct{ Time time.Time }
	if err := json.Unmarshal(r.Value, &ce); err != nil || time.Since(ce.Time) > time.Minute || time.Since(ce.Time) < 0 {
		t.Errorf("time %v (%v), want the commit time: %s", ce.Time, err, r.Value)
	}
	code, _, stderr := runCLI(t, time.Minute, append(args, "--column-time", "created_at")...)
	if code != 1 || !strings.Contains(stderr, "created_at: the event time column must be a timestamp or timestamptz column") {
		t.Errorf("run --column-time created_at: exit %d\n%s", code, stderr)
	}
}

// A team's poller that retries FAILED rows keeps two states that mean
// "not sent yet": --status-pending takes both, and the takeover publishes
// the rows in either, once, leaving a state it was not given alone.
func TestStatusPendingValues(t *testing.T) {
	dbURL := pgcluster.NewDatabase(t)
	typ := fmt.Sprintf("retry%d", time.Now().UnixNano()%1e6)
	exec(t, dbURL, `CREATE TABLE transfer_events (id bigserial PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
  event_type text NOT NULL, payload text NOT NULL, status varchar(20) NOT NULL DEFAULT 'PENDING', published_at timestamp)`,
		fmt.Sprintf(`INSERT INTO transfer_events (aggregate_type, aggregate_id, event_type, payload, status, published_at) VALUES
  ('%s', 't-1', 'TransferRequested', '{}', 'PUBLISHED', now()), ('%[1]s', 't-2', 'TransferRequested', '{}', 'FAILED', NULL),
  ('%[1]s', 't-3', 'TransferRequested', '{}', 'PENDING', NULL), ('%[1]s', 't-4', 'TransferRequested', '{}', 'PROCESSING', NULL)`, typ))
	broker := kafkatest.New(t)
	runSteps(t, dbURL, []step{{args: []string{"migrate", "--table", "transfer_events"}}})
	code, _, stderr := runCLI(t, 6*time.Second, "run", "--mode", "poll", "--kafka-brokers", strings.Join(broker.Brokers, ","), "--database-url", dbURL,
		"--table", "transfer_events", "--column-aggregate-type", "aggregate_type", "--column-aggregate-id", "aggregate_id", "--column-type", "event_type",
		"--column-order", "id", "--column-status", "status", "--status-pending", "PENDING, FAILED", "--status-published", "PUBLISHED",
		"--column-processed-at", "published_at")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	recs := kafkatest.Consume(t, broker.Brokers, []string{"outbox.event." + typ}, 2, 20*time.Second)
	if n := topicRecords(t, broker.Brokers, "outbox.event."+typ); n != 2 || string(recs[0].Key) != "t-2" || string(recs[1].Key) != "t-3" {
		t.Errorf("%d records, first keys %q %q; want t-2 and t-3 once each", n, recs[0].Key, recs[1].Key)
	}
	var states string
	scalar(t, dbURL, &states, `SELECT string_agg(status || ':' || (published_at IS NOT NULL)::text, ' ' ORDER BY id) FROM transfer_events`)
	if want := "PUBLISHED:true PUBLISHED:true PUBLISHED:true PROCESSING:false"; states != want {
		t.Errorf("states %s, want %s", states, want)
	}
}

// Seed 004's transfer_events keeps its own metadata in a text headers
// column. Left to the default name it is not read as CloudEvents
// extensions: its rows (camelCase keys, a "source" that is a context
// attribute) reach their topic, none the dead-letter topic, and the log
// says how to read it. Named, it is read, and those rows are dead-lettered
// with the reason.
func TestTransferEventsTextHeaders(t *testing.T) {
	for _, named := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "named"}[named], func(t *testing.T) {
			dbURL := pgcluster.NewDatabase(t)
			typ := fmt.Sprintf("hdr%d", time.Now().UnixNano()%1e6)
			exec(t, dbURL, `CREATE TABLE transfer_events (event_id bigserial PRIMARY KEY, aggregate_type varchar(50) NOT NULL,
  aggregate_id varchar(100) NOT NULL, event_type varchar(50) NOT NULL, payload text NOT NULL, headers text,
  status varchar(20) NOT NULL DEFAULT 'PENDING', published_at timestamp)`,
				fmt.Sprintf(`INSERT INTO transfer_events (aggregate_type, aggregate_id, event_type, payload, headers) VALUES
  ('%s', 't-1', 'TransferCompleted', '{"amount": 1}', '{"traceId": "abc-1"}'),
  ('%[1]s', 't-2', 'TransferCompleted', '{"amount": 2}', NULL),
  ('%[1]s', 't-3', 'TransferCompleted', '{"amount": 3}', '{"source": "transfer-service"}')`, typ))
			broker := kafkatest.New(t)
			args := []string{"--table", "transfer_events", "--column-id", "event_id", "--column-aggregate-type", "aggregate_type",
				"--column-aggregate-id", "aggregate_id", "--column-type", "event_type", "--column-order", "event_id",
				"--column-status", "status", "--status-pending", "PENDING", "--status-published", "PUBLISHED", "--column-processed-at", "published_at"}
			if named {
				args = append(args, "--column-headers", "headers")
			}
			// Its pending rows are polled by its status, which migrate says.
			runSteps(t, dbURL, []step{{args: append([]string{"migrate"}, args...),
				stdout: []string{"rows already there whose status is PENDING are published by run, the others not"}}})
			code, _, stderr := runCLI(t, 6*time.Second, append([]string{"run", "--mode", "poll", "--kafka-brokers", strings.Join(broker.Brokers, ","),
				"--database-url", dbURL}, args...)...)
			if code != 0 {
				t.Fatalf("run: exit %d\n%s", code, stderr)
			}
			topic := "outbox.event." + typ
			var wantTopic, wantDLQ int64 = 3, 0
			if named {
				wantTopic, wantDLQ = 1, 2
			}
			if n := topicRecords(t, broker.Brokers, topic); n != wantTopic {
				t.Errorf("%d records on %s, want %d", n, topic, wantTopic)
			}
			if n := topicRecords(t, broker.Brokers, "pgoutbox.dlq"); n != wantDLQ {
				t.Errorf("%d dead letters, want %d\n%s", n, wantDLQ, stderr)
			}
			said := strings.Contains(stderr, "headers column is not json or jsonb")
			if said == named {
				t.Errorf("the log says the headers column is left out: %v, want %v\n%s", said, !named, stderr)
			}
			if named && !strings.Contains(stderr, `extension name \"traceId\" must consist of lower-case letters`) {
				t.Errorf("the dead letter's reason is not logged:\n%s", stderr)
			}
			// status takes run's flags as they are and counts by the
			// table's status: nothing is left, and the dead letters are
			// a problem it names.
			st := step{args: append([]string{"status"}, args...), stdout: []string{"unpublished  0 rows"}}
			if named {
				st.code, st.stdout = 1, append(st.stdout, "problem: 2 events are dead-lettered")
			}
			runSteps(t, dbURL, []step{st})
		})
	}
}

// A jsonb column named headers that holds a team's own metadata (HTTP
// headers, nested objects), not CloudEvents extensions: read by default,
// its rows go to the dead-letter topic with a reason that says how to
// leave it out; --column-headers ” leaves it out, and they are published.
func TestJSONHeadersOfOwnLeftOut(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "off"}[off], func(t *testing.T) {
			dbURL := pgcluster.NewDatabase(t)
			typ := fmt.Sprintf("jhdr%d", time.Now().UnixNano()%1e6)
			exec(t, dbURL, `CREATE TABLE events (id bigserial PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL,
  type text NOT NULL, payload jsonb NOT NULL, headers jsonb, created_at timestamptz NOT NULL DEFAULT now())`)
			broker := kafkatest.New(t)
			args := []string{"--table", "events", "--column-order", "id"}
			if off {
				args = append(args, "--column-headers", "")
			}
			runSteps(t, dbURL, []step{{args: append([]string{"migrate"}, args...)}})
			exec(t, dbURL, fmt.Sprintf(`INSERT INTO events (aggregatetype, aggregateid, type, payload, headers) VALUES
  ('%s', 'e-1', 'Sent', '{}', '{"Content-Type": "application/json", "X-Request-Id": "r-1"}'),
  ('%[1]s', 'e-2', 'Sent', '{}', '{"http": {"status": 200}}')`, typ))
			code, _, stderr := runCLI(t, 6*time.Second, append([]string{"run", "--mode", "poll", "--kafka-brokers", strings.Join(broker.Brokers, ","),
				"--database-url", dbURL}, args...)...)
			if code != 0 {
				t.Fatalf("run: exit %d\n%s", code, stderr)
			}
			topic := "outbox.event." + typ
			if off {
				onceEach(t, broker.Brokers, topic, "e-1", "e-2")
				for _, r := range kafkatest.Consume(t, broker.Brokers, []string{topic}, 2, 20*time.Second) {
					// The type, and so the topic and the CloudEvent, may
					// hold any digits: look for the column's own names.
					if bytes.Contains(r.Value, []byte("X-Request-Id")) || bytes.Contains(r.Value, []byte(`"status"`)) {
						t.Errorf("the headers column was read: %s", r.Value)
					}
				}
			} else if n := topicRecords(t, broker.Brokers, topic); n != 0 {
				t.Errorf("%d records on %s, want none: every row's headers are not extensions", n, topic)
			}
			var wantDLQ int64
			if !off {
				wantDLQ = 2
			}
			if n := topicRecords(t, broker.Brokers, "pgoutbox.dlq"); n != wantDLQ {
				t.Errorf("%d dead letters, want %d\n%s", n, wantDLQ, stderr)
			}
			hinted := strings.Contains(stderr, `is read as CloudEvents extensions unless --column-headers '' is given`)
			if hinted == off {
				t.Errorf("the dead letters' reason says how to leave the column out: %v, want %v\n%s", hinted, !off, stderr)
			}
		})
	}
}

// Seed 004's created_at is a timestamp without time zone, DEFAULT NOW(),
// on a server whose TimeZone is Asia/Seoul: the wall time it holds is
// Seoul's, and the CloudEvent's time is the instant the row was written,
// whether the WAL or polling publishes it (before: nine hours ahead).
func TestTimestampWithoutZoneInServerZone(t *testing.T) {
	for _, mode := range []string{"wal", "poll"} {
		t.Run(mode, func(t *testing.T) {
			dbURL := pgcluster.NewDatabase(t)
			typ := fmt.Sprintf("seoul%d", time.Now().UnixNano()%1e6)
			exec(t, dbURL, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET timezone = %L', current_database(), 'Asia/Seoul'); END $$`)
			exec(t, dbURL, `CREATE TABLE transfer_events (event_id bigserial PRIMARY KEY, aggregate_type varchar(50) NOT NULL,
  aggregate_id varchar(100) NOT NULL, event_type varchar(50) NOT NULL, payload text NOT NULL,
  status varchar(20) NOT NULL DEFAULT 'PENDING', created_at timestamp NOT NULL DEFAULT NOW(), published_at timestamp)`)
			broker := kafkatest.New(t)
			args := []string{"--table", "transfer_events", "--column-id", "event_id", "--column-aggregate-type", "aggregate_type",
				"--column-aggregate-id", "aggregate_id", "--column-type", "event_type", "--column-order", "event_id",
				"--column-status", "status", "--status-pending", "PENDING", "--status-published", "PUBLISHED", "--column-processed-at", "published_at"}
			runSteps(t, dbURL, []step{{args: append([]string{"migrate"}, args...)}})
			slot := []string{"--slot", "s" + typ, "--publication", "p" + typ}
			if mode == "wal" {
				runSteps(t, dbURL, []step{{args: append(append([]string{"slot", "create"}, args...), slot...)}})
			}
			before := time.Now()
			exec(t, dbURL, fmt.Sprintf(`INSERT INTO transfer_events (aggregate_type, aggregate_id, event_type, payload) VALUES ('%s', 't-1', 'TransferCompleted', '{"amount": 1}')`, typ))
			after := time.Now()
			var wall string
			scalar(t, dbURL, &wall, `SELECT created_at::text FROM transfer_events`)
			code, _, stderr := runCLI(t, 6*time.Second, append(append([]string{"run", "--mode", mode, "--kafka-brokers", strings.Join(broker.Brokers, ","),
				"--database-url", dbURL}, args...), slot...)...)
			if code != 0 {
				t.Fatalf("run: exit %d\n%s", code, stderr)
			}
			r := kafkatest.Consume(t, broker.Brokers, []string{"outbox.event." + typ}, 1, 20*time.Second)[0]
			var ev struct {
				Time time.Time `json:"time"`
			}
			if err := json.Unmarshal(r.Value, &ev); err != nil {
				t.Fatalf("%v: %s", err, r.Value)
			}
			if ev.Time.Before(before.Add(-time.Second)) || ev.Time.After(after.Add(time.Second)) {
				t.Errorf("time %s for a row written between %s and %s (created_at %s in Seoul)", ev.Time.UTC(), before.UTC(), after.UTC(), wall)
			}
		})
	}
}

// A team's table holds its history: rows its poller sent long ago. Mapped
// with its own status column, or ordered by its own id, polling reads the
// few pending rows through an index migrate builds for that mapping, not
// by reading the whole table at every poll (before: a sequential scan of
// every row twice a second, the index migrate built being over seq and
// pgoutbox's published_at, which such a mapping never reads).
func TestPollingReadsThroughTheMappingsIndex(t *testing.T) {
	statusTable := `CREATE TABLE transfer_events (event_id bigserial PRIMARY KEY, aggregate_type varchar(50) NOT NULL,
  aggregate_id varchar(100) NOT NULL, event_type varchar(50) NOT NULL, payload text NOT NULL,
  status varchar(20) NOT NULL DEFAULT 'PENDING', published_at timestamp)`
	statusMapping := []string{"--column-status", "status",
		"--status-pending", "PENDING,FAILED", "--status-published", "PUBLISHED", "--column-processed-at", "published_at"}
	for _, tc := range []struct {
		name, table string
		mapping     []string
		// unmapped runs migrate without the mapping, as before: run
		// says that every poll reads the whole table.
		unmapped bool
	}{
		{"migrated without the mapping", statusTable, statusMapping, true},
		{"status", statusTable, statusMapping, false},
		{"own order", `CREATE TABLE transfer_events (event_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, aggregate_type varchar(50) NOT NULL,
  aggregate_id varchar(100) NOT NULL, event_type varchar(50) NOT NULL, payload text NOT NULL)`, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbURL := pgcluster.NewDatabase(t)
			typ := fmt.Sprintf("idx%d", time.Now().UnixNano()%1e6)
			exec(t, dbURL, tc.table)
			args := append([]string{"--table", "transfer_events", "--column-id", "event_id", "--column-aggregate-type", "aggregate_type",
				"--column-aggregate-id", "aggregate_id", "--column-type", "event_type", "--column-order", "event_id"}, tc.mapping...)
			migrate := append([]string{"migrate"}, args...)
			if tc.unmapped {
				migrate = []string{"migrate", "--table", "transfer_events"}
			}
			runSteps(t, dbURL, []step{{args: migrate}})
			// The history, sent and marked by the team's poller (by its
			// status, or by published_at, which migrate added).
			mark := "published_at"
			if tc.mapping != nil {
				mark = "status"
			}
			exec(t, dbURL, fmt.Sprintf(`INSERT INTO transfer_events (aggregate_type, aggregate_id, event_type, payload, %s)
  SELECT '%s', 't-' || (g %% 50), 'TransferCompleted', '{}', %s FROM generate_series(1, 100000) g`,
				mark, typ, map[string]string{"status": "'PUBLISHED'", "published_at": "now()"}[mark]),
				fmt.Sprintf(`INSERT INTO transfer_events (aggregate_type, aggregate_id, event_type, payload)
  SELECT '%s', 'p-' || g, 'TransferCompleted', '{}' FROM generate_series(1, 3) g`, typ),
				`ANALYZE transfer_events`)
			scans := func() int64 {
				var n int64
				scalar(t, dbURL, &n, `SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'transfer_events'`)
				return n
			}
			before := scans()
			broker := kafkatest.New(t)
			code, _, stderr := runCLI(t, 6*time.Second, append([]string{"run", "--mode", "poll", "--poll-interval", "100ms",
				"--kafka-brokers", strings.Join(broker.Brokers, ","), "--database-url", dbURL}, args...)...)
			if code != 0 {
				t.Fatalf("run: exit %d\n%s", code, stderr)
			}
			onceEach(t, broker.Brokers, "outbox.event."+typ, "p-1", "p-2", "p-3")
			// About 50 polls in those seconds, each a scan of the table
			// without the index; a start's own checks read it a few times.
			time.Sleep(600 * time.Millisecond) // the statistics collector's delay
			n := scans() - before
			t.Logf("%d sequential scans of the table", n)
			warned := strings.Contains(stderr, "every poll reads the whole outbox table")
			if warned != tc.unmapped {
				t.Errorf("run says every poll reads the whole table: %v, want %v\n%s", warned, tc.unmapped, stderr)
			}
			if !tc.unmapped && n > 6 {
				t.Errorf("%d sequential scans of the table in one run polling every 100 ms", n)
			}
		})
	}
}

// A team's poller that marked rows only with a processed_at of its own
// (null while pending), taken over with --column-published: its pending
// rows from before pgoutbox are published once and marked, its processed
// ones not again, then what commits later, in poll and in auto mode.
func TestTakeOverProcessedAtPoller(t *testing.T) {
	for _, mode := range []string{"poll", "auto"} {
		t.Run(mode, func(t *testing.T) {
			dbURL := pgcluster.NewDatabase(t)
			typ := fmt.Sprintf("processed%d", time.Now().UnixNano()%1e6)
			exec(t, dbURL, `CREATE TABLE outbox_event (id bigserial PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
  event_type text NOT NULL, payload jsonb NOT NULL, processed_at timestamptz)`,
				fmt.Sprintf(`INSERT INTO outbox_event (aggregate_type, aggregate_id, event_type, payload, processed_at)
  SELECT '%s', 'o-' || g, 'OrderPlaced', '{}', CASE WHEN g <= 2 THEN now() END FROM generate_series(1, 4) g`, typ))
			broker := kafkatest.New(t)
			mapping := []string{"--table", "outbox_event", "--column-aggregate-type", "aggregate_type", "--column-aggregate-id", "aggregate_id",
				"--column-type", "event_type", "--column-order", "id", "--column-published", "processed_at"}
			runSteps(t, dbURL, []step{{args: append([]string{"migrate"}, mapping...)}})
			args := append([]string{"run", "--mode", mode, "--slot", "p" + typ, "--kafka-brokers", strings.Join(broker.Brokers, ","), "--database-url", dbURL}, mapping...)
			if code, _, stderr := runCLI(t, 6*time.Second, args...); code != 0 {
				t.Fatalf("first start: exit %d\n%s", code, stderr)
			}
			exec(t, dbURL, fmt.Sprintf(`INSERT INTO outbox_event (aggregate_type, aggregate_id, event_type, payload) VALUES ('%s', 'o-5', 'OrderPlaced', '{}')`, typ))
			if code, _, stderr := runCLI(t, 6*time.Second, args...); code != 0 {
				t.Fatalf("second start: exit %d\n%s", code, stderr)
			}
			onceEach(t, broker.Brokers, "outbox.event."+typ, "o-3", "o-4", "o-5")
			// Every row is marked, whether polling or the WAL (the second
			// start in auto mode) published it.
			var unmarked int
			scalar(t, dbURL, &unmarked, `SELECT count(*) FROM outbox_event WHERE processed_at IS NULL`)
			if unmarked != 0 {
				t.Errorf("%d published rows still pending", unmarked)
			}
		})
	}
}

// A WAL session marks the rows it streamed with the table's own status;
// a role that may not update the table still streams them, says once why
// they stay pending, and a later session with the right marks them.
func TestWALMarkRefusedThenMarked(t *testing.T) {
	dbURL := pgcluster.NewDatabase(t)
	typ := fmt.Sprintf("walmark%d", time.Now().UnixNano()%1e6)
	exec(t, dbURL, `CREATE TABLE outbox_event (id bigserial PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
  event_type text NOT NULL, payload jsonb NOT NULL, status text NOT NULL DEFAULT 'PENDING', processed_at timestamptz)`)
	broker := kafkatest.New(t)
	mapping := []string{"--table", "outbox_event", "--column-aggregate-type", "aggregate_type", "--column-aggregate-id", "aggregate_id",
		"--column-type", "event_type", "--column-order", "id", "--column-status", "status", "--status-pending", "PENDING",
		"--status-published", "PUBLISHED", "--column-processed-at", "processed_at"}
	runSteps(t, dbURL, []step{{args: append([]string{"migrate"}, mapping...)}})
	role := fmt.Sprintf("nomark_%d", time.Now().UnixNano())
	exec(t, dbURL, `CREATE ROLE `+role+` LOGIN REPLICATION`,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO `+role,
		`GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO `+role,
		`REVOKE UPDATE ON outbox_event FROM `+role,
		// A publication needs the table's owner; the DBA makes it.
		`CREATE PUBLICATION pgoutbox FOR TABLE outbox_event WITH (publish = 'insert')`)
	t.Cleanup(func() {
		exec(t, dbURL, `DROP OWNED BY `+role)
		exec(t, dbURL, `DROP ROLE `+role)
	})
	args := append([]string{"run", "--mode", "wal", "--slot", "p" + typ, "--kafka-brokers", strings.Join(broker.Brokers, ",")}, mapping...)
	written := make(chan struct{})
	go func() {
		defer close(written)
		time.Sleep(2 * time.Second) // the first start creates the slot; rows come after it
		exec(t, dbURL, fmt.Sprintf(`INSERT INTO outbox_event (aggregate_type, aggregate_id, event_type, payload)
  SELECT '%s', 'o-' || g, 'OrderPlaced', '{}' FROM generate_series(1, 3) g`, typ))
	}()
	code, _, stderr := runCLI(t, 8*time.Second, append(args, "--database-url", withUser(t, dbURL, role, ""))...)
	<-written
	if code != 0 {
		t.Fatalf("run without UPDATE: exit %d\n%s", code, stderr)
	}
	onceEach(t, broker.Brokers, "outbox.event."+typ, "o-1", "o-2", "o-3")
	if n := strings.Count(stderr, "marking the rows the WAL published failed"); n != 1 {
		t.Errorf("the refused marking said %d times, want once:\n%s", n, stderr)
	}
	contains(t, "run stderr", stderr, "permission denied")
	pending := func() int {
		t.Helper()
		var n int
		scalar(t, dbURL, &n, `SELECT count(*) FROM outbox_event WHERE status <> 'PUBLISHED' OR processed_at IS NULL`)
		return n
	}
	if n := pending(); n != 3 {
		t.Errorf("%d rows pending after a session that may not mark them, want 3", n)
	}
	if code, _, stderr := runCLI(t, 6*time.Second, append(args, "--database-url", dbURL)...); code != 0 {
		t.Fatalf("run as the owner: exit %d\n%s", code, stderr)
	}
	if n := pending(); n != 0 {
		t.Errorf("%d rows still pending after a session that may mark them", n)
	}
	onceEach(t, broker.Brokers, "outbox.event."+typ, "o-1", "o-2", "o-3")
}

// Seed 001's poller keeps a cursor (outbox_cursor.last_processed_id) and
// no mark on the rows: the rows above the cursor are the ones it has not
// sent. A first start with --snapshot-mode initial --snapshot-after
// <cursor>, polling or streaming the WAL, sends exactly those, then what
// commits later, each once, and none up to the cursor.
func TestTakeOverCursorPoller(t *testing.T) {
	for _, mode := range []string{"poll", "wal", "auto"} {
		t.Run(mode, func(t *testing.T) {
			dbURL := pgcluster.NewDatabase(t)
			typ := fmt.Sprintf("cursor%d", time.Now().UnixNano()%1e6)
			exec(t, dbURL, `CREATE TABLE outbox (id bigserial PRIMARY KEY, event_id varchar(36) NOT NULL, event_type varchar(100) NOT NULL,
  source varchar(100) NOT NULL, aggregate_type varchar(100) NOT NULL, aggregate_id varchar(255) NOT NULL, payload jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now())`,
				`CREATE TABLE outbox_cursor (id bigserial PRIMARY KEY, last_processed_id bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`,
				fmt.Sprintf(`INSERT INTO outbox (event_id, event_type, source, aggregate_type, aggregate_id, payload)
  SELECT gen_random_uuid(), 'loopers.order.created.v1', 'commerce-api', '%s', 'o-' || g, '{}' FROM generate_series(1, 5) g`, typ),
				`INSERT INTO outbox_cursor (last_processed_id) VALUES (0), (3)`)
			var cursor string
			scalar(t, dbURL, &cursor, `SELECT last_processed_id::text FROM outbox_cursor ORDER BY id DESC LIMIT 1`)
			broker := kafkatest.New(t)
			mapping := []string{"--table", "outbox", "--column-id", "event_id", "--column-type", "event_type",
				"--column-aggregate-type", "aggregate_type", "--column-aggregate-id", "aggregate_id", "--column-order", "id"}
			runSteps(t, dbURL, []step{{args: append([]string{"migrate"}, mapping...), stdout: []string{
				"public.outbox: the rows already in the table are its history", "--snapshot-after <id>"}}})
			args := append([]string{"run", "--mode", mode, "--slot", "p" + typ, "--kafka-brokers", strings.Join(broker.Brokers, ","),
				"--database-url", dbURL, "--snapshot-mode", "initial", "--snapshot-after", cursor}, mapping...)
			code, _, stderr := runCLI(t, 6*time.Second, args...)
			if code != 0 || !strings.Contains(stderr, "published the rows already in the table") {
				t.Fatalf("first start: exit %d\n%s", code, stderr)
			}
			exec(t, dbURL, fmt.Sprintf(`INSERT INTO outbox (event_id, event_type, source, aggregate_type, aggregate_id, payload)
  VALUES (gen_random_uuid(), 'loopers.order.created.v1', 'commerce-api', '%s', 'o-6', '{}')`, typ))
			if code, _, stderr := runCLI(t, 6*time.Second, args...); code != 0 {
				t.Fatalf("second start: exit %d\n%s", code, stderr)
			}
			onceEach(t, broker.Brokers, "outbox.event."+typ, "o-4", "o-5", "o-6")
		})
	}
	t.Run("refused", func(t *testing.T) {
		dbURL := pgcluster.NewDatabase(t)
		exec(t, dbURL, `CREATE TABLE outbox (id bigserial PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb NOT NULL)`)
		base := []string{"run", "--kafka-brokers", "127.0.0.1:1", "--database-url", dbURL, "--snapshot-after", "3"}
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"--column-order", "id"}, "--snapshot-after bounds the rows already in the table that --snapshot-mode initial publishes"},
			{[]string{"--snapshot-mode", "initial"}, "--snapshot-after is a value of the table's own insertion order, named with --column-order"},
		} {
			code, _, stderr := runCLI(t, 30*time.Second, append(append([]string{}, base...), tt.args...)...)
			if code != 1 {
				t.Errorf("%v: exit %d, want 1\n%s", tt.args, code, stderr)
			}
			contains(t, "stderr", stderr, tt.want)
		}
		code, _, stderr := runCLI(t, 30*time.Second, "run", "--kafka-brokers", "127.0.0.1:1", "--database-url", dbURL, "--snapshot-after", "last")
		if code != 2 {
			t.Errorf("--snapshot-after last: exit %d, want 2\n%s", code, stderr)
		}
		contains(t, "stderr", stderr, `"last" is not an integer`)
	})
}

// A publication of every operation (Debezium's default) carries the
// marks a WAL session sets back into the stream as UPDATEs of the outbox
// table; with a mark column of the table's own they are its life, not an
// unexpected operation, even under --on-update fatal.
func TestWALMarksThroughPublicationOfUpdates(t *testing.T) {
	dbURL := pgcluster.NewDatabase(t)
	typ := fmt.Sprintf("walupd%d", time.Now().UnixNano()%1e6)
	exec(t, dbURL, `CREATE TABLE outbox_event (id bigserial PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
  event_type text NOT NULL, payload jsonb NOT NULL, status text NOT NULL DEFAULT 'PENDING', processed_at timestamptz)`,
		`CREATE PUBLICATION everything FOR TABLE outbox_event`)
	broker := kafkatest.New(t)
	mapping := []string{"--table", "outbox_event", "--column-aggregate-type", "aggregate_type", "--column-aggregate-id", "aggregate_id",
		"--column-type", "event_type", "--column-order", "id", "--column-status", "status", "--status-pending", "PENDING",
		"--status-published", "PUBLISHED", "--column-processed-at", "processed_at"}
	runSteps(t, dbURL, []step{{args: append([]string{"migrate"}, mapping...)}})
	args := append([]string{"run", "--mode", "wal", "--slot", "p" + typ, "--publication", "everything", "--on-update", "fatal",
		"--kafka-brokers", strings.Join(broker.Brokers, ","), "--database-url", dbURL}, mapping...)
	written := make(chan struct{})
	go func() {
		defer close(written)
		for i := 1; i <= 3; i++ {
			time.Sleep(time.Second)
			exec(t, dbURL, fmt.Sprintf(`INSERT INTO outbox_event (aggregate_type, aggregate_id, event_type, payload) VALUES ('%s', 'o-%d', 'OrderPlaced', '{}')`, typ, i))
		}
	}()
	code, _, stderr := runCLI(t, 8*time.Second, args...)
	<-written
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	if strings.Contains(stderr, "UPDATE of the outbox table") {
		t.Errorf("the marks were reported as unexpected updates:\n%s", stderr)
	}
	onceEach(t, broker.Brokers, "outbox.event."+typ, "o-1", "o-2", "o-3")
	var pending int
	scalar(t, dbURL, &pending, `SELECT count(*) FROM outbox_event WHERE status <> 'PUBLISHED'`)
	if pending != 0 {
		t.Errorf("%d rows still pending", pending)
	}
}

// The change event's key is the table's primary key in key order, its
// first column included (pg_index.indkey's subscripts start at 0), its
// INCLUDE columns not, and not the id column when the key is another.
// Without a primary key it is the first unique index as the JDBC driver
// lists them for Debezium (clustered first, then by name, INCLUDE columns
// kept), and without either none: a null key.
func TestTableInfoPrimaryKey(t *testing.T) {
	dbURL := pgcluster.NewDatabase(t)
	exec(t, dbURL, `CREATE TABLE composite (id uuid NOT NULL, booked timestamp NOT NULL, note text, PRIMARY KEY (booked, id) INCLUDE (note))`,
		`CREATE TABLE bykey (id uuid, seq bigint PRIMARY KEY)`,
		`CREATE TABLE unique_only (id uuid NOT NULL, seq bigint NOT NULL, note text)`,
		`CREATE UNIQUE INDEX b_unique ON unique_only (id)`,
		`CREATE UNIQUE INDEX a_unique ON unique_only (seq) INCLUDE (note)`,
		`CREATE TABLE clustered (id uuid NOT NULL, seq bigint NOT NULL)`,
		`CREATE UNIQUE INDEX a_clustered ON clustered (seq)`,
		`CREATE UNIQUE INDEX z_clustered ON clustered (id)`,
		`CLUSTER clustered USING z_clustered`,
		`CREATE TABLE keyless (id uuid NOT NULL, note text)`,
		`CREATE INDEX keyless_id ON keyless (id)`)
	for table, want := range map[string][]string{"public.composite": {"booked", "id"}, "public.bykey": {"seq"},
		"public.unique_only": {"seq", "note"}, "public.clustered": {"id"}, "public.keyless": nil} {
		tt, err := outbox.ParseTable(table)
		if err != nil {
			t.Fatal(err)
		}
		shape, err := tableInfo(context.Background(), &common{databaseURL: dbURL}, tt)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(shape.key, want) {
			t.Errorf("%s: key %v, want %v", table, shape.key, want)
		}
		if table == "public.composite" && (!shape.notNull["booked"] || shape.notNull["note"]) {
			t.Errorf("%s: NOT NULL %v", table, shape.notNull)
		}
	}
	// Debezium fails to read a table whose first unique index has an
	// expression; pgoutbox says so at start.
	exec(t, dbURL, `CREATE TABLE byexpr (id uuid NOT NULL, email text NOT NULL)`, `CREATE UNIQUE INDEX byexpr_email ON byexpr (lower(email))`)
	if _, err := tableInfo(context.Background(), &common{databaseURL: dbURL}, outbox.Table{Schema: "public", Name: "byexpr"}); err == nil || !strings.Contains(err.Error(), "byexpr_email") {
		t.Errorf("an expression index: %v", err)
	}
}
