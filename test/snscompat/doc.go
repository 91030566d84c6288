// Package snscompat runs outbox tables and Debezium Server properties
// through Debezium Server 3.6.1's sns sink itself (test/dbzserver) and
// through pgoutbox's, each into topics of its own in a moto server
// (test/mototest), read from queues subscribed with raw delivery, and
// compares the messages: message, attributes and, on a FIFO topic, the
// message group, in the order received. The deduplication ids are
// compared where Debezium Server sends them (from a header); without one
// it sends none and leans on the topic's content-based deduplication,
// where pgoutbox sends the event id.
package snscompat
