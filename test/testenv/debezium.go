package testenv

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DebeziumDB returns the database.* options of e's database, as a
// Debezium configuration names it.
func DebeziumDB(t *testing.T, e *Env) (host, port, user, dbname string) {
	t.Helper()
	u, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/")
}

// DebeziumHeaderID reads the event id from the header Debezium Server
// writes by default: JSON with its schema.
func DebeziumHeaderID(t *testing.T) func(*kgo.Record) string {
	return func(r *kgo.Record) string {
		h, _ := HeaderOf(r, "id")
		var v struct{ Payload any }
		if err := json.Unmarshal([]byte(h), &v); err != nil {
			t.Fatalf("header id %q: %v", h, err)
		}
		return fmt.Sprint(v.Payload)
	}
}

// DebeziumServer is the start of a Debezium Server application.properties
// that reads e's database with Debezium's PostgreSQL connector: its class
// and database.hostname, port, user and dbname, a key=value a line. A test
// adds its sink and its own settings after it.
func DebeziumServer(t *testing.T, e *Env) string {
	t.Helper()
	host, port, user, db := DebeziumDB(t, e)
	return "debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
		"debezium.source.database.hostname=" + host + "\n" +
		"debezium.source.database.port=" + port + "\n" +
		"debezium.source.database.user=" + user + "\n" +
		"debezium.source.database.dbname=" + db + "\n"
}

// DebeziumServerKafka is DebeziumServer with e's broker as its sink:
// debezium.sink.type=kafka and the producer's bootstrap.servers.
func DebeziumServerKafka(t *testing.T, e *Env) string {
	t.Helper()
	return "debezium.sink.type=kafka\n" +
		"debezium.sink.kafka.producer.bootstrap.servers=" + strings.Join(e.Brokers, ",") + "\n" +
		DebeziumServer(t, e)
}
