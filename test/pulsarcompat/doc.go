// Package pulsarcompat runs outbox tables and Debezium Server properties
// through Debezium Server 3.6.1's pulsar sink itself (test/dbzserver) and
// through pgoutbox's, into topics of their own in one Apache Pulsar
// standalone (test/pulsartest), and compares the topics message by
// message, in order (with key-based batching, in each key's order): key,
// properties (Debezium's run id, which differs from run to run,
// normalised), payload and whether an event time is set; and each
// topic's schema, as the admin API reports it (STRING, or none). A
// tombstone is a message with a null value from Debezium Server and one
// with an empty payload from pgoutbox (the Go client sets no null
// value): both read as an empty payload.
package pulsarcompat
