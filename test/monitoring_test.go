package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/promtest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// A real Prometheus scrapes the relay binary with the repository's alert
// rules loaded (a copy with every "for" at 1s, generated from
// monitoring/alerts.yml) and the dashboard's queries at hand: every metric
// and label the rules and the dashboard use is in what it scraped, under
// that name, and every expression is valid PromQL to it. Then the
// dead-letter alert fires for a row that cannot be published, and the down
// alert for a stopped relay; neither fires before.
func TestMonitoringWithPrometheus(t *testing.T) {
	e := testenv.New(t)
	e.Setup(e.Config())
	addr := testenv.FreeAddr(t)
	p := e.Run(t, "--metrics-addr", addr, "--metrics-interval", "500ms")
	ids := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{}`), testenv.NewRow("order", "o-1", "Paid", `{}`))
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 15*time.Second)

	root := filepath.Join("..", "monitoring")
	src, err := os.ReadFile(filepath.Join(root, "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	short, err := promtest.ShortFor(src, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rulesPath := filepath.Join(t.TempDir(), "alerts.yml")
	if err := os.WriteFile(rulesPath, short, 0o644); err != nil {
		t.Fatal(err)
	}
	prom := promtest.Start(t, promtest.Options{Job: "pgoutbox", Targets: []string{addr}, RuleFiles: []string{rulesPath}})
	defer func() {
		if t.Failed() {
			t.Logf("prometheus output:\n%s", prom.Output())
		}
	}()

	rules, err := promtest.ReadRules(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	dashboard, err := os.ReadFile(filepath.Join(root, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	panelExprs, variables, err := promtest.DashboardQueries(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	exprs = append(exprs, panelExprs...)

	testenv.Eventually(t, 15*time.Second, "the relay scraped and every rule evaluated", func() bool {
		targets, err := prom.Targets()
		if err != nil || len(targets) != 1 || targets[0].Health != "up" {
			return false
		}
		loaded, err := prom.Rules()
		if err != nil || len(loaded) != len(exprs)-len(panelExprs) {
			return false
		}
		for _, r := range loaded {
			if r.Health != "ok" {
				return false
			}
		}
		return true
	})

	// What each expression reads, against what was scraped.
	var uses []promtest.Uses
	for _, expr := range exprs {
		if _, err := prom.Query(expr); err != nil {
			t.Errorf("not valid PromQL to Prometheus: %v", err)
		}
		u, err := promtest.Parse(expr)
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		uses = append(uses, u)
	}
	uses = append(uses, variables...)
	metrics := map[string]bool{}
	for _, u := range uses {
		labels := map[string]bool{}
		for _, sel := range u.Selectors {
			metrics[sel.Metric] = true
			var series []map[string]string
			if !waitFor(5*time.Second, func() bool {
				series, err = prom.Series(sel.String())
				return err == nil && len(series) > 0
			}) {
				t.Errorf("no series %s was scraped (%v)", sel, err)
			}
			for _, s := range series {
				for l := range s {
					labels[l] = true
				}
			}
		}
		for _, l := range u.Labels {
			if !labels[l] {
				t.Errorf("label %q is on no series of %v", l, u.Selectors)
			}
		}
	}
	if len(metrics) < 25 {
		t.Errorf("only %d metrics named by the rules and the dashboard: %v", len(metrics), metrics)
	}
	if t.Failed() {
		t.FailNow()
	}

	quiet := func(name string) {
		t.Helper()
		alerts, err := prom.Alerts()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range alerts {
			if a.Labels["alertname"] == name {
				t.Fatalf("%s is %s before its condition: %+v", name, a.State, a)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A row with an empty aggregate id cannot be published: it is
	// dead-lettered, and its aggregate held.
	quiet("PgoutboxDeadLetters")
	e.Insert(testenv.NewRow("order", "", "Placed", `{}`))
	start := time.Now()
	a, err := prom.Firing(ctx, "PgoutboxDeadLetters", map[string]string{"job": "pgoutbox"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "1 events could not be published"; !strings.HasPrefix(a.Annotations["description"], want) {
		t.Errorf("PgoutboxDeadLetters says %q, want %q...", a.Annotations["description"], want)
	}
	t.Logf("PgoutboxDeadLetters firing %s after the poison row", time.Since(start).Round(100*time.Millisecond))
	// The runbook's confirmation: status counts it and the aggregate it holds.
	if st, ok := e.Status(t); ok || st.DeadLetters == nil || *st.DeadLetters != 1 || st.HeldAggregates == nil || *st.HeldAggregates != 1 {
		t.Errorf("status: exit ok %t, dead letters %v, held aggregates %v; want a problem, 1 and 1", ok, st.DeadLetters, st.HeldAggregates)
	}

	quiet("PgoutboxDown")
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("relay exit: %v", err)
	}
	start = time.Now()
	a, err = prom.Firing(ctx, "PgoutboxDown", map[string]string{"job": "pgoutbox", "instance": addr})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("The relay at %s does not answer", addr); !strings.HasPrefix(a.Annotations["description"], want) {
		t.Errorf("PgoutboxDown says %q, want %q...", a.Annotations["description"], want)
	}
	t.Logf("PgoutboxDown firing %s after the relay stopped", time.Since(start).Round(100*time.Millisecond))
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}
