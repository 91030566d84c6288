// Package promtest runs a real Prometheus (the prometheus binary from
// Debian's package) for tests: a temporary configuration and storage
// directory, a free port, short scrape and evaluation intervals, rule files
// loaded. It queries Prometheus's HTTP API, and reads the repository's
// rules and dashboard: the metric names and labels their expressions use
// (promql.go), and a copy of the rules with short "for" durations.
package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pgoutbox/pgoutbox/proc"
)

// Binary finds the prometheus binary, or fails the test saying how to
// install it: a test never skips for lack of a server it can start.
func Binary(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("promtest: %s not found (%v): install Debian's prometheus package (apt-get install prometheus)", name, err)
	}
	return path
}

// Options configure a Prometheus.
type Options struct {
	// Job is the scrape job's name; Targets are its host:port targets.
	Job     string
	Targets []string
	// Interval is the scrape and evaluation interval (default 1s).
	Interval time.Duration
	// RuleFiles are loaded as they are.
	RuleFiles []string
}

// Server is a running Prometheus.
type Server struct {
	// URL is its base URL, http://127.0.0.1:PORT.
	URL string
	t   testing.TB
	p   *proc.Process
}

// Start starts Prometheus and waits until it is ready. It is stopped when
// the test ends, and killed if the test binary dies first.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin := Binary(t, "prometheus")
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	dir := t.TempDir()
	cfg := config{
		Global:    global{ScrapeInterval: o.Interval.String(), EvaluationInterval: o.Interval.String(), ScrapeTimeout: o.Interval.String()},
		RuleFiles: o.RuleFiles,
		ScrapeConfigs: []scrapeConfig{{
			JobName:       o.Job,
			StaticConfigs: []staticConfig{{Targets: o.Targets}},
		}},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The port is free when chosen; should something take it before
	// Prometheus listens, it exits and the next attempt takes another.
	for attempt := 0; ; attempt++ {
		addr := freeAddr(t)
		p, err := proc.Start("prometheus", bin, []string{
			"--config.file=" + cfgPath,
			"--storage.tsdb.path=" + filepath.Join(dir, "data"),
			"--web.listen-address=" + addr,
			"--log.level=warn",
		}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{URL: "http://" + addr, t: t, p: p}
		if err := s.waitReady(30 * time.Second); err != nil {
			p.Kill()
			if attempt < 3 {
				continue
			}
			t.Fatalf("promtest: %v", err)
		}
		t.Cleanup(func() {
			if err := p.Stop(10 * time.Second); err != nil {
				t.Logf("promtest: %v", err)
			}
		})
		return s
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func (s *Server) waitReady(timeout time.Duration) error {
	if err := s.p.Await(timeout, 100*time.Millisecond, proc.HTTPOK(s.URL+"/-/ready")); err != nil {
		return fmt.Errorf("%w; output:\n%s", err, s.p.Output())
	}
	return nil
}

// Output is what Prometheus logged, its last 4 KiB.
func (s *Server) Output() string { return s.p.Output() }

type config struct {
	Global        global         `yaml:"global"`
	RuleFiles     []string       `yaml:"rule_files,omitempty"`
	ScrapeConfigs []scrapeConfig `yaml:"scrape_configs"`
}

type global struct {
	ScrapeInterval     string `yaml:"scrape_interval"`
	ScrapeTimeout      string `yaml:"scrape_timeout"`
	EvaluationInterval string `yaml:"evaluation_interval"`
}

type scrapeConfig struct {
	JobName       string         `yaml:"job_name"`
	StaticConfigs []staticConfig `yaml:"static_configs"`
}

type staticConfig struct {
	Targets []string `yaml:"targets"`
}

// get calls the HTTP API and decodes its data into out. An answer with
// status "error" (a query that does not parse, say) is an error.
func (s *Server) get(path string, params url.Values, out any) error {
	resp, err := http.Get(s.URL + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("%s: %s: %s", path, resp.Status, body)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s %s: %s", path, params.Encode(), r.Error)
	}
	return json.Unmarshal(r.Data, out)
}

// Series returns the label sets of the series that match the selector
// within the last hour.
func (s *Server) Series(match string) ([]map[string]string, error) {
	now := time.Now()
	var out []map[string]string
	err := s.get("/api/v1/series", url.Values{
		"match[]": {match},
		"start":   {strconv.FormatInt(now.Add(-time.Hour).Unix(), 10)},
		"end":     {strconv.FormatInt(now.Unix()+1, 10)},
	}, &out)
	return out, err
}

// Query evaluates an instant query now; it returns the result's type, to
// check that the expression is valid PromQL.
func (s *Server) Query(expr string) (string, error) {
	var out struct {
		ResultType string `json:"resultType"`
	}
	err := s.get("/api/v1/query", url.Values{"query": {expr}}, &out)
	return out.ResultType, err
}

// Target is a scrape target as Prometheus sees it.
type Target struct {
	ScrapeURL string `json:"scrapeUrl"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
}

// Targets returns the active targets.
func (s *Server) Targets() ([]Target, error) {
	var out struct {
		Active []Target `json:"activeTargets"`
	}
	err := s.get("/api/v1/targets", nil, &out)
	return out.Active, err
}

// Alert is an alert pending or firing.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
}

// Alerts returns the alerts pending or firing.
func (s *Server) Alerts() ([]Alert, error) {
	var out struct {
		Alerts []Alert `json:"alerts"`
	}
	err := s.get("/api/v1/alerts", nil, &out)
	return out.Alerts, err
}

// LoadedRule is a rule as Prometheus loaded it.
type LoadedRule struct {
	Name      string `json:"name"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
}

// Rules returns the rules Prometheus loaded, of every group.
func (s *Server) Rules() ([]LoadedRule, error) {
	var out struct {
		Groups []struct {
			Rules []LoadedRule `json:"rules"`
		} `json:"groups"`
	}
	if err := s.get("/api/v1/rules", nil, &out); err != nil {
		return nil, err
	}
	var rules []LoadedRule
	for _, g := range out.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules, nil
}

// Firing waits until an alert named name fires with these labels (a
// subset of its own), and returns it.
func (s *Server) Firing(ctx context.Context, name string, labels map[string]string) (Alert, error) {
	for {
		alerts, err := s.Alerts()
		if err == nil {
		alerts:
			for _, a := range alerts {
				if a.Labels["alertname"] != name || a.State != "firing" {
					continue
				}
				for k, v := range labels {
					if a.Labels[k] != v {
						continue alerts
					}
				}
				return a, nil
			}
		}
		select {
		case <-ctx.Done():
			return Alert{}, fmt.Errorf("alert %s%v not firing (%v); alerts: %+v", name, labels, ctx.Err(), alerts)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// RuleFile is a Prometheus rule file.
type RuleFile struct {
	Groups []RuleGroup `yaml:"groups"`
}

// RuleGroup is a group of rules.
type RuleGroup struct {
	Name  string `yaml:"name"`
	Rules []Rule `yaml:"rules"`
}

// Rule is an alerting or recording rule.
type Rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// ReadRules reads a rule file.
func ReadRules(path string) (RuleFile, error) {
	var f RuleFile
	b, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// ShortFor is the rule file src with every "for" duration set to d, all
// else as it is: the same rules, firing within seconds of their
// condition.
func ShortFor(src []byte, d time.Duration) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	n := 0
	var walk func(*yaml.Node)
	walk = func(node *yaml.Node) {
		if node.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(node.Content); i += 2 {
				if node.Content[i].Value == "for" {
					node.Content[i+1].Value = d.String()
					n++
				}
			}
		}
		for _, c := range node.Content {
			walk(c)
		}
	}
	walk(&doc)
	if n == 0 {
		return nil, fmt.Errorf("no rule has a for duration")
	}
	return yaml.Marshal(&doc)
}

// Substitute replaces Grafana's variables in a dashboard expression with
// what makes it plain PromQL over everything: a range variable by a range,
// any other variable (in a label matcher's regular expression) by ".*".
func Substitute(expr string) string {
	expr = strings.NewReplacer("$__rate_interval", "1m", "${__rate_interval}", "1m",
		"$__interval", "1m", "${__interval}", "1m", "$__range", "1h", "${__range}", "1h").Replace(expr)
	return grafanaVar.ReplaceAllString(expr, ".*")
}
