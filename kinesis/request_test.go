package kinesis

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A request holds one stream's items in order, each partition key once:
// an item of a key already in it, and that key's items after it, wait for
// a later request; the items are all taken, each once, in as few requests
// as that allows.
func TestRequestPicksEachKeyOnce(t *testing.T) {
	rec := func(topic, key string, size int) pending {
		r := &kgo.Record{Topic: topic, Value: []byte(strings.Repeat("x", size))}
		if key != "" {
			r.Key = []byte(key)
		}
		return pending{rec: r, promise: func(*kgo.Record, error) {}}
	}
	big := MaxRequestBytes / 2
	tests := []struct {
		name  string
		batch int
		items []pending
		want  [][]int
	}{
		{"distinct keys", 500, []pending{rec("s", "a", 1), rec("s", "b", 1), rec("s", "c", 1)}, [][]int{{0, 1, 2}}},
		{"a key twice", 500, []pending{rec("s", "a", 1), rec("s", "b", 1), rec("s", "a", 1), rec("s", "c", 1)}, [][]int{{0, 1, 3}, {2}}},
		{"a hot key", 500, []pending{rec("s", "a", 1), rec("s", "a", 1), rec("s", "b", 1), rec("s", "a", 1)}, [][]int{{0, 2}, {1}, {3}}},
		{"no key is the null key", 500, []pending{rec("s", "", 1), rec("s", "default", 1), rec("s", "", 1)}, [][]int{{0}, {1}, {2}}},
		{"two streams", 500, []pending{rec("s", "a", 1), rec("t", "a", 1), rec("s", "b", 1), rec("t", "b", 1)}, [][]int{{0, 2}, {1, 3}}},
		{"the batch size", 2, []pending{rec("s", "a", 1), rec("s", "b", 1), rec("s", "c", 1)}, [][]int{{0, 1}, {2}}},
		{"the request's bytes", 500, []pending{rec("s", "a", big), rec("s", "b", big), rec("s", "c", 1)}, [][]int{{0}, {1, 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Publisher{cfg: Config{BatchSize: tt.batch, NullKey: DefaultNullKey}, log: slog.New(slog.DiscardHandler)}
			var got [][]int
			b := p.batch()
			b.Send = func(_ context.Context, msgs []pending, _ int) ([]int, error) {
				var req []int
				for _, m := range msgs {
					req = append(req, slices.IndexFunc(tt.items, func(it pending) bool { return it.rec == m.rec }))
				}
				got = append(got, req)
				return nil, nil
			}
			b.Settle(context.Background(), tt.items, errAfterFailure)
			if !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("requests %v, want %v", got, tt.want)
			}
		})
	}
}
