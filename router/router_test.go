package router

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/schema"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		topic string
		ok    bool
	}{
		{"", true}, // DefaultTopic
		{"outbox.event.{aggregatetype}", true},
		{"{aggregatetype}", true},
		{"events", true},
		{"a.b_c-D9", true},
		{"{aggregatetype}.{type}", true},
		{"{aggregatetype}{aggregateid}{type}", true},
		{"x.{aggregateid}.{aggregateid}", true},
		{strings.Repeat("a", 249), true},
		{strings.Repeat("a", 248) + "{type}", true},

		{"outbox.{aggregatetype", false},
		{"outbox.aggregatetype}", false},
		{"outbox.{{aggregatetype}}", false},
		{"outbox.{aggregate{type}}", false},
		{"{}", false},
		{"{AggregateType}", false},
		{"{aggregate_type}", false},
		{"{payload}", false},
		{"{ type }", false},
		{"outbox event", false},
		{"outbox/{type}", false},
		{"ü.{type}", false},
		{".", false},
		{"..", false},
		{strings.Repeat("a", 250), false},
		{strings.Repeat("a", 249) + "{type}", false},
	} {
		err := Config{Topic: tc.topic}.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("Validate(%q) = %v, want ok=%v", tc.topic, err, tc.ok)
		}
		if _, nerr := New(Config{Topic: tc.topic}); (nerr == nil) != tc.ok {
			t.Errorf("New(%q) = %v, want ok=%v", tc.topic, nerr, tc.ok)
		}
	}
}

func rec(aggType, aggID, typ string) *schema.Record {
	return &schema.Record{ID: "1", AggregateType: aggType, AggregateID: aggID, Type: typ, Payload: []byte("{}"), Time: time.Unix(0, 0)}
}

func TestTopic(t *testing.T) {
	for _, tc := range []struct {
		name     string
		template string
		rec      *schema.Record
		want     string
		column   string // RowError column when the topic is illegal
	}{
		{"default", "", rec("Order", "42", "OrderCreated"), "outbox.event.Order", ""},
		{"case kept", "outbox.event.{aggregatetype}", rec("CUSTOMER_Account", "42", "x"), "outbox.event.CUSTOMER_Account", ""},
		{"constant", "all-events", rec("Order", "42", "x"), "all-events", ""},
		{"only placeholder", "{aggregatetype}", rec("orders", "42", "x"), "orders", ""},
		{"two fields", "{aggregatetype}.{type}", rec("Order", "42", "Created.v2"), "Order.Created.v2", ""},
		{"all fields", "t-{aggregatetype}-{aggregateid}-{type}", rec("A", "b", "C"), "t-A-b-C", ""},
		{"repeated field", "{aggregateid}.{aggregateid}", rec("A", "7", "C"), "7.7", ""},
		{"exactly 249", "x{aggregateid}", rec("A", strings.Repeat("9", 248), "C"), "x" + strings.Repeat("9", 248), ""},

		{"space", "", rec("Order Line", "42", "x"), "", "aggregatetype"},
		{"slash", "", rec("orders/eu", "42", "x"), "", "aggregatetype"},
		{"unicode", "", rec("Bestellüng", "42", "x"), "", "aggregatetype"},
		{"empty field", "", rec("", "42", "x"), "", "aggregatetype"},
		{"bad type", "{aggregatetype}.{type}", rec("Order", "42", "created:v2"), "", "type"},
		{"bad id", "{aggregateid}", rec("Order", "a b", "x"), "", "aggregateid"},
		{"dot", "{aggregatetype}", rec(".", "42", "x"), "", "aggregatetype"},
		{"dot dot", "{aggregatetype}", rec("..", "42", "x"), "", "aggregatetype"},
		{"dot dot split", "{aggregatetype}{type}", rec(".", "42", "."), "", "aggregatetype"},
		{"too long", "x{aggregateid}", rec("A", strings.Repeat("9", 249), "C"), "", "aggregateid"},
		{"too long blames the longest", "{aggregatetype}.{type}", rec("A", "1", strings.Repeat("t", 248)), "", "type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(Config{Topic: tc.template})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second call may be served from the cache
				got, err := r.Topic(tc.rec)
				if tc.column == "" {
					if err != nil || got != tc.want {
						t.Fatalf("Topic = %q, %v; want %q", got, err, tc.want)
					}
					continue
				}
				var re *schema.RowError
				if !errors.As(err, &re) || re.Column != tc.column {
					t.Fatalf("Topic = %q, %v; want a *schema.RowError on column %q", got, err, tc.column)
				}
			}
		})
	}
}

func TestTopicAllocations(t *testing.T) {
	for _, tc := range []struct {
		template string
		want     float64
	}{
		{"all-events", 0},
		{"outbox.event.{aggregatetype}", 0},  // cached
		{"{type}.{type}", 0},                 // cached: one field
		{"{aggregatetype}.{aggregateid}", 1}, // two fields: rendered each time
		{"outbox.{aggregateid}", 0},          // one field: cached up to maxCached
	} {
		r, err := New(Config{Topic: tc.template})
		if err != nil {
			t.Fatal(err)
		}
		rc := rec("Order", "42", "OrderCreated")
		if _, err := r.Topic(rc); err != nil {
			t.Fatal(err)
		}
		if got := testing.AllocsPerRun(100, func() { _, _ = r.Topic(rc) }); got != tc.want {
			t.Errorf("%s: %v allocations per Topic, want %v", tc.template, got, tc.want)
		}
	}
}

// TestTopicCacheBounded checks that a high-cardinality field neither grows
// the cache without bound nor stops rendering correctly.
func TestTopicCacheBounded(t *testing.T) {
	r, err := New(Config{Topic: "agg.{aggregateid}"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxCached + 100 {
		id := strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strings.Repeat("9", i/26%40) + "-" + strconv.Itoa(i)
		got, err := r.Topic(rec("A", id, "t"))
		if err != nil || got != "agg."+id {
			t.Fatalf("Topic(%q) = %q, %v", id, got, err)
		}
	}
	if n := len(*r.cache.Load()); n != maxCached {
		t.Fatalf("cache holds %d topics, want the bound %d", n, maxCached)
	}
}

// TestTopicConcurrent runs Topic from several goroutines (go test -race).
func TestTopicConcurrent(t *testing.T) {
	r, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	types := []string{"Order", "Customer", "Payment", "Shipment"}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				at := types[(g+i)%len(types)]
				got, err := r.Topic(rec(at, "1", "t"))
				if err != nil || got != "outbox.event."+at {
					t.Errorf("Topic(%s) = %q, %v", at, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
