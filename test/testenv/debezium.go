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
