package relay

import (
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/transform"
)

// TestConfigGroups checks the grouped settings through Config: their
// defaults, and the first error Validate reports for each rule.
func TestConfigGroups(t *testing.T) {
	base := func() Config {
		var c Config
		c.Replication.DatabaseURL = "postgres://x"
		c.Replication.Slot = "orders"
		c.Sink = fakeOpener{}
		return c
	}
	c := base()
	c.Defaults()
	if got := (TransactionConfig{PositionTopic: "orders.position", MaxAge: 100 * time.Millisecond, MaxRecords: 10_000}); c.Transactions != got {
		t.Errorf("transaction defaults %+v, want %+v", c.Transactions, got)
	}
	if got := (LeaseConfig{TTL: DefaultLeaseTTL, Renew: DefaultLeaseRenew}); c.Lease != got {
		t.Errorf("lease defaults %+v, want %+v", c.Lease, got)
	}
	if got := (OperationsConfig{RetentionInterval: 5 * time.Minute}); c.Operations != got {
		t.Errorf("operations defaults %+v, want %+v", c.Operations, got)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}

	for _, tt := range []struct {
		name string
		set  func(*Config)
		want string // "" for valid
	}{
		{"lease renewal negative", func(c *Config) { c.Lease.Renew = -time.Second }, "lease TTL"},
		{"lease TTL under three renewals", func(c *Config) { c.Lease.TTL, c.Lease.Renew = 2*time.Second, time.Second }, "at least three times"},
		{"lease TTL three renewals", func(c *Config) { c.Lease.TTL, c.Lease.Renew = 3*time.Second, time.Second }, ""},
		{"negative monitor interval", func(c *Config) { c.Operations.MonitorInterval = -time.Second }, "must not be negative"},
		{"negative retention interval", func(c *Config) { c.Operations.RetentionInterval = -time.Second }, "must not be negative"},
		{"at-least-once ignores transactions", func(c *Config) { c.Transactions.Interval = time.Hour }, ""},
		{"exactly-once defaults", func(c *Config) { c.Delivery = ExactlyOnce }, ""},
		{"position topic with a placeholder", func(c *Config) {
			c.Delivery, c.Transactions.PositionTopic = ExactlyOnce, "{aggregatetype}.position"
		}, "position topic"},
		{"position topic the dead-letter topic", func(c *Config) {
			c.Delivery, c.Transactions.PositionTopic, c.Transactions.MaxRecords = ExactlyOnce, "orders.dlq", -1
		}, "must differ"},
		{"negative transaction bound", func(c *Config) { c.Delivery, c.Transactions.MaxRecords = ExactlyOnce, -1 }, "transaction bounds"},
		{"interval over the maximum age", func(c *Config) { c.Delivery, c.Transactions.Interval = ExactlyOnce, time.Second }, "transaction interval"},
		{"negative settle", func(c *Config) { c.Delivery, c.Transactions.Settle = ExactlyOnce, -time.Millisecond }, "transaction settle"},
		{"cloudevents on change events", func(c *Config) {
			c.Encoder.Format, c.Encoder.Debezium.Value = schema.Debezium, schema.ConvCloudEvents+":json"
		}, ""},
		{"cloudevents after ExtractNewRecordState", func(c *Config) {
			c.Encoder.Format, c.Encoder.Debezium.Value = schema.Debezium, schema.ConvCloudEvents+":json"
			c.Transforms.Props = map[string]string{"transforms": "u", "transforms.u.type": transform.NewStateClass}
		}, "ExtractNewRecordState"},
		{"cloudevents after the router", func(c *Config) {
			c.Encoder.Format, c.Encoder.Debezium.Value = schema.DebeziumOutbox, schema.ConvCloudEvents
		}, "after the Outbox Event Router"},
		{"cloudevents from headers without HeaderFrom", func(c *Config) {
			c.Encoder.Format, c.Encoder.Debezium.Value, c.Encoder.Debezium.Header = schema.DebeziumOutbox, schema.ConvCloudEvents, schema.ConvJSONSchemas
			c.Encoder.Debezium.CloudEventsMetadata = schema.CloudEventsMetadata{Headers: true, IDHeader: true, TypeHeader: true}
		}, "HeaderFrom$Value before the Outbox Event Router"},
		{"cloudevents from headers", func(c *Config) {
			c.Encoder.Format, c.Encoder.Debezium.Value, c.Encoder.Debezium.Header = schema.DebeziumOutbox, schema.ConvCloudEvents, schema.ConvJSONSchemas
			c.Encoder.Debezium.CloudEventsMetadata = schema.CloudEventsMetadata{Headers: true, IDHeader: true, TypeHeader: true}
			c.Transforms.Props = map[string]string{"transforms": "m,outbox", "transforms.outbox.type": transform.RouterClass,
				"transforms.m.type": "org.apache.kafka.connect.transforms.HeaderFrom$Value", "transforms.m.fields": "op,source",
				"transforms.m.headers": "op,source", "transforms.m.operation": "copy"}
		}, ""},
		{"cloudevents from headers under string headers", func(c *Config) {
			c.Encoder.Format, c.Encoder.Debezium.Value = schema.DebeziumOutbox, schema.ConvCloudEvents
			c.Encoder.Debezium.CloudEventsMetadata = schema.CloudEventsMetadata{Headers: true}
		}, "header converter must be json-schemas"},
		{"cloudevents from headers on change events", func(c *Config) {
			c.Encoder.Format, c.Encoder.Debezium.Value, c.Encoder.Debezium.Header = schema.Debezium, schema.ConvCloudEvents, schema.ConvJSONSchemas
			c.Encoder.Debezium.CloudEventsMetadata = schema.CloudEventsMetadata{Headers: true}
		}, "after the Outbox Event Router"},
		{"cloudevents keys", func(c *Config) {
			c.Encoder.Format, c.Encoder.Debezium.Key = schema.Debezium, schema.ConvCloudEvents
		}, "as the value converter"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.set(&c)
			c.Defaults()
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}
