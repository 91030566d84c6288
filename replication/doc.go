// Package replication gets outbox rows out of PostgreSQL through logical
// replication: it checks that the server allows it, sets up the publication
// and the pgoutput slot, streams the slot from its confirmed position,
// decodes inserts into the outbox table, answers keepalives, sends standby
// status updates on a timer, and emits heartbeats so that an idle outbox
// does not pin WAL.
//
// The stream never decides what is safe to confirm: its caller reports the
// commit LSN that Kafka acknowledged through Stream.Confirm, and only that
// position is sent as flush and apply.
package replication
