package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgoutbox/pgoutbox/outbox"
)

// Config configures a Stream.
type Config struct {
	// DatabaseURL is a libpq connection string or URL. It is never logged.
	DatabaseURL string
	// Table is the outbox table, "schema.table".
	Table string
	// Tables, when set, are every outbox table of the pipeline, Table
	// first: one slot and one publication stream the inserts of all of
	// them. Nil streams Table alone.
	Tables []string
	// Slot and Publication name the replication slot and publication.
	Slot, Publication string
	// StatusInterval is how often a standby status update is sent, whether
	// or not anything was received (default 1s). It must stay well below the
	// server's wal_sender_timeout (60s by default).
	StatusInterval time.Duration
	// HeartbeatInterval is how often a heartbeat message is written to the
	// WAL so that the slot advances while the outbox is idle (default 10s;
	// negative disables).
	HeartbeatInterval time.Duration
	// InitialStatements, as Debezium's database.initial.statements, are
	// run in order, each on its own, on the connections ConnectUser opens,
	// before they are used; never on the replication connection, nor on
	// those of pgoutbox's own tables.
	InitialStatements []string
	// HeartbeatActionQuery, as Debezium's heartbeat.action.query, is SQL
	// run at every heartbeat, before its message, on the heartbeat's
	// connection: a failure is logged and run again at the next one, but
	// one naming a table that does not exist ends the stream with a
	// permanent *ActionQueryError, as it fails Debezium's task.
	HeartbeatActionQuery string
	// ReceiveTimeout is how long the stream waits without any message from
	// the server before it declares the connection lost. A silent
	// connection is asked for a reply after a third of it. Zero (the
	// default) takes twice the server's wal_sender_timeout, at least 30s: a
	// walsender busy decoding a huge transaction reads replies only every
	// wal_sender_timeout/2, and must not be taken for a dead connection.
	ReceiveTimeout time.Duration
	// Failover creates the slot as a failover slot (PostgreSQL 17 and
	// later), which standbys with sync_replication_slots keep in step, so
	// that it survives a promotion. An existing slot is left as it is.
	Failover bool
	// FailoverWhereSupported, as Debezium's slot.failover, creates a
	// failover slot on PostgreSQL 17 and later and a plain one before,
	// where Failover is refused.
	FailoverWhereSupported bool
	// OnUpdate, when set, is called for each UPDATE of an outbox table the
	// stream carries (pgoutbox's own publication carries inserts only; an
	// existing one may carry every operation). Returning an error ends the
	// stream with it: what was decoded before the update is delivered,
	// nothing after it.
	// Deletes and truncates are only counted. Under ChangeEvents it is
	// not called: updates are rows.
	OnUpdate func(table outbox.Table, lsn pglogrepl.LSN) error
	// ChangeEvents reads the updates and deletes of the pipeline's tables
	// as rows too (outbox.Change's Op, Old), as Debezium's change events
	// carry them, and a publication pgoutbox creates publishes them.
	ChangeEvents bool
	// Truncates, under ChangeEvents, makes each truncate of a pipeline's
	// table a row of its own (Op schema.OpTruncate, every value null), as
	// Debezium publishes one where skipped.operations leaves out no t.
	Truncates bool
	// Captures, when set, tells the tables besides Tables whose rows are
	// the pipeline's too: those its patterns match (Debezium's
	// table.include.list and table.exclude.list as regular expressions,
	// or no list at all) that were created, or renamed into the patterns,
	// since the tables were listed, whose rows a publication of all
	// tables, or of whole schemas, sends. Each is asked once, at its
	// first row, after the relations below the pipeline's tables (a
	// partition attached to one is that table's).
	Captures func(outbox.Table) bool
	// PublishAllTables makes a publication pgoutbox creates publish every
	// table of the database (FOR ALL TABLES), those created later too, as
	// Debezium's publication.autocreate.mode=all_tables does: with
	// Captures, a table created since start reaches the stream from its
	// first row. See Publishes.AllTables.
	PublishAllTables bool
	// Messages, when set, selects the logical decoding messages the
	// stream reads as outbox rows, besides the tables' inserts.
	Messages *Messages
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.Table == "" {
		c.Table = "public.outbox"
	}
	if c.Slot == "" {
		c.Slot = "pgoutbox"
	}
	if c.Publication == "" {
		c.Publication = "pgoutbox"
	}
	if c.StatusInterval == 0 {
		c.StatusInterval = time.Second
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 10 * time.Second
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if c.DatabaseURL == "" {
		return errors.New("database URL is required")
	}
	if _, err := c.AllTables(); err != nil {
		return err
	}
	if err := ValidateName("slot", c.Slot); err != nil {
		return err
	}
	if err := ValidateName("publication", c.Publication); err != nil {
		return err
	}
	if c.StatusInterval <= 0 || c.StatusInterval > 30*time.Second {
		return fmt.Errorf("status interval %s: must be between 0 and 30s", c.StatusInterval)
	}
	if c.ReceiveTimeout != 0 && c.ReceiveTimeout < 3*c.StatusInterval {
		return fmt.Errorf("receive timeout %s: must be at least three status intervals (%s)", c.ReceiveTimeout, 3*c.StatusInterval)
	}
	return nil
}

// Publishes is what a publication pgoutbox creates for c publishes.
func (c Config) Publishes() Publishes {
	return Publishes{Changes: c.ChangeEvents, AllTables: c.PublishAllTables}
}

// AllTables parses the pipeline's outbox tables, Table first.
func (c Config) AllTables() ([]outbox.Table, error) {
	first, err := outbox.ParseTable(c.Table)
	if err != nil {
		return nil, err
	}
	if len(c.Tables) == 0 {
		return []outbox.Table{first}, nil
	}
	seen := map[outbox.Table]bool{}
	out := make([]outbox.Table, 0, len(c.Tables))
	for _, s := range c.Tables {
		t, err := outbox.ParseTable(s)
		if err != nil {
			return nil, err
		}
		if seen[t] {
			return nil, fmt.Errorf("%w: table %s is listed twice", outbox.ErrInvalidName, t)
		}
		seen[t] = true
		out = append(out, t)
	}
	if out[0] != first {
		return nil, fmt.Errorf("tables %v do not start with the table %s", c.Tables, first)
	}
	return out, nil
}

// Stream reads the outbox tables' inserts from a logical replication slot.
// Run reads; Confirm may be called from any goroutine.
type Stream struct {
	cfg       Config
	tables    []outbox.Table
	log       *slog.Logger
	conn      *pgconn.PgConn
	start     pglogrepl.LSN
	confirmed atomic.Uint64
	received  pglogrepl.LSN
	// delivered is the last commit or heartbeat position handed to the
	// pipeline or waiting in the batch to be; once it is confirmed,
	// nothing is in flight.
	delivered pglogrepl.LSN
	stop      chan struct{}
	stopOnce  sync.Once
	rels      *relations
	buf       []byte
	// fatal carries the heartbeat's error that ends the stream.
	fatal chan error
	// Counters are what the stream saw.
	Counters Counters
}

// Open connects for replication and starts streaming the slot from its
// confirmed position. It returns ErrSlotMissing, ErrSlotInvalidated or
// ErrSlotActive when the slot cannot be streamed.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (*Stream, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tables, _ := cfg.AllTables()
	pgcfg, err := replicationConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	conn, err := pgconn.ConnectConfig(ctx, pgcfg)
	if err != nil {
		return nil, fmt.Errorf("connect for replication: %w", refusedReplication(tlsRefused(err)))
	}
	s := &Stream{cfg: cfg, tables: tables, log: log, conn: conn, stop: make(chan struct{}), fatal: make(chan error, 1)}
	if s.rels, err = s.loadRelations(ctx); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	if err := s.startReplication(ctx); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return s, nil
}

func (s *Stream) startReplication(ctx context.Context) error {
	if s.cfg.ReceiveTimeout == 0 {
		res, err := s.conn.Exec(ctx, "SHOW wal_sender_timeout").ReadAll()
		if err != nil {
			return fmt.Errorf("read wal_sender_timeout: %w", err)
		}
		wst := time.Minute
		if len(res) == 1 && len(res[0].Rows) == 1 {
			if d, ok := parsePGDuration(string(res[0].Rows[0][0])); ok {
				wst = d
			}
		}
		s.cfg.ReceiveTimeout = DefaultReceiveTimeout(wst)
	}
	res, err := s.conn.Exec(ctx, fmt.Sprintf(
		"SELECT confirmed_flush_lsn::text, coalesce(wal_status, ''), plugin::text FROM pg_replication_slots WHERE slot_name = '%s'", s.cfg.Slot)).ReadAll()
	if err != nil {
		return fmt.Errorf("read slot %s: %w", s.cfg.Slot, err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 {
		return fmt.Errorf("%w: %s", ErrSlotMissing, s.cfg.Slot)
	}
	row := res[0].Rows[0]
	if string(row[1]) == "lost" {
		return fmt.Errorf("%w: %s (wal_status lost)", ErrSlotInvalidated, s.cfg.Slot)
	}
	if p := string(row[2]); p != "pgoutput" {
		return fmt.Errorf("slot %s uses plugin %q; pgoutbox needs pgoutput", s.cfg.Slot, p)
	}
	if row[0] == nil {
		return fmt.Errorf("slot %s has no confirmed position (is it a physical slot?)", s.cfg.Slot)
	}
	if s.start, err = pglogrepl.ParseLSN(string(row[0])); err != nil {
		return err
	}
	s.confirmed.Store(uint64(s.start))
	s.received = s.start
	err = pglogrepl.StartReplication(ctx, s.conn, s.cfg.Slot, s.start, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{
			"proto_version '1'",
			"publication_names '" + s.cfg.Publication + "'",
			"messages 'true'",
		},
	})
	if err != nil {
		return classify(err, s.cfg, false)
	}
	return nil
}

// loadRelations reads which relations hold the pipeline's rows, and
// whether the publication publishes other tables by design, on a
// connection of its own; the stream reads the relations again the same way
// when a row comes from one it does not know.
func (s *Stream) loadRelations(ctx context.Context) (*relations, error) {
	conn, err := s.cfg.ConnectUser(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	p, err := InspectPublication(ctx, conn, s.cfg.Publication, s.tables)
	if err != nil {
		return nil, err
	}
	rels := newRelations(s.tables, p.Members, p.Broad())
	rels.captures = s.cfg.Captures
	rels.load = func(tables []outbox.Table) (*Publication, error) {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StatusInterval+ConnectTimeout)
		defer cancel()
		conn, err := s.cfg.ConnectUser(ctx)
		if err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
		defer conn.Close(context.Background())
		return InspectPublication(ctx, conn, s.cfg.Publication, tables)
	}
	return rels, nil
}

// Start is the position streaming started from: the slot's confirmed LSN.
func (s *Stream) Start() pglogrepl.LSN { return s.start }

// Confirm records that everything up to lsn is safely in Kafka. The next
// status update reports it as flush and apply. Positions never go back.
func (s *Stream) Confirm(lsn pglogrepl.LSN) {
	for {
		cur := s.confirmed.Load()
		if uint64(lsn) <= cur || s.confirmed.CompareAndSwap(cur, uint64(lsn)) {
			return
		}
	}
}

// Confirmed is the position the next status update will report as flushed.
func (s *Stream) Confirmed() pglogrepl.LSN { return pglogrepl.LSN(s.confirmed.Load()) }

// Stop asks Run to return at the next transaction boundary, so that a
// transaction is never left half published at shutdown.
func (s *Stream) Stop() { s.stopOnce.Do(func() { close(s.stop) }) }

func (s *Stream) stopping() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// MaxBatch bounds the changes one Batch holds.
const MaxBatch = 128

// Batch is changes handed over together, in stream order: those the stream
// decoded while more data was already buffered on the connection, up to
// MaxBatch. The receiver owns it until Release; the stream then reuses it,
// so nothing may keep a pointer into Changes after Release. The Values of
// each row are the receiver's to keep.
type Batch struct {
	Changes []outbox.Change
	free    chan *Batch
}

// Release hands b back to the stream. Call it once, when done with b.
func (b *Batch) Release() {
	clear(b.Changes) // let what the receiver does not keep be collected
	b.Changes = b.Changes[:0]
	b.free <- b // free has room for every batch: never blocks
}

// handoff is the batch being filled and the batches to fill next.
type handoff struct {
	out  chan<- *Batch
	free chan *Batch
	cur  *Batch
	// rows counts the rows in cur: a batch of commits and heartbeats only
	// waits for the next row or status update, since only a row makes
	// the receiver do something that cannot wait.
	rows int
	// timer wakes a deliver blocked on the pipeline for a status update;
	// one for the stream, not one per wait.
	timer *time.Timer
}

func newHandoff(out chan<- *Batch) *handoff {
	// One batch per slot of out, the one being filled and the one the
	// receiver walks: a receiver that releases each before taking the
	// next never makes the stream wait for a free one.
	n := cap(out) + 2
	h := &handoff{out: out, free: make(chan *Batch, n)}
	for range n - 1 {
		h.free <- &Batch{Changes: make([]outbox.Change, 0, MaxBatch), free: h.free}
	}
	h.cur = &Batch{Changes: make([]outbox.Change, 0, MaxBatch), free: h.free}
	h.timer = time.NewTimer(time.Hour)
	h.timer.Stop()
	return h
}

// Run streams changes into out until Stop (at a transaction boundary), an
// error, or ctx ends. It hands over what it decoded in a Batch as soon as
// no more data is buffered on the connection and the rows it holds end
// with their transaction's commit (it never waits for more to fill one),
// when the batch is full, and before each status update; what
// it decoded before an error is dropped, as the pipeline drops what it has
// not taken once the stream fails. It answers keepalives and sends a status
// update every StatusInterval even while out is full, so a stalled Kafka
// never makes the server drop the connection. Run does not close out.
func (s *Stream) Run(ctx context.Context, out chan<- *Batch) error {
	hbCtx, hbCancel := context.WithCancel(ctx)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		s.heartbeats(hbCtx)
	}()
	defer func() { hbCancel(); <-hbDone }()

	dec := newDecoder(s.rels, &s.Counters)
	dec.onUpdate = s.cfg.OnUpdate
	dec.changeEvents = s.cfg.ChangeEvents
	dec.truncates = s.cfg.ChangeEvents && s.cfg.Truncates
	dec.messages = s.cfg.Messages
	h := newHandoff(out)
	nextStatus := time.Now()
	lastRecv := time.Now()
	// flush hands the batch over; while blocked on the pipeline nothing is
	// read, so silence then says nothing about the connection.
	flush := func() error {
		if len(h.cur.Changes) == 0 {
			return nil
		}
		blockedFrom := time.Now()
		var err error
		if nextStatus, err = s.deliver(ctx, h, nextStatus); err != nil {
			return err
		}
		if time.Since(blockedFrom) > s.cfg.StatusInterval {
			lastRecv = time.Now()
		}
		return nil
	}
	var readDeadline time.Time
	defer s.conn.Conn().SetReadDeadline(time.Time{})
	for {
		if !dec.inTx && s.stopping() {
			return flush()
		}
		if !time.Now().Before(nextStatus) {
			// A status update, and the keepalive reply it may be, comes
			// after what was decoded before it is handed over.
			if err := flush(); err != nil {
				return err
			}
		}
		if now := time.Now(); !now.Before(nextStatus) {
			silent := now.Sub(lastRecv)
			if silent > s.cfg.ReceiveTimeout {
				return fmt.Errorf("%w: nothing from the server for %s", ErrConnectionLost, silent.Round(time.Second))
			}
			// A connection that stays silent is asked to prove it lives.
			if err := s.sendStatus(silent > s.cfg.ReceiveTimeout/3); err != nil {
				return err
			}
			nextStatus = now.Add(s.cfg.StatusInterval)
			select {
			case err := <-s.fatal:
				return err
			default:
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// The next receive would wait for the server: hand over what came
		// so far first, once it ends a transaction. The server decodes a
		// transaction when it commits and sends its messages back to back,
		// so its rows wait microseconds for their commit, and the
		// transaction is one hand-over and one produce request instead of
		// one per part that happened to arrive alone. A batch that fills
		// (MaxBatch) or a status update that falls due goes out mid
		// transaction. A commit without rows (an empty transaction) goes
		// with the next rows or before the next status update, which is
		// when its position is reported: handing it over alone would wake
		// the receiver for nothing it must do now.
		if h.rows > 0 && !dec.inTx && s.conn.Frontend().ReadBufferLen() == 0 {
			if err := flush(); err != nil {
				return err
			}
			continue // the wait may have made a status update due
		}
		// One read deadline per status interval: a context per message
		// cost a third of the reader's CPU. Reads wake at the deadline, so
		// ctx is still seen within a status interval.
		if !readDeadline.Equal(nextStatus) {
			s.conn.Conn().SetReadDeadline(nextStatus)
			readDeadline = nextStatus
		}
		msg, err := s.conn.ReceiveMessage(context.Background())
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if pgconn.Timeout(err) {
				continue
			}
			return fmt.Errorf("receive: %w", classify(err, s.cfg, true))
		}
		lastRecv = time.Now()
		switch msg := msg.(type) {
		case *pgproto3.CopyData:
			if len(msg.Data) == 0 {
				return fmt.Errorf("%w: empty CopyData", ErrProtocol)
			}
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				reply, err := s.keepalive(dec, msg.Data[1:])
				if err != nil {
					return err
				}
				if reply {
					// The server asks when it is about to time out or is
					// shutting down.
					nextStatus = time.Time{}
				}
			case pglogrepl.XLogDataByteID:
				if err := s.xlogData(dec, h, msg.Data[1:], flush); err != nil {
					return err
				}
			}
		case *pgproto3.ErrorResponse:
			return classify(pgconn.ErrorResponseToPgError(msg), s.cfg, true)
		case *pgproto3.CopyDone:
			return errors.New("server ended replication")
		}
	}
}

// keepalive reads a primary keepalive; reply says the server asked for a
// status update.
func (s *Stream) keepalive(dec *decoder, data []byte) (reply bool, err error) {
	ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data)
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	s.Counters.Keepalives.Add(1)
	// A keepalive follows what the server sent before it, and its WAL end
	// is how far the server has read: when nothing is in flight,
	// everything committed before that end was sent and acked (or was not
	// the outbox's), so it may be confirmed. A commit still in the batch
	// counts as in flight. The slot then advances past the WAL of other
	// tables, the published floor with it, while the outbox is idle, and a
	// fast shutdown, which waits until the reported flush reaches the
	// server's WAL end, ends.
	if !dec.inTx && s.Confirmed() >= s.delivered {
		s.Confirm(ka.ServerWALEnd)
	}
	return ka.ReplyRequested, nil
}

// xlogData decodes one WAL message into the batch being filled; flush
// hands the batch over when it is full, or before a stop the decoder met.
func (s *Stream) xlogData(dec *decoder, h *handoff, data []byte, flush func() error) error {
	xld, err := pglogrepl.ParseXLogData(data)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	if end := xld.WALStart + pglogrepl.LSN(len(xld.WALData)); end > s.received {
		s.received = end
	}
	c, ok, err := dec.decode(xld.WALStart, xld.WALData)
	if err != nil {
		if stop := (stopAt{}); errors.As(err, &stop) {
			// What came before the update goes on, as Debezium publishes
			// what it read before it fails.
			if ferr := flush(); ferr != nil {
				return ferr
			}
			return stop.err
		}
		return err
	}
	if len(dec.truncated)+len(dec.gone)+len(dec.renamed) > 0 {
		s.report(dec)
	}
	if !ok {
		return nil
	}
	if err := s.add(h, c, flush); err != nil {
		return err
	}
	for len(dec.more) > 0 {
		c := dec.more[0]
		dec.more = dec.more[1:]
		if err := s.add(h, c, flush); err != nil {
			return err
		}
	}
	if b := dec.boundary; b != nil {
		dec.boundary = nil
		return s.add(h, *b, flush)
	}
	return nil
}

// add puts c in the batch being filled, handing it over when full.
func (s *Stream) add(h *handoff, c outbox.Change, flush func() error) error {
	if c.Kind != outbox.KindRow {
		s.delivered = c.LSN
	}
	h.cur.Changes = append(h.cur.Changes, c)
	if c.Kind == outbox.KindRow {
		h.rows++
	}
	if len(h.cur.Changes) == MaxBatch {
		return flush()
	}
	return nil
}

// report logs what the decoder met besides rows, and clears it. A
// Relation message carries no position: the transaction's commit LSN
// says where.
func (s *Stream) report(dec *decoder) {
	at := []any{"xid", dec.xid, "commit_lsn", dec.final.String()}
	if len(dec.truncated) > 0 {
		// Nothing to do: the rows inserted before it are in the stream
		// all the same, and are published.
		s.log.Info("the outbox table was truncated; the rows inserted before the truncate are published all the same, as the WAL holds them",
			append([]any{"tables", tablesString(dec.truncated)}, at...)...)
	}
	for _, t := range dec.gone {
		s.log.Warn("skipping the rows of a table that publication "+s.cfg.Publication+" published when they were written and no longer does; it is not an outbox table of the pipeline",
			append([]any{"table", t.String()}, at...)...)
	}
	for _, r := range dec.renamed {
		s.log.Warn("the outbox table is under another name at this point of the stream (renamed, or moved to another schema): its rows are published as the table's",
			append([]any{"table", r[0].String(), "named", r[1].String()}, at...)...)
	}
	dec.truncated, dec.gone, dec.renamed = dec.truncated[:0], dec.gone[:0], dec.renamed[:0]
}

// deliver hands the filled batch to the pipeline and takes a free one to
// fill next. While the pipeline is full it keeps the status updates going,
// which is what keeps the walsender from timing out during a long Kafka
// outage.
func (s *Stream) deliver(ctx context.Context, h *handoff, nextStatus time.Time) (time.Time, error) {
	b, out := h.cur, h.out
	h.cur, h.rows = nil, 0
	select {
	case out <- b:
		out = nil
		select {
		case h.cur = <-h.free:
			return nextStatus, nil
		default:
		}
	default:
	}
	// Timers since Go 1.23 deliver nothing stale after Stop or Reset.
	h.timer.Reset(time.Until(nextStatus))
	defer h.timer.Stop()
	for h.cur == nil {
		var free chan *Batch // taken only once b is handed over
		if out == nil {
			free = h.free
		}
		select {
		case out <- b:
			out = nil
		case h.cur = <-free:
		case <-ctx.Done():
			return nextStatus, ctx.Err()
		case <-h.timer.C:
			if err := s.sendStatus(false); err != nil {
				return nextStatus, err
			}
			nextStatus = time.Now().Add(s.cfg.StatusInterval)
			h.timer.Reset(s.cfg.StatusInterval)
		}
	}
	return nextStatus, nil
}

// sendStatus reports the received position as write and the confirmed
// position as flush and apply, each set explicitly.
func (s *Stream) sendStatus(reply bool) error {
	confirmed := s.Confirmed()
	p := Position{Write: max(s.received, confirmed), Flush: confirmed, Apply: confirmed}
	s.buf = appendStatusUpdate(s.buf[:0], p, time.Now(), reply)
	s.conn.Frontend().Send(&pgproto3.CopyData{Data: s.buf})
	// A black-holed connection would block this write forever.
	s.conn.Conn().SetWriteDeadline(time.Now().Add(s.cfg.ReceiveTimeout))
	err := s.conn.Frontend().Flush()
	s.conn.Conn().SetWriteDeadline(time.Time{})
	if err != nil {
		return fmt.Errorf("%w: send status update: %v", ErrConnectionLost, err)
	}
	return nil
}

// Close sends a last status update with the confirmed position and closes
// the connection. Call it after Run returned and the sink was flushed.
func (s *Stream) Close(ctx context.Context) error {
	err := s.sendStatus(false)
	closeErr := s.conn.Close(ctx)
	if err != nil {
		return err
	}
	return closeErr
}

// heartbeats writes a non-transactional logical message every
// HeartbeatInterval. The stream receives it like any change; once the
// pipeline confirms it, the slot advances even when the outbox is idle and
// other tables fill the WAL. Failures are logged and retried: a missed
// heartbeat only delays that advance.
func (s *Stream) heartbeats(ctx context.Context) {
	if s.cfg.HeartbeatInterval < 0 {
		return
	}
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	ticker := time.NewTicker(s.cfg.HeartbeatInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if conn == nil {
			c, err := s.cfg.ConnectUser(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("heartbeat connection failed", "err", err)
				}
				continue
			}
			conn = c
		}
		hctx, cancel := context.WithTimeout(ctx, s.cfg.ReceiveTimeout)
		if q := s.cfg.HeartbeatActionQuery; q != "" {
			// The simple protocol: the query may hold several statements.
			if _, err := conn.Exec(hctx, q, pgx.QueryExecModeSimpleProtocol); err != nil && ctx.Err() == nil {
				aerr := &ActionQueryError{Err: err}
				if aerr.Permanent() {
					cancel()
					s.fatal <- aerr
					return
				}
				s.log.Warn("heartbeat action query failed; it runs again at the next heartbeat", "err", err)
			}
		}
		_, err := conn.Exec(hctx, "SELECT pg_logical_emit_message(false, $1, $2)", HeartbeatPrefix, s.cfg.Slot)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("heartbeat failed", "err", err)
			}
			conn.Close(context.Background())
			conn = nil
		}
	}
}

// ConnectTimeout bounds establishing a connection when the URL does not set
// connect_timeout: an address that accepts TCP but never answers must not
// hang the relay.
const ConnectTimeout = 10 * time.Second

// Connect opens a regular connection as ConnConfig sets it up, for
// pgoutbox's own work (its state, lease and dead letters): it runs no
// InitialStatements, which are the user's and could move or refuse that
// work (a search_path, a role, a read-only default). The URL never
// appears in its errors.
func (c Config) Connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := ConnConfig(c.DatabaseURL)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, tlsRefused(err)
	}
	return conn, nil
}

// ConnectUser is Connect for a connection that reads the user's tables
// and catalog, where Debezium reads them on its JDBC connections (the
// snapshot, the publication, the heartbeat and its action query): it runs
// InitialStatements first, in order, each on its own.
func (c Config) ConnectUser(ctx context.Context) (*pgx.Conn, error) {
	conn, err := c.Connect(ctx)
	if err != nil {
		return nil, err
	}
	for i, stmt := range c.InitialStatements {
		// The simple protocol, as a JDBC Statement sends it: one statement
		// may hold several, and none is prepared.
		if _, err := conn.PgConn().Exec(ctx, stmt).ReadAll(); err != nil {
			conn.Close(context.Background())
			return nil, &InitialStatementError{N: i + 1, Err: err}
		}
	}
	return conn, nil
}

// DefaultReceiveTimeout is the receive timeout for a server's
// wal_sender_timeout: twice it, at least 30s; 2 minutes when the server
// never times out (0).
func DefaultReceiveTimeout(walSenderTimeout time.Duration) time.Duration {
	if walSenderTimeout <= 0 {
		return 2 * time.Minute
	}
	return max(30*time.Second, 2*walSenderTimeout)
}

// parsePGDuration reads a time setting as SHOW prints it: "60s", "1min",
// "500ms", "2h", "1d", or a bare number of milliseconds.
func parsePGDuration(s string) (time.Duration, bool) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil {
		return 0, false
	}
	unit := map[string]time.Duration{"": time.Millisecond, "ms": time.Millisecond, "s": time.Second,
		"min": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[s[i:]]
	if unit == 0 {
		return 0, false
	}
	return time.Duration(n) * unit, true
}
