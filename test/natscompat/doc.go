// Package natscompat is the NATS corpus: each case's table, rows and
// Debezium Server properties run through Debezium Server 3.6.1 itself
// (test/dbzserver) and through pgoutbox, into one nats-server
// (test/natstest), and the two sides' messages are compared message for
// message: subject, data and headers, in order, equal or a listed
// deliberate difference.
package natscompat
