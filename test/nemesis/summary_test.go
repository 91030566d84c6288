package nemesis

import (
	"strings"
	"testing"
	"time"
)

func TestSummary(t *testing.T) {
	sched := func(seed uint64) Schedule {
		return NewSchedule(Config{Seed: seed, Duration: 2 * time.Minute, Kinds: []Kind{RelayKill, KafkaKill}})
	}
	results := []Result{
		{Seed: 1, Delivery: AtLeastOnce, Mode: ModeAuto, Schedule: sched(1), Report: Report{Committed: 100, Duplicates: 3}},
		{Seed: 2, Delivery: AtLeastOnce, Mode: ModeAuto, Schedule: sched(2), Report: Report{Committed: 50, Lost: 1}},
		{Seed: 3, Delivery: AtLeastOnce, Mode: ModeAuto, Schedule: sched(3), Report: Report{Committed: 10}},
		{Seed: 1, Delivery: ExactlyOnce, Mode: ModeWAL, Schedule: sched(1), Report: Report{Committed: 70}, Stuck: "no event for 50s"},
	}
	got := Summary(results)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header, a rule and two rows:\n%s", got)
	}
	for _, want := range []string{"| at-least-once | auto | 1-3 | 6.0 |", "| 160 | 1 | 3 |", "| 2 |"} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("row %q lacks %q", lines[2], want)
		}
	}
	if !strings.Contains(lines[3], "| exactly-once | wal | 1 | 2.0 |") || !strings.Contains(lines[3], "| n/a | 1 |") || !strings.HasSuffix(lines[3], "| 1 |") {
		t.Errorf("row %q", lines[3])
	}
	if s := seedList([]uint64{8, 1, 2, 3, 5, 3}); s != "1-3, 5, 8" {
		t.Errorf("seedList: %s", s)
	}
}
