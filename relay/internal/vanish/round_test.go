package vanish

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/store"
)

// table is a fake Source: the readings a test sets, as the table's
// statistics and sequence would give them.
type table struct {
	pos   poll.Positions // the next reading
	known int64          // what CountKnown counts
}

func (t *table) Positions(context.Context, poll.Sequence, int64) (poll.Positions, error) {
	return t.pos, nil
}
func (t *table) CountKnown(context.Context, int64) (int64, error) { return t.known, nil }
func (t *table) CountGap(context.Context, int64, int64, int64, int64, int64) (poll.GapCount, error) {
	return poll.GapCount{}, nil
}
func (t *table) XMin(context.Context) (uint64, error) { return t.pos.XMin, nil }

// account is a fake Account that keeps what is saved.
type account struct {
	saved []store.Gap // SaveGap's, in order
	lost  [][3]int64  // SaveLost's: lost, from, to
}

func (a *account) LoadGap(context.Context) (*store.Gap, error) { return nil, nil }
func (a *account) SaveGap(_ context.Context, g store.Gap) error {
	a.saved = append(a.saved, g)
	return nil
}
func (a *account) ForgetGap(context.Context) error                                   { return nil }
func (a *account) SaveGapProgress(context.Context, int64, int64, int64, int64) error { return nil }
func (a *account) AddGapBatch(context.Context, int64, int64, int64, int64) error     { return nil }
func (a *account) SaveLost(_ context.Context, lost, from, to int64) error {
	a.lost = append(a.lost, [3]int64{lost, from, to})
	return nil
}

// reading is the table at last position last, every transaction finished,
// with these relations (OID, file, delete counter).
func reading(last int64, files ...poll.File) poll.Positions {
	var sum int64
	for _, f := range files {
		sum += f.Deletes
	}
	return poll.Positions{Last: last, XMin: 100, Next: 100, Files: files, Deletes: sum}
}

// start starts a detector at position 10, with 10 rows known and the
// table in relations files.
func start(t *testing.T, files ...poll.File) (*Detector, *table, *account) {
	t.Helper()
	tab := &table{pos: reading(10, files...), known: 10}
	acct := &account{}
	d, err := Start(context.Background(), tab, acct, poll.Sequence{Name: "outbox_seq_seq", Start: 1}, Config{Table: "public.outbox", Mode: store.ModePoll, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if len(acct.saved) != 1 || acct.saved[0].Seq != 10 || acct.saved[0].Known != 10 {
		t.Fatalf("the new account saved: %+v", acct.saved)
	}
	return d, tab, acct
}

// Positions no row holds and deletes of rows the phase never saw: the
// smaller of the two is lost, reported once, over the unseen range.
func TestRoundReportsDeletesOfUnseenRows(t *testing.T) {
	ctx := context.Background()
	d, tab, acct := start(t, poll.File{OID: 1, Node: 10})
	for _, seq := range []int64{11, 12, 14} {
		d.Seen(seq)
	}
	// 13 and 15 were inserted and deleted before a poll saw them; the
	// rows known then (10, and the 3 published) are all there.
	tab.pos, tab.known = reading(15, poll.File{OID: 1, Node: 10, Deletes: 2}), 13
	if lost := d.Round(ctx, false); lost != 2 {
		t.Fatalf("lost %d, want 2", lost)
	}
	if len(acct.lost) != 1 || acct.lost[0] != [3]int64{2, 13, 15} {
		t.Fatalf("saved losses %v, want 2 in [13, 15]", acct.lost)
	}
	if lost := d.Round(ctx, false); lost != 0 {
		t.Fatalf("reported again: %d", lost)
	}
}

// Deletes of rows the phase published (a cleanup of published rows)
// raise only the delete counter: nothing is lost.
func TestRoundCleanupOfPublishedRowsIsNoLoss(t *testing.T) {
	ctx := context.Background()
	d, tab, acct := start(t, poll.File{OID: 1, Node: 10})
	for _, seq := range []int64{11, 12, 13} {
		d.Seen(seq)
	}
	// Three published rows deleted: the count of known rows says so.
	tab.pos, tab.known = reading(13, poll.File{OID: 1, Node: 10, Deletes: 3}), 10
	if lost := d.Round(ctx, false); lost != 0 || len(acct.lost) != 0 {
		t.Fatalf("lost %d (%v) for a cleanup of published rows", lost, acct.lost)
	}
}

// A TRUNCATE gives the table a new file and takes its rows without
// counting deletes: the positions drawn and not yet settled that no row
// holds count as deleted once settled, and are reported at once.
func TestRoundTruncateWindow(t *testing.T) {
	ctx := context.Background()
	d, tab, acct := start(t, poll.File{OID: 1, Node: 10})
	d.Seen(11)
	d.Seen(12)
	// 13 and 14 were drawn and not published when the table was
	// truncated: every row is gone, and the counter starts again.
	tab.pos, tab.known = reading(14, poll.File{OID: 1, Node: 11}), 0
	if lost := d.Round(ctx, false); lost != 2 {
		t.Fatalf("lost %d after the truncate, want 2", lost)
	}
	if len(acct.lost) != 1 || acct.lost[0] != [3]int64{2, 13, 14} {
		t.Fatalf("saved losses %v, want 2 in [13, 14]", acct.lost)
	}
	if d.del.truncTo != 0 || len(acct.saved) != 2 {
		t.Fatalf("window open to %d; accounts saved %d, want the new one after the truncate", d.del.truncTo, len(acct.saved))
	}
	// Rows written after the truncate and published are no loss.
	d.Seen(15)
	tab.pos, tab.known = reading(15, poll.File{OID: 1, Node: 11}), 1
	if lost := d.Round(ctx, false); lost != 0 {
		t.Fatalf("lost %d after the window closed", lost)
	}
}

// A partition attached brings rows (and a delete counter) the account
// never counted: its past deletes are not the phase's, only those after.
// A partition dropped takes its rows as a TRUNCATE does.
func TestRoundPartitions(t *testing.T) {
	ctx := context.Background()
	d, tab, acct := start(t, poll.File{OID: 1, Node: 10})
	d.Seen(11)
	attached := poll.File{OID: 2, Node: 20, Deletes: 50}
	tab.pos, tab.known = reading(11, poll.File{OID: 1, Node: 10}, attached), 61
	if lost := d.Round(ctx, false); lost != 0 {
		t.Fatalf("lost %d when a partition with 50 past deletes was attached", lost)
	}
	if n := len(acct.saved); n != 2 || acct.saved[1].Known != 61 {
		t.Fatalf("accounts saved %v, want the partition's rows counted in a new one", acct.saved)
	}
	// A rollback (12) leaves a position no row holds and no delete: the
	// partition's past deletes do not make it a loss.
	aMinuteLater(d)
	tab.pos = reading(12, poll.File{OID: 1, Node: 10}, attached)
	if lost := d.Round(ctx, false); lost != 0 {
		t.Fatalf("lost %d for a rollback after a partition was attached", lost)
	}
	// A row of the new partition inserted and deleted unseen (13) is.
	aMinuteLater(d)
	attached.Deletes++
	tab.pos = reading(13, poll.File{OID: 1, Node: 10}, attached)
	if lost := d.Round(ctx, false); lost != 1 {
		t.Fatalf("lost %d for a row deleted unseen in the attached partition, want 1", lost)
	}
	// The attached partition is dropped with an unpublished row (14)
	// in it: the window counts it.
	aMinuteLater(d)
	tab.pos, tab.known = reading(14, poll.File{OID: 1, Node: 10}), 11
	if lost := d.Round(ctx, false); lost != 1 {
		t.Fatalf("lost %d when the partition was dropped, want 1", lost)
	}
	if got := acct.lost[len(acct.lost)-1]; got[1] != 14 || got[2] != 14 {
		t.Fatalf("the dropped partition's loss saved as %v, want seq 14", got)
	}
}

// aMinuteLater moves the detector's last count and report a minute back:
// counts and reports are spaced in time (recount, reportEvery).
func aMinuteLater(d *Detector) {
	d.count.last = d.count.last.Add(-time.Minute)
	d.rep.last = d.rep.last.Add(-time.Minute)
}

// A nil detector (the table's positions cannot be read) does nothing.
func TestNilDetector(t *testing.T) {
	var d *Detector
	d.Seen(1)
	d.WillPublish(context.Background(), []poll.Row{{Seq: 1}})
	if d.Round(context.Background(), false) != 0 || d.From() != 0 || !d.GapJudged() {
		t.Fatal("a nil detector reported something")
	}
}
