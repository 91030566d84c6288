package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/schema"
)

// CheckMapping tells whether every outbox table of cfg can be relayed with
// its column mapping, format and converters, from the tables' columns in
// the catalog: run checks it before it creates anything (its own tables,
// the publication, the slot), and so do migrate and slot create. A table
// that does not exist is replication.ErrNoTable. It returns the tables
// whose column of the default headers name the mapping leaves unread (it
// is not json or jsonb), to be said.
func CheckMapping(ctx context.Context, conn *pgx.Conn, cfg Config) (unreadHeaders []outbox.Table, err error) {
	cfg.Defaults()
	tables, err := cfg.Replication.AllTables()
	if err != nil {
		return nil, err
	}
	for _, t := range tables {
		cols, err := replication.TableColumns(ctx, conn, t)
		if err != nil {
			return nil, err
		}
		if err := CheckColumns(t, cols, cfg); err != nil {
			return nil, err
		}
		if b, err := cfg.Columns.Bind(cols); err == nil && b.UnreadHeaders() != "" {
			unreadHeaders = append(unreadHeaders, t)
		}
	}
	return unreadHeaders, nil
}

// CheckColumns is CheckMapping for one table whose columns are known.
func CheckColumns(t outbox.Table, cols []schema.Column, cfg Config) error {
	cfg.Defaults()
	cols = cfg.Encoder.Debezium.MapColumns(t.Schema, t.Name, cols)
	enc := cfg.Encoder
	enc.Debezium = enc.Debezium.ForTable(t.Schema, t.Name)
	err := cfg.Columns.Check(cols, enc)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, schema.ErrMissingColumn):
		hint := "name the table's columns with --column-id, --column-aggregate-type, --column-aggregate-id, --column-payload (Debezium's table.field.event.id, route.by.field, table.field.event.key, table.field.event.payload)"
		switch cfg.Encoder.Format {
		case schema.CloudEvents, schema.CloudEventsBinary:
			hint += " and --column-type: a CloudEvent needs a type (--format debezium-outbox needs no type column)"
		}
		return fmt.Errorf("the outbox table %s cannot be relayed with this mapping: %w; %s", t, err, hint)
	default:
		return fmt.Errorf("the outbox table %s cannot be relayed with this mapping: %w", t, err)
	}
}

// inServerZone is cols reading a timestamp without time zone in the
// server's zone (schema.Columns.Zone), read on conn: a session binds its
// tables with what the gate read once (gate.columns), dlq replay with its
// own reading.
func inServerZone(ctx context.Context, conn *pgx.Conn, cols schema.Columns, log *slog.Logger) (schema.Columns, error) {
	z, err := serverZone(ctx, conn)
	if err != nil {
		return cols, err
	}
	if z.loadErr != nil {
		log.Warn("the server's TimeZone is not one Go knows: a timestamp without time zone is read at its offset now, without daylight saving changes",
			"timezone", z.name, "offset", z.loc.String(), "err", z.loadErr)
	}
	cols.Zone = z.loc
	return cols, nil
}

// zone is the server's TimeZone setting as a location.
type zone struct {
	name    string
	loc     *time.Location
	loadErr error // the name is not one Go can load; loc is its offset now
}

// serverZone reads the TimeZone of the session (the server's, or the
// database's or role's where set), the zone in which DEFAULT now() writes
// a timestamp without time zone and PostgreSQL casts one to timestamptz.
func serverZone(ctx context.Context, conn *pgx.Conn) (zone, error) {
	var (
		z      zone
		offset float64
	)
	if err := conn.QueryRow(ctx, "SELECT current_setting('TimeZone'), EXTRACT(TIMEZONE FROM now())").Scan(&z.name, &offset); err != nil {
		return zone{}, fmt.Errorf("read the server's TimeZone: %w", err)
	}
	switch strings.TrimPrefix(strings.ToUpper(z.name), "ETC/") {
	case "UTC", "UCT", "GMT", "ZULU", "UNIVERSAL", "GREENWICH":
		z.loc = time.UTC // the timestamps are read as they are
		return z, nil
	}
	if z.loc, z.loadErr = time.LoadLocation(z.name); z.loadErr != nil {
		// A POSIX zone ("<+05>-05", "EST5EDT,M3.2.0,M11.1.0") Go cannot read.
		z.loc = time.FixedZone(z.name, int(offset))
	}
	return z, nil
}
