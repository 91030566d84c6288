// Package httpcompat runs outbox tables and Debezium Server properties
// through Debezium Server 3.6.1's http sink itself (test/dbzserver) and
// through pgoutbox's, into one HTTP endpoint of the test's, and compares
// the requests one for one: body, content-type, the X-DEBEZIUM-* headers
// and, when signed, the Standard Webhooks signature; with OAuth2 or JWT
// authentication, also the requests each side made to the token endpoint
// or auth server the endpoint serves, and each event's Authorization.
package httpcompat
