package test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// One file of pgoutbox's own settings, run's included, serves migrate,
// slot create, status, dlq and run; a setting no command has is still
// refused.
func TestOneConfigEveryCommand(t *testing.T) {
	e := testenv.NewBare(t, "")
	conf := testenv.WriteFile(t, "pgoutbox.conf", `# run's settings, and every command's
database-url = `+e.URL+`
kafka-brokers = `+strings.Join(e.Brokers, ",")+`
table = public.outbox
slot = one_file
publication = one_file
format = debezium-outbox
key-converter = string
mode = wal
status-interval = 100ms
heartbeat-interval = 200ms
log-format = json
`)
	for _, cmd := range [][]string{{"migrate"}, {"slot", "create"}, {"status"}, {"dlq", "list"}} {
		if out, ok := testenv.CLIOutput(t, append(cmd, "--config", conf)...); !ok {
			t.Fatalf("%v --config failed:\n%s", cmd, out)
		}
	}
	p := testenv.StartBinary(t, "run", "--config", conf)
	e.AwaitSlotActive(t, "one_file")
	if _, err := e.Conn.Exec(context.Background(), `INSERT INTO public.outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'o-1', 'Created', '{"a": 1}')`); err != nil {
		t.Fatal(err)
	}
	if r := kafkatest.Consume(t, e.Brokers, []string{"outbox.event.order"}, 1, 30*time.Second)[0]; string(r.Key) != "o-1" || string(r.Value) != `"{\"a\": 1}"` {
		t.Errorf("record key %q value %s", r.Key, r.Value)
	}
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("run: %v\n%s", err, p.Out)
	}
	typo := testenv.WriteFile(t, "typo.conf", "database-url = "+e.URL+"\nkafka-broker = x:1\n")
	if out, ok := testenv.CLIOutput(t, "migrate", "--config", typo); ok || !strings.Contains(out, `unknown setting "kafka-broker"`) {
		t.Errorf("a setting no command has: exit 0 %v\n%s", ok, out)
	}
}
