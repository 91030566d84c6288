// Package store reads and writes pgoutbox's own tables: the pipeline's row
// in pgoutbox_state (mode and why, the confirmed position and the published
// floor, a pending handoff, the cluster the positions belong to, liveness,
// Kafka health, rows lost to deletes) and pgoutbox_dead_letter. It also
// holds the one statement that deletes published outbox rows for retention
// (the policy, when and which, stays in relay) and the count of unpublished
// rows that status and the metrics read.
//
// relay and cmd go through store; no other package writes SQL against these
// tables. The tables themselves (DDL) belong to migrations, which Ensure
// applies. Values that other packages act on are typed: Mode, and the
// ReasonCode of a mode's Reason, kept in the same text columns as before so
// that databases written by an earlier pgoutbox read back as they are.
//
// Every operation takes a Querier (a *pgx.Conn, or a transaction), so the
// caller decides which connection, lock and timeout a statement runs under.
package store
