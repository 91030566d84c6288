// Package replication gets outbox rows out of PostgreSQL through logical
// replication: it checks that the server allows it, sets up the publication
// and the pgoutput slot, streams the slot from its confirmed position,
// decodes inserts into the outbox table, answers keepalives, sends standby
// status updates on a timer, and emits heartbeats so that an idle outbox
// does not pin WAL.
//
// The stream confirms what its caller reports: the commit LSN that Kafka
// acknowledged, through Stream.Confirm, is sent as flush and apply. It
// decides one thing itself: when the server asks for a reply (it is about to
// time out the connection, or is shutting down and waits for the flush to
// reach its WAL end) and nothing is in flight (outside a transaction, every
// commit and heartbeat handed over already confirmed), it confirms the
// server's WAL end, since everything committed before it was sent and acked.
package replication
