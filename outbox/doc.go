// Package outbox is the outbox table as every part of pgoutbox names it:
// the table's name (parsed, validated, quoted), the polling columns and
// the published floor that say which rows polling may skip, and a Change,
// one item of what a source reads (a row, a commit, a heartbeat), which
// the WAL reader (replication) and the poller (poll) both produce. It
// imports no other package of the project but schema, so that store, poll
// and replication can all use it.
package outbox
