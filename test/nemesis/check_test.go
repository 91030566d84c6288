package nemesis

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// events are n events of aggregate a committed one per 10 ms from start,
// in transactions of their own (xid = 100+i, LSN = 1000+i).
func events(a string, n int, start float64) []Written {
	out := make([]Written, n)
	for i := range out {
		out[i] = Written{ID: fmt.Sprintf("%s-%d", a, i), Aggregate: a, Seq: int64(i + 1),
			Committed: at(start + float64(i)/100), LSN: uint64(1000 + i), XID: uint64(100 + i)}
	}
	return out
}

// deliver is the records of ws, in order, on partition p, produced 5 ms
// after their commit.
func deliver(ws []Written, p int32, offset int64) []Record {
	out := make([]Record, len(ws))
	for i, w := range ws {
		out[i] = Record{ID: w.ID, Key: w.Aggregate, Topic: eventTopic, DeadLetter: w.Poison, Partition: p, Offset: offset + int64(i),
			Time: w.Committed.Add(5 * time.Millisecond)}
		if w.Poison {
			out[i].Topic = deadLetters
		}
	}
	return out
}

func TestCheckClean(t *testing.T) {
	a, b := events("a", 50, 0), events("b", 50, 0)
	rep := Check(Input{Delivery: ExactlyOnce, Start: t0, Committed: append(a, b...),
		Records: append(deliver(a, 0, 0), deliver(b, 1, 0)...)})
	if !rep.Valid(ExactlyOnce) || rep.Delivered != 100 || rep.Committed != 100 {
		t.Fatalf("%v", rep)
	}
}

// Each problem is counted as itself.
func TestCheckFindsEachProblem(t *testing.T) {
	a := events("a", 10, 0)
	poison := Written{ID: "p1", Poison: true, Committed: at(0.05)}
	recs := deliver(a[:9], 0, 0)                                                                              // a-9 lost
	recs = append(recs, Record{ID: "a-3", Key: "a", Topic: eventTopic, Partition: 0, Offset: 9, Time: at(1)}) // a duplicate
	recs = append(recs, Record{ID: "r1", Key: "a", Topic: eventTopic, Partition: 0, Offset: 10, Time: at(1)}) // rolled back
	recs = append(recs, Record{ID: "x1", Key: "a", Topic: eventTopic, Partition: 0, Offset: 11, Time: at(1)}) // never written
	recs = append(recs, Record{ID: "p1", Key: "", Topic: eventTopic, Partition: 2, Offset: 0, Time: at(1)})   // poison in the event topic
	rep := Check(Input{Delivery: ExactlyOnce, Start: t0, Committed: append(a, poison), RolledBack: []Written{{ID: "r1"}}, Records: recs})
	want := Report{Committed: 11, Delivered: 9, Lost: 1, Duplicates: 1, RolledBackSeen: 1, NeverWritten: 1, PoisonMisrouted: 1, Unattributed: 1}
	got := rep
	got.Examples, got.Episodes = nil, nil
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
	if rep.Valid(ExactlyOnce) || rep.Valid(AtLeastOnce) {
		t.Fatal("a report with problems is valid")
	}
}

// Per aggregate, first deliveries follow commit order; a redelivered
// suffix does not count as reordering, an event ahead of an earlier one
// does, and order is read by partition offset, not by arrival.
func TestCheckOrder(t *testing.T) {
	a := events("a", 5, 0)
	redelivered := append(deliver(a, 0, 0), deliver(a[3:], 0, 5)...)
	rep := Check(Input{Delivery: AtLeastOnce, Start: t0, Committed: a, Records: redelivered})
	if rep.Reordered != 0 || rep.Duplicates != 2 {
		t.Fatalf("redelivered suffix: %v", rep)
	}
	swapped := deliver([]Written{a[0], a[2], a[1], a[3], a[4]}, 0, 0)
	// Arrival order differs from offset order: the checker sorts.
	swapped[0], swapped[4] = swapped[4], swapped[0]
	rep = Check(Input{Delivery: AtLeastOnce, Start: t0, Committed: a, Records: swapped})
	if rep.Reordered != 1 {
		t.Fatalf("a-1 after a-2: %v", rep)
	}
}

// Poison events belong in the dead-letter topic; vanished events may
// arrive or not.
func TestCheckPoisonAndVanished(t *testing.T) {
	a := events("a", 3, 0)
	poison := Written{ID: "p1", Poison: true}
	recs := append(deliver(append(a, poison), 0, 0), Record{ID: "v1", Topic: eventTopic, Partition: 1})
	rep := Check(Input{Delivery: ExactlyOnce, Start: t0, Committed: append(a, poison), Vanished: []string{"v1", "v2"}, Records: recs})
	if !rep.Valid(ExactlyOnce) || rep.DeadLettered != 1 || rep.VanishedSeen != 1 || rep.Lost != 0 {
		t.Fatalf("%v", rep)
	}
}

// Under at-least-once the duplicates after a fault are compared with what
// was in flight at it: produced, and not confirmed when the fault began.
func TestCheckInFlight(t *testing.T) {
	a := events("a", 100, 0) // committed from 0 to 0.99 s, produced 5 ms later
	kill := Span{Fault: Fault{Kind: RelayKill}, Start: at(0.5), End: at(0.6)}
	// The slot had confirmed up to event 39 (LSN 1039) when the relay was
	// killed: 40 to 54 (produced before 0.5 s) were in flight, plus what
	// came out before the re-send began.
	conf := []Confirmation{{Time: at(0.1), SlotLSN: 1010}, {Time: at(0.45), SlotLSN: 1039}, {Time: at(0.9), SlotLSN: 1099}}
	recs := deliver(a[:55], 0, 0)
	resend := deliver(a[40:55], 0, 55) // the restarted relay sends 40..54 again
	for i := range resend {
		resend[i].Time = at(0.7)
	}
	recs = append(recs, resend...)
	rest := deliver(a[55:], 0, 70)
	recs = append(recs, rest...)
	in := Input{Delivery: AtLeastOnce, Start: t0, Committed: a, Records: recs, Confirmations: conf, Spans: []Span{kill}}
	rep := Check(in)
	if len(rep.Episodes) != 1 {
		t.Fatalf("episodes %+v", rep.Episodes)
	}
	e := rep.Episodes[0]
	// In flight: 40..69 (produced by 0.7 s, the re-send's start, and
	// above the confirmed 39).
	if e.Resent != 15 || e.InFlight != 30 || e.Outside != 0 || rep.OverBound != 0 || !rep.Valid(AtLeastOnce) {
		t.Fatalf("%+v; %v", e, rep)
	}

	// Re-sending from event 10 on is more than was in flight.
	more := deliver(a[10:55], 0, 200)
	for i := range more {
		more[i].Time = at(0.7)
	}
	in.Records = append(append(deliver(a[:55], 0, 0), more...), deliver(a[55:], 0, 300)...)
	rep = Check(in)
	if e := rep.Episodes[0]; e.Resent != 45 || e.Outside != 30 || rep.OverBound != 1 || rep.Valid(AtLeastOnce) {
		t.Fatalf("%+v; %v", e, rep)
	}
	// The same after a slot drop: the slot's position no longer counts,
	// the floor does (transactions below 110 are in Kafka).
	in.Spans = []Span{{Fault: Fault{Kind: DropSlot}, Start: at(0.5), End: at(0.5)}}
	for i := range in.Confirmations {
		in.Confirmations[i].FloorXID = 110
	}
	rep = Check(in)
	if e := rep.Episodes[0]; e.SlotKept || e.InFlight != 60 || e.Resent != 45 || rep.OverBound != 0 {
		t.Fatalf("%+v; %v", e, rep)
	}
	// Duplicates with no fault before them are a failure on their own.
	in.Spans = nil
	if rep := Check(in); rep.Unattributed != 45 || rep.Valid(AtLeastOnce) {
		t.Fatalf("%v", rep)
	}

	in.Spans = []Span{kill}
	for i := range in.Confirmations {
		in.Confirmations[i].FloorXID = 0
	}

	// A copy produced before the fault that lands after the re-send (the
	// killed session's client still held it) was in flight all the same:
	// 40..54 first reach Kafka from the new session at 0.7 s, then the old
	// copies, produced at 0.4 s, come.
	late := deliver(a[40:55], 0, 200)
	for i := range late {
		late[i].Time = at(0.4)
	}
	in.Records = append(append(deliver(a[:40], 0, 0), resend...), deliver(a[55:], 0, 100)...)
	in.Records = append(in.Records, late...)
	rep = Check(in)
	if e := rep.Episodes[0]; e.Resent != 15 || e.Events != 15 || e.Outside != 0 || rep.OverBound != 0 {
		t.Fatalf("late copies: %+v; %v", e, rep)
	}
	// Two faults in one episode may each send it again; one fault may not.
	again := deliver(a[40:55], 0, 300)
	for i := range again {
		again[i].Time = at(0.8)
	}
	in.Records = append(in.Records, again...)
	in.Spans = []Span{kill, {Fault: Fault{Kind: PostgresRestart}, Start: at(0.65), End: at(0.7)}}
	if rep = Check(in); rep.Episodes[0].Resent != 30 || rep.Episodes[0].Events != 15 || rep.OverBound != 0 {
		t.Fatalf("two faults: %+v; %v", rep.Episodes[0], rep)
	}
	in.Spans = []Span{kill}
	if rep = Check(in); rep.OverBound != 1 {
		t.Fatalf("one fault, three copies: %+v; %v", rep.Episodes[0], rep)
	}
}

// Faults that overlap make one episode; those apart make one each, and a
// duplicate belongs to the last one that began before it.
func TestEpisodes(t *testing.T) {
	a := events("a", 10, 0)
	spans := []Span{
		{Fault: Fault{Kind: KafkaKill}, Start: at(1), End: at(3)},
		{Fault: Fault{Kind: RelayKill}, Start: at(2), End: at(2.5)},
		{Fault: Fault{Kind: AddColumn}, Start: at(5), End: at(5)},
	}
	recs := append(deliver(a, 0, 0), Record{ID: "a-1", Topic: eventTopic, Offset: 10, Time: at(4)}, Record{ID: "a-2", Topic: eventTopic, Offset: 11, Time: at(6)})
	rep := Check(Input{Delivery: AtLeastOnce, Start: t0, Committed: a, Records: recs, Spans: spans})
	if len(rep.Episodes) != 2 || len(rep.Episodes[0].Kinds) != 2 || rep.Episodes[0].Resent != 1 || rep.Episodes[1].Resent != 1 {
		t.Fatalf("%+v", rep.Episodes)
	}
}

// After a slot rewind the relay sends again, from its floor, what the slot
// had confirmed before it: a poll phase cut short by later faults does so
// in their episodes too (nemesis seeds 7 and 39). Rows committed before the
// last rewind are in flight for a later episode unless the floor or a
// published mark confirms them; the slot's position no longer does.
func TestCheckInFlightAfterRewind(t *testing.T) {
	a := events("a", 100, 0)
	conf := []Confirmation{{Time: at(0.1), SlotLSN: 1010, FloorXID: 110}, {Time: at(0.45), SlotLSN: 1039, FloorXID: 110},
		{Time: at(0.75), SlotLSN: 1075, FloorXID: 110}, {Time: at(0.95), SlotLSN: 1099, FloorXID: 110}}
	// 20..39 delivered, confirmed by the slot at 0.45 s; the slot is
	// dropped at 0.5 s (the new one confirms up to 75 by 0.75 s), and a
	// broker kill at 0.8 s cuts the handoff's polling, which sends 20..39
	// again from the floor at 0.9 s.
	recs := deliver(a, 0, 0)
	again := deliver(a[20:40], 0, 100)
	for i := range again {
		again[i].Time = at(0.9)
	}
	in := Input{Delivery: AtLeastOnce, Start: t0, Committed: a, Records: append(recs, again...), Confirmations: conf, Spans: []Span{
		{Fault: Fault{Kind: DropSlot}, Start: at(0.5), End: at(0.5)},
		{Fault: Fault{Kind: KafkaKill}, Start: at(0.8), End: at(0.85)},
	}}
	rep := Check(in)
	if len(rep.Episodes) != 2 {
		t.Fatalf("episodes %+v", rep.Episodes)
	}
	if e := rep.Episodes[1]; e.Resent != 20 || e.Outside != 0 || rep.OverBound != 0 || !rep.Valid(AtLeastOnce) {
		t.Fatalf("after the drop: %+v; %v", e, rep)
	}
	// Without the drop, the slot's position confirms them: a re-send at
	// the kill is more than was in flight (76..89).
	in.Spans = in.Spans[1:]
	if rep := Check(in); rep.OverBound != 1 || rep.Episodes[0].Outside != 20 || rep.Episodes[0].InFlight != 14 {
		t.Fatalf("without the drop: %+v; %v", rep.Episodes, rep)
	}
}
