package rabbitmqcompat

import (
	"context"
	"fmt"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/corpusrun"
	"github.com/pgoutbox/pgoutbox/test/dbzserver"
	"github.com/pgoutbox/pgoutbox/test/rabbitmqtest"
)

// TestRabbitMQStreamCorpus runs each case of testdata/streams through
// Debezium Server's rabbitmqstream sink and through pgoutbox into one
// rabbitmq-server, over the stream protocol, and compares the streams'
// messages: message-id, application properties with their types,
// content-type and body, in order. Like TestRabbitMQCorpus it needs
// Debezium Server's distribution: make compat runs it, make test does
// not.
func TestRabbitMQStreamCorpus(t *testing.T) {
	corpus(t, "testdata/streams", rabbitmqtest.Options{Streams: true}, func(*rabbitmqtest.Server) {}, runStreams)
}

// runStreams runs one case: pgoutbox's slot first, then Debezium Server
// streaming, the rows, Debezium Server's messages read from the case's
// streams, which are then deleted; then pgoutbox from its slot into
// streams of the same names, and the comparison.
func runStreams(t *testing.T, c Case, s *rabbitmqtest.Server, pgo string) {
	ctx := context.Background()
	deleteStreams := func() {
		ch := s.Channel()
		defer ch.Close()
		for _, name := range c.Streams {
			_, _ = ch.QueueDelete(name, false, false, false)
		}
	}
	deleteStreams()
	t.Cleanup(deleteStreams)
	conn, props := caseDB(t, c, fmt.Sprintf("debezium.sink.rabbitmqstream.host=127.0.0.1\ndebezium.sink.rabbitmqstream.port=%d\n", s.StreamPort))
	pgoProps := corpusrun.FirstRun(t, conn, pgo, props("pgo"), "--dlq-topic", "pgo.dlq")

	dbz := dbzserver.Start(t, props("dbz"))
	corpusrun.AwaitSlot(t, conn, "dbz")
	for _, row := range c.Rows {
		if _, err := conn.Exec(ctx, row); err != nil {
			t.Fatalf("%s: %v", row, err)
		}
	}
	dbzMsgs := readStreams(t, s, c, dbz.Exited())
	dbz.Stop()
	deleteStreams()

	p := corpusrun.StartPgoutbox(t, pgo, pgoProps, "--dlq-topic", "pgo.dlq")
	pgoMsgs := readStreams(t, s, c, p.Exited())
	if os.Getenv("PGOUTBOX_TEST_OUTPUT") != "" || t.Failed() {
		for i, m := range dbzMsgs {
			t.Logf("Debezium Server %d: %q %s %s %v", i, m.MessageID, m.ContentType, m.Data, m.Properties)
		}
		for i, m := range pgoMsgs {
			t.Logf("pgoutbox %d: %q %s %s %v", i, m.MessageID, m.ContentType, m.Data, m.Properties)
		}
	}
	for _, d := range CompareStreams(dbzMsgs, pgoMsgs, c.Varies) {
		t.Error(d)
	}
}

// readStreams reads the case's messages from its streams, in the order
// the case lists them, or fails when the process that publishes them
// exits first.
func readStreams(t *testing.T, s *rabbitmqtest.Server, c Case, exited <-chan struct{}) []rabbitmqtest.StreamMessage {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var msgs []rabbitmqtest.StreamMessage
		for _, name := range c.Streams {
			msgs = append(msgs, s.ReadStream(name, 0, time.Second)...)
		}
		if len(msgs) >= c.Messages {
			time.Sleep(time.Second) // a message too many would show
			msgs = msgs[:0]
			for _, name := range c.Streams {
				msgs = append(msgs, s.ReadStream(name, 0, time.Second)...)
			}
			return msgs
		}
		select {
		case <-exited:
			t.Fatalf("the publisher exited after %d of %d messages", len(msgs), c.Messages)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages after 2 minutes", len(msgs), c.Messages)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// CompareStreams compares Debezium Server's stream messages with
// pgoutbox's, in order. It returns one line per difference.
func CompareStreams(dbz, pgo []rabbitmqtest.StreamMessage, varies []string) []string {
	var diffs []string
	if len(dbz) != len(pgo) {
		diffs = append(diffs, fmt.Sprintf("Debezium Server published %d messages, pgoutbox %d", len(dbz), len(pgo)))
	}
	for i := range min(len(dbz), len(pgo)) {
		d, p := dbz[i], pgo[i]
		for _, f := range []struct{ name, dbz, pgo string }{
			{"message-id", d.MessageID, p.MessageID},
			{"body", string(d.Data), string(p.Data)},
			{"content-type", d.ContentType, p.ContentType},
		} {
			if f.dbz != f.pgo {
				diffs = append(diffs, fmt.Sprintf("message %d: %s\n  %s\npgoutbox\n  %s", i, f.name, f.dbz, f.pgo))
			}
		}
		if dh, ph := typed(d.Properties, varies), typed(p.Properties, varies); !maps.Equal(dh, ph) {
			diffs = append(diffs, fmt.Sprintf("message %d: properties\n  %s\npgoutbox\n  %s", i, render(dh), render(ph)))
		}
	}
	return diffs
}
