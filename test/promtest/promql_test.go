package promtest

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		expr      string
		selectors []string
		labels    []string
	}{
		{`up{job="pgoutbox"} == 0 or absent(up{job="pgoutbox"})`, []string{`up{job="pgoutbox"}`, `up{job="pgoutbox"}`}, nil},
		{`max by (job) (pgoutbox_ready) == 0`, []string{`pgoutbox_ready`}, []string{"job"}},
		{`sum without(instance) (rate(pgoutbox_events_failed_total[5m])) * 60 > 10`, []string{`pgoutbox_events_failed_total`}, []string{"instance"}},
		{`histogram_quantile(0.99, sum by (job, instance, mode, le) (rate(pgoutbox_publish_latency_seconds_bucket{mode=~"wal|poll"}[5m:1m])))`,
			[]string{`pgoutbox_publish_latency_seconds_bucket{mode=~"wal|poll"}`}, []string{"job", "instance", "mode", "le"}},
		{`time() - max by (job) (pgoutbox_polling_since_timestamp_seconds) > 900 and max by(job)(pgoutbox_polling_since_timestamp_seconds) > 0`,
			[]string{`pgoutbox_polling_since_timestamp_seconds`, `pgoutbox_polling_since_timestamp_seconds`}, []string{"job", "job"}},
		{`pgoutbox_slot_retained_wal_bytes > 1e9 and deriv(pgoutbox_slot_retained_wal_bytes[30m] offset 1h) > 0x10`,
			[]string{`pgoutbox_slot_retained_wal_bytes`, `pgoutbox_slot_retained_wal_bytes`}, nil},
		{`a * on (instance) group_left(version) b{x!="}", y!~'\'q'} unless bool c`, []string{`a`, `b{x!="}", y!~"'q"}`, `c`}, []string{"instance", "version"}},
		{`a / on(job) group_left b # a comment naming not_a_metric`, []string{`a`, `b`}, []string{"job"}},
		{`{__name__="pgoutbox_mode", mode="poll"}`, []string{`pgoutbox_mode{__name__="pgoutbox_mode", mode="poll"}`}, nil},
		{`count_values("v", topk(3, x)) + Inf - NaN + 1.5e-3 + 2h30m`, []string{`x`}, nil},
		{`sum(rate(x[$__rate_interval])) by (topic)`, []string{`x`}, []string{"topic"}},
	} {
		u, err := Parse(c.expr)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.expr, err)
			continue
		}
		var sels []string
		for _, s := range u.Selectors {
			sels = append(sels, s.String())
		}
		if !reflect.DeepEqual(sels, c.selectors) || !reflect.DeepEqual(u.Labels, c.labels) {
			t.Errorf("Parse(%q) = %q, labels %q; want %q, labels %q", c.expr, sels, u.Labels, c.selectors, c.labels)
		}
	}
	for _, bad := range []string{`x{a="b"`, `x{a="b}`, `rate(x[5m)`, `x{a}`, `x{1="b"}`, `sum by (a`, `"open`} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q): no error", bad)
		}
	}
}

func TestDashboardQueries(t *testing.T) {
	exprs, vars, err := DashboardQueries([]byte(`{
  "panels": [
    {"type": "row", "panels": [{"targets": [{"expr": "rate(a{job=~\"$job\", instance=~\"${instance}\"}[$__rate_interval])"}]}]},
    {"targets": [{"expr": "b"}, {"refId": "B"}]}
  ],
  "templating": {"list": [
    {"type": "datasource", "name": "datasource", "query": "prometheus"},
    {"type": "query", "name": "job", "query": {"query": "label_values(up, job)"}},
    {"type": "query", "name": "instance", "query": "label_values(pgoutbox_ready{job=~\"$job\"}, instance)"}
  ]}
}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`rate(a{job=~".*", instance=~".*"}[1m])`, `b`}; !reflect.DeepEqual(exprs, want) {
		t.Errorf("exprs %q, want %q", exprs, want)
	}
	if len(vars) != 2 || vars[0].Selectors[0].String() != "up" || vars[0].Labels[0] != "job" ||
		vars[1].Selectors[0].String() != `pgoutbox_ready{job=~".*"}` || vars[1].Labels[0] != "instance" {
		t.Errorf("variables %+v", vars)
	}
	if _, _, err := DashboardQueries([]byte(`{"templating": {"list": [{"type": "query", "name": "x", "query": "up"}]}}`)); err == nil {
		t.Error("a variable query that is not label_values: no error")
	}
}

func TestShortFor(t *testing.T) {
	src := []byte(`groups:
  - name: g
    rules:
      - alert: A
        expr: up == 0
        for: 5m
        annotations:
          description: 'for: 5m stays'
      - alert: B
        expr: up == 1
`)
	out, err := ShortFor(src, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(out); !strings.Contains(s, "for: 1s") || strings.Contains(s, "for: 5m\n") || !strings.Contains(s, "for: 5m stays") {
		t.Errorf("ShortFor:\n%s", out)
	}
	if _, err := ShortFor([]byte("groups: []\n"), time.Second); err == nil {
		t.Error("no for duration: no error")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`up{job="x"} == 0`, `sum by (a) (rate(x[5m]))`, `a{b=~'c\'d'}`, `{__name__="x"}`, `1e-3 + 0x1f`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		u, err := Parse(expr)
		if err != nil {
			return
		}
		for _, s := range u.Selectors {
			if s.Metric == "" && len(s.Matchers) == 0 {
				t.Errorf("Parse(%q): an empty selector", expr)
			}
		}
	})
}
