// Package bench measures pgoutbox end to end: commit-to-consume latency,
// throughput and CPU per event of the relay in WAL and polling mode, at one
// rate or a sweep of rates, under one-INSERT transactions or an
// application's (lock an aggregate's row, then insert its events), a drain
// of a committed backlog, and the floor: the relay's own receive loop and
// decoder with nothing done to the events (RunFloor).
//
// The relay under test is a separate `pgoutbox run` process, and the floor a
// separate `pgoutbox bench floor` process, so that their CPU time and peak
// RSS can be read from /proc; the machine's idle CPU over each run comes
// from /proc/stat. The load generator is open-loop:
// transactions are due at fixed times, and a writer that falls behind does
// not push the schedule back; how late writers started is reported as the
// schedule lag. Latency is measured per event, on the bench process's clock,
// from the moment its transaction's COMMIT returned to the moment a consumer
// read the event from Kafka (or, for the floor, the reader decoded it).
package bench
