package debezium

import (
	"strings"
	"testing"
)

// ExtractNewRecordState before the Outbox Event Router leaves the router
// nothing to route, as Debezium's passes records that are no change
// event: the change events, flattened, with a warning naming the
// router's options; its columns still map the table.
func TestUnwrapBeforeRouter(t *testing.T) {
	tr, err := translateConnect(t, `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "transforms": "unwrap, outbox",
  "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
  "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
  "transforms.outbox.table.field.event.key": "aggregate_id",
  "transforms.outbox.route.by.field": "type",
  "transforms.outbox.route.topic.replacement": "${routedByValue}"}`)
	if err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{"format": "debezium", "column-aggregate-id": "aggregate_id", "column-aggregate-type": "type",
		"transforms": `{"transforms":"unwrap","transforms.unwrap.type":"io.debezium.transforms.ExtractNewRecordState"}`} {
		if got, _ := settingOf(tr, flag); got != want {
			t.Errorf("--%s %q, want %q", flag, got, want)
		}
	}
	if _, ok := settingOf(tr, "route-topic-replacement"); ok {
		t.Errorf("the inert router's replacement set")
	}
	if w := strings.Join(tr.Warnings, "\n"); !strings.Contains(w, "transforms.outbox.type: the Outbox Event Router after transforms.unwrap.type") ||
		!strings.Contains(w, "transforms.outbox.route.topic.replacement") {
		t.Errorf("warnings %q", tr.Warnings)
	}
	// With a predicate, the router may still see change events: refused
	// as before.
	if _, err := translateConnect(t, `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "transforms": "unwrap,outbox", "predicates": "p", "predicates.p.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
  "predicates.p.pattern": "x", "transforms.unwrap.predicate": "p",
  "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
  "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"}`); err == nil {
		t.Errorf("ExtractNewRecordState with a predicate before the router: not refused")
	}
}
