package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Placeholders in a Debezium configuration resolve as Debezium resolves
// them; one that cannot is an error naming the option and the
// placeholder, never a secret.
func TestConfigPlaceholders(t *testing.T) {
	dir := t.TempDir()
	secrets := filepath.Join(dir, "db.properties")
	if err := os.WriteFile(secrets, []byte("password = Fr0m-F1le\nuser: relay\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dbname"), []byte("shop"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGOUTBOX_TEST_DB_HOST", "db-7")
	t.Setenv("PGOUTBOX_TEST_DB_PASSWORD", "Fr0m-Env")
	connect := func(db string) string {
		return `{"name": "c", "config": {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "database.port": "5432", ` + db + `,
  "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
  "transforms.outbox.route.topic.replacement": "outbox.event.${routedByValue}"}}`
	}
	server := func(db string) string {
		return "debezium.sink.type=kafka\ndebezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
			"debezium.source.database.port=5432\n" + db +
			"debezium.transforms=outbox\ndebezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n" +
			"debezium.transforms.outbox.route.topic.replacement=${routedByValue}.events\n"
	}
	tests := []struct {
		name, file, conf string
		url              string // the --database-url it makes
		err              []string
	}{
		{
			name: "connect env file directory", file: "c.json",
			conf: connect(`"database.hostname": "${env:PGOUTBOX_TEST_DB_HOST}", "database.user": "${file:` + secrets + `:user}",
  "database.password": "${file:` + secrets + `:password}", "database.dbname": "${directory:` + dir + `:dbname}"`),
			url: "postgres://relay:Fr0m-F1le@db-7:5432/shop",
		},
		{
			// The worker names its providers; the file may say which is which.
			name: "connect providers named in the file", file: "c.json",
			conf: connect(`"config.providers": "vault", "config.providers.vault.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
  "database.hostname": "db", "database.user": "u", "database.password": "${vault:` + secrets + `:password}", "database.dbname": "shop"`),
			url: "postgres://u:Fr0m-F1le@db:5432/shop",
		},
		{
			name: "connect unknown provider", file: "c.json",
			conf: connect(`"database.hostname": "db", "database.user": "u", "database.password": "${aws:prod/db:password}", "database.dbname": "shop"`),
			err:  []string{`database.password: ${aws:prod/db:password}: config provider "aws" is not one pgoutbox reads (env, file, directory)`, "PGOUTBOX_DATABASE_URL"},
		},
		{
			name: "connect unset variable and missing key", file: "c.json",
			conf: connect(`"database.hostname": "${env:PGOUTBOX_TEST_UNSET}", "database.user": "${file:` + secrets + `:login}", "database.dbname": "shop"`),
			err:  []string{"database.hostname: ${env:PGOUTBOX_TEST_UNSET}: the environment has no PGOUTBOX_TEST_UNSET", "database.user: ${file:" + secrets + ":login}: " + secrets + " has no key login"},
		},
		{
			name: "server environment, default and key", file: "application.properties",
			conf: server("debezium.source.database.hostname=${PGOUTBOX_TEST_DB_HOST}\ndebezium.source.database.user=${DB_USER:relay}\n" +
				"debezium.source.database.password=${PGOUTBOX_TEST_DB_PASSWORD}\ndb.name=shop\ndebezium.source.database.dbname=${db.name}\n"),
			url: "postgres://relay:Fr0m-Env@db-7:5432/shop",
		},
		{
			// Quarkus reads $$ and \$ as a literal $: a template of the
			// router's is written so, and a password may hold one.
			name: "server escapes", file: "application.properties",
			conf: strings.Replace(server("debezium.source.database.hostname=db\ndebezium.source.database.user=u\n"+
				"debezium.source.database.password=Fr0m-$$Env\\$\ndebezium.source.database.dbname=shop\n"),
				"=${routedByValue}.events", "=$${routedByValue}.events", 1),
			url: "postgres://u:Fr0m-$Env$@db:5432/shop",
		},
		{
			name: "server unresolved", file: "application.properties",
			conf: server("debezium.source.database.hostname=db\ndebezium.source.database.user=u\ndebezium.source.database.password=${PGOUTBOX_TEST_UNSET}\ndebezium.source.database.dbname=shop\n"),
			err:  []string{"debezium.source.database.password: ${PGOUTBOX_TEST_UNSET}: neither the environment nor the file has PGOUTBOX_TEST_UNSET"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, _, err := loadConfig(t, tt.file, tt.conf)
			if tt.err != nil {
				if err == nil {
					t.Fatalf("accepted: --database-url %s", flagValue(fs, "database-url"))
				}
				for _, w := range tt.err {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error does not contain %q:\n%v", w, err)
					}
				}
				for _, secret := range []string{"Fr0m-F1le", "Fr0m-Env"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error shows a secret: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := flagValue(fs, "database-url"); got != tt.url {
				t.Errorf("--database-url %s, want %s", got, tt.url)
			}
			if got := flagValue(fs, "route-topic-replacement"); !strings.Contains(got, "${routedByValue}") || strings.Contains(got, "$${") {
				t.Errorf("--route-topic-replacement %q is not the router's ${routedByValue}", got)
			}
		})
	}
}
