package rocketmqcompat

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/corpusrun"
	"github.com/pgoutbox/pgoutbox/test/dbzserver"
	"github.com/pgoutbox/pgoutbox/test/rocketmqtest"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

func TestMain(m *testing.M) { pgcluster.Main(m) }

// runID is the context header each run of a connector has its own value
// of.
const runID = "__debezium.context.runId"

// autoQueues is how many queues a topic the broker creates at its first
// message gets: the producer's defaultTopicQueueNums (4), not TBW102's 8,
// in the Java client as in pgoutbox.
const autoQueues = 4

// docTable is Debezium's documented outbox table.
const docTable = `CREATE TABLE public.outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`

// source is the connector's part of every case, without the database.
const source = `debezium.sink.type=rocketmq
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.plugin.name=pgoutput
debezium.source.topic.prefix=corpus
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
`

// The cases: the table, Debezium Server's properties without the
// database, the slot, the name server, the producer group and the
// router's topic (each side's is SIDE_outbox_$1: RocketMQ's topic names
// take no '.'), the rows, how many messages each topic gets, by its name
// after SIDE_, how many queues each topic is made with before the run (0:
// none made, the broker creates it at the first message, with autoQueues
// queues). In every case the events' ids ascend in commit order: the id
// header tells the order Debezium Server's sink was handed the records in
// (see compare).
var cases = []struct {
	name, table, server string
	rows                []string
	topics              map[string]int
	created             int
}{
	// Debezium's documented outbox table at the defaults: key and value
	// JSON envelopes of schema and payload, the queue picked by the key
	// envelope's text; a NULL payload is an envelope whose payload is
	// null, not a tombstone. The topics are created by the broker at the
	// first message (through TBW102).
	{"doc-table-defaults", docTable, source + `debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
`, []string{
		`INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderCreated', '{"a": [1, 2], "note": "caf\u00e9"}')`,
		`BEGIN; INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Payment', 'p-1', 'PaymentStarted', NULL); INSERT INTO public.outbox VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', 'OrderCreated', '{"total": 12.50}'); COMMIT`,
		`BEGIN; INSERT INTO public.outbox VALUES ('706c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderPaid', '{"paid": true}'); INSERT INTO public.outbox VALUES ('806c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-3', 'OrderCreated', '{}'); INSERT INTO public.outbox VALUES ('906c07f3-26f0-4eea-a50c-109940064b8f', 'Payment', 'p-2', 'PaymentStarted', '{"order": "o-3"}'); INSERT INTO public.outbox VALUES ('a06c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', 'OrderCancelled', '"why not"'); COMMIT`,
		`INSERT INTO public.outbox VALUES ('b06c07f3-26f0-4eea-a50c-109940064b8f', 'Payment', 'p-1', 'PaymentCaptured', '{"n": [1.50, 2]}')`,
	}, map[string]int{"outbox_Order": 5, "outbox_Payment": 3}, 0},
	// Keys as text, values as JSON without schemas, no context headers
	// but the event type as a header; many rows of seven keys interleaved
	// in one transaction, into topics made before the run with three
	// queues: batching, and the order in a queue several keys share.
	{"string-keys-batched-3-queues", `CREATE TABLE public.outbox_event (id uuid PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb)`,
		source + `debezium.format.key=simplestring
debezium.format.value=json
debezium.format.value.schemas.enable=false
debezium.source.table.include.list=public.outbox_event
debezium.source.extended.headers.enabled=false
debezium.transforms=outbox
debezium.transforms.outbox.route.by.field=aggregate_type
debezium.transforms.outbox.table.field.event.key=aggregate_id
debezium.transforms.outbox.table.fields.additional.placement=event_type:header:eventType
`, []string{
			// 45 rows: every third a payment (p-0, p-1), the others orders
			// (o-0 to o-4), in the order of i.
			`INSERT INTO public.outbox_event SELECT ('00000000-0000-0000-0000-' || lpad(i::text, 12, '0'))::uuid,
				CASE WHEN i % 3 = 0 THEN 'payment' ELSE 'order' END,
				CASE WHEN i % 3 = 0 THEN 'p-' || (i / 3 % 2) ELSE 'o-' || (i % 5) END,
				'Step' || i, jsonb_build_object('n', i, 'note', 'caf' || chr(233))
				FROM generate_series(1, 45) i`,
			`INSERT INTO public.outbox_event VALUES ('f06c07f3-26f0-4eea-a50c-109940064b8f', 'order', 'o-1', 'OrderClosed', '{"n": 46}')`,
		}, map[string]int{"outbox_order": 31, "outbox_payment": 15}, 3},
	// Values as bytes (jsonbytearray), JSON payloads expanded, aggregate
	// ids beyond ASCII (one beyond the BMP, which the JSON converter
	// writes as \u escapes): the queue is the Java hash of the key's
	// UTF-16 text. A NULL aggregate id is a key too, as JSON: an envelope
	// whose payload is null.
	{"bytes-expanded-non-ascii-keys", `CREATE TABLE public.outbox (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text, type text NOT NULL, payload jsonb)`,
		source + `debezium.format.value=jsonbytearray
debezium.format.value.schemas.enable=false
debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
debezium.transforms.outbox.table.expand.json.payload=true
`, []string{
			`BEGIN; INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'café-7', 'OrderCreated', '{"a": [1, 2], "note": "caf\u00e9"}'); INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Order', '주문-1', 'OrderCreated', '{"b": true, "n": 1.50}'); INSERT INTO public.outbox VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'café-7', 'OrderPaid', '{"paid": 12.50}'); COMMIT`,
			`BEGIN; INSERT INTO public.outbox VALUES ('706c07f3-26f0-4eea-a50c-109940064b8f', 'Order', '📦-9', 'OrderShipped', '{"box": "📦", "items": [{"sku": "a", "qty": 2}]}'); INSERT INTO public.outbox VALUES ('806c07f3-26f0-4eea-a50c-109940064b8f', 'Order', '주문-1', 'OrderPaid', '{}'); INSERT INTO public.outbox VALUES ('906c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderCreated', '[1, "x", null]'); COMMIT`,
			`INSERT INTO public.outbox VALUES ('a06c07f3-26f0-4eea-a50c-109940064b8f', 'Order', '📦-9', 'OrderDelivered', '{"at": null}')`,
			`BEGIN; INSERT INTO public.outbox VALUES ('b06c07f3-26f0-4eea-a50c-109940064b8f', 'Order', NULL, 'OrderAudited', '{"by": "주문"}'); INSERT INTO public.outbox VALUES ('c06c07f3-26f0-4eea-a50c-109940064b8f', 'Order', NULL, 'OrderAudited', '{"by": 2}'); COMMIT`,
		}, map[string]int{"outbox_Order": 9}, 0},
	// Kafka Connect's RegexRouter after the outbox router renames the
	// topics (two groups), and InsertHeader adds a header of a literal;
	// keys and values as text (simplestring), a column placed as a
	// header. Keys as text are hashed as they are: one beyond the BMP is
	// a surrogate pair in Java's hash (the JSON converter of the other
	// cases writes it as \u escapes, ASCII).
	{"regex-router-insert-header", docTable, source + `debezium.format.key=simplestring
debezium.format.value=simplestring
debezium.source.table.include.list=public.outbox
debezium.transforms=outbox,rename,stamp
debezium.transforms.outbox.table.fields.additional.placement=type:header:eventType
debezium.transforms.rename.type=org.apache.kafka.connect.transforms.RegexRouter
debezium.transforms.rename.regex=(dbz|pgo)_outbox_(.*)
debezium.transforms.rename.replacement=$1_renamed_$2
debezium.transforms.stamp.type=org.apache.kafka.connect.transforms.InsertHeader
debezium.transforms.stamp.header=origin
debezium.transforms.stamp.value.literal=orders-service
`, []string{
		`INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderCreated', '{"total": 12.5, "note": "caf\u00e9"}')`,
		`BEGIN; INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Payment', 'p-1', 'PaymentStarted', '{"order": "o-1"}'); INSERT INTO public.outbox VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderPaid', '{"paid": true}'); INSERT INTO public.outbox VALUES ('706c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', 'OrderCreated', '{}'); COMMIT`,
		`BEGIN; INSERT INTO public.outbox VALUES ('806c07f3-26f0-4eea-a50c-109940064b8f', 'Payment', 'p-1', 'PaymentCaptured', '{"captured": 12.5}'); INSERT INTO public.outbox VALUES ('906c07f3-26f0-4eea-a50c-109940064b8f', 'Order', '📦-9', 'OrderCreated', '{"box": "📦"}'); INSERT INTO public.outbox VALUES ('a06c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'café-7', 'OrderCreated', '[]'); COMMIT`,
		`INSERT INTO public.outbox VALUES ('b06c07f3-26f0-4eea-a50c-109940064b8f', 'Order', '📦-9', 'OrderPaid', '"paid"')`,
	}, map[string]int{"renamed_Order": 6, "renamed_Payment": 2}, 0},
}

// TestRocketMQCorpus runs each case through Debezium Server and through
// pgoutbox, each into its own topics on the case's RocketMQ broker, and
// compares the topics. It needs Debezium Server's distribution (installed
// on first use by .ci/install-debezium-server) and RocketMQ's (make
// rocketmq): make compat runs it, make test does not.
func TestRocketMQCorpus(t *testing.T) {
	pgo := testbin.Build(t, "github.com/pgoutbox/pgoutbox/cmd/pgoutbox")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			// A broker of the case's own: the topics, and which ones the
			// broker created, are the case's.
			s := rocketmqtest.Start(t)
			db := pgcluster.New(t)
			conn, err := pgx.Connect(ctx, db.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, c.table); err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(db.URL)
			// $1, not ${routedByValue}: Debezium Server expands ${...}
			// in its file itself, and fails to start on this one.
			props := func(side string) string {
				return c.server + fmt.Sprintf(`debezium.sink.rocketmq.producer.name.srv.addr=%s
debezium.sink.rocketmq.producer.group=%s_producer
debezium.transforms.outbox.route.topic.replacement=%s_outbox_$1
debezium.source.database.hostname=%s
debezium.source.database.port=%s
debezium.source.database.user=%s
debezium.source.database.dbname=%s
debezium.source.slot.name=%s
debezium.source.publication.name=%s_publication
`, s.NameServer(), side, side, u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/"), side, side)
			}
			topics := slices.Sorted(maps.Keys(c.topics))
			queues := autoQueues
			if c.created > 0 {
				queues = c.created
				for _, side := range []string{"dbz", "pgo"} {
					for _, topic := range topics {
						s.CreateTopic(side+"_"+topic, c.created)
					}
				}
			}
			pgoProps := corpusrun.FirstRun(t, conn, pgo, props("pgo"))
			dbz := dbzserver.Start(t, props("dbz"))
			corpusrun.AwaitSlot(t, conn, "dbz")
			for _, row := range c.rows {
				if _, err := conn.Exec(ctx, row); err != nil {
					t.Fatal(err)
				}
			}
			for _, topic := range topics {
				await(t, s, "dbz_"+topic, c.topics[topic], 3*time.Minute, dbz.Exited())
			}
			// Stopped, it sends no more: what its topics hold is all.
			dbz.Stop()
			dbzMsgs, dbzQueues := map[string][]rocketmqtest.Message{}, map[string]int{}
			for _, topic := range topics {
				dbzMsgs[topic], dbzQueues[topic] = s.Messages("dbz_"+topic), s.Queues("dbz_"+topic)
				logMessages(t, "dbz_"+topic, dbzQueues[topic], dbzMsgs[topic])
			}
			p := corpusrun.StartPgoutbox(t, pgo, pgoProps)
			for _, topic := range topics {
				await(t, s, "pgo_"+topic, c.topics[topic], 3*time.Minute, p.Exited())
			}
			// A copy sent after the counts were reached would show.
			time.Sleep(time.Second)
			for _, topic := range topics {
				pgoMsgs, pgoQueues := s.Messages("pgo_"+topic), s.Queues("pgo_"+topic)
				logMessages(t, "pgo_"+topic, pgoQueues, pgoMsgs)
				name := "*_" + topic
				if dbzQueues[topic] != queues {
					t.Errorf("topic %s: Debezium Server's has %d queues, the case expects %d", name, dbzQueues[topic], queues)
				}
				if dbzQueues[topic] != pgoQueues {
					t.Errorf("topic %s: %d queues, pgoutbox's %d", name, dbzQueues[topic], pgoQueues)
				}
				diffs, notes := compare(dbzMsgs[topic], pgoMsgs, dbzQueues[topic], c.topics[topic])
				for _, n := range notes {
					t.Logf("topic %s: %s", name, n)
				}
				for _, d := range diffs {
					t.Errorf("topic %s: %s", name, d)
				}
			}
		})
	}
}

// await waits until topic holds n messages, failing the test when the
// process publishing them exits first or within passes.
func await(t *testing.T, s *rocketmqtest.Server, topic string, n int, within time.Duration, exited <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := len(s.Messages(topic))
		if got >= n {
			return
		}
		select {
		case <-exited:
			t.Fatalf("the publisher exited with %d of %d messages in %s", got, n, topic)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages in %s after %s", got, n, topic, within)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// properties are a message's user properties with Debezium's run id,
// which differs from run to run, as "(each run's own)".
func properties(m rocketmqtest.Message) map[string]string {
	out := make(map[string]string, len(m.Properties))
	for k, v := range m.Properties {
		if k == runID {
			v = "(each run's own)"
		}
		out[k] = v
	}
	return out
}

// systemNames are the names of a message's properties RocketMQ reserves,
// sorted: which ones the producer and the broker set.
func systemNames(m rocketmqtest.Message) string {
	var out []string
	for k := range m.System {
		if _, user := m.Properties[k]; !user {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// javaQueue is the queue SelectMessageQueueByHash picks for key among n:
// Java's String.hashCode (over its UTF-16 code units), its remainder
// made positive.
func javaQueue(key string, n int) int {
	var h int32
	for _, u := range utf16.Encode([]rune(key)) {
		h = 31*h + int32(u)
	}
	v := int(h) % n
	if v < 0 {
		v = -v
	}
	return v
}

// inQueue are msgs's messages in queue q, in offset order.
func inQueue(msgs []rocketmqtest.Message, q int) []rocketmqtest.Message {
	var out []rocketmqtest.Message
	for _, m := range msgs {
		if m.Queue == q {
			out = append(out, m)
		}
	}
	return out
}

// keys are the messages' KEYS in order, for a log line.
func keys(msgs []rocketmqtest.Message) string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = strconv.Quote(m.Keys)
	}
	return "[" + strings.Join(out, " ") + "]"
}

// uuid matches an event id in its header's text.
var uuid = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// eventID is the id the message's id header holds (the router's, through
// the header converter: JSON with or without a schema); "" for none.
func eventID(m rocketmqtest.Message) string { return uuid.FindString(m.Properties["id"]) }

// commitOrder is msgs sorted by event id, which ascends in commit order in
// every case (stable: a copy stays after its original).
func commitOrder(msgs []rocketmqtest.Message) []rocketmqtest.Message {
	return slices.SortedStableFunc(slices.Values(msgs), func(a, b rocketmqtest.Message) int {
		return strings.Compare(eventID(a), eventID(b))
	})
}

// outOfOrder tells, for each key whose messages in a queue (in offset
// order) are not in commit order, the key and its ids in offset order.
func outOfOrder(msgs []rocketmqtest.Message) []string {
	last, ids, bad := map[string]string{}, map[string][]string{}, map[string]bool{}
	for _, m := range msgs {
		id := eventID(m)
		if id < last[m.Keys] {
			bad[m.Keys] = true
		}
		last[m.Keys] = id
		ids[m.Keys] = append(ids[m.Keys], id)
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(bad)) {
		out = append(out, fmt.Sprintf("key %q: ids %v", k, ids[k]))
	}
	return out
}

// compare compares Debezium Server's messages of a topic of queues
// queues with pgoutbox's: each side holds want; each key is in the same
// queue on both sides, the one SelectMessageQueueByHash picks; each
// queue's messages, in commit order, have the same KEYS, body and user
// properties, and a message ID on both sides or neither; and pgoutbox's
// are, key by key, in commit order in the queue. notes are what is not
// a difference of pgoutbox's: where the order in a queue differs.
//
// The order compared is the commit order, not Debezium Server's offsets:
// its sink sends each record asynchronously (DefaultMQProducer's send
// with a selector and a callback), on the client's pool of sender
// threads (as many as the processors), and waits for the batch's
// answers only at its end; so a queue's messages, even one key's, are
// stored in the order those threads happen to send them, which differs
// from run to run. The records come to the sink in commit order, and
// that is the order pgoutbox keeps for each key.
func compare(dbz, pgo []rocketmqtest.Message, queues, want int) (diffs, notes []string) {
	if len(dbz) != want || len(pgo) != want {
		diffs = append(diffs, fmt.Sprintf("%d messages expected: Debezium Server sent %d, pgoutbox %d", want, len(dbz), len(pgo)))
	}
	where := func(msgs []rocketmqtest.Message) map[string][]int {
		out := map[string][]int{}
		for _, m := range msgs {
			if !slices.Contains(out[m.Keys], m.Queue) {
				out[m.Keys] = append(out[m.Keys], m.Queue)
			}
		}
		return out
	}
	dw, pw := where(dbz), where(pgo)
	for _, k := range slices.Sorted(maps.Keys(dw)) {
		if !slices.Equal(dw[k], pw[k]) {
			diffs = append(diffs, fmt.Sprintf("key %q in queues %v, pgoutbox's in %v", k, dw[k], pw[k]))
		}
		if want := javaQueue(k, queues); !slices.Equal(dw[k], []int{want}) {
			diffs = append(diffs, fmt.Sprintf("key %q: Debezium Server's in queues %v, SelectMessageQueueByHash picks %d of %d", k, dw[k], want, queues))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(pw)) {
		if _, ok := dw[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("key %q: only pgoutbox's, in queues %v", k, pw[k]))
		}
	}
	for _, m := range slices.Concat(dbz, pgo) {
		if eventID(m) == "" {
			diffs = append(diffs, fmt.Sprintf("queue %d, offset %d (key %q): no event id in its id property %q: the comparison needs it", m.Queue, m.Offset, m.Keys, m.Properties["id"]))
		}
	}
	for q := range queues {
		d, p := inQueue(dbz, q), inQueue(pgo, q)
		if len(d) != len(p) {
			diffs = append(diffs, fmt.Sprintf("queue %d: Debezium Server's holds %d messages, pgoutbox's %d", q, len(d), len(p)))
		}
		for _, o := range outOfOrder(p) {
			diffs = append(diffs, fmt.Sprintf("queue %d: pgoutbox's messages of a key out of commit order: %s", q, o))
		}
		for _, o := range outOfOrder(d) {
			notes = append(notes, fmt.Sprintf("queue %d: Debezium Server's messages of a key out of commit order (its asynchronous sends): %s", q, o))
		}
		if keys(d) != keys(p) {
			notes = append(notes, fmt.Sprintf("queue %d: keys in the order %s, pgoutbox's %s", q, keys(d), keys(p)))
		}
		d, p = commitOrder(d), commitOrder(p)
		for i := range min(len(d), len(p)) {
			dm, pm := d[i], p[i]
			at := fmt.Sprintf("queue %d, message %d in commit order (offsets %d and %d)", q, i, dm.Offset, pm.Offset)
			if dm.Keys != pm.Keys {
				diffs = append(diffs, fmt.Sprintf("%s: KEYS %q, pgoutbox's %q", at, dm.Keys, pm.Keys))
			}
			if string(dm.Body) != string(pm.Body) {
				diffs = append(diffs, fmt.Sprintf("%s: body\n  %q\npgoutbox\n  %q", at, dm.Body, pm.Body))
			}
			if dp, pp := properties(dm), properties(pm); !maps.Equal(dp, pp) {
				diffs = append(diffs, fmt.Sprintf("%s: properties\n  %q\npgoutbox\n  %q", at, dp, pp))
			}
			if dm.Tags != pm.Tags {
				diffs = append(diffs, fmt.Sprintf("%s: TAGS %q, pgoutbox's %q", at, dm.Tags, pm.Tags))
			}
			_, du := dm.System["UNIQ_KEY"]
			_, pu := pm.System["UNIQ_KEY"]
			if du != pu {
				diffs = append(diffs, fmt.Sprintf("%s: a message ID (UNIQ_KEY) set %v, pgoutbox's %v", at, du, pu))
			}
		}
	}
	return diffs, notes
}

// logMessages shows a topic's messages in a -v run, with what compare
// leaves out: the system properties' names, the message ID, the producer's
// address and whether the body was stored compressed.
func logMessages(t *testing.T, topic string, queues int, msgs []rocketmqtest.Message) {
	t.Helper()
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "\n  queue=%d offset=%d keys=%q properties=%q system=[%s] msgid=%s born=%s compressed=%v body(%d)=%q",
			m.Queue, m.Offset, m.Keys, m.Properties, systemNames(m), m.MsgID, m.BornHost, m.Compressed, len(m.Body), m.Body)
	}
	t.Logf("%s: %d queues, %d messages%s", topic, queues, len(msgs), b.String())
}

// TestRocketMQDeadLetters runs through pgoutbox alone the records Debezium
// Server's rocketmq sink fails on, and so stops at (no corpus case can
// hold them): a tombstone (route.tombstone.on.empty.payload=true and a
// NULL payload: no body) and, keys as text (simplestring), a NULL
// aggregate id (no key; as JSON it is an envelope, a key like another).
// pgoutbox dead-letters each to <slot>_dlq and publishes the rows around
// them.
func TestRocketMQDeadLetters(t *testing.T) {
	pgo := testbin.Build(t, "github.com/pgoutbox/pgoutbox/cmd/pgoutbox")
	ctx := context.Background()
	s := rocketmqtest.Start(t)
	db := pgcluster.New(t)
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE public.outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255), type varchar(255) NOT NULL, payload jsonb)`); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(db.URL)
	props := corpusrun.WriteFile(t, "pgoutbox.properties", source+fmt.Sprintf(`debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
debezium.transforms.outbox.route.tombstone.on.empty.payload=true
debezium.transforms.outbox.route.topic.replacement=pgo_outbox_$1
debezium.format.key=simplestring
debezium.sink.rocketmq.producer.name.srv.addr=%s
debezium.sink.rocketmq.producer.group=pgo_producer
debezium.source.database.hostname=%s
debezium.source.database.port=%s
debezium.source.database.user=%s
debezium.source.database.dbname=%s
debezium.source.slot.name=pgo
debezium.source.publication.name=pgo_publication
`, s.NameServer(), u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/")))
	p := corpusrun.StartPgoutbox(t, pgo, props)
	corpusrun.AwaitSlot(t, conn, "pgo")
	if _, err := conn.Exec(ctx, `BEGIN;
INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderCreated', '{"n": 1}');
INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', 'OrderDeleted', NULL);
INSERT INTO public.outbox VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Order', NULL, 'OrderAudited', '{"n": 3}');
INSERT INTO public.outbox VALUES ('706c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-3', 'OrderCreated', '{"n": 4}');
COMMIT`); err != nil {
		t.Fatal(err)
	}
	await(t, s, "pgo_outbox_Order", 2, 3*time.Minute, p.Exited())
	await(t, s, "pgo_dlq", 2, 3*time.Minute, p.Exited())
	time.Sleep(time.Second) // a copy would show
	published, dead := s.Messages("pgo_outbox_Order"), s.Messages("pgo_dlq")
	logMessages(t, "pgo_outbox_Order", s.Queues("pgo_outbox_Order"), published)
	logMessages(t, "pgo_dlq", s.Queues("pgo_dlq"), dead)
	var ids []string
	for _, m := range published {
		ids = append(ids, eventID(m))
	}
	slices.Sort(ids)
	if want := []string{"406c07f3-26f0-4eea-a50c-109940064b8f", "706c07f3-26f0-4eea-a50c-109940064b8f"}; !slices.Equal(ids, want) {
		t.Errorf("published the events %v, want %v, each once", ids, want)
	}
	reasons := map[string]string{}
	for _, m := range dead {
		var dl struct {
			EventID string `json:"event_id"`
			Reason  string `json:"reason"`
		}
		if err := json.Unmarshal(m.Body, &dl); err != nil {
			t.Errorf("a dead letter that is not JSON: %v: %q", err, m.Body)
			continue
		}
		if _, dup := reasons[dl.EventID]; dup {
			t.Errorf("event %s dead-lettered twice", dl.EventID)
		}
		reasons[dl.EventID] = dl.Reason
	}
	for id, want := range map[string]string{"506c07f3-26f0-4eea-a50c-109940064b8f": "tombstone", "606c07f3-26f0-4eea-a50c-109940064b8f": "key"} {
		if r, ok := reasons[id]; !ok || !strings.Contains(r, want) {
			t.Errorf("event %s: dead-lettered %v, reason %q, want one naming the %s", id, ok, r, want)
		}
	}
	if len(reasons) != 2 {
		t.Errorf("dead letters of %v, want the two events'", slices.Sorted(maps.Keys(reasons)))
	}
}
