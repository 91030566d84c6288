package relay

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/poll"
)

// The marks of a snapshot's rows, for tables of so many rows read in
// batches of two, are Debezium's (RelationalSnapshotChangeEventSource's
// marker and EventDispatcher's last buffered event): the first table's
// first row first, each table's first and last, the last row read last,
// whatever tables are empty.
func TestSnapshotMarks(t *testing.T) {
	for _, tc := range []struct {
		tables []int
		want   []string
	}{
		{[]int{0}, nil},
		{[]int{1}, []string{"last"}},
		{[]int{2}, []string{"first", "last"}},
		{[]int{5}, []string{"first", "true", "true", "true", "last"}},
		{[]int{2, 0}, []string{"first", "last"}},
		{[]int{0, 2}, []string{"first_in_data_collection", "last"}},
		{[]int{1, 1}, []string{"first", "last"}},
		{[]int{3, 1, 3}, []string{"first", "true", "last_in_data_collection", "last_in_data_collection", "first_in_data_collection", "true", "last"}},
		{[]int{2, 3, 0}, []string{"first", "last_in_data_collection", "first_in_data_collection", "true", "last"}},
	} {
		m := newSnapshotMarker(pglogrepl.LSN(42), time.Unix(7, 0))
		var got []poll.Row
		n := 0
		for _, rows := range tc.tables {
			for left := rows; left > 0; left -= 2 {
				batch := make([]poll.Row, min(2, left))
				for i := range batch {
					n++
					batch[i].Seq = int64(n)
				}
				got = append(got, m.take(batch)...)
			}
			m.tableDone()
		}
		got = append(got, m.finish()...)
		var marks []string
		for i, r := range got {
			marks = append(marks, r.Snapshot.String())
			if r.Seq != int64(i+1) || r.LSN != 42 || !r.CommitTime.Equal(time.Unix(7, 0)) {
				t.Errorf("tables %v: row %d is %s at %s, %s; want row %d at 0/2A, 7 s", tc.tables, i, strconv.FormatInt(r.Seq, 10), r.LSN, r.CommitTime, i+1)
			}
		}
		if !slices.Equal(marks, tc.want) {
			t.Errorf("tables %v: marks %v, want %v", tc.tables, marks, tc.want)
		}
	}
}
