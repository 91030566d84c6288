// Package schema maps the outbox table's columns to an event [Record] and
// encodes records into Kafka messages (envelopes).
//
// The per-event path is built for few allocations: [Binding.Record] copies the
// four text fields into one string allocation and aliases the JSON columns;
// [Encoder.Encode] appends JSON by hand into one buffer that holds both the
// Kafka key and value. Errors that belong to one row (a poison row) are
// [*RowError]; callers decide to dead-letter or halt.
//
// The package imports no other package of the project.
package schema
