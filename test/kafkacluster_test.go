package test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// With two brokers of three down, the one left refuses every write for
// want of in-sync replicas (NOT_ENOUGH_REPLICAS), which franz-go retries
// without a word: the relay says why its records wait, in its log, on
// /readyz and in status, naming the topic, the partition and
// min.insync.replicas. Once a broker returns, it says Kafka takes writes
// again and every event is delivered.
func TestKafkaClusterWritesRefusedReported(t *testing.T) {
	c := kafkatest.StartCluster(t, kafkatest.ClusterOptions{})
	e := testenv.New(t)
	e.Brokers = c.Brokers
	const topic = "outbox.event.order"
	var ids []string
	for i := range 5 { // the user's rows, there before the relay starts
		ids = append(ids, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i%3), "Placed", fmt.Sprintf(`{"i":%d}`, i)))...)
	}
	addr := testenv.FreeAddr(t)
	out := testenv.StartBinary(t, "run", "--database-url", e.URL, "--kafka-brokers", strings.Join(c.Brokers, ","),
		"--metrics-addr", addr, "--status-interval", "100ms", "--heartbeat-interval", "200ms", "--log-format", "json").Out
	testenv.AwaitIDs(t, c.Brokers, topic, ids, 60*time.Second)

	for _, id := range []int32{2, 3} {
		if err := c.Kill(id); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		ids = append(ids, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i%3), "Shipped", fmt.Sprintf(`{"i":%d}`, i)))...)
	}
	const why = "replicas in sync, fewer than its min.insync.replicas 2"
	testenv.Eventually(t, 60*time.Second, "a log line saying why records wait", func() bool {
		return len(out.Lines("kafka does not take writes; records wait for it", topic, why, "NOT_ENOUGH_REPLICAS")) > 0
	})
	testenv.Eventually(t, 30*time.Second, "/readyz not ready, saying why", func() bool {
		code, body := testenv.HTTPGet("http://" + addr + "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "records wait: topic "+topic) && strings.Contains(body, why)
	})
	testenv.Eventually(t, 30*time.Second, "status saying why", func() bool {
		st, ok := e.Status(t)
		return !ok && strings.Contains(st.KafkaProblem, why)
	})
	t.Logf("%s", out.Lines("kafka does not take writes")[0])

	if err := c.Start(2); err != nil {
		t.Fatal(err)
	}
	testenv.AwaitIDs(t, c.Brokers, topic, ids, 60*time.Second)
	testenv.Eventually(t, 30*time.Second, "a log line saying Kafka takes writes again", func() bool {
		return len(out.Lines("kafka takes writes again")) > 0
	})
	testenv.Eventually(t, 30*time.Second, "/readyz ready again", func() bool {
		code, _ := testenv.HTTPGet("http://" + addr + "/readyz")
		return code == http.StatusOK
	})
}
