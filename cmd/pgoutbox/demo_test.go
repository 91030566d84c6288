package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/migrations"
	"github.com/pgoutbox/pgoutbox/pgcluster"
)

// The demo's summary counts as written exactly the events that committed:
// writers stopped by the end of the writing time, at any point of a
// transaction, leave no committed event uncounted (it would arrive as an
// event nobody wrote) and count none that did not commit.
func TestDemoWritersCountWhatCommitted(t *testing.T) {
	dbURL := pgcluster.NewDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := migrations.Migrate(ctx, conn, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tr := newTracker(io.Discard)
	// Many short runs of busy writers: the end of a run finds some of
	// them in the middle of a COMMIT.
	for round := range 40 {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(5+round%7)*time.Millisecond)
		done := make(chan error, 8)
		for w := range 8 {
			go func() { done <- demoWriter(wctx, pool, tr, w, time.Microsecond, 2) }()
		}
		for range 8 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		cancel()
	}
	var rows int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows == 0 || rows != tr.written {
		t.Fatalf("%d events committed, the writers counted %d", rows, tr.written)
	}
	t.Logf("%d events committed and counted", rows)
}
