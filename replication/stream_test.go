package replication

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgoutbox/pgoutbox/outbox"
)

// walSender is the server end of a replication connection: it sends
// pgoutput messages as XLogData and discards what the stream sends back.
type walSender struct {
	t    testing.TB
	conn net.Conn
	lsn  pglogrepl.LSN
}

// send writes msgs with one write, so that they arrive together.
func (w *walSender) send(msgs ...[]byte) {
	w.t.Helper()
	var b []byte
	for _, m := range msgs {
		b = append(b, 'd')
		b = binary.BigEndian.AppendUint32(b, uint32(4+1+24+len(m)))
		b = append(b, pglogrepl.XLogDataByteID)
		b = binary.BigEndian.AppendUint64(b, uint64(w.lsn))
		b = binary.BigEndian.AppendUint64(b, uint64(w.lsn))
		b = binary.BigEndian.AppendUint64(b, 0)
		b = append(b, m...)
		w.lsn += 0x100
	}
	if _, err := w.conn.Write(b); err != nil {
		w.t.Fatal(err)
	}
}

// newTestStream is a Stream on a loopback connection whose server end is
// the returned walSender.
func newTestStream(t testing.TB) (*Stream, *walSender) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	go io.Copy(io.Discard, server)
	pgcfg, err := pgconn.ParseConfig("host=127.0.0.1 user=test")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgconn.Construct(&pgconn.HijackedConn{Conn: client, Frontend: pgproto3.NewFrontend(client, client),
		Config: pgcfg, TxStatus: 'I', ParameterStatuses: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		server.Close()
		conn.Close(context.Background())
	})
	s := &Stream{
		cfg:    Config{StatusInterval: 50 * time.Millisecond, ReceiveTimeout: time.Minute, HeartbeatInterval: -1},
		tables: []outbox.Table{{Schema: "public", Name: "outbox"}}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		conn: conn, stop: make(chan struct{}), rels: outboxOnly(),
	}
	return s, &walSender{t: t, conn: server, lsn: 0x1000}
}

// runStream runs s into a channel as the relay does and returns it and
// Run's result.
func runStream(t *testing.T, s *Stream) (<-chan *Batch, <-chan error) {
	out := make(chan *Batch, 4)
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(out)
		done <- s.Run(ctx, out)
	}()
	t.Cleanup(func() {
		cancel()
		for range out {
		}
	})
	return out, done
}

// took is a change as the test compares it: its kind, and a row's id.
type took struct {
	kind outbox.Kind
	id   string
}

func takeBatch(t *testing.T, out <-chan *Batch) []took {
	t.Helper()
	select {
	case b, ok := <-out:
		if !ok {
			t.Fatal("stream ended")
		}
		var got []took
		for _, c := range b.Changes {
			tc := took{kind: c.Kind}
			if c.Kind == outbox.KindRow {
				tc.id = string(c.Values[0])
			}
			got = append(got, tc)
		}
		b.Release()
		return got
	case <-time.After(10 * time.Second):
		t.Fatal("no batch")
		return nil
	}
}

func insert(id string) []byte {
	return msgInsert(1, []byte(id), []byte("order"), []byte("o-1"), []byte(`{}`))
}

func equalTook(t *testing.T, got, want []took) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// What the stream received together it hands over together, in order:
// one wake-up of the publisher for all of it, Begin and Commit included.
func TestRunHandsOverBufferedChangesInOneBatch(t *testing.T) {
	s, w := newTestStream(t)
	w.send(msgRelation(1, "public", "outbox", outboxCols...),
		msgBegin(0x2000, 7), insert("a"), insert("b"), msgCommit(0x2000, 0x2010),
		msgBegin(0x3000, 8), insert("c"), msgCommit(0x3000, 0x3010),
		msgMessage(0x3100, false, HeartbeatPrefix, "pgoutbox"))
	out, done := runStream(t, s)
	equalTook(t, takeBatch(t, out), []took{{outbox.KindRow, "a"}, {outbox.KindRow, "b"}, {kind: outbox.KindCommit},
		{outbox.KindRow, "c"}, {kind: outbox.KindCommit}, {kind: outbox.KindHeartbeat}})

	// Nothing more is buffered: the next transaction is handed over alone,
	// without waiting for company.
	w.send(msgBegin(0x4000, 9), insert("d"), msgCommit(0x4000, 0x4010))
	equalTook(t, takeBatch(t, out), []took{{outbox.KindRow, "d"}, {kind: outbox.KindCommit}})
	s.Stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A transaction's rows wait for its commit, which the server sends right
// after them: the transaction is one hand-over, however its messages
// arrived.
func TestRunHoldsRowsForTheirCommit(t *testing.T) {
	s, w := newTestStream(t)
	s.cfg.StatusInterval = time.Hour // no status update comes to flush them
	w.send(msgRelation(1, "public", "outbox", outboxCols...), msgBegin(0x2000, 7), insert("a"))
	out, _ := runStream(t, s)
	t.Cleanup(func() { w.conn.Close() }) // first: the next read deadline is an hour away
	w.send(insert("b"))
	select {
	case b := <-out:
		t.Fatalf("rows were handed over before their commit: %d changes", len(b.Changes))
	case <-time.After(100 * time.Millisecond):
	}
	w.send(msgCommit(0x2000, 0x2010))
	equalTook(t, takeBatch(t, out), []took{{outbox.KindRow, "a"}, {outbox.KindRow, "b"}, {kind: outbox.KindCommit}})
}

// A batch holds at most MaxBatch changes; a longer run of buffered changes
// comes in several, in order.
func TestRunBatchBound(t *testing.T) {
	s, w := newTestStream(t)
	msgs := [][]byte{msgRelation(1, "public", "outbox", outboxCols...), msgBegin(0x2000, 7)}
	var want []took
	for i := range 3 * MaxBatch {
		id := string(rune('a'+i%26)) + string(rune('a'+i/26%26))
		msgs = append(msgs, insert(id))
		want = append(want, took{outbox.KindRow, id})
	}
	w.send(append(msgs, msgCommit(0x2000, 0x2010))...)
	want = append(want, took{kind: outbox.KindCommit})
	out, _ := runStream(t, s)
	var got []took
	for len(got) < len(want) {
		b := takeBatch(t, out)
		if len(b) > MaxBatch {
			t.Fatalf("batch of %d changes, bound %d", len(b), MaxBatch)
		}
		got = append(got, b...)
	}
	equalTook(t, got, want)
}

// A stop request lands on a transaction boundary: the transaction being
// read is handed over whole, the next one not at all, though it was
// already received.
func TestRunStopsAtTransactionBoundary(t *testing.T) {
	s, w := newTestStream(t)
	w.send(msgRelation(1, "public", "outbox", outboxCols...), msgBegin(0x2000, 7), insert("a"))
	out, done := runStream(t, s)
	equalTook(t, takeBatch(t, out), []took{{outbox.KindRow, "a"}})
	s.Stop()
	w.send(insert("b"), msgCommit(0x2000, 0x2010), msgBegin(0x3000, 8), insert("c"), msgCommit(0x3000, 0x3010))
	var got []took
	for b := range out {
		for _, c := range b.Changes {
			tc := took{kind: c.Kind}
			if c.Kind == outbox.KindRow {
				tc.id = string(c.Values[0])
			}
			got = append(got, tc)
		}
		b.Release()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	equalTook(t, got, []took{{outbox.KindRow, "b"}, {kind: outbox.KindCommit}})
}

// A commit without rows (an empty transaction, which servers before
// PostgreSQL 15 send) waits for the next rows (or the next status update)
// instead of waking the receiver on its own.
func TestRunHoldsALoneCommitForTheNextRows(t *testing.T) {
	s, w := newTestStream(t)
	s.cfg.StatusInterval = time.Hour // no status update comes to flush it
	w.send(msgRelation(1, "public", "outbox", outboxCols...), msgBegin(0x2000, 7), insert("a"), msgCommit(0x2000, 0x2010))
	out, _ := runStream(t, s)
	t.Cleanup(func() { w.conn.Close() }) // first: the next read deadline is an hour away
	equalTook(t, takeBatch(t, out), []took{{outbox.KindRow, "a"}, {kind: outbox.KindCommit}})
	w.send(msgBegin(0x2100, 8), msgCommit(0x2100, 0x2110))
	w.send(msgMessage(0x2200, false, HeartbeatPrefix, "pgoutbox"))
	select {
	case b := <-out:
		t.Fatalf("a batch without rows was handed over: %d changes", len(b.Changes))
	case <-time.After(100 * time.Millisecond):
	}
	w.send(msgBegin(0x3000, 9), insert("b"), msgCommit(0x3000, 0x3010))
	equalTook(t, takeBatch(t, out), []took{{kind: outbox.KindCommit}, {kind: outbox.KindHeartbeat}, {outbox.KindRow, "b"}, {kind: outbox.KindCommit}})
}

// A held commit goes out before the next status update, which reports its
// position once the receiver confirmed it.
func TestRunHandsOverAHeldCommitBeforeTheStatusUpdate(t *testing.T) {
	s, w := newTestStream(t)
	w.send(msgRelation(1, "public", "outbox", outboxCols...), msgBegin(0x2000, 7), insert("a"), msgCommit(0x2000, 0x2010))
	out, _ := runStream(t, s)
	equalTook(t, takeBatch(t, out), []took{{outbox.KindRow, "a"}, {kind: outbox.KindCommit}})
	w.send(msgBegin(0x2100, 8), msgCommit(0x2100, 0x2110))
	equalTook(t, takeBatch(t, out), []took{{kind: outbox.KindCommit}})
}
