// Package poll reads outbox rows from the table itself, without the WAL:
// the poller (unpublished rows in insertion order, marked published once
// Kafka acknowledged them, under the pipeline's fence), the reading a
// published floor is made of, the positions the deleted-row detector
// counts, and the reader of a table's existing rows for a snapshot. It is
// the fallback of the WAL reader (package replication) and produces the
// same outbox.Change rows.
package poll
