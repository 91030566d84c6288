package sqscompat

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/corpusrun"
	"github.com/pgoutbox/pgoutbox/test/dbzserver"
	"github.com/pgoutbox/pgoutbox/test/mototest"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

func TestMain(m *testing.M) { pgcluster.Main(m) }

// contentDedup is the FIFO queues' attributes: Debezium Server sends no
// deduplication id, and SQS takes a FIFO message without one only from a
// queue deduplicating by content.
var contentDedup = map[string]string{"ContentBasedDeduplication": "true"}

// The cases: the table, Debezium Server's properties without the
// database, the slot and the sink's region, endpoint and queue URL, the
// queue (each side's is SIDE-QUEUE: a name ending in .fifo makes a FIFO
// queue) and its attributes, the rows, and how many messages the queue
// gets. Every record goes to the one queue, whatever its routed topic.
var cases = []struct {
	name, table, server string
	queue               string
	attrs               map[string]string
	rows                []string
	messages            int
}{
	// Debezium's documented outbox table at the defaults, to a standard
	// queue: each body a JSON envelope of schema and payload, a NULL
	// payload's an envelope whose payload is null (not an empty body). A
	// standard queue keeps no order: the bodies compare as a multiset.
	{"doc-table-defaults", `CREATE TABLE public.outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`,
		`debezium.sink.type=sqs
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.plugin.name=pgoutput
debezium.source.topic.prefix=corpus
debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
`, "doc-table", nil, []string{
			`INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderCreated', '{"a": [1, 2], "note": "caf\u00e9"}')`,
			`BEGIN; INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Payment', 'p-1', 'PaymentStarted', NULL); INSERT INTO public.outbox VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', 'OrderCreated', '{"total": 12.50}'); COMMIT`,
		}, 3},
	// A FIFO queue and a configured message group: values as JSON
	// without schemas, rows of two aggregates, in order in the one group.
	// The payloads differ: the queue would drop a body seen in the last
	// five minutes from Debezium Server, which sends no deduplication id.
	{"fifo-group-no-schemas", `CREATE TABLE public.outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`,
		`debezium.sink.type=sqs
debezium.sink.sqs.fifo.message.group.id=orders-and-payments
debezium.format.value.schemas.enable=false
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.plugin.name=pgoutput
debezium.source.topic.prefix=corpus
debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
`, "fifo-group.fifo", contentDedup, []string{
			`INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderCreated', '{"total": 12.5, "note": "caf\u00e9"}')`,
			`BEGIN; INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Payment', 'p-1', 'PaymentStarted', '{"order": "o-1"}'); INSERT INTO public.outbox VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderPaid', '{"total": 12.5, "paid": true}'); COMMIT`,
			`INSERT INTO public.outbox VALUES ('706c07f3-26f0-4eea-a50c-109940064b8f', 'Payment', 'p-1', 'PaymentCaptured', '{"order": "o-1", "n": [1.50, 2]}')`,
			`INSERT INTO public.outbox VALUES ('806c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', 'OrderCreated', '{}')`,
		}, 5},
	// Values as text (simplestring: a text payload as it is, JSON or
	// not) on a FIFO queue at the default group (cdc-group), in order.
	{"fifo-simplestring", `CREATE TABLE public.outbox_event (id uuid PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL, payload text)`,
		`debezium.sink.type=sqs
debezium.format.value=simplestring
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.plugin.name=pgoutput
debezium.source.topic.prefix=corpus
debezium.source.table.include.list=public.outbox_event
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.transforms.outbox.route.by.field=aggregate_type
debezium.transforms.outbox.table.field.event.key=aggregate_id
`, "simplestring.fifo", contentDedup, []string{
			`INSERT INTO public.outbox_event VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'order', 'o-1', 'OrderPlaced', '{"total": 12.5}')`,
			`BEGIN; INSERT INTO public.outbox_event VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'order', 'o-1', 'OrderNoted', 'plain text, café'); INSERT INTO public.outbox_event VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'payment', 'p-7', 'PaymentCaptured', '  {"amount":1}  '); COMMIT`,
			`INSERT INTO public.outbox_event VALUES ('706c07f3-26f0-4eea-a50c-109940064b8f', 'order', 'o-2', 'OrderPlaced', 'line one
line two')`,
		}, 4},
}

// TestSQSCorpus runs each case through Debezium Server and through
// pgoutbox, each into its own queue in the case's moto server, and
// compares the queues. It needs Debezium Server's distribution (installed
// on first use by .ci/install-debezium-server) and moto (make moto): make
// compat runs it, make test does not.
func TestSQSCorpus(t *testing.T) {
	// Both sides find their credentials in the environment, as on AWS.
	t.Setenv("AWS_ACCESS_KEY_ID", mototest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", mototest.SecretKey)
	t.Setenv("AWS_REGION", mototest.Region)
	pgo := testbin.Build(t, "github.com/pgoutbox/pgoutbox/cmd/pgoutbox")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			moto := mototest.Start(t)
			db := pgcluster.New(t)
			conn, err := pgx.Connect(ctx, db.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, c.table); err != nil {
				t.Fatal(err)
			}
			dbzQueue := moto.CreateQueue(t, "dbz-"+c.queue, c.attrs)
			pgoQueue := moto.CreateQueue(t, "pgo-"+c.queue, c.attrs)
			u, _ := url.Parse(db.URL)
			props := func(slot, queue string) string {
				return c.server + fmt.Sprintf(`debezium.sink.sqs.region=%s
debezium.sink.sqs.endpoint=%s
debezium.sink.sqs.queue.url=%s
debezium.source.database.hostname=%s
debezium.source.database.port=%s
debezium.source.database.user=%s
debezium.source.database.dbname=%s
debezium.source.slot.name=%s
debezium.source.publication.name=%s_publication
`, mototest.Region, moto.Endpoint(), queue, u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/"), slot, slot)
			}
			pgoProps := corpusrun.FirstRun(t, conn, pgo, props("pgo", pgoQueue))
			dbz := dbzserver.Start(t, props("dbz", dbzQueue))
			corpusrun.AwaitSlot(t, conn, "dbz")
			for _, row := range c.rows {
				if _, err := conn.Exec(ctx, row); err != nil {
					t.Fatal(err)
				}
			}
			dbzMsgs := moto.ReceiveAll(t, dbzQueue, c.messages, 2*time.Minute, dbz.Exited())
			mototest.LogMessages(t, dbzQueue, dbzMsgs)
			dbz.Stop()
			p := corpusrun.StartPgoutbox(t, pgo, pgoProps)
			pgoMsgs := moto.ReceiveAll(t, pgoQueue, c.messages, 2*time.Minute, p.Exited())
			mototest.LogMessages(t, pgoQueue, pgoMsgs)
			fifo := strings.HasSuffix(c.queue, ".fifo")
			if !fifo && !slices.Equal(mototest.Bodies(dbzMsgs), mototest.Bodies(pgoMsgs)) {
				t.Logf("queue %s: the bodies came in another order than Debezium Server's", c.queue)
			}
			for _, d := range mototest.Compare(dbzMsgs, pgoMsgs, fifo) {
				t.Errorf("queue %s: %s", c.queue, d)
			}
		})
	}
}
