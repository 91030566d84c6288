package debezium

import (
	"errors"
	"strings"
	"testing"
)

// TestExpandServer holds what SmallRye Config 3.16.0 (Debezium Server
// 3.6.1's) reads for each value, with other=OTHER and nope unset; where it
// fails on an unresolved expression, pgoutbox keeps the expression.
func TestExpandServer(t *testing.T) {
	vars := map[string]string{"other": "OTHER"}
	lookup := func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
	for _, tc := range []struct{ in, want string }{
		{"$${routedByValue}", "${routedByValue}"},
		{"outbox.event.$${routedByValue}", "outbox.event.${routedByValue}"},
		{`\${routedByValue}`, "${routedByValue}"},
		{"a$$b", "a$b"},
		{"$$", "$"},
		{"$$$", "$$"},
		{"$$$$", "$$"},
		{"x$$$${r}", "x$${r}"},
		{"$${r}$${s}", "${r}${s}"},
		{"$$${other}", "$OTHER"},
		{"${nope:def}", "def"},
		{"$${nope:def}", "${nope:def}"},
		{"${other}", "OTHER"},
		{"${other}$$", "OTHER$"},
		{"${other:}", "OTHER"},
		{"${:x}", "x"},
		{"${nope:${other}}", "OTHER"},
		{"plain$", "plain$"},
		{"$x", "$x"},
		{"$$other", "$other"},
		{"$${r", "${r"},
		{`\$\{r}`, `$\{r}`},
		{`\\${other}`, `\${other}`},
		{`a\$b`, "a$b"},
		{`a\b`, `a\b`},
		{`x\`, `x\`},
		// SmallRye fails on these; pgoutbox keeps them as written.
		{"${nope}", "${nope}"},
		{"outbox.event.${routedByValue}", "outbox.event.${routedByValue}"},
		{"${r", "${r"},
	} {
		if got := expandServer(tc.in, lookup, func(_, _ string) {}); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestResolveServerKeys: an expression naming another key takes that key's
// value, read in turn.
func TestResolveServerKeys(t *testing.T) {
	props := map[string]string{
		"prefix":  "outbox",
		"literal": "$${routedByValue}",
		"debezium.transforms.outbox.route.topic.replacement": "${prefix}.event.${literal}",
		"debezium.source.database.password":                  "pa$$word",
	}
	if err := resolveServer(props); err != nil {
		t.Fatal(err)
	}
	if got := props["debezium.transforms.outbox.route.topic.replacement"]; got != "outbox.event.${routedByValue}" {
		t.Errorf("replacement: %q", got)
	}
	if got := props["debezium.source.database.password"]; got != "pa$word" {
		t.Errorf("password: %q", got)
	}
}

// ${file:PATH} without a key, which Kafka Connect's FileConfigProvider
// fails on, is refused saying what it lacks.
func TestFilePlaceholderWithoutKey(t *testing.T) {
	props := map[string]string{"transforms.outbox.route.topic.replacement": "${file:/run/secrets/topic}"}
	err := resolveConnect(props)
	if err == nil || !strings.Contains(err.Error(), `${file:PATH:KEY} names a key of a properties file, and "/run/secrets/topic" has none`) {
		t.Errorf("%v", err)
	}
}

// A host without a database, which Debezium refuses, is one of the
// database's options a URL given otherwise stands in for.
func TestDatabaseNameRequired(t *testing.T) {
	tr, ok, err := Read([]byte(`{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "database.hostname": "db", "topic.prefix": "shop"}`))
	var ue *UnresolvedError
	if !ok || !errors.As(err, &ue) || !strings.Contains(err.Error(), "database.dbname: not given, and Debezium requires it") {
		t.Fatalf("ok %v, %v", ok, err)
	}
	if _, set := settingOf(tr, "database-url"); set {
		t.Errorf("a database URL without the database")
	}
	if got, _ := settingOf(tr, "topic-prefix"); got != "shop" {
		t.Errorf("the rest not read: --topic-prefix %q", got)
	}
}
