// Package pulsarcompat runs outbox tables and Debezium Server properties
// through Debezium Server 3.6.1's pulsar sink itself (test/dbzserver) and
// through pgoutbox's, into topics of their own in one Apache Pulsar
// standalone (test/pulsartest), and compares the topics message by
// message, in order (with key-based batching, in each key's order; a
// partitioned topic partition by partition): key, properties (Debezium's
// run id, which differs from run to run, normalised), payload, whether an
// event time is set, whether the value is null and the schema version
// named, as the admin API's raw entries tell; and each topic's schema, as
// the admin API reports it (STRING, or none).
package pulsarcompat
