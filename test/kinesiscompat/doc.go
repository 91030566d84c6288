// Package kinesiscompat runs outbox tables and Debezium Server properties
// through Debezium Server 3.6.1's kinesis sink itself (test/dbzserver) and
// through pgoutbox's, into streams of their own in a moto server
// (test/mototest), and compares the records stream by stream, in order:
// partition key, data, and the shard the partition key picked.
package kinesiscompat
