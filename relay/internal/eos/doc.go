// Package eos is exactly-once delivery's part that knows nothing of the
// relay's sessions: the position record that every Kafka transaction
// carries (Position) and what a session resumes from after it; the
// transactional session that fences, commits and ends (Session); a WAL
// session's ledger of whole Postgres transactions in one Kafka
// transaction (Ledger, OpenWAL); a poll session's transaction per batch
// (Poll); and the transactions a session leaves open (Unended).
//
// The relay puts it behind its delivery interface (relay/delivery.go);
// at-least-once delivery's bookkeeping is in package flow.
package eos
