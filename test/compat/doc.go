// Package compat is the differential corpus's data and checker: a case is
// a table, a configuration (Kafka Connect's connector JSON and/or Debezium
// Server's properties), the rows to write and the named normalisations
// under which Debezium's records and pgoutbox's must be equal; Compare
// checks two streams of Kafka records record by record.
//
// The harness that runs Debezium 3.6.1 (Kafka Connect standalone, the
// PostgreSQL connector and the outbox router, installed by
// .ci/install-debezium) and pgoutbox against one PostgreSQL and one Kafka,
// and feeds their records to Compare, builds on test/kafkatest.
package compat
