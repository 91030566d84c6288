package replication

import (
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/outbox"
)

func TestMessagesReads(t *testing.T) {
	for _, tc := range []struct {
		include, exclude string
		reads, skips     []string
	}{
		{include: "outbox", reads: []string{"outbox", "OUTBOX"}, skips: []string{"outbox2", "my-outbox", "audit", HeartbeatPrefix}},
		{include: "outbox, audit.*", reads: []string{"outbox", "audit", "audit-x"}, skips: []string{"x-audit"}},
		{exclude: "audit", reads: []string{"outbox", "anything"}, skips: []string{"audit", "Audit", HeartbeatPrefix}},
	} {
		m, err := ParseMessages(tc.include, tc.exclude)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range tc.reads {
			if !m.Reads(p) {
				t.Errorf("include %q exclude %q: %q not read", tc.include, tc.exclude, p)
			}
		}
		for _, p := range tc.skips {
			if m.Reads(p) {
				t.Errorf("include %q exclude %q: %q read", tc.include, tc.exclude, p)
			}
		}
	}
	if m, err := ParseMessages(" ", ""); err != nil || m != nil || m.Reads("outbox") {
		t.Errorf("empty lists: %v, %v", m, err)
	}
	if _, err := ParseMessages("(", ""); err == nil {
		t.Error("a bad pattern was taken")
	}
	if !(&Messages{}).Reads("any") {
		t.Error("no list reads every prefix")
	}
}

func TestMessageColumns(t *testing.T) {
	for _, tc := range []struct {
		content string
		want    string // name:oid=value, ... ("" for no column)
	}{
		{`{"id": "e-1", "aggregatetype": "order", "aggregateid": "o-\"1", "type": "Placed", "payload": {"a": [1, null]}}`,
			`id:25=e-1 aggregatetype:25=order aggregateid:25=o-"1 type:25=Placed payload:3802={"a": [1, null]}`},
		{`{"n": 12, "f": 1.5, "e": 1e3, "b": false, "z": null, "l": [1]}`, `n:20=12 f:701=1.5 e:701=1e3 b:16=f z:25=<nil> l:3802=[1]`},
		{`{"a": "1", "a": "2"}`, `a:25=2`},
		{`{}`, ``},
		{`[1, 2]`, ``},
		{`not json`, ``},
		{`{"a": 1} {"b": 2}`, ``},
		{`{"a": 1`, ``},
		{``, ``},
	} {
		cols, values := messageColumns([]byte(tc.content))
		var got []string
		for i, c := range cols {
			v := "<nil>"
			if values[i] != nil {
				v = string(values[i])
			}
			got = append(got, c.Name+":"+strconv.FormatUint(uint64(c.TypeOID), 10)+"="+v)
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.content, g, tc.want)
		}
	}
}

func TestDecodeMessages(t *testing.T) {
	var counters Counters
	d := newDecoder(outboxOnly(), &counters)
	m, _ := ParseMessages("outbox", "")
	d.messages = m
	type step struct {
		data []byte
		kind outbox.Kind // 0: nothing
		xid  uint32
		lsn  pglogrepl.LSN
		// boundary: a commit at lsn follows (a non-transactional message).
		boundary bool
	}
	event := `{"id": "e-1", "aggregatetype": "order", "aggregateid": "o-1", "type": "Placed", "payload": {}}`
	steps := []step{
		{data: msgBegin(0x200, 7)},
		{data: msgMessage(0x110, true, "outbox", event), kind: outbox.KindRow, xid: 7, lsn: 0x110},
		{data: msgMessage(0x120, true, "audit", event)},
		{data: msgMessage(0x130, true, "outbox", event), kind: outbox.KindRow, xid: 7, lsn: 0x130},
		{data: msgCommit(0x200, 0x210), kind: outbox.KindCommit, xid: 7, lsn: 0x210},
		{data: msgMessage(0x300, false, "outbox", `{"id": "e-2"}`), kind: outbox.KindRow, lsn: 0x300, boundary: true},
		{data: msgMessage(0x310, false, HeartbeatPrefix, "slot"), kind: outbox.KindHeartbeat, lsn: 0x310},
		{data: msgMessage(0x320, false, "audit", event)},
	}
	var rels []*outbox.Relation
	for i, s := range steps {
		c, ok, err := d.decode(s.lsn, s.data)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if ok != (s.kind != 0) || ok && (c.Kind != s.kind || c.XID != s.xid || c.LSN != s.lsn) {
			t.Fatalf("step %d: got %v %+v", i, ok, c)
		}
		if (d.boundary != nil) != s.boundary {
			t.Fatalf("step %d: boundary %v", i, d.boundary)
		}
		if s.boundary {
			if b := *d.boundary; b.Kind != outbox.KindCommit || b.LSN != s.lsn || c.FinalLSN != s.lsn-1 || b.FinalLSN != s.lsn-1 {
				t.Fatalf("step %d: boundary %+v", i, b)
			}
			d.boundary = nil
		}
		if ok && c.Kind == outbox.KindRow {
			if !c.Relation.Message || c.Relation.Name != "outbox" || c.Relation.Schema != MessageSchema {
				t.Fatalf("step %d: relation %+v", i, c.Relation)
			}
			rels = append(rels, c.Relation)
		}
	}
	if rels[0] != rels[1] || rels[0] == rels[2] {
		t.Error("messages of one shape should share their relation, and only those")
	}
	if n := counters.Messages.Load(); n != 3 {
		t.Errorf("counted %d messages, want 3", n)
	}
	if _, _, err := d.decode(0x400, msgMessage(0x400, true, "outbox", event)); err == nil {
		t.Error("a transactional message outside a transaction was taken")
	}
}
