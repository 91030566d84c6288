// Package bench measures pgoutbox end to end: commit-to-consume latency and
// throughput of the relay in WAL and polling mode, a drain of a committed
// backlog, and the floor, what a bare logical-replication reader gets from
// the same Postgres.
//
// The relay under test is a separate `pgoutbox run` process, so that its CPU
// time and peak RSS can be read from /proc. The load generator is open-loop:
// transactions are due at fixed times, and a writer that falls behind does
// not push the schedule back; how late writers started is reported as the
// schedule lag. Latency is measured per event, on the bench process's clock,
// from the moment its transaction's COMMIT returned to the moment a consumer
// read the event from Kafka (or, for the floor, the reader decoded it).
package bench
