// Package debezium reads a Debezium configuration, a Kafka Connect
// connector JSON or a Debezium Server application.properties, into
// pgoutbox's settings: each option becomes a setting of run, is ignored
// (named in one warning), or is refused with what to do instead.
//
// What pgoutbox makes of each option is a row of one table ([Options]),
// which docs/debezium.md's "Every option" section is written from.
package debezium
