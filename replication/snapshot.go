package replication

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// ExportedSlot is a slot just created over a replication connection that
// exported its snapshot: a transaction that imports the snapshot sees
// exactly what committed before the slot's consistent point, and the slot
// streams exactly what commits after it. The snapshot can be imported
// only while the connection stays open and idle.
type ExportedSlot struct {
	// Failover: the slot is a failover slot.
	Failover bool
	conn     *pgconn.PgConn
	LSN      pglogrepl.LSN
	Snapshot string
}

// CreateSlotExported creates cfg's slot (a failover slot with
// cfg.Failover) and exports its snapshot. Close the result once the
// snapshot is imported.
func CreateSlotExported(ctx context.Context, cfg Config) (*ExportedSlot, error) {
	cfg.Defaults()
	if err := ValidateName("slot", cfg.Slot); err != nil {
		return nil, err
	}
	pgcfg, err := replicationConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	conn, err := pgconn.ConnectConfig(ctx, pgcfg)
	if err != nil {
		return nil, fmt.Errorf("connect for replication: %w", refusedReplication(tlsRefused(err)))
	}
	opts := "SNAPSHOT 'export'"
	major, _ := strconv.Atoi(strings.SplitN(conn.ParameterStatus("server_version"), ".", 2)[0])
	failover, err := SlotFailover(cfg, major)
	if err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	if failover {
		opts += ", FAILOVER"
	}
	// The option list is PostgreSQL 15's syntax, which later versions keep.
	res, err := pglogrepl.ParseCreateReplicationSlot(conn.Exec(ctx,
		fmt.Sprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput (%s)", cfg.Slot, opts)))
	if err != nil {
		conn.Close(context.Background())
		if isPrivilegeError(err) {
			return nil, fmt.Errorf("%w: may not create slot %s: %v", ErrNotReady, cfg.Slot, err)
		}
		return nil, fmt.Errorf("create slot %s: %w", cfg.Slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("create slot %s: consistent point %q: %w", cfg.Slot, res.ConsistentPoint, err)
	}
	return &ExportedSlot{conn: conn, LSN: lsn, Snapshot: res.SnapshotName, Failover: failover}, nil
}

// Close ends the replication connection; the slot stays.
func (s *ExportedSlot) Close() {
	if s.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.conn.Close(ctx)
		cancel()
		s.conn = nil
	}
}
