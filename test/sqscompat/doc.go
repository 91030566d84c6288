// Package sqscompat runs outbox tables and Debezium Server properties
// through Debezium Server 3.6.1's sqs sink itself (test/dbzserver) and
// through pgoutbox's, each into a queue of its own in a moto server
// (test/mototest), and compares the messages in the order received: body,
// message attributes and, on a FIFO queue, the message group. The
// deduplication ids differ by design (Debezium Server sends none and
// leans on the queue's content-based deduplication; pgoutbox sends the
// event id) and are logged only.
package sqscompat
