package testenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Status is what pgoutbox status --json prints, the part the tests read.
type Status struct {
	Mode         string `json:"mode"`
	ModeReason   string `json:"mode_reason"`
	ReasonCode   string `json:"mode_reason_code"`
	ConfirmedLSN string `json:"confirmed_lsn"`
	Slot         *struct {
		LagBytes      int64 `json:"lag_bytes"`
		RetainedBytes int64 `json:"retained_wal_bytes"`
	} `json:"slot"`
	Unpublished int64      `json:"unpublished_rows"`
	Oldest      *float64   `json:"oldest_unpublished_seconds"`
	LastPublish *time.Time `json:"last_publish_at"`
	Alive       *time.Time `json:"alive_at"`
	// KafkaProblem is what the relay last saved about the broker it
	// publishes to, Broker its name.
	KafkaProblem string      `json:"kafka_problem"`
	Broker       string      `json:"broker"`
	KafkaKnown   bool        `json:"kafka_known"`
	LostDeleted  *LostStatus `json:"lost_deleted"`
	// DeadLetters are the open ones, HeldAggregates their aggregates.
	DeadLetters    *int64   `json:"dead_letters"`
	HeldAggregates *int64   `json:"held_aggregates"`
	Problems       []string `json:"problems"`
	Cluster        *int64   `json:"system_identifier"`
	// ClusterChange is set once a relay saw the state move to a new cluster.
	ClusterChange *struct {
		At       time.Time `json:"at"`
		Previous *int64    `json:"previous_system_identifier"`
		What     string    `json:"what"`
	} `json:"cluster_change"`
}

// Status runs pgoutbox status --json against e's database, with extra
// flags, and returns what it printed and whether it exited 0 (no problem
// over its limits). Output that is not JSON fails the test.
func (e *Env) Status(t *testing.T, extra ...string) (Status, bool) {
	t.Helper()
	cmd := exec.Command(Bin(t), append([]string{"status", "--json", "--database-url", e.URL}, extra...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("status: %v", err)
	}
	var st Status
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status output is not JSON: %v\n%s\n%s", err, out, stderr.String())
	}
	return st, err == nil
}

// LostStatus is what status --json says about rows deleted before polling
// published them.
type LostStatus struct {
	Rows    int64 `json:"rows"`
	FromSeq int64 `json:"from_seq"`
	ToSeq   int64 `json:"to_seq"`
}

// LostStatusOf runs status and returns its lost-row section, its problems,
// and whether it exited 0.
func LostStatusOf(t *testing.T, e *Env) (*LostStatus, []string, bool) {
	t.Helper()
	st, ok := e.Status(t)
	return st.LostDeleted, st.Problems, ok
}

// LostNow waits for status to report at least want rows lost, then a
// moment longer, and returns what it reports.
func LostNow(t *testing.T, e *Env, want int64, extra ...string) int64 {
	t.Helper()
	var lost *LostStatus
	Eventually(t, 60*time.Second, fmt.Sprintf("status reporting %d rows lost", want), func() bool {
		st, _ := e.Status(t, extra...)
		lost = st.LostDeleted
		return lost != nil && lost.Rows >= want
	})
	time.Sleep(1500 * time.Millisecond) // a report in steps would show by now
	st, _ := e.Status(t, extra...)
	return st.LostDeleted.Rows
}

// Scrape reads the metrics endpoint and returns each sample line's value by
// its name and labels as exposed, e.g. `pgoutbox_mode{mode="wal"}`.
func Scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s: %s", resp.Status, body)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scrape: bad line %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

// HTTPStatus is the status code of a GET of url, 0 when it got no answer.
func HTTPStatus(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// HTTPGet is the status code and body of a GET of url; without an answer,
// 0 and the error.
func HTTPGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// FreeAddr returns a loopback address with a port free a moment ago, for a
// server the test starts (the relay's --metrics-addr, say).
func FreeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
