package testenv

// The tables users already have when they start pgoutbox, as the tests
// create and fill them: Debezium's documented table, a ledger's, and a
// partitioned outbox.

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pgcluster"
)

// DebeziumDocTable is the outbox table of Debezium's documentation and
// examples: no type column, which Debezium has not read since 1.2.
const DebeziumDocTable = `CREATE TABLE public.outboxevent (
  id uuid NOT NULL PRIMARY KEY,
  aggregatetype varchar(255) NOT NULL,
  aggregateid varchar(255),
  payload jsonb)`

// LedgerTable is seed 000's outbox_event in Postgres types: a bigserial id,
// the team's own status column, and no column pgoutbox added.
const LedgerTable = `CREATE TABLE public.outbox_event (
  id BIGSERIAL PRIMARY KEY,
  aggregate_type VARCHAR(50) NOT NULL,
  aggregate_id BIGINT NOT NULL,
  event_type VARCHAR(100) NOT NULL,
  payload JSONB NOT NULL,
  status VARCHAR(20) NOT NULL DEFAULT 'PENDING',
  retry_count INT NOT NULL DEFAULT 0,
  created_at TIMESTAMP(6) NOT NULL DEFAULT now(),
  processed_at TIMESTAMP(6) NULL);
CREATE INDEX idx_outbox_status_created ON public.outbox_event (status, created_at)`

// LedgerFlags map the ledger's columns for pgoutbox run.
var LedgerFlags = []string{"--table", "public.outbox_event", "--column-aggregate-type", "aggregate_type",
	"--column-aggregate-id", "aggregate_id", "--column-type", "event_type"}

// ExistingLedger is a database that holds the ledger's table and rows and
// nothing of pgoutbox: no migrate has run.
func ExistingLedger(t *testing.T, rows int, pgOpts ...pgcluster.Options) *Env {
	t.Helper()
	e := NewBare(t, LedgerTable, pgOpts...)
	ctx := context.Background()
	if _, err := e.Conn.Exec(ctx, `INSERT INTO outbox_event (aggregate_type, aggregate_id, event_type, payload, status, created_at, processed_at)
SELECT 'TRANSACTION', g % 1000, 'LEDGER_POSTED', jsonb_build_object('transactionId', g, 'amount', '10.00'),
  CASE WHEN g % 10 = 0 THEN 'PENDING' ELSE 'PUBLISHED' END, now() - interval '1 year', now() - interval '1 year'
FROM generate_series(1, $1) g`, rows); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Conn.Exec(ctx, "VACUUM ANALYZE outbox_event"); err != nil {
		t.Fatal(err)
	}
	return e
}

// WriteLedger inserts n ledger rows, one per transaction every 5 ms, for
// aggregates the ledger's history already has (aggregate_id 0..9), on a
// connection of its own, and sends their ids once all committed: started
// with a relay, rows committed before, during and after its snapshot.
func WriteLedger(t *testing.T, e *Env, n int) <-chan []string {
	return WriteLedgerEvery(t, e, n, 5*time.Millisecond, 0)
}

// WriteLedgerEvery writes for aggregates from..from+9, one row every
// so often. Writers of other aggregates may run beside it: an aggregate's
// rows are committed in the order of their ids.
func WriteLedgerEvery(t *testing.T, e *Env, n int, every time.Duration, from int) <-chan []string {
	t.Helper()
	done := make(chan []string, 1)
	conn := e.Connect()
	go func() {
		defer conn.Close(context.Background())
		var ids []string
		for i := 0; i < n; i++ {
			var id string
			if err := conn.QueryRow(context.Background(), `INSERT INTO outbox_event (aggregate_type, aggregate_id, event_type, payload)
VALUES ('TRANSACTION', $1, 'LEDGER_POSTED', '{"new": true}') RETURNING id::text`, from+i%10).Scan(&id); err != nil {
				t.Error(err)
				break
			}
			ids = append(ids, id)
			time.Sleep(every)
		}
		done <- ids
	}()
	return done
}

// MustInt is s, a ledger's event id, as a number, failing the test if it
// is not one.
func MustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q is not an integer id", s)
	}
	return n
}

// PartitionedTable is an outbox as teams partition theirs, by month of
// created_at so that old months are dropped instead of deleted: last
// month, this month, and a default partition; the primary key includes
// the partition key, as PostgreSQL requires.
const PartitionedTable = `CREATE TABLE public.outbox (
  id uuid NOT NULL DEFAULT gen_random_uuid(),
  aggregatetype text NOT NULL,
  aggregateid text NOT NULL,
  type text NOT NULL,
  payload jsonb NOT NULL,
  headers jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at);
DO $$ DECLARE m timestamptz := date_trunc('month', now()); BEGIN
  EXECUTE format('CREATE TABLE outbox_last_month PARTITION OF outbox FOR VALUES FROM (%L) TO (%L)', m - interval '1 month', m);
  EXECUTE format('CREATE TABLE outbox_this_month PARTITION OF outbox FOR VALUES FROM (%L) TO (%L)', m, m + interval '1 month');
END $$;
CREATE TABLE outbox_default PARTITION OF outbox DEFAULT`

// Months relative to the current one, as SQL, for created_at.
const (
	LastMonth   = "date_trunc('month', now()) - interval '1 month' + interval '1 day'"
	ThisMonth   = "now()"
	NextMonth   = "date_trunc('month', now()) + interval '1 month' + interval '1 day'"
	InTwoMonths = "date_trunc('month', now()) + interval '2 months' + interval '1 day'"
	FarFuture   = "'2200-01-01'::timestamptz" // the default partition
)

// PartitionedOutbox is a database that holds a partitioned outbox with
// history rows (last month's) and nothing of pgoutbox: no migrate has run.
func PartitionedOutbox(t *testing.T, history int, pgOpts ...pgcluster.Options) *Env {
	t.Helper()
	e := NewBare(t, PartitionedTable, pgOpts...)
	if history > 0 {
		InsertInto(t, e, "outbox", "history", LastMonth, history)
	}
	return e
}

// InsertInto commits one transaction of n outbox rows of aggregate type
// aggType into table (the outbox, or one of its partitions directly) with
// created_at set to the SQL expression at, and returns their ids.
func InsertInto(t *testing.T, e *Env, table, aggType, at string, n int) []string {
	t.Helper()
	var ids []string
	rows, err := e.Conn.Query(context.Background(), fmt.Sprintf(`INSERT INTO %s (aggregatetype, aggregateid, type, payload, created_at)
SELECT $1, 'a-' || (g %% 3), 'Happened', jsonb_build_object('n', g), %s FROM generate_series(1, $2) g RETURNING id::text`, table, at), aggType, n)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("insert into %s: %v", table, err)
	}
	return ids
}

// Filenode is table's file on disk, which a rewrite of the table changes.
func Filenode(t *testing.T, conn *pgx.Conn, table string) uint32 {
	t.Helper()
	var n uint32
	if err := conn.QueryRow(context.Background(), "SELECT relfilenode FROM pg_class WHERE oid = $1::regclass", table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
