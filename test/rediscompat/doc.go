// Package rediscompat is the Redis corpus: each case's table, rows and
// Debezium Server properties run through Debezium Server 3.6.1 itself
// (test/dbzserver) and through pgoutbox, into one redis-server
// (test/redistest), and the two sides' entries are compared stream by
// stream, entry for entry: their fields and values, in order, equal or a
// listed difference (entry ids are Redis's, and differ by nature).
package rediscompat
