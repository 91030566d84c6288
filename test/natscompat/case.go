package natscompat

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Case is one file of testdata/cases.
type Case struct {
	Name string `yaml:"-"`
	// About says what the case shows.
	About string `yaml:"about"`
	// Table is the DDL of the outbox table (and anything else it needs).
	Table string `yaml:"table"`
	// Server is Debezium Server's application.properties without the
	// database, the sink's url and the slot, which the harness adds.
	Server string `yaml:"server"`
	// Rows are SQL statements, each committed on its own, while both
	// sides stream.
	Rows []string `yaml:"rows"`
	// Messages is how many messages each side publishes.
	Messages int `yaml:"messages"`
	// Subjects are the stream's (default outbox.>).
	Subjects []string `yaml:"subjects"`
	// Varies are headers whose values differ by nature (a run's id): both
	// sides must carry them, their values are not compared.
	Varies []string `yaml:"varies"`
	// Normalize are paths into the messages' JSON data (dot-separated,
	// payload.ts_ms) whose values differ by nature (each side's
	// processing time, its version): set to null on both sides.
	Normalize []string `yaml:"normalize"`
	// Heartbeats is the subject of the heartbeat records, when the case
	// writes them (heartbeat.interval.ms above 0): they come at a rate,
	// so each side must publish one and their first ones are compared,
	// ts_ms set aside; Messages counts the others.
	Heartbeats string `yaml:"heartbeats"`
	// Environment gives both sides the case's properties as environment
	// variables (DEBEZIUM_SOURCE_...), over a file of the harness's:
	// Debezium Server's configuration in a container.
	Environment bool `yaml:"environment"`
}

// headersOnlyPgoutbox are the headers pgoutbox adds and Debezium Server
// does not (a deliberate difference: docs/debezium.md).
var headersOnlyPgoutbox = []string{"Nats-Msg-Id", "Nats-Expected-Last-Msg-Id"}

// Load reads every case of dir.
func Load(dir string) ([]Case, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []Case
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var c Case
		if err := yaml.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		c.Name = strings.TrimSuffix(filepath.Base(p), ".yaml")
		if c.Table == "" || c.Server == "" || len(c.Rows) == 0 || c.Messages <= 0 {
			return nil, fmt.Errorf("%s: table, server, rows and messages are required", p)
		}
		if len(c.Subjects) == 0 {
			c.Subjects = []string{"outbox.>"}
		}
		out = append(out, c)
	}
	return out, nil
}
