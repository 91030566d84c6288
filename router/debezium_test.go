package router

import (
	"errors"
	"testing"

	"github.com/pgoutbox/pgoutbox/schema"
)

// Debezium's Outbox Event Router routes with Kafka's RegexRouter
// (EventRouterDelegate.apply, debezium/debezium): the route.by.field value
// is matched in full against route.topic.regex; a match is replaced by
// route.topic.replacement (Java syntax), a non-match leaves the value itself
// as the topic. Defaults: (?<routedByValue>.*) and
// outbox.event.${routedByValue} (outbox-event-router.adoc options table).
func TestRouteTopicReplacement(t *testing.T) {
	for _, tc := range []struct {
		regex, replacement, aggType, want string
	}{
		{"", "outbox.event.${routedByValue}", "Order", "outbox.event.Order"},
		{"", "${routedByValue}", "customers", "customers"},
		{`(?<routedByValue>.*)Aggregate`, "events.${routedByValue}", "OrderAggregate", "events.Order"},
		{`(?<routedByValue>.*)Aggregate`, "events.${routedByValue}", "Customer", "Customer"}, // no match: the value itself
		{`(.*)-(.*)`, "$2.$1", "order-eu", "eu.order"},
		// An empty route.by.field routes as Debezium's RegexRouter routes
		// it (canRouteBasedOnField): the empty value matches .* whole.
		{"", "outbox.event.${routedByValue}", "", "outbox.event."},
		{`(.*)`, `x\$$1`, "a", "x$a"}, // \$ is a literal $: then an illegal topic, tested below
	} {
		r, err := New(Config{RouteRegex: tc.regex, RouteReplacement: tc.replacement})
		if err != nil {
			t.Fatalf("%q %q: %v", tc.regex, tc.replacement, err)
		}
		got, err := r.Topic(&schema.Record{AggregateType: tc.aggType})
		if tc.want == "x$a" {
			var rowErr *schema.RowError
			if !errors.As(err, &rowErr) || rowErr.Column != "aggregatetype" {
				t.Errorf("topic x$a: got %q, %v; want a RowError", got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q %q %q: got %q, %v; want %q", tc.regex, tc.replacement, tc.aggType, got, err, tc.want)
		}
	}
	for _, bad := range []Config{
		{RouteReplacement: "${nosuch}"},
		{RouteRegex: "(", RouteReplacement: "x"},
		{RouteRegex: "(a)", RouteReplacement: "$2"},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v: Validate succeeded", bad)
		}
	}
}

func TestSchemaTablePlaceholders(t *testing.T) {
	r, err := New(Config{Topic: "dbserver1.{schema}.{table}"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Topic(&schema.Record{Origin: schema.Origin{Schema: "public", Table: "outbox"}})
	if err != nil || got != "dbserver1.public.outbox" {
		t.Fatalf("got %q, %v", got, err)
	}
}
