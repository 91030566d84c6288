package eos

import (
	"encoding/json"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/store"
)

func TestPositionRecordRoundTrip(t *testing.T) {
	for _, p := range []Position{
		{Mode: store.ModeWAL, End: 0x1A2B3C4, Commit: 0x1A2B3A0},
		{Mode: store.ModePoll, Seqs: []int64{3, 4, 9}},
		{Mode: store.ModeWAL, End: 0x1A2B3C4, Commit: 0x1A2B3A0, Cluster: 7, FloorXID: 1 << 33, XIDs: []uint32{5, 9}, Incomplete: true},
		{Mode: store.ModePoll, End: 0x1A2B3C4, Commit: 0x1A2B3A0, Cluster: 7, Seqs: []int64{1}},
	} {
		rec, err := p.Record("pgoutbox", "pgoutbox.position", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if rec.Topic != "pgoutbox.position" || string(rec.Key) != "pgoutbox" {
			t.Fatalf("record to %s keyed %q", rec.Topic, rec.Key)
		}
		got, err := ParsePosition(rec)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Fatalf("%s: read back %+v, wrote %+v", rec.Value, got, p)
		}
	}
	rec, _ := Position{Mode: store.ModeWAL}.Record("pgoutbox", "pgoutbox.position", time.Now())
	rec.Value = []byte(`{"mode":"sideways"}`)
	if _, err := ParsePosition(rec); err == nil {
		t.Fatal("a position of an unknown mode was accepted")
	}
}

// After a WAL record the stream skips what it covers and its list goes
// on; after a poll record, what the WAL position it carries covers, and
// the rows polling published, the last transaction's marked first; a
// record from another cluster covers nothing.
func TestResumeWAL(t *testing.T) {
	wal := Position{Mode: store.ModeWAL, End: 500, Commit: 490, Cluster: 7, FloorXID: 30, XIDs: []uint32{31, 35}}
	afterPolling := wal
	afterPolling.PolledUntil = 600
	polled := Position{Mode: store.ModePoll, End: 500, Commit: 490, Cluster: 7, Seqs: []int64{4, 5}}
	for _, tt := range []struct {
		name    string
		pos     Position
		cluster int64
		hasSeq  bool
		want    walResume
	}{
		{"nothing committed yet", Position{}, 7, true, walResume{}},
		{"a WAL record", wal, 7, true, walResume{from: wal, after: wal}},
		{"a WAL record, cluster unknown", wal, 0, true, walResume{from: wal, after: wal}},
		{"a WAL record while polled rows may replay", afterPolling, 7, true,
			walResume{from: afterPolling, after: afterPolling, readPolled: true, polledUntil: 600}},
		{"the same without the polling columns", afterPolling, 7, false, walResume{from: afterPolling, after: afterPolling}},
		{"a poll record", polled, 7, true, walResume{from: polled, after: Position{Mode: store.ModeWAL, End: 500, Commit: 490, Cluster: 7},
			readPolled: true, mark: []int64{4, 5}}},
		{"a poll record without the polling columns", polled, 7, false,
			walResume{from: polled, after: Position{Mode: store.ModeWAL, End: 500, Commit: 490, Cluster: 7}}},
		{"a WAL record of another cluster", wal, 8, true,
			walResume{foreign: true, from: Position{Mode: store.ModeWAL}, after: Position{Mode: store.ModeWAL}}},
		{"a poll record of another cluster", polled, 8, true,
			walResume{foreign: true, from: Position{Mode: store.ModePoll, Seqs: []int64{4, 5}}, after: Position{Mode: store.ModeWAL},
				readPolled: true, mark: []int64{4, 5}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := resumeWAL(tt.pos, tt.cluster, tt.hasSeq); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("resumeWAL = %+v\nwant          %+v", got, tt.want)
			}
		})
	}
	// The ledger of the resumed session skips what Kafka has and lists on.
	l := newLedger(wal, 7, "seq", skipped(), nil, new(atomic.Uint64))
	if !slices.Equal(l.Position().XIDs, []uint32{31, 35}) || l.floorXID != 30 {
		t.Fatalf("the resumed ledger lists %v above %d", l.Position().XIDs, l.floorXID)
	}
}

// A poll session marks what the last Kafka transaction carried: a poll
// record's rows, or every transaction a WAL record says Kafka has; from
// another cluster, nothing. Every poll record then carries the WAL's
// position, of this cluster only.
func TestResumePoll(t *testing.T) {
	wal := Position{Mode: store.ModeWAL, End: 500, Commit: 490, Cluster: 7, FloorXID: 30, XIDs: []uint32{31, 35}}
	for _, tt := range []struct {
		name    string
		pos     Position
		cluster int64
		want    pollResume
	}{
		{"nothing committed yet", Position{}, 7, pollResume{wal: Position{Cluster: 7}}},
		{"a poll record", Position{Mode: store.ModePoll, End: 500, Commit: 490, Cluster: 7, Seqs: []int64{4}}, 7,
			pollResume{seqs: []int64{4}, wal: Position{End: 500, Commit: 490, Cluster: 7}}},
		{"a WAL record", wal, 7, pollResume{markWAL: true, below: 30, xids: []uint32{31, 35}, wal: Position{End: 500, Commit: 490, Cluster: 7}}},
		{"a WAL record of another cluster", wal, 8, pollResume{foreign: true, wal: Position{Cluster: 8}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := resumePoll(tt.pos, tt.cluster); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("resumePoll = %+v\nwant           %+v", got, tt.want)
			}
		})
	}
}

// The ids a position record lists are kept sorted whatever order their
// transactions commit in, once each, and written as encoding/json writes
// a []uint32, so that a record reads back the same.
func TestXIDSetAndList(t *testing.T) {
	var s xidSet
	for _, x := range []uint32{7, 7, 9, 3, 9, 8, 1 << 31, 3, 0} {
		s.add(x)
	}
	if want := []uint32{0, 3, 7, 8, 9, 1 << 31}; !slices.Equal(s, want) {
		t.Fatalf("set %v, want %v", s, want)
	}
	for _, x := range []uint32{0, 8, 1 << 31} {
		if !s.has(x) {
			t.Errorf("has(%d) false", x)
		}
	}
	if s.has(5) || s.has(1<<31+1) {
		t.Error("has an id never added")
	}
	for _, l := range [][]uint32{nil, {}, {0}, {1, 22, 4294967295}} {
		want, _ := json.Marshal(l)
		got, err := xidList(l).MarshalJSON()
		if err != nil || string(got) != string(want) && len(l) > 0 {
			t.Errorf("%v: %s, want %s", l, got, want)
		}
	}
	p := Position{Mode: store.ModeWAL, End: 20, Commit: 10, FloorXID: 5, XIDs: []uint32{5, 6, 4000000000}}
	rec, err := p.Record("pl", "t", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParsePosition(rec)
	if err != nil || !slices.Equal(back.XIDs, p.XIDs) {
		t.Fatalf("read back %+v, %v: %s", back, err, rec.Value)
	}
}
