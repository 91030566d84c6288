package inflight

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// msg is a test message: its group, its order key, and how many of its
// attempts the broker refuses.
type msg struct {
	group, key string
	refusals   int
}

// A batch's requests hold one group's messages, each key once; an entry
// the broker refused is sent again alone, its key's later messages after
// it; promises run in order. After Retries attempts the refused message
// gets the broker's error, those written before it nil, the others after.
func TestBatchSettle(t *testing.T) {
	errAfter := errors.New("after")
	tests := []struct {
		name     string
		msgs     []msg
		retries  int
		requests [][]int
		outcomes []string
	}{
		{"written at once", []msg{{"s", "a", 0}, {"s", "b", 0}, {"t", "a", 0}, {"s", "", 0}, {"s", "", 0}}, 3,
			[][]int{{0, 1, 3, 4}, {2}}, []string{"ok", "ok", "ok", "ok", "ok"}},
		{"a refused entry sent again before its key's next", []msg{{"s", "a", 0}, {"s", "b", 1}, {"s", "b", 0}, {"s", "c", 0}}, 3,
			[][]int{{0, 1, 3}, {1}, {2}}, []string{"ok", "ok", "ok", "ok"}},
		{"retries exhausted", []msg{{"s", "a", 0}, {"s", "b", 9}, {"s", "c", 0}, {"s", "a", 0}}, 2,
			[][]int{{0, 1, 2}, {1}}, []string{"ok", "refused b", "after", "after"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var requests [][]int
			var outcomes []string
			failed := false
			refused := map[int]int{}
			b := Batch[int]{Max: 10, Bytes: 100, Retries: tt.retries,
				Group: func(i int) string { return tt.msgs[i].group },
				Order: func(i int) string { return tt.msgs[i].key },
				Size:  func(int) int { return 1 },
				Send: func(_ context.Context, ids []int, _ int) ([]int, error) {
					requests = append(requests, slices.Clone(ids))
					var out []int
					var err error
					for j, i := range ids {
						if refused[i] < tt.msgs[i].refusals {
							refused[i]++
							out = append(out, j)
							err = fmt.Errorf("refused %s", tt.msgs[i].key)
						}
					}
					return out, err
				},
				Promise: func(_ int, err error) {
					if err == nil {
						outcomes = append(outcomes, "ok")
						return
					}
					outcomes = append(outcomes, err.Error())
				},
				Failed: func() { failed = true },
			}
			items := make([]int, len(tt.msgs))
			for i := range items {
				items[i] = i
			}
			b.Settle(context.Background(), items, errAfter)
			if !slices.EqualFunc(requests, tt.requests, slices.Equal) {
				t.Errorf("requests %v, want %v", requests, tt.requests)
			}
			if !slices.Equal(outcomes, tt.outcomes) {
				t.Errorf("outcomes %v, want %v", outcomes, tt.outcomes)
			}
			if want := slices.Contains(tt.outcomes, "after"); failed != want {
				t.Errorf("Failed called %v, want %v", failed, want)
			}
		})
	}
}
