package snscompat

import (
	"context"
	"fmt"
	"maps"
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

// contentDedup is the FIFO topics' attributes: Debezium Server sends a
// deduplication id only from a header, and SNS takes a FIFO message
// without one only on a topic deduplicating by content.
var contentDedup = map[string]string{"ContentBasedDeduplication": "true"}

// runID is the context header each run of a connector has its own
// value of.
const runID = "__debezium.context.runId"

// docTable is Debezium's documented outbox table.
const docTable = `CREATE TABLE public.outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`

// source is the connector's part of every case, without the database.
const source = `debezium.sink.type=sns
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.plugin.name=pgoutput
debezium.source.topic.prefix=corpus
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
`

// The cases: the table, Debezium Server's properties without the
// database, the slot and the sink's region and endpoint, where ARN- is
// each side's ARN prefix (arn:aws:sns:<region>:<account>:dbz- or pgo-),
// the topics each side's messages go to (a name ending in .fifo makes a
// FIFO topic) with how many each gets, the rows, and whether the
// deduplication ids must be equal (only when Debezium Server sends them).
var cases = []struct {
	name, table, server string
	topics              map[string]int
	rows                []string
	sameDedup           bool
}{
	// Debezium's documented outbox table at the defaults (values as JSON
	// with schemas), to a standard topic (topic.arn): each message the
	// payload's text as it is, not the converter's envelope, the id and
	// Debezium's context headers its attributes. A standard topic keeps
	// no order: the messages compare as a multiset.
	{"doc-table-defaults", docTable, source + `debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
debezium.sink.sns.topic.arn=ARN-events
`, map[string]int{"events": 3}, []string{
		`INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderCreated', '{"a": [1, 2], "note": "caf\u00e9"}')`,
		`BEGIN; INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Payment', 'p-1', 'PaymentStarted', '{"order": "o-1"}'); INSERT INTO public.outbox VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', 'OrderCreated', '{"total": 12.50}'); COMMIT`,
	}, false},
	// Values through Debezium's CloudEventsConverter after the router:
	// the sink sends the router's value, the payload's text, which the
	// converter never sees.
	{"cloudevents-router", docTable, source + `debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
debezium.format.value=cloudevents
debezium.sink.sns.topic.arn=ARN-ce
`, map[string]int{"ce": 2}, []string{
		`BEGIN; INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderCreated', '{"a": 1}'); INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', 'OrderCreated', '"text"'); COMMIT`,
	}, false},
	// FIFO topics by prefix (topic.arn.prefix), the router's topics
	// renamed by a RegexRouter to the aggregate type (an SNS topic's name
	// has no periods): each aggregate's messages in its group (the key),
	// in order, a header placement among the attributes.
	{"fifo-prefix-routed", docTable, source + `debezium.source.table.include.list=public.outbox
debezium.transforms=outbox,route
debezium.transforms.outbox.table.fields.additional.placement=type:header:eventType
debezium.transforms.route.type=org.apache.kafka.connect.transforms.RegexRouter
debezium.transforms.route.regex=outbox\\.event\\.(.*)
debezium.transforms.route.replacement=$1.fifo
debezium.sink.sns.topic.arn.prefix=ARN-
`, map[string]int{"Order.fifo": 4, "Payment.fifo": 2}, []string{
		`INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderCreated', '{"total": 12.5, "note": "caf\u00e9"}')`,
		`BEGIN; INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Payment', 'p-1', 'PaymentStarted', '{"order": "o-1"}'); INSERT INTO public.outbox VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderPaid', '{"total": 12.5, "paid": true}'); COMMIT`,
		`INSERT INTO public.outbox VALUES ('706c07f3-26f0-4eea-a50c-109940064b8f', 'Payment', 'p-1', 'PaymentCaptured', '{"order": "o-1", "n": [1.50, 2]}')`,
		`BEGIN; INSERT INTO public.outbox VALUES ('806c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', 'OrderCreated', '{}'); INSERT INTO public.outbox VALUES ('906c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderShipped', '{"n": 3}'); COMMIT`,
	}, false},
	// The group from a header (fifo.message.group.id.header, a tenant
	// column placed as a header), the deduplication id from the id header
	// (fifo.message.dedup.id.header), and an expanded JSON payload, which
	// is a struct, not text: written through the value converter (JSON
	// without schemas).
	{"fifo-headers-expanded", `CREATE TABLE public.outbox_event (id uuid PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL, tenant text NOT NULL, payload jsonb)`,
		source + `debezium.source.table.include.list=public.outbox_event
debezium.transforms=outbox
debezium.transforms.outbox.route.by.field=aggregate_type
debezium.transforms.outbox.table.field.event.key=aggregate_id
debezium.transforms.outbox.table.fields.additional.placement=tenant:header:tenant
debezium.transforms.outbox.table.expand.json.payload=true
debezium.format.value.schemas.enable=false
debezium.sink.sns.topic.arn=ARN-tenants.fifo
debezium.sink.sns.fifo.message.group.id.header=tenant
debezium.sink.sns.fifo.message.dedup.id.header=id
`, map[string]int{"tenants.fifo": 4}, []string{
			`INSERT INTO public.outbox_event VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'order', 'o-1', 'OrderPlaced', 'acme', '{"total": 12.5, "items": [{"sku": "a", "qty": 2}]}')`,
			`BEGIN; INSERT INTO public.outbox_event VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'order', 'o-2', 'OrderPlaced', 'globex', '{"total": 3}'); INSERT INTO public.outbox_event VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'payment', 'p-7', 'PaymentCaptured', 'acme', '{"amount": 1, "note": "caf\u00e9"}'); COMMIT`,
			`INSERT INTO public.outbox_event VALUES ('706c07f3-26f0-4eea-a50c-109940064b8f', 'order', 'o-1', 'OrderShipped', 'acme', '{"carrier": "x", "at": null}')`,
		}, true},
}

// TestSNSCorpus runs each case through Debezium Server and through
// pgoutbox, each into topics of its own in the case's moto server, read
// from queues subscribed with raw delivery, and compares each topic's
// messages. It needs Debezium Server's distribution (installed on first
// use by .ci/install-debezium-server) and moto (make moto): make compat
// runs it, make test does not.
func TestSNSCorpus(t *testing.T) {
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
			topics := slices.Sorted(maps.Keys(c.topics))
			queues := map[string]string{} // by side and topic
			var arnPrefix string
			for _, side := range []string{"dbz", "pgo"} {
				for _, topic := range topics {
					attrs := map[string]string(nil)
					if strings.HasSuffix(topic, ".fifo") {
						attrs = contentDedup
					}
					arn, q := moto.CreateTopic(t, side+"-"+topic, attrs)
					queues[side+"-"+topic] = q
					arnPrefix = strings.TrimSuffix(arn, side+"-"+topic)
				}
			}
			u, _ := url.Parse(db.URL)
			props := func(side string) string {
				return strings.ReplaceAll(c.server, "ARN-", arnPrefix+side+"-") + fmt.Sprintf(`debezium.sink.sns.region=%s
debezium.sink.sns.endpoint=%s
debezium.source.database.hostname=%s
debezium.source.database.port=%s
debezium.source.database.user=%s
debezium.source.database.dbname=%s
debezium.source.slot.name=%s
debezium.source.publication.name=%s_publication
`, mototest.Region, moto.Endpoint(), u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/"), side, side)
			}
			pgoProps := corpusrun.FirstRun(t, conn, pgo, props("pgo"))
			dbz := dbzserver.Start(t, props("dbz"))
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("Debezium Server's log ends:\n%s", dbz.LogTail(6000))
				}
			})
			corpusrun.AwaitSlot(t, conn, "dbz")
			for _, row := range c.rows {
				if _, err := conn.Exec(ctx, row); err != nil {
					t.Fatal(err)
				}
			}
			dbzMsgs := map[string][]mototest.Message{}
			for _, topic := range topics {
				dbzMsgs[topic] = moto.ReceiveAll(t, queues["dbz-"+topic], c.topics[topic], 2*time.Minute, dbz.Exited())
				mototest.LogMessages(t, "dbz-"+topic, dbzMsgs[topic])
			}
			dbz.Stop()
			p := corpusrun.StartPgoutbox(t, pgo, pgoProps)
			for _, topic := range topics {
				pgoMsgs := moto.ReceiveAll(t, queues["pgo-"+topic], c.topics[topic], 2*time.Minute, p.Exited())
				mototest.LogMessages(t, "pgo-"+topic, pgoMsgs)
				for _, msgs := range [][]mototest.Message{dbzMsgs[topic], pgoMsgs} {
					for _, m := range msgs {
						if _, ok := m.MessageAttributes[runID]; ok {
							m.MessageAttributes[runID] = "(each run's own)"
						}
					}
				}
				fifo := strings.HasSuffix(topic, ".fifo")
				for _, d := range mototest.Compare(dbzMsgs[topic], pgoMsgs, fifo) {
					t.Errorf("topic %s: %s", topic, d)
				}
				if !c.sameDedup {
					continue
				}
				for i := range min(len(pgoMsgs), len(dbzMsgs[topic])) {
					if d, p := dbzMsgs[topic][i].MessageDeduplicationId, pgoMsgs[i].MessageDeduplicationId; d != p {
						t.Errorf("topic %s: message %d: deduplication id %q, pgoutbox's %q", topic, i, d, p)
					}
				}
			}
		})
	}
}
