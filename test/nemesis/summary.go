package nemesis

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Summary is a campaign's results as a Markdown table, one row per
// delivery and mode: the seeds, the minutes the faults came for, the
// faults by kind, what the checker counted, and the seeds that failed.
func Summary(results []Result) string {
	type key struct {
		d Delivery
		m Mode
	}
	type row struct {
		seeds                 []uint64
		minutes               float64
		kinds                 map[Kind]int
		committed, lost, dups int
		reordered, rolledBack int
		over, stuck, exits    int
		fenced                int
		failed                []uint64
		longest               time.Duration
	}
	rows := map[key]*row{}
	var keys []key
	for _, r := range results {
		k := key{r.Delivery, r.Mode}
		if rows[k] == nil {
			rows[k] = &row{kinds: map[Kind]int{}}
			keys = append(keys, k)
		}
		w := rows[k]
		w.seeds = append(w.seeds, r.Seed)
		w.minutes += r.Schedule.Config.Duration.Minutes()
		for kind, n := range r.Schedule.Counts() {
			w.kinds[kind] += n
		}
		w.committed += r.Report.Committed
		w.lost += r.Report.Lost
		w.dups += r.Report.Duplicates
		w.reordered += r.Report.Reordered
		w.rolledBack += r.Report.RolledBackSeen
		w.over += r.Report.OverBound
		if r.Stuck != "" {
			w.stuck++
		}
		w.exits += len(r.Exits)
		w.fenced += r.Fenced
		w.longest = max(w.longest, r.LongestStall)
		if len(r.Failures()) > 0 {
			w.failed = append(w.failed, r.Seed)
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		return strings.Compare(string(a.d)+string(a.m), string(b.d)+string(b.m))
	})
	var b strings.Builder
	b.WriteString("| delivery | mode | seeds | minutes | faults | committed | lost | duplicates | reordered | rolled back seen | over the in-flight bound | stuck | unexpected exits | longest stall without a fault | failed seeds |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range keys {
		w := rows[k]
		var kinds []string
		for _, kind := range AllKinds {
			if n := w.kinds[kind]; n > 0 {
				kinds = append(kinds, fmt.Sprintf("%s %d", kind, n))
			}
		}
		over := fmt.Sprint(w.over)
		if k.d == ExactlyOnce {
			over = "n/a"
		}
		failed := "none"
		if len(w.failed) > 0 {
			failed = seedList(w.failed)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.1f | %s | %d | %d | %d | %d | %d | %s | %d | %d | %v | %s |\n",
			k.d, k.m, seedList(w.seeds), w.minutes, strings.Join(kinds, ", "), w.committed, w.lost, w.dups,
			w.reordered, w.rolledBack, over, w.stuck, w.exits, w.longest.Round(time.Second), failed)
	}
	return b.String()
}

// seedList writes seeds as ranges: 1-5, 8.
func seedList(seeds []uint64) string {
	s := slices.Clone(seeds)
	slices.Sort(s)
	s = slices.Compact(s)
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", s[i], s[j]))
		} else {
			parts = append(parts, fmt.Sprint(s[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
