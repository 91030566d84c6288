package pubsubcompat

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/corpusrun"
	"github.com/pgoutbox/pgoutbox/test/dbzserver"
	"github.com/pgoutbox/pgoutbox/test/pubsubtest"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

func TestMain(m *testing.M) { pgcluster.Main(m) }

// The cases: the table, Debezium Server's properties without the
// database, the slot, the project, the emulator's address and the
// router's topic (each side's topics are SIDE.outbox.event.$1, the routed
// value), the rows, how many messages each topic gets, by the routed
// value, and whether the properties turn ordering off (then the topics
// keep no order at all).
var cases = []struct {
	name, table, server string
	rows                []string
	topics              map[string]int
	unordered           bool
}{
	// Debezium's documented outbox table at the defaults (ordering on):
	// key and value JSON envelopes of schema and payload, the key's the
	// ordering key; a NULL payload is an envelope whose payload is null.
	{"doc-table-defaults", `CREATE TABLE public.outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`,
		`debezium.sink.type=pubsub
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.plugin.name=pgoutput
debezium.source.topic.prefix=corpus
debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
`, []string{
			`INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderCreated', '{"a": [1, 2], "note": "caf\u00e9"}')`,
			`BEGIN; INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Payment', 'p-1', 'PaymentStarted', NULL); INSERT INTO public.outbox VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', 'OrderCreated', '{"total": 12.50}'); COMMIT`,
		}, map[string]int{"Order": 2, "Payment": 1}, false},
	// Keys as text (simplestring), values as JSON without schemas, an
	// empty payload as a tombstone (no data, the headers kept as
	// attributes: Debezium Server publishes it), a NULL key as the
	// configured null.key, ordering on as set.
	{"string-key-tombstone-null-key", `CREATE TABLE public.outbox_event (id uuid PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text, event_type text NOT NULL, payload jsonb)`,
		`debezium.sink.type=pubsub
debezium.sink.pubsub.ordering.enabled=true
debezium.sink.pubsub.null.key=no-key
debezium.format.key=simplestring
debezium.format.value=json
debezium.format.value.schemas.enable=false
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.plugin.name=pgoutput
debezium.source.topic.prefix=corpus
debezium.source.table.include.list=public.outbox_event
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.transforms.outbox.route.by.field=aggregate_type
debezium.transforms.outbox.table.field.event.key=aggregate_id
debezium.transforms.outbox.route.tombstone.on.empty.payload=true
`, []string{
			`INSERT INTO public.outbox_event VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'order', 'o-1', 'OrderPlaced', '{"total": 12.5}')`,
			`INSERT INTO public.outbox_event VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'order', 'o-1', 'OrderDeleted', NULL)`,
			`BEGIN; INSERT INTO public.outbox_event VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'order', NULL, 'OrderAudited', '{"by": "caf\u00e9"}'); INSERT INTO public.outbox_event VALUES ('706c07f3-26f0-4eea-a50c-109940064b8f', 'payment', 'café-7', 'PaymentCaptured', '{"amount": 12.5}'); COMMIT`,
			`INSERT INTO public.outbox_event VALUES ('806c07f3-26f0-4eea-a50c-109940064b8f', 'payment', 'p-8', 'PaymentCaptured', '{"amount": 1}')`,
		}, map[string]int{"order": 3, "payment": 2}, false},
	// Ordering off (no ordering key), values as bytes (jsonbytearray:
	// the envelope of schema and payload as it is), no context headers
	// but the event type as one.
	{"unordered-bytes-header", `CREATE TABLE public.outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`,
		`debezium.sink.type=pubsub
debezium.sink.pubsub.ordering.enabled=false
debezium.format.value=jsonbytearray
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.plugin.name=pgoutput
debezium.source.topic.prefix=corpus
debezium.source.table.include.list=public.outbox
debezium.source.extended.headers.enabled=false
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.transforms.outbox.table.fields.additional.placement=type:header:eventType
`, []string{
			`INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderCreated', '{"a": [1, 2], "note": "caf\u00e9"}')`,
			`BEGIN; INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', 'OrderCreated', '{"b": true}'); INSERT INTO public.outbox VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Payment', 'p-1', 'PaymentStarted', NULL); INSERT INTO public.outbox VALUES ('706c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderPaid', '{"paid": 12.50}'); COMMIT`,
			`INSERT INTO public.outbox VALUES ('806c07f3-26f0-4eea-a50c-109940064b8f', 'Payment', 'p-1', 'PaymentCaptured', '{}')`,
		}, map[string]int{"Order": 3, "Payment": 2}, true},
}

// TestPubSubCorpus runs each case through Debezium Server and through
// pgoutbox, each into its own topics in the case's Pub/Sub emulator, and
// compares the topics. It needs Debezium Server's distribution (installed
// on first use by .ci/install-debezium-server) and the emulator (Debian's
// google-cloud-cli-pubsub-emulator): make compat runs it, make test does
// not.
func TestPubSubCorpus(t *testing.T) {
	pgo := testbin.Build(t, "github.com/pgoutbox/pgoutbox/cmd/pgoutbox")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := pubsubtest.Start(t)
			db := pgcluster.New(t)
			conn, err := pgx.Connect(ctx, db.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, c.table); err != nil {
				t.Fatal(err)
			}
			routed := slices.Sorted(maps.Keys(c.topics))
			topic := func(side, r string) string { return side + ".outbox.event." + r }
			// Both sides publish only to topics that exist, and a
			// subscription gets only what is published after it.
			for _, side := range []string{"dbz", "pgo"} {
				for _, r := range routed {
					s.CreateTopic(t, topic(side, r))
				}
			}
			u, _ := url.Parse(db.URL)
			// $1, not ${routedByValue}: Debezium Server expands ${...}
			// in its file itself, and fails to start on this one.
			props := func(slot string) string {
				return c.server + fmt.Sprintf(`debezium.sink.pubsub.project.id=%s
debezium.sink.pubsub.address=%s
debezium.transforms.outbox.route.topic.replacement=%s.outbox.event.$1
debezium.source.database.hostname=%s
debezium.source.database.port=%s
debezium.source.database.user=%s
debezium.source.database.dbname=%s
debezium.source.slot.name=%s
debezium.source.publication.name=%s_publication
`, pubsubtest.Project, s.Address(), slot, u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/"), slot, slot)
			}
			pgoProps := corpusrun.FirstRun(t, conn, pgo, props("pgo"))
			dbz := dbzserver.Start(t, props("dbz"))
			corpusrun.AwaitSlot(t, conn, "dbz")
			for _, row := range c.rows {
				if _, err := conn.Exec(ctx, row); err != nil {
					t.Fatal(err)
				}
			}
			dbzMsgs := map[string][]pubsubtest.Message{}
			for _, r := range routed {
				dbzMsgs[r] = s.Pull(t, topic("dbz", r), c.topics[r], 2*time.Minute, dbz.Exited())
				logMessages(t, topic("dbz", r), dbzMsgs[r])
			}
			dbz.Stop()
			p := corpusrun.StartPgoutbox(t, pgo, pgoProps)
			for _, r := range routed {
				// Pull waits a second past the count: a copy sent
				// after it would show.
				pgoMsgs := s.Pull(t, topic("pgo", r), c.topics[r], 2*time.Minute, p.Exited())
				logMessages(t, topic("pgo", r), pgoMsgs)
				name := "*.outbox.event." + r
				if order(dbzMsgs[r]) != order(pgoMsgs) {
					t.Logf("topic %s: pulled in the order %s, pgoutbox's %s", name, order(dbzMsgs[r]), order(pgoMsgs))
				}
				for _, d := range compare(dbzMsgs[r], pgoMsgs, !c.unordered) {
					t.Errorf("topic %s: %s", name, d)
				}
			}
		})
	}
}

// logMessages shows a topic's messages in a -v run, in the order pulled.
func logMessages(t *testing.T, topic string, msgs []pubsubtest.Message) {
	t.Helper()
	var b strings.Builder
	for i, m := range msgs {
		fmt.Fprintf(&b, "\n  %d ordering-key=%q attributes=%q data(%d)=%q", i, m.OrderingKey, m.Attributes, len(m.Data), m.Data)
	}
	t.Logf("%s: %d messages%s", topic, len(msgs), b.String())
}

// attributes are a message's attributes with Debezium's run id, which
// differs from run to run, as "(varies)".
func attributes(m pubsubtest.Message) map[string]string {
	out := make(map[string]string, len(m.Attributes))
	for k, v := range m.Attributes {
		if strings.Contains(strings.ToLower(k), "runid") {
			v = "(varies)"
		}
		out[k] = v
	}
	return out
}

// order is the messages' ordering keys and data in the order pulled, for
// a log line.
func order(msgs []pubsubtest.Message) string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = strconv.Quote(m.OrderingKey) + ":" + strconv.Quote(string(m.Data))
	}
	return "[" + strings.Join(out, " ") + "]"
}

// compare compares Debezium Server's messages of a topic with pgoutbox's:
// ordering key, attributes and data. Pub/Sub keeps each ordering key's
// order and no other: ordered, the messages compare in each key's order,
// the keys sorted; unordered, sorted by data and attributes.
func compare(dbz, pgo []pubsubtest.Message, ordered bool) []string {
	var diffs []string
	if len(dbz) != len(pgo) {
		diffs = append(diffs, fmt.Sprintf("Debezium Server sent %d messages, pgoutbox %d", len(dbz), len(pgo)))
	}
	by := func(a, b pubsubtest.Message) int { return strings.Compare(a.OrderingKey, b.OrderingKey) }
	if !ordered {
		by = func(a, b pubsubtest.Message) int {
			if c := strings.Compare(string(a.Data), string(b.Data)); c != 0 {
				return c
			}
			// fmt prints a map's entries sorted by key.
			return strings.Compare(fmt.Sprintf("%q", attributes(a)), fmt.Sprintf("%q", attributes(b)))
		}
	}
	// Stable: each key's messages stay in their order.
	dbz, pgo = slices.SortedStableFunc(slices.Values(dbz), by), slices.SortedStableFunc(slices.Values(pgo), by)
	for i := range min(len(dbz), len(pgo)) {
		d, p := dbz[i], pgo[i]
		if d.OrderingKey != p.OrderingKey {
			diffs = append(diffs, fmt.Sprintf("message %d: ordering key %q, pgoutbox's %q", i, d.OrderingKey, p.OrderingKey))
		}
		if da, pa := attributes(d), attributes(p); !maps.Equal(da, pa) {
			diffs = append(diffs, fmt.Sprintf("message %d: attributes\n  %q\npgoutbox\n  %q", i, da, pa))
		}
		if string(d.Data) != string(p.Data) {
			diffs = append(diffs, fmt.Sprintf("message %d: data\n  %q\npgoutbox\n  %q", i, d.Data, p.Data))
		}
	}
	return diffs
}
