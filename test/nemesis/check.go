package nemesis

import (
	"cmp"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Written is an event as a writer committed it.
type Written struct {
	ID        string
	Aggregate string
	// Seq is its place in its aggregate's commit order: writers lock the
	// aggregate's row, take the next numbers from it and commit, so a
	// higher Seq committed later.
	Seq int64
	// Poison events have an empty aggregate id: the relay dead-letters
	// them (and holds their aggregate, which only they use).
	Poison bool
	// Committed is when the commit returned to the writer.
	Committed time.Time
	// LSN is pg_current_wal_insert_lsn() read right after the commit: at
	// or past the end of its commit record.
	LSN uint64
	// XID is its transaction's id (xid8).
	XID uint64
	// Txn says what kind of transaction wrote it (plain, large,
	// prepared with its gid, rollback), for reading a failure.
	Txn string `json:",omitempty"`
}

// Record is a record read back from Kafka.
type Record struct {
	ID    string
	Key   string
	Topic string
	// DeadLetter: read from the dead-letter topic.
	DeadLetter bool
	Partition  int32
	Offset     int64
	// Time is the record's timestamp: when the relay produced it.
	Time time.Time
	// Read is when the checker's consumer received it.
	Read time.Time
}

// Confirmation is a sample of what the pipeline had confirmed at Time.
type Confirmation struct {
	Time time.Time
	// SlotLSN is the slot's confirmed_flush_lsn (0: no slot).
	SlotLSN uint64
	// FloorXID is the published floor the relay saved (0: none): every
	// transaction below it is in Kafka.
	FloorXID uint64
}

// Input is what the checker reads.
type Input struct {
	Delivery Delivery
	// Start is the run's time 0, which episode times count from.
	Start time.Time
	// Committed are the events whose commit returned, and those whose
	// outcome the writer could not know that the table holds at the end.
	Committed []Written
	// RolledBack are events of transactions the writers rolled back.
	RolledBack []Written
	// Vanished are events whose commit outcome the writer could not know
	// (the connection broke at COMMIT) and that the table does not hold at
	// the end: not committed, or committed on a primary that died before
	// its standby had the commit. Kafka may or may not have them.
	Vanished []string
	// Published is published_at of the rows polling marked, by event id.
	Published map[string]time.Time
	Records   []Record
	// Confirmations are samples of the pipeline's confirmed position, in
	// time order.
	Confirmations []Confirmation
	// Spans are the faults as they were done.
	Spans []Span
}

// Report is what the checker found in one run.
type Report struct {
	Committed int `json:"committed"`
	Delivered int `json:"delivered"` // committed events read at least once
	Lost      int `json:"lost"`
	// Duplicates are deliveries beyond the first of an event.
	Duplicates int `json:"duplicates"`
	// Reordered counts first deliveries that came after a first delivery
	// of a later event of the same aggregate.
	Reordered int `json:"reordered"`
	// RolledBackSeen are deliveries of events that rolled back.
	RolledBackSeen int `json:"rolled_back_seen"`
	// NeverWritten are deliveries of ids no writer wrote.
	NeverWritten int `json:"never_written"`
	// PoisonMisrouted are poison events in the event topic, or ordinary
	// events in the dead-letter topic.
	PoisonMisrouted int `json:"poison_misrouted"`
	DeadLettered    int `json:"dead_lettered"`
	// VanishedSeen are deliveries of Vanished events (allowed; reported).
	VanishedSeen int `json:"vanished_seen"`
	// Episodes are the faults grouped where they overlap, with what was
	// re-sent after them and what was in flight (at-least-once).
	Episodes []Episode `json:"episodes,omitempty"`
	// OverBound are the episodes that re-sent more than was in flight
	// (Episode.Over).
	OverBound int `json:"over_bound"`
	// Unattributed are duplicates delivered before the first fault.
	Unattributed int `json:"unattributed"`
	// Examples name a few events of each problem, for the log.
	Examples map[string][]string `json:"examples,omitempty"`
}

// Episode is a group of faults whose spans overlap or follow each other
// within episodeSettle, and what the relay re-sent from its start until the
// next episode's.
type Episode struct {
	Start Seconds `json:"start"`
	End   Seconds `json:"end"`
	Kinds []Kind  `json:"kinds"`
	// Resent are the duplicates delivered within the episode; Events
	// the events they are copies of (an event the episode's faults sent
	// three times counts 2 and 1).
	Resent int `json:"resent"`
	Events int `json:"events"`
	// Faults are the faults of the episode: each can re-send what was in
	// flight at it, so an event may come once more per fault.
	Faults int `json:"faults"`
	// InFlight is the bound: events produced by the time re-sending
	// began (or the episode ended, if later) whose transactions the
	// pipeline had not confirmed when the episode began (see confirmed).
	InFlight int `json:"in_flight"`
	// Outside are re-sent events that were not in flight by that
	// definition (confirmed before the episode): informational.
	Outside int `json:"outside"`
	// SlotKept tells whether the slot's confirmed position counts as
	// confirmation (no fault of the episode loses or rewinds the slot).
	SlotKept bool `json:"slot_kept"`
}

// Over tells whether the episode re-sent more than was in flight: an event
// that was not, or more copies than one per fault of what was.
func (e Episode) Over() bool {
	return e.Events > e.InFlight || e.Resent > e.InFlight*max(e.Faults, 1)
}

// episodeSettle joins faults into one episode when the next starts within
// this long of the previous one's end: faults that overlap, or as good as.
const episodeSettle = 250 * time.Millisecond

// publishMargin: published_at is now() of the transaction that marked the
// row, which commits a moment later. A row counts as confirmed at t only if
// it was marked this long before t.
const publishMargin = 500 * time.Millisecond

// slotRewinds are the faults after which the slot's confirmed position is
// not where the stream resumes: the slot is dropped or lost, PostgreSQL
// restarts from the position it last saved to disk (15 and 16 save it only
// at checkpoints when other fields of the slot change), or polling takes
// over from the floor.
var slotRewinds = []Kind{DropSlot, Failover, PostgresRestart, RevokeReplication}

// Valid tells whether the report shows no violation of the delivery's
// guarantees: nothing lost, reordered, published that rolled back or was
// never written, poison routed as such; under exactly-once no duplicate,
// under at-least-once no episode over its bound and no duplicate without a
// fault.
func (r Report) Valid(d Delivery) bool {
	ok := r.Lost == 0 && r.Reordered == 0 && r.RolledBackSeen == 0 && r.NeverWritten == 0 && r.PoisonMisrouted == 0
	if d == ExactlyOnce {
		return ok && r.Duplicates == 0
	}
	return ok && r.OverBound == 0 && r.Unattributed == 0
}

func (r Report) String() string {
	s := fmt.Sprintf("committed %d, delivered %d, lost %d, duplicates %d, reordered %d, rolled back seen %d, never written %d, poison misrouted %d, dead-lettered %d, vanished seen %d",
		r.Committed, r.Delivered, r.Lost, r.Duplicates, r.Reordered, r.RolledBackSeen, r.NeverWritten, r.PoisonMisrouted, r.DeadLettered, r.VanishedSeen)
	if r.OverBound > 0 || r.Unattributed > 0 {
		s += fmt.Sprintf("; %d episodes re-sent more than was in flight, %d duplicates before any fault", r.OverBound, r.Unattributed)
	}
	return s
}

func (r *Report) example(problem, id string) {
	if r.Examples == nil {
		r.Examples = map[string][]string{}
	}
	if len(r.Examples[problem]) < 5 {
		r.Examples[problem] = append(r.Examples[problem], id)
	}
}

// Check compares what was written with what Kafka holds.
func Check(in Input) Report {
	var rep Report
	committed := make(map[string]Written, len(in.Committed))
	for _, w := range in.Committed {
		committed[w.ID] = w
	}
	rolledBack := make(map[string]Written, len(in.RolledBack))
	for _, w := range in.RolledBack {
		rolledBack[w.ID] = w
	}
	vanished := setOf(in.Vanished)
	rep.Committed = len(committed)

	recs := slices.Clone(in.Records)
	slices.SortStableFunc(recs, func(a, b Record) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	seen := map[string]int{}
	first := map[string]time.Time{}
	// produced is when an event was first handed to Kafka: the earliest
	// timestamp of its copies. A copy produced before the fault can land
	// after one a later session produced (a relay's client still retries
	// what its failed session left), so the first copy in the log is not
	// always the first produced.
	produced := map[string]time.Time{}
	last := map[string]int64{} // aggregate -> seq of its latest first delivery
	var dups []Record
	for _, r := range recs {
		seen[r.ID]++
		if t, ok := produced[r.ID]; !ok || r.Time.Before(t) {
			produced[r.ID] = r.Time
		}
		if seen[r.ID] > 1 {
			rep.Duplicates++
			rep.example("duplicate", r.ID)
			dups = append(dups, r)
			continue
		}
		first[r.ID] = r.Time
		w, ok := committed[r.ID]
		switch {
		case rolledBack[r.ID].ID != "":
			rep.RolledBackSeen++
			rep.example("rolled back seen", fmt.Sprintf("%s (%s, aggregate %s seq %d xid %d, produced at %.3fs)", r.ID, rolledBack[r.ID].Txn,
				rolledBack[r.ID].Aggregate, rolledBack[r.ID].Seq, rolledBack[r.ID].XID, r.Time.Sub(in.Start).Seconds()))
			continue
		case vanished[r.ID]:
			rep.VanishedSeen++
			continue
		case !ok:
			rep.NeverWritten++
			rep.example("never written", r.ID)
			continue
		case w.Poison != r.DeadLetter:
			rep.PoisonMisrouted++
			rep.example("poison misrouted", r.ID)
			continue
		}
		if w.Poison {
			rep.DeadLettered++
			continue
		}
		rep.Delivered++
		if prev, ok := last[w.Aggregate]; ok && w.Seq <= prev {
			rep.Reordered++
			rep.example("reordered", fmt.Sprintf("%s (aggregate %s seq %d after %d)", r.ID, w.Aggregate, w.Seq, prev))
		}
		last[w.Aggregate] = max(last[w.Aggregate], w.Seq)
	}
	for id, w := range committed {
		if seen[id] == 0 {
			rep.Lost++
			rep.example("lost", fmt.Sprintf("%s (aggregate %q seq %d, committed %s)", id, w.Aggregate, w.Seq, w.Committed.Format("15:04:05.000")))
		}
	}
	rep.Episodes, rep.Unattributed = episodes(in, committed, first, produced, dups, &rep)
	if in.Delivery != ExactlyOnce {
		for _, e := range rep.Episodes {
			if e.Over() {
				rep.OverBound++
			}
		}
	}
	return rep
}

func setOf(ids []string) map[string]bool {
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// episodes groups the spans, attributes each duplicate to the last episode
// that began before it was produced, and counts what was in flight. A
// duplicate is produced when the later of it and the first copy in the log
// was: a copy that lands after the re-send was produced before it.
func episodes(in Input, committed map[string]Written, first, produced map[string]time.Time, dups []Record, rep *Report) ([]Episode, int) {
	spans := slices.Clone(in.Spans)
	slices.SortFunc(spans, func(a, b Span) int { return a.Start.Compare(b.Start) })
	type group struct {
		start, end time.Time
		kinds      []Kind
		faults     int
		dups       []Record
	}
	var groups []*group
	for _, s := range spans {
		if n := len(groups); n > 0 && !s.Start.After(groups[n-1].end.Add(episodeSettle)) {
			g := groups[n-1]
			g.end = later(g.end, s.End)
			g.faults++
			if !slices.Contains(g.kinds, s.Fault.Kind) {
				g.kinds = append(g.kinds, s.Fault.Kind)
			}
			continue
		}
		groups = append(groups, &group{start: s.Start, end: s.End, kinds: []Kind{s.Fault.Kind}, faults: 1})
	}
	unattributed := 0
	resentAt := func(d Record) time.Time { return later(d.Time, first[d.ID]) }
	slices.SortFunc(dups, func(a, b Record) int { return resentAt(a).Compare(resentAt(b)) })
	for _, d := range dups {
		i, _ := slices.BinarySearchFunc(groups, resentAt(d), func(g *group, t time.Time) int {
			if g.start.After(t) {
				return 1
			}
			return -1
		})
		if i == 0 {
			unattributed++
			continue
		}
		groups[i-1].dups = append(groups[i-1].dups, d)
	}
	// rewinds are when slot rewinds began: after one, the slot's
	// confirmed position says nothing of the rows committed before it,
	// which the relay sends again from its floor until that passes them
	// (a poll phase cut short by later faults does so again in later
	// episodes; nemesis seeds 7 and 39).
	var rewinds []time.Time
	for _, s := range spans {
		if slices.Contains(slotRewinds, s.Fault.Kind) {
			rewinds = append(rewinds, s.Start)
		}
	}
	start := in.Start
	out := make([]Episode, 0, len(groups))
	for _, g := range groups {
		e := Episode{Start: Seconds(g.start.Sub(start).Seconds()), End: Seconds(g.end.Sub(start).Seconds()),
			Kinds: g.kinds, Faults: g.faults, Resent: len(g.dups), SlotKept: true}
		events := map[string]bool{}
		for _, d := range g.dups {
			events[d.ID] = true
		}
		e.Events = len(events)
		for _, k := range g.kinds {
			if slices.Contains(slotRewinds, k) {
				e.SlotKept = false
			}
		}
		if len(g.dups) > 0 {
			until := later(g.end, g.dups[0].Time)
			conf := confirmationAt(in.Confirmations, g.start)
			var slotSince time.Time // the last rewind before the episode
			for _, r := range rewinds {
				if r.Before(g.start) {
					slotSince = r
				}
			}
			inflight := map[string]bool{}
			for id, t := range produced {
				w, ok := committed[id]
				slotKept := e.SlotKept && w.Committed.After(slotSince)
				if !ok || t.After(until) || confirmed(w, conf, in.Published, g.start, slotKept) {
					continue
				}
				inflight[id] = true
			}
			e.InFlight = len(inflight)
			for _, d := range g.dups {
				if !inflight[d.ID] {
					e.Outside++
					w := committed[d.ID]
					rep.example("re-sent outside in flight", fmt.Sprintf("%s at %.3fs (first at %.3fs; lsn %X xid %d; at %.3fs slot %X floor %d)",
						d.ID, d.Time.Sub(in.Start).Seconds(), first[d.ID].Sub(in.Start).Seconds(), w.LSN, w.XID,
						g.start.Sub(in.Start).Seconds(), conf.SlotLSN, conf.FloorXID))
				}
			}
		}
		out = append(out, e)
	}
	return out, unattributed
}

// confirmationAt is the last sample taken at or before t: the pipeline had
// confirmed at least that much at t.
func confirmationAt(cs []Confirmation, t time.Time) Confirmation {
	i, _ := slices.BinarySearchFunc(cs, t, func(c Confirmation, t time.Time) int {
		if c.Time.After(t) {
			return 1
		}
		return -1
	})
	if i == 0 {
		return Confirmation{}
	}
	return cs[i-1]
}

// confirmed tells whether the pipeline had recorded w as published by t,
// where a restart would not send it again: its transaction is below the
// saved floor, polling marked its row, or (when slotKept: no slot rewind
// since w committed) the slot's confirmed position is past its commit.
func confirmed(w Written, c Confirmation, published map[string]time.Time, t time.Time, slotKept bool) bool {
	if c.FloorXID != 0 && w.XID < c.FloorXID {
		return true
	}
	if p, ok := published[w.ID]; ok && p.Before(t.Add(-publishMargin)) {
		return true
	}
	return slotKept && c.SlotLSN != 0 && w.LSN <= c.SlotLSN
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// EpisodeTable is the episodes as text, one per line, for the log.
func (r Report) EpisodeTable() string {
	var b strings.Builder
	for _, e := range r.Episodes {
		kinds := make([]string, len(e.Kinds))
		for i, k := range e.Kinds {
			kinds[i] = string(k)
		}
		mark := ""
		if e.Over() {
			mark = "  OVER"
		}
		fmt.Fprintf(&b, "%7.1fs-%7.1fs %-60s re-sent %6d (%6d events) in flight %6d outside %5d slot kept %t%s\n",
			e.Start, e.End, strings.Join(kinds, "+"), e.Resent, e.Events, e.InFlight, e.Outside, e.SlotKept, mark)
	}
	return b.String()
}

// inputFile keeps a failed run's Input, for checking it again.
const inputFile = "input.json.gz"

// SaveInput writes in to dir (gzipped JSON), so that a failed run can be
// checked again (LoadInput, Check) without running it again.
func SaveInput(dir string, in Input) error {
	f, err := os.Create(filepath.Join(dir, inputFile))
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	err = json.NewEncoder(zw).Encode(in)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// LoadInput reads what SaveInput wrote.
func LoadInput(dir string) (Input, error) {
	var in Input
	f, err := os.Open(filepath.Join(dir, inputFile))
	if err != nil {
		return in, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return in, err
	}
	err = json.NewDecoder(zr).Decode(&in)
	return in, err
}
