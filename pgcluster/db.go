package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// slotDropTimeout bounds the retries of dropping a slot whose replication
// connection is still going away (SQLSTATE 55006 for about a second).
const slotDropTimeout = 10 * time.Second

// createDatabase creates database name on the server adminURL connects to.
func createDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("pgcluster: connecting to create database %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("pgcluster: creating database %s: %w", name, err)
	}
	return nil
}

// dropDatabase drops database name even if a test left sessions or
// replication slots in it: a leftover logical slot would block the drop and,
// on a shared server, retain WAL for as long as the server lives.
func dropDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("pgcluster: connecting to drop database %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	if err := dropSlots(ctx, conn, name); err != nil {
		return err
	}
	ident := pgx.Identifier{name}.Sanitize()
	if serverMajor(conn) >= 13 {
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
	} else {
		_, err = conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name)
		if err == nil {
			_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident)
		}
	}
	if err != nil {
		return fmt.Errorf("pgcluster: dropping database %s: %w", name, err)
	}
	return nil
}

func dropSlots(ctx context.Context, conn *pgx.Conn, db string) error {
	rows, err := conn.Query(ctx, "SELECT slot_name, active_pid FROM pg_replication_slots WHERE database = $1", db)
	if err != nil {
		return fmt.Errorf("pgcluster: listing the replication slots of %s: %w", db, err)
	}
	type slot struct {
		name string
		pid  *int32
	}
	slots, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (slot, error) {
		var s slot
		err := r.Scan(&s.name, &s.pid)
		return s, err
	})
	if err != nil {
		return fmt.Errorf("pgcluster: listing the replication slots of %s: %w", db, err)
	}
	for _, s := range slots {
		if s.pid != nil {
			if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend($1)", *s.pid); err != nil {
				return fmt.Errorf("pgcluster: ending the replication connection of slot %s: %w", s.name, err)
			}
		}
		if err := dropSlot(ctx, conn, s.name); err != nil {
			return err
		}
	}
	return nil
}

func dropSlot(ctx context.Context, conn *pgx.Conn, name string) error {
	deadline := time.Now().Add(slotDropTimeout)
	for {
		_, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", name)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &pgErr) && pgErr.Code == "42704": // undefined_object: gone meanwhile
			return nil
		case errors.As(err, &pgErr) && pgErr.Code == "55006" && time.Now().Before(deadline): // still active
		default:
			return fmt.Errorf("pgcluster: dropping replication slot %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: dropping replication slot %s: %w", name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// serverMajor returns the server's major version, 0 if unknown.
func serverMajor(conn *pgx.Conn) int {
	v := conn.PgConn().ParameterStatus("server_version") // "15.8 (Debian 15.8-0+deb12u1)"
	major, _, _ := strings.Cut(v, ".")
	major, _, _ = strings.Cut(major, " ")
	n, _ := strconv.Atoi(major)
	return n
}
