// Package flow is the at-least-once bookkeeping of the rows a session has
// in flight, which the relay's row path produces into and the broker's
// acks settle: a WAL session's transactions (Watermark, under WALLedger),
// which confirm a commit LSN only once it and every transaction before it
// are acked; a polled batch's rows (PollLedger), of which exactly the
// acked are marked published; and the rows a poll phase published
// (Polled), which the WAL session after it does not send again.
//
// Its ledgers are what the relay's ledger interface (relay/publisher.go)
// asks for; exactly-once delivery's is in package eos. Nothing here reads
// a database or a broker.
package flow
