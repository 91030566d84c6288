// Package rocketmqcompat runs outbox tables and Debezium Server properties
// through Debezium Server 3.6.1's rocketmq sink itself (test/dbzserver)
// and through pgoutbox's, each into topics of its own (dbz_... and
// pgo_...) on one Apache RocketMQ name server and broker per case
// (test/rocketmqtest), and compares the topics: how many queues each has,
// which queue each key's messages are in (Java's String.hashCode of the
// key's text, as SelectMessageQueueByHash), and each queue's messages in
// commit order: KEYS, body, user properties (Debezium's run id, which
// differs from run to run, normalised), TAGS and whether a message ID was
// set. pgoutbox's must be, key by key, in commit order in their queue;
// Debezium Server's sink sends asynchronously on several threads, and
// stores a queue's messages, even one key's, in whatever order those
// threads send them, which the test logs (see compare).
//
// TestRocketMQDeadLetters shows, through pgoutbox alone, what becomes of
// the records Debezium Server's sink stops at (a tombstone, a key that is
// null): each is dead-lettered.
package rocketmqcompat
