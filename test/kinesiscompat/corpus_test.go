package kinesiscompat

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

// shards is each stream's: two or more, so that a partition key's shard
// says something.
const shards = 2

// The cases: the table, Debezium Server's properties without the
// database, the slot, the endpoint and the router's topic (each side's
// streams are SIDE.outbox.event.$1, the routed value), the rows, and how many
// records each stream gets, by the routed value.
var cases = []struct {
	name, table, server string
	rows                []string
	streams             map[string]int
}{
	// Debezium's documented outbox table at the defaults: the key in a
	// schema envelope is the partition key; a NULL payload is a record
	// whose payload is null.
	{"doc-table-defaults", `CREATE TABLE public.outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`,
		`debezium.sink.type=kinesis
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.plugin.name=pgoutput
debezium.source.topic.prefix=corpus
debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
`, []string{
			`INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderCreated', '{"a": [1, 2], "note": "caf\u00e9"}')`,
			`BEGIN; INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Payment', 'p-1', 'PaymentStarted', NULL); INSERT INTO public.outbox VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', 'OrderCreated', '{"total": 12.50}'); COMMIT`,
		}, map[string]int{"Order": 2, "Payment": 1}},
	// Keys as text (simplestring), values as JSON without schemas, an
	// empty payload as a tombstone (no data), a NULL key as the sink's
	// null.key (default: "default").
	{"string-key-tombstone", `CREATE TABLE public.outbox_event (id uuid PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text, event_type text NOT NULL, payload jsonb)`,
		`debezium.sink.type=kinesis
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
		}, map[string]int{"order": 3, "payment": 2}},
	// JSON keys and values without schemas (values as bytes,
	// jsonbytearray), a configured null.key, and the sink's batch size
	// and retries: a NULL key is JSON's null, text the sink takes as it
	// is.
	{"json-no-schemas-null-key", `CREATE TABLE public.outbox (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text, type text NOT NULL, payload jsonb)`,
		`debezium.sink.type=kinesis
debezium.sink.kinesis.null.key=no-key
debezium.sink.kinesis.batch.size=1
debezium.sink.kinesis.default.retries=3
debezium.format.key=json
debezium.format.value=jsonbytearray
debezium.format.schemas.enable=false
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.plugin.name=pgoutput
debezium.source.topic.prefix=corpus
debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.transforms.outbox.table.expand.json.payload=true
`, []string{
			`INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', 'OrderCreated', '{"a": [1, 2], "note": "caf\u00e9"}')`,
			`BEGIN; INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Order', NULL, 'OrderAudited', '{"b": true}'); INSERT INTO public.outbox VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-3', 'OrderCreated', NULL); COMMIT`,
		}, map[string]int{"Order": 3}},
	// Keys and values as text (simplestring: the payload's JSON as it
	// is), a NULL key as the configured null.key, rows of two
	// transactions in one table.
	{"string-value-null-key", `CREATE TABLE public.outbox (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text, type text NOT NULL, payload jsonb)`,
		`debezium.sink.type=kinesis
debezium.sink.kinesis.null.key=no-key
debezium.format.key=simplestring
debezium.format.value=simplestring
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.plugin.name=pgoutput
debezium.source.topic.prefix=corpus
debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
`, []string{
			`BEGIN; INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', NULL, 'OrderAudited', '{"a": 1}'); INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', 'OrderCreated', '{"note": "caf\u00e9", "n": [1.50, 2]}'); COMMIT`,
			`INSERT INTO public.outbox VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-3', 'OrderCreated', NULL)`,
			`INSERT INTO public.outbox VALUES ('706c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-4', 'OrderCreated', '{}')`,
		}, map[string]int{"Order": 4}},
}

// TestKinesisCorpus runs each case through Debezium Server and through
// pgoutbox, each into its own streams in the case's moto server, and
// compares the streams. It needs Debezium Server's distribution (installed on
// first use by .ci/install-debezium-server) and moto (make moto): make
// compat runs it, make test does not.
func TestKinesisCorpus(t *testing.T) {
	// Both sides find their credentials in the environment, as on AWS.
	// The Java SDK speaks CBOR to Kinesis unless told not to (its
	// setting aws.cborEnabled, in the environment CBOR_ENABLED), and moto
	// takes only JSON.
	t.Setenv("AWS_ACCESS_KEY_ID", mototest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", mototest.SecretKey)
	t.Setenv("AWS_REGION", mototest.Region)
	t.Setenv("CBOR_ENABLED", "false")
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
			// The sinks write to the streams their topics name and
			// create none.
			routed := slices.Sorted(maps.Keys(c.streams))
			for _, side := range []string{"dbz", "pgo"} {
				for _, r := range routed {
					moto.CreateStream(t, stream(side, r), shards)
				}
			}
			u, _ := url.Parse(db.URL)
			// $1, not ${routedByValue}: Debezium Server expands ${...}
			// in its file itself, and fails to start on this one.
			props := func(slot string) string {
				return c.server + fmt.Sprintf(`debezium.sink.kinesis.region=%s
debezium.sink.kinesis.endpoint=%s
debezium.transforms.outbox.route.topic.replacement=%s.outbox.event.$1
debezium.source.database.hostname=%s
debezium.source.database.port=%s
debezium.source.database.user=%s
debezium.source.database.dbname=%s
debezium.source.slot.name=%s
debezium.source.publication.name=%s_publication
`, mototest.Region, moto.Endpoint(), slot, u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/"), slot, slot)
			}
			pgoProps := corpusrun.FirstRun(t, conn, pgo, props("pgo"))
			dbz := dbzserver.Start(t, props("dbz"))
			corpusrun.AwaitSlot(t, conn, "dbz")
			for _, row := range c.rows {
				if _, err := conn.Exec(ctx, row); err != nil {
					t.Fatal(err)
				}
			}
			dbzRecs := map[string][]mototest.Record{}
			for _, r := range routed {
				dbzRecs[r] = moto.Await(t, stream("dbz", r), c.streams[r], 2*time.Minute, dbz.Exited())
				logRecords(t, stream("dbz", r), dbzRecs[r])
			}
			dbz.Stop()
			p := corpusrun.StartPgoutbox(t, pgo, pgoProps)
			for _, r := range routed {
				pgoRecs := moto.Await(t, stream("pgo", r), c.streams[r], 2*time.Minute, p.Exited())
				logRecords(t, stream("pgo", r), pgoRecs)
				for _, d := range compare(dbzRecs[r], pgoRecs) {
					t.Errorf("stream %s: %s", stream("*", r), d)
				}
			}
		})
	}
}

// stream is the stream side's router sends the value routed to.
func stream(side, routed string) string { return side + ".outbox.event." + routed }

// logRecords shows a stream's records in a -v run.
func logRecords(t *testing.T, name string, recs []mototest.Record) {
	t.Helper()
	var b strings.Builder
	for i, r := range recs {
		fmt.Fprintf(&b, "\n  %d %s key=%q data=%q", i, r.Shard, r.PartitionKey, r.Data)
	}
	t.Logf("%s: %d records%s", name, len(recs), b.String())
}

// compare compares Debezium Server's records of a stream with pgoutbox's,
// shard by shard in order: partition key, data and the shard.
func compare(dbz, pgo []mototest.Record) []string {
	var diffs []string
	if len(dbz) != len(pgo) {
		diffs = append(diffs, fmt.Sprintf("Debezium Server wrote %d records, pgoutbox %d", len(dbz), len(pgo)))
	}
	for i := range min(len(dbz), len(pgo)) {
		d, p := dbz[i], pgo[i]
		if d.Shard != p.Shard {
			diffs = append(diffs, fmt.Sprintf("record %d: shard %s, pgoutbox's %s", i, d.Shard, p.Shard))
		}
		if d.PartitionKey != p.PartitionKey {
			diffs = append(diffs, fmt.Sprintf("record %d: partition key\n  %q\npgoutbox\n  %q", i, d.PartitionKey, p.PartitionKey))
		}
		if string(d.Data) != string(p.Data) {
			diffs = append(diffs, fmt.Sprintf("record %d: data\n  %q\npgoutbox\n  %q", i, d.Data, p.Data))
		}
	}
	return diffs
}
