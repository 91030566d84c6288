package schema

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The orders below are what java.util.HashMap<String, Long> iterates for
// those keys put in that order (jshell, OpenJDK 21), as Debezium's
// TransactionContext keeps the per-table counts.
func TestOrderTxCounts(t *testing.T) {
	for _, tt := range []struct {
		put      []string
		capacity int // before
		want     string
		wantCap  int
	}{
		{[]string{"public.orders", "public.order_lines"}, 0, "public.orders,public.order_lines", 16},
		{[]string{"public.order_lines", "public.orders"}, 0, "public.orders,public.order_lines", 16},
		{[]string{"public.a", "public.b", "public.c", "s1.t", "inventory.products", "inventory.customers", "x.y"}, 0,
			"s1.t,x.y,public.c,public.a,inventory.customers,public.b,inventory.products", 16},
		{[]string{"public.outbox"}, 16, "public.outbox", 16},
		{[]string{"public.t0", "public.t1", "public.t2", "public.t3", "public.t4", "public.t5", "public.t6", "public.t7",
			"public.t8", "public.t9", "public.t10", "public.t11", "public.t12", "public.t13"}, 0,
			"public.t12,public.t13,public.t8,public.t7,public.t9,public.t4,public.t3,public.t6,public.t5,public.t0,public.t10,public.t11,public.t2,public.t1", 32},
		// The map was cleared after the fourteen: its table stays 32.
		{[]string{"public.t3", "public.t12", "public.t1"}, 32, "public.t12,public.t3,public.t1", 32},
	} {
		counts := make([]TxCount, len(tt.put))
		for i, n := range tt.put {
			counts[i] = TxCount{Collection: n, Events: int64(i + 1)}
		}
		got, capacity := OrderTxCounts(counts, tt.capacity)
		names := make([]string, len(got))
		for i, c := range got {
			names[i] = c.Collection
			if want := int64(strings.Index(strings.Join(tt.put, ","), c.Collection)); want < 0 || c.Events == 0 {
				t.Errorf("%s lost its count", c.Collection)
			}
		}
		if strings.Join(names, ",") != tt.want || capacity != tt.wantCap {
			t.Errorf("%v: %s (capacity %d), want %s (%d)", tt.put, strings.Join(names, ","), capacity, tt.want, tt.wantCap)
		}
	}
	// String.hashCode counts UTF-16 code units: a character outside the
	// BMP is two.
	var h int32
	for _, u := range []int32{'ü', '日', 0xD83D, 0xDE00, '.', 'x'} {
		h = 31*h + u
	}
	if h != -1351389546 {
		t.Fatalf("the test's own hash: %d", h)
	}
	u := uint32(h)
	if got, want := javaBucket("ü日😀.x", 1<<30), int((u^u>>16)&(1<<30-1)); got != want {
		t.Errorf("javaBucket: %d, want %d", got, want)
	}
}

func TestTxBoundaryMessage(t *testing.T) {
	at := time.Date(2026, 11, 30, 3, 0, 0, 123_999_000, time.UTC)
	begin := TxBoundary{ID: "771:2345", Time: at}.Message()
	end := TxBoundary{End: true, ID: "771:2400", Time: at, Events: 3,
		Collections: []TxCount{{"public.orders", 1}, {"public.order_lines", 2}}}.Message()
	for _, tt := range []struct {
		name    string
		got     []byte
		schema  string
		payload string
	}{
		{"begin key", begin.Key, "io.debezium.connector.common.TransactionMetadataKey", `{"id":"771:2345"}`},
		{"begin value", begin.Value, "io.debezium.connector.common.TransactionMetadataValue",
			`{"status":"BEGIN","id":"771:2345","event_count":null,"data_collections":null,"ts_ms":1796007600123}`},
		{"end value", end.Value, "io.debezium.connector.common.TransactionMetadataValue",
			`{"status":"END","id":"771:2400","event_count":3,"data_collections":[{"data_collection":"public.orders","event_count":1},{"data_collection":"public.order_lines","event_count":2}],"ts_ms":1796007600123}`},
	} {
		var env struct {
			Schema struct {
				Name    string `json:"name"`
				Version int    `json:"version"`
			} `json:"schema"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(tt.got, &env); err != nil {
			t.Fatalf("%s: %v: %s", tt.name, err, tt.got)
		}
		if env.Schema.Name != tt.schema || env.Schema.Version != 1 || string(env.Payload) != tt.payload {
			t.Errorf("%s: %s v%d %s, want %s v1 %s", tt.name, env.Schema.Name, env.Schema.Version, env.Payload, tt.schema, tt.payload)
		}
	}
	if begin.Timestamp != (time.Time{}) || len(begin.Headers) != 0 || begin.HasPartition {
		t.Errorf("a transaction record has no timestamp, headers or partition of its own: %+v", begin)
	}
}

func TestTxBlock(t *testing.T) {
	if got := string(appendTxBlock(nil, TxBlock{})); got != "null" {
		t.Errorf("none: %s", got)
	}
	got := string(appendTxBlock(nil, TxBlock{ID: TxID(4294967295, 1<<40), TotalOrder: 3, CollectionOrder: 2}))
	if want := `{"id":"4294967295:1099511627776","total_order":3,"data_collection_order":2}`; got != want {
		t.Errorf("%s, want %s", got, want)
	}
}
