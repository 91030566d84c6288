package pulsarcompat

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/corpusrun"
	"github.com/pgoutbox/pgoutbox/test/dbzserver"
	"github.com/pgoutbox/pgoutbox/test/pulsartest"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

func TestMain(m *testing.M) { pgcluster.Main(m) }

// The cases: the table, Debezium Server's properties without the
// database, the slot, the service URL and the router's topic (each side's
// topics are SIDE.outbox.event.$1, the routed value), the namespace in
// tenant public (empty: default, and the properties name none; else
// created for the case, and the properties name it), the rows, how many
// messages each topic gets, by the routed value, whether the topics
// keep each key's order only (key-based batching), not the order across
// keys, and how many partitions each topic has (0: not partitioned).
var cases = []struct {
	name, table, server string
	namespace           string
	rows                []string
	topics              map[string]int
	byKey               bool
	partitions          int // > 0: each topic made partitioned before the run
}{
	// Debezium's documented outbox table at the defaults: key and value
	// JSON envelopes of schema and payload, as text (STRING schema); a
	// NULL payload is an envelope whose payload is null.
	{"doc-table-defaults", `CREATE TABLE public.outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`,
		`debezium.sink.type=pulsar
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.plugin.name=pgoutput
debezium.source.topic.prefix=corpus
debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
`, "", []string{
			`INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderCreated', '{"a": [1, 2], "note": "caf\u00e9"}')`,
			`BEGIN; INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Payment', 'p-1', 'PaymentStarted', NULL); INSERT INTO public.outbox VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', 'OrderCreated', '{"total": 12.50}'); COMMIT`,
		}, map[string]int{"Order": 2, "Payment": 1}, false, 0},
	// Keys as text (simplestring), values as JSON without schemas, an
	// empty payload as a tombstone, a NULL key as the configured
	// null.key, no context headers but the event type as a header. The
	// refund topic's first record is a tombstone: Debezium Server makes
	// a topic's producer from its first record's value, and a null one
	// is not text.
	{"string-key-tombstone-headers", `CREATE TABLE public.outbox_event (id uuid PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text, event_type text NOT NULL, payload jsonb)`,
		`debezium.sink.type=pulsar
debezium.sink.pulsar.null.key=no-key
debezium.format.key=simplestring
debezium.format.value=json
debezium.format.value.schemas.enable=false
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.plugin.name=pgoutput
debezium.source.topic.prefix=corpus
debezium.source.table.include.list=public.outbox_event
debezium.source.extended.headers.enabled=false
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.transforms.outbox.route.by.field=aggregate_type
debezium.transforms.outbox.table.field.event.key=aggregate_id
debezium.transforms.outbox.table.fields.additional.placement=event_type:header:eventType
debezium.transforms.outbox.route.tombstone.on.empty.payload=true
`, "strings", []string{
			`INSERT INTO public.outbox_event VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'order', 'o-1', 'OrderPlaced', '{"total": 12.5}')`,
			`INSERT INTO public.outbox_event VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'order', 'o-1', 'OrderDeleted', NULL)`,
			`BEGIN; INSERT INTO public.outbox_event VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'order', NULL, 'OrderAudited', '{"by": "caf\u00e9"}'); INSERT INTO public.outbox_event VALUES ('706c07f3-26f0-4eea-a50c-109940064b8f', 'payment', 'café-7', 'PaymentCaptured', '{"amount": 12.5}'); COMMIT`,
			`INSERT INTO public.outbox_event VALUES ('806c07f3-26f0-4eea-a50c-109940064b8f', 'payment', 'p-8', 'PaymentCaptured', '{"amount": 1}')`,
			`INSERT INTO public.outbox_event VALUES ('906c07f3-26f0-4eea-a50c-109940064b8f', 'refund', 'r-1', 'RefundVoided', NULL)`,
			`INSERT INTO public.outbox_event VALUES ('a06c07f3-26f0-4eea-a50c-109940064b8f', 'refund', 'r-2', 'RefundIssued', '{"amount": 3}')`,
		}, map[string]int{"order": 3, "payment": 2, "refund": 2}, false, 0},
	// Values as bytes (jsonbytearray: no schema), JSON payloads expanded,
	// key-based batching, two aggregates interleaved in one transaction.
	// A batch holds one key's messages, and which key's batch a producer
	// sends first depends on timing: the topics compare key by key.
	{"bytes-key-based", `CREATE TABLE public.outbox (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb)`,
		`debezium.sink.type=pulsar
debezium.sink.pulsar.producer.batcherBuilder=KEY_BASED
debezium.format.value=jsonbytearray
debezium.format.value.schemas.enable=false
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.plugin.name=pgoutput
debezium.source.topic.prefix=corpus
debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.transforms.outbox.table.expand.json.payload=true
`, "bytes", []string{
			`BEGIN; INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderCreated', '{"a": [1, 2], "note": "caf\u00e9"}'); INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', 'OrderCreated', '{"b": true}'); INSERT INTO public.outbox VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderPaid', '{"paid": 12.50}'); INSERT INTO public.outbox VALUES ('706c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', 'OrderCancelled', NULL); COMMIT`,
			`INSERT INTO public.outbox VALUES ('806c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-3', 'OrderCreated', '{}')`,
		}, map[string]int{"Order": 5}, true, 0},
	// Partitioned topics (three partitions, made before the run, as a
	// team makes them): each message in its key's partition, as Pulsar's
	// Java client routes it, each partition's messages in order.
	{"partitioned-topics", `CREATE TABLE public.outbox (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb)`,
		`debezium.sink.type=pulsar
debezium.format.key=simplestring
debezium.format.value=simplestring
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.plugin.name=pgoutput
debezium.source.topic.prefix=corpus
debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
`, "parts", []string{
			`BEGIN; INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderCreated', '{"n": 1}'); INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', 'OrderCreated', '{"n": 2}'); INSERT INTO public.outbox VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-3', 'OrderCreated', '{"n": 3}'); COMMIT`,
			`BEGIN; INSERT INTO public.outbox VALUES ('706c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-4', 'OrderCreated', '{"n": 4}'); INSERT INTO public.outbox VALUES ('806c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderPaid', '{"n": 5}'); INSERT INTO public.outbox VALUES ('906c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'café-5', 'OrderCreated', '{"n": 6}'); COMMIT`,
			`INSERT INTO public.outbox VALUES ('a06c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', 'OrderPaid', '{"n": 7}')`,
		}, map[string]int{"Order": 7}, false, 3},
}

// TestPulsarCorpus runs each case through Debezium Server and through
// pgoutbox, each into its own topics in one Pulsar standalone, and
// compares the topics. It needs Debezium Server's distribution (installed
// on first use by .ci/install-debezium-server) and Pulsar's (make
// pulsar): make compat runs it, make test does not.
func TestPulsarCorpus(t *testing.T) {
	pgo := testbin.Build(t, "github.com/pgoutbox/pgoutbox/cmd/pgoutbox")
	// One server for the cases: each case's topics are its own by name
	// or by namespace.
	s := pulsartest.Start(t)
	client := s.Client()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			ns := "default"
			if c.namespace != "" {
				ns = c.namespace
				createNamespace(t, s, ns)
			}
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
			props := func(slot string) string {
				p := c.server + fmt.Sprintf(`debezium.sink.pulsar.client.serviceUrl=%s
debezium.transforms.outbox.route.topic.replacement=%s.outbox.event.$1
debezium.source.database.hostname=%s
debezium.source.database.port=%s
debezium.source.database.user=%s
debezium.source.database.dbname=%s
debezium.source.slot.name=%s
debezium.source.publication.name=%s_publication
`, s.ServiceURL(), slot, u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/"), slot, slot)
				if c.namespace != "" {
					p += "debezium.sink.pulsar.namespace=" + c.namespace + "\n"
				}
				return p
			}
			routed := slices.Sorted(maps.Keys(c.topics))
			topic := func(side, r string) string { return "public/" + ns + "/" + side + ".outbox.event." + r }
			// What is compared: the topic, or each of its partitions.
			parts := func(side, r string) []string {
				if c.partitions == 0 {
					return []string{topic(side, r)}
				}
				var out []string
				for i := range c.partitions {
					out = append(out, topic(side, r)+"-partition-"+strconv.Itoa(i))
				}
				return out
			}
			if c.partitions > 0 {
				for _, side := range []string{"dbz", "pgo"} {
					for _, r := range routed {
						createPartitioned(t, s, topic(side, r), c.partitions)
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
			for _, r := range routed {
				await(t, client, parts("dbz", r), c.topics[r], 2*time.Minute, dbz.Exited())
			}
			// Stopped, it sends no more: what its topics hold is all.
			dbz.Stop()
			dbzMsgs, dbzSchema := map[string][]message{}, map[string]string{}
			for _, r := range routed {
				dbzSchema[r] = schemaType(t, s, topic("dbz", r))
				for _, part := range parts("dbz", r) {
					dbzMsgs[part] = read(t, s, part)
					logMessages(t, part, dbzSchema[r], dbzMsgs[part])
				}
			}
			p := corpusrun.StartPgoutbox(t, pgo, pgoProps)
			for _, r := range routed {
				await(t, client, parts("pgo", r), c.topics[r], 2*time.Minute, p.Exited())
			}
			// A copy sent after the counts were reached would show.
			time.Sleep(time.Second)
			for _, r := range routed {
				pgoSchema := schemaType(t, s, topic("pgo", r))
				if dbzSchema[r] != pgoSchema {
					t.Errorf("topic public/%s/*.outbox.event.%s: schema %s, pgoutbox's %s", ns, r, dbzSchema[r], pgoSchema)
				}
				for i, part := range parts("pgo", r) {
					dbzPart := parts("dbz", r)[i]
					pgoMsgs := read(t, s, part)
					logMessages(t, part, pgoSchema, pgoMsgs)
					name := strings.Replace(part, "/pgo.", "/*.", 1)
					if keys(dbzMsgs[dbzPart]) != keys(pgoMsgs) {
						t.Logf("topic %s: keys in the order %s, pgoutbox's %s", name, keys(dbzMsgs[dbzPart]), keys(pgoMsgs))
					}
					for _, d := range compare(dbzMsgs[dbzPart], pgoMsgs, c.byKey) {
						t.Errorf("topic %s: %s", name, d)
					}
				}
			}
		})
	}
}

// createPartitioned makes topic (tenant/namespace/name) a partitioned
// topic of n partitions through the admin API.
func createPartitioned(t *testing.T, s *pulsartest.Server, topic string, n int) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, s.AdminURL()+"/admin/v2/persistent/"+topic+"/partitions", strings.NewReader(strconv.Itoa(n)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if status, body := do(t, req); status != http.StatusNoContent && status != http.StatusOK {
		t.Fatalf("creating partitioned topic %s: %d %s", topic, status, body)
	}
}

// createNamespace creates public/name through the admin API.
func createNamespace(t *testing.T, s *pulsartest.Server, name string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, s.AdminURL()+"/admin/v2/namespaces/public/"+name, nil)
	if err != nil {
		t.Fatal(err)
	}
	status, body := do(t, req)
	if status != http.StatusNoContent && status != http.StatusOK {
		t.Fatalf("creating namespace public/%s: %d %s", name, status, body)
	}
}

// schemaType is the type of topic's (tenant/namespace/name) schema,
// "none" when it has none.
func schemaType(t *testing.T, s *pulsartest.Server, topic string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.AdminURL()+"/admin/v2/schemas/"+topic+"/schema", nil)
	if err != nil {
		t.Fatal(err)
	}
	status, body := do(t, req)
	switch status {
	case http.StatusNotFound:
		return "none"
	case http.StatusOK:
		var sc struct{ Type string }
		if err := json.Unmarshal(body, &sc); err != nil {
			t.Fatalf("schema of %s: %v: %s", topic, err, body)
		}
		return sc.Type
	}
	t.Fatalf("schema of %s: %d %s", topic, status, body)
	return ""
}

// do sends an admin API request and returns the status and the body.
func do(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// await waits until topics (a topic, or a partitioned topic's
// partitions) hold n messages together, failing the test when the
// process publishing them exits first or within passes. It reads from the
// earliest with one reader each: the comparison reads them again.
func await(t *testing.T, client pulsar.Client, topics []string, n int, within time.Duration, exited <-chan struct{}) {
	t.Helper()
	var readers []pulsar.Reader
	for _, topic := range topics {
		r, err := client.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
		if err != nil {
			t.Fatalf("reading %s: %v", topic, err)
		}
		defer r.Close()
		readers = append(readers, r)
	}
	deadline := time.Now().Add(within)
	for got := 0; got < n; {
		read := false
		for _, r := range readers {
			// Short tries: the exit and the deadline are seen in time.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second/time.Duration(len(readers)))
			_, err := r.Next(ctx)
			cancel()
			switch {
			case err == nil:
				got, read = got+1, true
			case !errors.Is(err, context.DeadlineExceeded):
				t.Fatalf("reading %s: %v", r.Topic(), err)
			}
		}
		if read {
			continue
		}
		select {
		case <-exited:
			t.Fatalf("the publisher exited with %d of %d messages in %s", got, n, topics)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages in %s after %s", got, n, topics, within)
		}
	}
}

// message is a stored message with what the Go client does not tell
// and the admin API's raw entry does: whether it was sent with a null
// value (a tombstone's), and the schema version its entry names.
type message struct {
	pulsartest.Message
	null          string // "true", "false", "?" when the entry does not say
	schemaVersion string // base64, "" for none
}

// read reads topic's messages and what their entries say.
func read(t *testing.T, s *pulsartest.Server, topic string) []message {
	t.Helper()
	msgs := s.Messages(topic)
	type meta struct {
		nulls         []bool
		schemaVersion string
	}
	entries := map[[2]int64]meta{}
	out := make([]message, len(msgs))
	for i, m := range msgs {
		e := [2]int64{m.ID.LedgerID(), m.ID.EntryID()}
		if _, ok := entries[e]; !ok {
			n, v := entryMeta(t, s, topic, e[0], e[1])
			entries[e] = meta{n, v}
		}
		null, n, idx := "?", entries[e].nulls, int(max(m.ID.BatchIdx(), 0))
		if idx < len(n) {
			null = strconv.FormatBool(n[idx])
		}
		out[i] = message{Message: m, null: null, schemaVersion: entries[e].schemaVersion}
	}
	return out
}

// logMessages shows a topic's messages in a -v run, with what compare
// leaves out: the producer and the batch.
func logMessages(t *testing.T, topic, schema string, msgs []message) {
	t.Helper()
	var b strings.Builder
	for i, m := range msgs {
		fmt.Fprintf(&b, "\n  %d id=%v batch=%d/%d producer=%q schema-version=%q event-time=%v key=%q properties=%q null-value=%s payload(%d)=%q",
			i, m.ID, m.ID.BatchIdx(), m.ID.BatchSize(), m.Producer, m.schemaVersion, eventTime(m.Message), m.Key, m.Properties, m.null, len(m.Payload), m.Payload)
	}
	t.Logf("%s: schema %s, %d messages%s", topic, schema, len(msgs), b.String())
}

// entryMeta tells, for each message of an entry (one unless batched),
// whether it was sent with a null value, and the entry's schema version
// (base64, empty: none), as the admin API's raw entry says: the entry's
// metadata in headers and, batched, each message's metadata in the body.
func entryMeta(t *testing.T, s *pulsartest.Server, topic string, ledger, entry int64) ([]bool, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/admin/v2/persistent/%s/ledger/%d/entry/%d", s.AdminURL(), topic, ledger, entry), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("entry %d:%d of %s: %v %s %s", ledger, entry, topic, err, resp.Status, body)
	}
	version := resp.Header.Get("X-Pulsar-Base64-schema-version")
	n := resp.Header.Get("X-Pulsar-num-batch-message")
	if n == "" {
		return []bool{resp.Header.Get("X-Pulsar-null-value") == "true"}, version
	}
	out, err := batchNullValues(body)
	if err != nil {
		t.Fatalf("entry %d:%d of %s (%s messages): %v", ledger, entry, topic, n, err)
	}
	return out, version
}

// batchNullValues reads a batch's messages (each a 4-byte size, a
// SingleMessageMetadata and the payload) for their null_value (field 9)
// and payload_size (field 3).
func batchNullValues(b []byte) ([]bool, error) {
	var out []bool
	for len(b) > 0 {
		if len(b) < 4 {
			return out, errors.New("a batch message cut short")
		}
		size := int(binary.BigEndian.Uint32(b))
		if len(b) < 4+size {
			return out, errors.New("a batch message's metadata cut short")
		}
		meta := b[4 : 4+size]
		b = b[4+size:]
		var null bool
		payload := -1
		for len(meta) > 0 {
			tag, n := binary.Uvarint(meta)
			if n <= 0 {
				return out, errors.New("a bad tag")
			}
			meta = meta[n:]
			switch tag & 7 {
			case 0:
				v, n := binary.Uvarint(meta)
				if n <= 0 {
					return out, errors.New("a bad varint")
				}
				meta = meta[n:]
				switch tag >> 3 {
				case 3:
					payload = int(v)
				case 9:
					null = v != 0
				}
			case 1:
				meta = meta[min(8, len(meta)):]
			case 2:
				l, n := binary.Uvarint(meta)
				if n <= 0 || uint64(len(meta)-n) < l {
					return out, errors.New("a bad length")
				}
				meta = meta[n+int(l):]
			case 5:
				meta = meta[min(4, len(meta)):]
			default:
				return out, fmt.Errorf("wire type %d", tag&7)
			}
		}
		if payload < 0 || payload > len(b) {
			return out, errors.New("no payload size, or a payload cut short")
		}
		b = b[payload:]
		out = append(out, null)
	}
	return out, nil
}

// properties are a message's properties with Debezium's run id, which
// differs from run to run, as "(varies)".
func properties(m pulsartest.Message) map[string]string {
	out := make(map[string]string, len(m.Properties))
	for k, v := range m.Properties {
		if strings.Contains(strings.ToLower(k), "runid") {
			v = "(varies)"
		}
		out[k] = v
	}
	return out
}

// keys are the messages' keys in order, for a log line.
func keys(msgs []message) string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = strconv.Quote(m.Key)
	}
	return "[" + strings.Join(out, " ") + "]"
}

// compare compares Debezium Server's messages of a topic with pgoutbox's,
// in order (byKey: in each key's order, the keys sorted): key,
// properties, payload, whether an event time is set, whether the value
// is null, and the schema version named (a null value's excepted).
func compare(dbz, pgo []message, byKey bool) []string {
	var diffs []string
	if len(dbz) != len(pgo) {
		diffs = append(diffs, fmt.Sprintf("Debezium Server sent %d messages, pgoutbox %d", len(dbz), len(pgo)))
	}
	if byKey {
		// Stable: each key's messages stay in their order.
		byKey := func(a, b message) int { return strings.Compare(a.Key, b.Key) }
		dbz, pgo = slices.SortedStableFunc(slices.Values(dbz), byKey), slices.SortedStableFunc(slices.Values(pgo), byKey)
	}
	for i := range min(len(dbz), len(pgo)) {
		d, p := dbz[i], pgo[i]
		if d.Key != p.Key {
			diffs = append(diffs, fmt.Sprintf("message %d: key %q, pgoutbox's %q", i, d.Key, p.Key))
		}
		if dp, pp := properties(d.Message), properties(p.Message); !maps.Equal(dp, pp) {
			diffs = append(diffs, fmt.Sprintf("message %d: properties\n  %q\npgoutbox\n  %q", i, dp, pp))
		}
		if string(d.Payload) != string(p.Payload) {
			diffs = append(diffs, fmt.Sprintf("message %d: payload\n  %q\npgoutbox\n  %q", i, d.Payload, p.Payload))
		}
		if eventTime(d.Message) != eventTime(p.Message) {
			diffs = append(diffs, fmt.Sprintf("message %d: event time set %v, pgoutbox's %v", i, eventTime(d.Message), eventTime(p.Message)))
		}
		if d.null != p.null {
			diffs = append(diffs, fmt.Sprintf("message %d: null value %s, pgoutbox's %s", i, d.null, p.null))
		}
		// Pulsar's Java client names no schema version in a batch that
		// starts with a null value, and one in a batch that holds one
		// after a value: which depends on its batching, not on the event.
		if d.schemaVersion != p.schemaVersion && (d.null != "true" || p.null != "true") {
			diffs = append(diffs, fmt.Sprintf("message %d: schema version %q, pgoutbox's %q", i, d.schemaVersion, p.schemaVersion))
		}
	}
	return diffs
}

// eventTime tells whether the producer set the message's event time: the
// Go client reads an unset one (0) as the Unix epoch, not as the zero
// time.
func eventTime(m pulsartest.Message) bool {
	return !m.EventTime.IsZero() && m.EventTime.UnixMilli() != 0
}
