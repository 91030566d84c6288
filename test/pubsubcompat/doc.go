// Package pubsubcompat runs outbox tables and Debezium Server properties
// through Debezium Server 3.6.1's pubsub sink itself (test/dbzserver) and
// through pgoutbox's, into topics of their own in one Google Cloud Pub/Sub
// emulator (test/pubsubtest), and compares each topic's messages: ordering
// key, attributes (Debezium's run id, which differs from run to run,
// normalised) and data. Pub/Sub keeps the order of each ordering key's
// messages only: with ordering, each key's messages compare in order;
// without, a topic's messages compare as a multiset. The order they were
// pulled in is logged. A tombstone is a message without data, its
// headers as attributes, from both.
package pubsubcompat
