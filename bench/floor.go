package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// floorMethod describes the floor reader in the report.
const floorMethod = "pglogrepl: START_REPLICATION on its own slot, pgoutput v1 decode, nothing else"

// floorReader is a bare logical-replication reader: it receives pgoutput
// from its own slot, decodes each message, and reports the id of every
// inserted row with the time it was decoded. It does nothing else, so it is
// what Postgres can deliver to any client: the floor under the relay.
type floorReader struct {
	conn     *pgconn.PgConn
	idCol    map[uint32]int // relation id -> index of its "id" column
	received pglogrepl.LSN
}

// openFloor connects for replication and starts streaming slot, which must
// exist, from its confirmed position.
func openFloor(ctx context.Context, url, slot, publication string) (*floorReader, error) {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return nil, errors.New("floor: invalid database URL")
	}
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["application_name"] = "pgoutbox-bench-floor"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("floor: connect: %w", err)
	}
	err = pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + publication + "'"},
	})
	if err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("floor: start replication: %w", err)
	}
	return &floorReader{conn: conn, idCol: map[uint32]int{}}, nil
}

// run reads until ctx ends, calling insert for every inserted row.
func (f *floorReader) run(ctx context.Context, insert func(id string, at time.Time)) error {
	defer f.conn.Close(context.Background())
	const statusEvery = 5 * time.Second
	next := time.Now().Add(statusEvery)
	for {
		if time.Now().After(next) {
			if err := f.status(); err != nil {
				return err
			}
			next = time.Now().Add(statusEvery)
		}
		rctx, cancel := context.WithDeadline(ctx, next)
		msg, err := f.conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if pgconn.Timeout(err) {
				continue
			}
			return fmt.Errorf("floor: receive: %w", err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok {
			if e, ok := msg.(*pgproto3.ErrorResponse); ok {
				return fmt.Errorf("floor: %w", pgconn.ErrorResponseToPgError(e))
			}
			continue
		}
		if len(cd.Data) == 0 {
			continue
		}
		switch cd.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(cd.Data[1:])
			if err == nil && ka.ReplyRequested {
				next = time.Time{}
			}
		case pglogrepl.XLogDataByteID:
			xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
			if err != nil {
				return fmt.Errorf("floor: %w", err)
			}
			f.received = max(f.received, xld.WALStart+pglogrepl.LSN(len(xld.WALData)))
			m, err := pglogrepl.Parse(xld.WALData)
			if err != nil {
				return fmt.Errorf("floor: decode: %w", err)
			}
			switch m := m.(type) {
			case *pglogrepl.RelationMessage:
				f.idCol[m.RelationID] = -1
				for i, c := range m.Columns {
					if c.Name == "id" {
						f.idCol[m.RelationID] = i
					}
				}
			case *pglogrepl.InsertMessage:
				if i, ok := f.idCol[m.RelationID]; ok && i >= 0 && m.Tuple != nil && i < len(m.Tuple.Columns) {
					insert(string(m.Tuple.Columns[i].Data), time.Now())
				}
			}
		}
	}
}

// status confirms everything received: the floor keeps nothing.
func (f *floorReader) status() error {
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), f.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: f.received, WALFlushPosition: f.received, WALApplyPosition: f.received,
	})
	if err != nil {
		return fmt.Errorf("floor: status update: %w", err)
	}
	return nil
}
