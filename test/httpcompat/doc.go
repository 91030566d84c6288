// Package httpcompat runs outbox tables and Debezium Server properties
// through Debezium Server 3.6.1's http sink itself (test/dbzserver) and
// through pgoutbox's, into one HTTP endpoint of the test's, and compares
// the requests one for one: body, content-type, the X-DEBEZIUM-* headers
// and, when signed, the Standard Webhooks signature.
package httpcompat
