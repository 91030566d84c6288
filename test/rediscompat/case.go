package rediscompat

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
	// database, the sink's address and the slot, which the harness adds.
	Server string `yaml:"server"`
	// Rows are SQL statements, each committed on its own, while both
	// sides stream.
	Rows []string `yaml:"rows"`
	// Entries is how many entries each side writes, over all streams.
	Entries int `yaml:"entries"`
	// Varies are fields whose values differ by nature (a run's id): both
	// sides must write them, their values are not compared.
	Varies []string `yaml:"varies"`
	// Normalize are paths into the entries' JSON values (dot-separated,
	// payload.ts_ms) whose values differ by nature (each side's
	// processing time, its version): set to null on both sides.
	Normalize []string `yaml:"normalize"`
	// Heartbeats is the stream of the heartbeat records, when the case
	// writes them (heartbeat.interval.ms above 0, not skipped): they come
	// at a rate, so each side must write one and their first ones are
	// compared, ts_ms set aside; Entries counts the others.
	Heartbeats string `yaml:"heartbeats"`
	// Environment gives both sides every property, the case's and the
	// harness's, as environment variables (DEBEZIUM_SOURCE_...) and no
	// file: Debezium Server's configuration in a container.
	Environment bool `yaml:"environment"`
	// YAML is Debezium Server's config/application.yaml, in place of
	// Server: pgoutbox reads it with --config, the harness's settings in
	// the environment.
	YAML string `yaml:"yaml"`
}

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
		if c.Table == "" || c.Server == "" && c.YAML == "" || len(c.Rows) == 0 || c.Entries <= 0 {
			return nil, fmt.Errorf("%s: table, server (or yaml), rows and entries are required", p)
		}
		out = append(out, c)
	}
	return out, nil
}
