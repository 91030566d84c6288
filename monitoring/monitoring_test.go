// Package monitoring holds no code: its tests check the alert rules and
// the dashboard beside them with promtool and Go.
package monitoring

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/pgoutbox/pgoutbox/test/promtest"
)

const runbookBase = "https://github.com/pgoutbox/pgoutbox/blob/main/docs/operations.md#"

func promtool(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(promtest.Binary(t, "promtool"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestRulesCheck(t *testing.T) {
	promtool(t, "check", "rules", "alerts.yml")
}

// Every alert has a test file of its own that checks it fires and that it
// stays quiet, and no test file names an alert that does not exist.
func TestAlertsUnitTests(t *testing.T) {
	rules, err := promtest.ReadRules("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
		}
	}
	files, err := filepath.Glob("tests/*.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".yml"); !slices.Contains(alerts, name) {
			t.Errorf("%s: no alert %s in alerts.yml", f, name)
		}
	}
	for _, alert := range alerts {
		path := filepath.Join("tests", alert+".yml")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("alert %s has no unit tests: %v", alert, err)
			continue
		}
		var tf struct {
			RuleFiles []string `yaml:"rule_files"`
			Tests     []struct {
				AlertRuleTest []struct {
					Alertname string `yaml:"alertname"`
					ExpAlerts []any  `yaml:"exp_alerts"`
				} `yaml:"alert_rule_test"`
			} `yaml:"tests"`
		}
		if err := yaml.Unmarshal(b, &tf); err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if !slices.Equal(tf.RuleFiles, []string{"../alerts.yml"}) {
			t.Errorf("%s: rule_files %v, want [../alerts.yml]", path, tf.RuleFiles)
		}
		var fires, quiet bool
		for _, tc := range tf.Tests {
			for _, a := range tc.AlertRuleTest {
				if a.Alertname != alert {
					t.Errorf("%s tests %s", path, a.Alertname)
				}
				fires = fires || len(a.ExpAlerts) > 0
				quiet = quiet || len(a.ExpAlerts) == 0
			}
		}
		if !fires || !quiet {
			t.Errorf("%s: checks that %s fires: %t, that it stays quiet: %t; want both", path, alert, fires, quiet)
		}
	}
	promtool(t, append([]string{"test", "rules"}, files...)...)
}

// Every alert says how bad it is, what it means, and where its runbook is.
func TestAlertsAnnotated(t *testing.T) {
	rules, err := promtest.ReadRules("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule that is not an alert: %+v", g.Name, r)
				continue
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			for _, a := range []string{"summary", "description"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s", r.Alert, a)
				}
			}
			if want := runbookBase + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
		}
	}
}

// The dashboard is Grafana JSON whose every query goes to the data source
// chosen in its variable.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string `json:"uid"`
		Title      string `json:"title"`
		Templating struct {
			List []struct {
				Type, Name string
			} `json:"list"`
		} `json:"templating"`
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q", d.UID, d.Title)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Type+":"+v.Name)
	}
	for _, want := range []string{"datasource:datasource", "query:job", "query:instance"} {
		if !slices.Contains(vars, want) {
			t.Errorf("variables %v: no %s", vars, want)
		}
	}
	queries := 0
	ids := map[int]bool{}
	var check func(ps []panel)
	check = func(ps []panel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel id %d twice", p.ID)
			}
			ids[p.ID] = true
			check(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Title == "" || p.Description == "" || len(p.Targets) == 0 {
				t.Errorf("panel %d %q: a title, a description and queries, please", p.ID, p.Title)
			}
			for _, tg := range append([]target{{Datasource: p.Datasource}}, p.Targets...) {
				if tg.Datasource.UID != "${datasource}" {
					t.Errorf("panel %q: data source %+v, want ${datasource}", p.Title, tg.Datasource)
				}
			}
			for _, tg := range p.Targets {
				if !strings.Contains(tg.Expr, `job=~"$job"`) || !strings.Contains(tg.Expr, `instance=~"$instance"`) {
					t.Errorf("panel %q: %s ignores the job or instance variable", p.Title, tg.Expr)
				}
				queries++
			}
		}
	}
	check(d.Panels)
	if queries < 20 {
		t.Errorf("only %d queries", queries)
	}
}

type panel struct {
	ID          int      `json:"id"`
	Type        string   `json:"type"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Datasource  source   `json:"datasource"`
	Targets     []target `json:"targets"`
	Panels      []panel  `json:"panels"`
}

type target struct {
	Datasource source `json:"datasource"`
	Expr       string `json:"expr"`
}

type source struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}
