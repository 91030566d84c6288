package schema

import (
	"strconv"
	"time"
)

// Debezium's heartbeat record (heartbeat.interval.ms above 0): on the
// heartbeat topic, a key naming the connector's logical name (topic.prefix)
// and a value holding the time of the beat, both structs of schemas of
// their own (SchemaFactory.heartbeatKeySchema, heartbeatValueSchema).

const (
	heartbeatKeySchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"serverName"}],` +
		`"optional":false,"name":"io.debezium.connector.common.ServerNameKey","version":1}`
	heartbeatValueSchema = `{"type":"struct","fields":[{"type":"int64","optional":false,"field":"ts_ms"}],` +
		`"optional":false,"name":"io.debezium.connector.common.Heartbeat","version":1}`
)

// Heartbeat is one heartbeat record: ServerName is the key's serverName,
// Time the value's ts_ms.
type Heartbeat struct {
	ServerName string
	Time       time.Time
}

// Message is the record as JsonConverter writes it with schemas, in
// partition 0 as Debezium puts it, no headers and no timestamp (Kafka
// Connect's producer stamps it): the form package transform reads, which
// converts it as the configuration's converters write it.
func (h Heartbeat) Message() Message {
	key := append([]byte(`{"schema":`+heartbeatKeySchema+`,"payload":{"serverName":`), nil...)
	key = appendJavaString(key, h.ServerName)
	key = append(key, "}}"...)
	v := append([]byte(`{"schema":`+heartbeatValueSchema+`,"payload":{"ts_ms":`), nil...)
	v = strconv.AppendInt(v, h.Time.UnixMilli(), 10)
	v = append(v, "}}"...)
	return Message{Key: key, Value: v, HasPartition: true}
}
