package redisstream

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/test/redistest"
)

// BenchmarkProduce writes events of 200 bytes to a real redis-server (its
// append-only file fsynced every second, as a benchmark of pgoutbox and
// not of the disk), many in flight, with the window of event ids and
// without it.
func BenchmarkProduce(b *testing.B) {
	srv := redistest.Start(b, "--appendfsync", "everysec")
	for _, window := range []int{DefaultWindow, -1} {
		b.Run(fmt.Sprintf("window=%d", max(window, 0)), func(b *testing.B) {
			s, err := New(Config{Addrs: []string{srv.Addr}, Window: window}, slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			value := []byte(`{"specversion":"1.0","data":` + `"` + strings.Repeat("x", 150) + `"}`)
			recs := make([]*kgo.Record, b.N)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: "bench", Key: []byte(fmt.Sprintf("acct-%d", i%20)), Value: value,
					Context: outbox.WithEventID(context.Background(), fmt.Sprintf("%08d-0000-0000-0000-000000000000", i))}
			}
			failed := 0
			promise := func(_ *kgo.Record, err error) {
				if err != nil {
					failed++
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for _, r := range recs {
				if err := s.Produce(ctx, r, promise); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if failed > 0 {
				b.Fatalf("%d failed", failed)
			}
		})
	}
}
