package testenv

import (
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

// DeadLetter is what a record of the dead-letter topic says.
type DeadLetter struct {
	EventID string `json:"event_id"`
	Reason  string `json:"reason"`
}

// AwaitDeadLetters reads n dead letters from the dead-letter topic, failing
// the test if they do not arrive within timeout.
func AwaitDeadLetters(t *testing.T, brokers []string, topic string, n int, timeout time.Duration) []DeadLetter {
	t.Helper()
	var out []DeadLetter
	for _, rec := range kafkatest.Consume(t, brokers, []string{topic}, n, timeout) {
		var d DeadLetter
		if err := json.Unmarshal(rec.Value, &d); err != nil {
			t.Fatalf("dead letter is not JSON: %s", rec.Value)
		}
		out = append(out, d)
	}
	return out
}

// DeadLetterRows returns event id -> how many rows the dead-letter table
// holds for it, and their reasons.
func DeadLetterRows(t *testing.T, e *Env) (map[string]int, map[string]string) {
	t.Helper()
	rows, err := e.Conn.Query(context.Background(), "SELECT event_id, reason FROM pgoutbox_dead_letter ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n, reasons := map[string]int{}, map[string]string{}
	for rows.Next() {
		var id, reason string
		if err := rows.Scan(&id, &reason); err != nil {
			t.Fatal(err)
		}
		n[id]++
		reasons[id] = reason
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n, reasons
}

// ReplayDeadLetters runs pgoutbox dlq replay against e's database and
// broker, topics not created, with extra flags (run's, say), and returns
// how many dead letters it published; a failed replay fails the test.
func ReplayDeadLetters(t *testing.T, e *Env, extra ...string) int {
	t.Helper()
	out, err := exec.Command(Bin(t), append([]string{"dlq", "replay", "--database-url", e.URL,
		"--kafka-brokers", strings.Join(e.Brokers, ","), "--kafka-create-topics=false"}, extra...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("dlq replay: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(\d+) dead letters published`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("dlq replay said:\n%s", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
