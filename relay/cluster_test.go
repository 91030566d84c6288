package relay

import (
	"reflect"
	"testing"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/store"
)

// A pipeline's positions belong to another cluster when its saved
// identifier differs, or, saved before the identifier was, when its floor
// is above this cluster's next transaction or its confirmed position
// beyond this cluster's WAL end; a standby (no WAL end) is judged by the
// rest.
func TestJudgeCluster(t *testing.T) {
	str := func(s string) *string { return &s }
	id := func(n int64) *int64 { return &n }
	for _, tt := range []struct {
		name    string
		st      store.Positions
		current int64
		walEnd  *string
		why     string // "" for the same cluster
	}{
		{"same identifier", store.Positions{Cluster: id(7), FloorXID: str("900"), Confirmed: str("0/90")}, 7, str("0/100"), ""},
		{"another identifier", store.Positions{Cluster: id(7)}, 8, str("0/100"), "state saved on cluster 7, this is cluster 8"},
		{"identifier unknown here", store.Positions{Cluster: id(7)}, 0, str("0/100"), ""},
		{"floor above the next transaction", store.Positions{FloorXID: str("2000")}, 8, str("0/100"),
			"the saved floor (transaction 2000) is above this cluster's next transaction id 1000"},
		{"floor below it", store.Positions{FloorXID: str("999")}, 8, str("0/100"), ""},
		{"confirmed beyond the WAL end", store.Positions{Confirmed: str("0/200")}, 8, str("0/100"),
			"the saved confirmed position 0/200 is beyond this cluster's WAL end 0/100"},
		{"confirmed beyond, on a standby", store.Positions{Confirmed: str("0/200")}, 8, nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := judgeCluster(&tt.st, tt.current, 1000, tt.walEnd)
			switch {
			case tt.why == "" && c != nil:
				t.Fatalf("judged another cluster: %s", c.why)
			case tt.why != "" && (c == nil || c.why != tt.why):
				t.Fatalf("judged %+v, want %q", c, tt.why)
			}
		})
	}
}

// The floor kept for the rows copied from the other cluster is the one
// saved there with the sequence's value, or the one it kept from a move
// before; a floor saved without the value keeps nothing, and says why.
func TestForeignFloor(t *testing.T) {
	str := func(s string) *string { return &s }
	id := func(n int64) *int64 { return &n }
	for _, tt := range []struct {
		name  string
		st    store.Positions
		want  *outbox.ForeignFloor
		noSeq bool
	}{
		{"a floor with its sequence", store.Positions{FloorXID: str("900"), FloorSeq: id(41)}, &outbox.ForeignFloor{XID: 900, Seq: 41}, false},
		{"a floor without", store.Positions{FloorXID: str("900")}, nil, true},
		{"moved again", store.Positions{ForeignXID: str("700"), ForeignSeq: id(12)}, &outbox.ForeignFloor{XID: 700, Seq: 12}, false},
		{"no floor", store.Positions{}, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, noSeq := foreignFloor(&tt.st)
			if !reflect.DeepEqual(got, tt.want) || (noSeq != "") != tt.noSeq {
				t.Fatalf("foreignFloor = %+v, %q", got, noSeq)
			}
		})
	}
}
