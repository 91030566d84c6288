package schema

import (
	"encoding/json"
	"testing"
	"time"
)

// The heartbeat record is Debezium's: key a ServerNameKey struct of the
// logical name, value a Heartbeat struct of the beat's time in
// milliseconds, in partition 0.
func TestHeartbeatMessage(t *testing.T) {
	for _, tt := range []struct {
		name string
		hb   Heartbeat
		key  string
		tsMS int64
	}{
		{name: "plain", hb: Heartbeat{ServerName: "shop", Time: time.UnixMilli(1700000000123)}, key: "shop", tsMS: 1700000000123},
		{name: "quoted", hb: Heartbeat{ServerName: `a"b\c`, Time: time.UnixMilli(5).Add(999 * time.Microsecond)}, key: `a"b\c`, tsMS: 5},
	} {
		m := tt.hb.Message()
		if !m.HasPartition || m.Partition != 0 {
			t.Errorf("%s: partition %d (%v), want 0", tt.name, m.Partition, m.HasPartition)
		}
		var k struct {
			Schema struct {
				Name    string
				Version int
				Fields  []struct{ Field, Type string }
			}
			Payload struct{ ServerName string }
		}
		if err := json.Unmarshal(m.Key, &k); err != nil {
			t.Fatalf("%s: key %s: %v", tt.name, m.Key, err)
		}
		if k.Schema.Name != "io.debezium.connector.common.ServerNameKey" || k.Schema.Version != 1 ||
			len(k.Schema.Fields) != 1 || k.Schema.Fields[0].Field != "serverName" || k.Schema.Fields[0].Type != "string" {
			t.Errorf("%s: key schema %s", tt.name, m.Key)
		}
		if k.Payload.ServerName != tt.key {
			t.Errorf("%s: serverName %q, want %q", tt.name, k.Payload.ServerName, tt.key)
		}
		var v struct {
			Schema struct {
				Name    string
				Version int
				Fields  []struct{ Field, Type string }
			}
			Payload struct {
				TS int64 `json:"ts_ms"`
			}
		}
		if err := json.Unmarshal(m.Value, &v); err != nil {
			t.Fatalf("%s: value %s: %v", tt.name, m.Value, err)
		}
		if v.Schema.Name != "io.debezium.connector.common.Heartbeat" || v.Schema.Version != 1 ||
			len(v.Schema.Fields) != 1 || v.Schema.Fields[0].Field != "ts_ms" || v.Schema.Fields[0].Type != "int64" {
			t.Errorf("%s: value schema %s", tt.name, m.Value)
		}
		if v.Payload.TS != tt.tsMS {
			t.Errorf("%s: ts_ms %d, want %d", tt.name, v.Payload.TS, tt.tsMS)
		}
	}
}
