package relay

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/relay/internal/flow"
)

// recorder is a hook of every kind that notes what it is told.
type recorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *recorder) note(s string) {
	r.mu.Lock()
	r.seen = append(r.seen, s)
	r.mu.Unlock()
}

func (r *recorder) notes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

func (r *recorder) OnSessionRecords(mode Mode) RecordHooks {
	r.note("records " + string(mode))
	return recorderRecords{r}
}
func (r *recorder) OnSessionStart(mode Mode)                  { r.note("session " + string(mode)) }
func (r *recorder) OnDeadLettered(int)                        { r.note("dead-lettered") }
func (r *recorder) OnTransactionCommitted(time.Duration, int) { r.note("committed") }

type recorderRecords struct{ r *recorder }

func (h recorderRecords) Topic(topic, table string) TopicHooks {
	h.r.note("topic " + topic + " " + table)
	return recorderTopic{h.r}
}
func (h recorderRecords) Batch(int)  { h.r.note("batch") }
func (h recorderRecords) Heartbeat() { h.r.note("heartbeat") }

type recorderTopic struct{ r *recorder }

func (h recorderTopic) Acked(time.Duration) { h.r.note("acked") }
func (h recorderTopic) Failed()             { h.r.note("failed") }

// A hook of Config.Hooks is told what the relay does beside its
// Prometheus metrics, each through the interfaces it implements: a
// session's start, every record's ack or failure, per topic and table, a
// transaction's end.
func TestHooksBesideMetrics(t *testing.T) {
	rec := &recorder{}
	var cfg Config
	cfg.Replication.DatabaseURL = "postgres://127.0.0.1:1/none"
	cfg.Sink = fakeOpener{}
	cfg.Router.Topic = "{aggregatetype}"
	cfg.OnPoison = PoisonHalt
	cfg.Hooks = []Hook{rec}
	rl, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p := rl.p
	down := p.sessionUp(ModeWAL)
	defer down()
	k := newFakeSink()
	pub := p.newPublisher(k, nil, ModeWAL, p.cfg.Columns)
	pub.recordCtx = context.Background()
	pub.ledger = flow.NewWALLedger(flow.NewWatermark(0, func(pglogrepl.LSN) {}, nil), &flow.Polled{}, p.cfg.Poll.Order, 0, p.stats.skipped())
	if err := pub.publish(context.Background(), []outbox.Change{
		row(10, "a1", "order", "A", "Placed", `{}`), row(20, "b1", "payment", "B", "Paid", `{}`), commit(100),
	}); err != nil {
		t.Fatal(err)
	}
	k.ack(0)
	k.fail(0, kerr.NotLeaderForPartition)
	want := []string{"session wal", "records wal", "topic order public.outbox", "topic payment public.outbox", "batch", "acked", "failed"}
	if got := rec.notes(); !slices.Equal(got, want) {
		t.Fatalf("the hook was told %q, want %q", got, want)
	}
	if got := value(t, rl.Metrics.Registry, "pgoutbox_events_published_total", "mode=wal", "table=public.outbox", "topic=order"); got != 1 {
		t.Errorf("the metrics counted %v published, want 1 beside the hook", got)
	}
	if got := value(t, rl.Metrics.Registry, "pgoutbox_mode", "mode=wal"); got != 1 {
		t.Errorf("the mode gauge %v, want 1", got)
	}
	p.hooks.Committed(time.Millisecond, 2)
	p.hooks.DeadLettered(1)
	p.hooks.Aborted(errors.New("a hook that does not take it is not told"))
	if got := rec.notes()[len(want):]; !slices.Equal(got, []string{"committed", "dead-lettered"}) {
		t.Errorf("then told %q", got)
	}
}
