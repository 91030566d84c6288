package compat

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pgoutbox/pgoutbox/schema"
)

// Case is one comparison, as data: a user adds theirs as a file of
// testdata/cases. Its YAML fields:
//
//	about:       what it shows, and the Debezium test or option it follows
//	table:       the DDL of the outbox table (and anything else it needs)
//	connect:     the connector's configuration as Kafka Connect takes it
//	             (the "config" object of the JSON POSTed to Connect)
//	server:      the same as Debezium Server's application.properties
//	rows:        SQL statements, each run as its own transaction, in order
//	records:     how many records each side writes for them
//	normalize:   the normalisations the comparison needs (see
//	             Normalization)
//	differences: deliberate differences the case shows, each one listed
//	             in docs/debezium.md; empty when the streams must be equal
//
// A case gives connect, server or both. The harness owns what ties a run
// to its machine and keeps the two sides apart, and sets it on both forms:
// database.*, topic.prefix, slot.name, publication.name, snapshot.mode
// (no_data: only the rows written), the Kafka bootstrap servers, and a
// topic prefix per side (prepended to route.topic.replacement, or
// topic.prefix for change events), which Compare strips.
type Case struct {
	Name        string            `yaml:"-"`
	About       string            `yaml:"about"`
	Table       string            `yaml:"table"`
	Connect     map[string]string `yaml:"connect"`
	Server      string            `yaml:"server"`
	Rows        []string          `yaml:"rows"`
	Records     int               `yaml:"records"`
	Normalize   []Normalization   `yaml:"normalize"`
	Differences []string          `yaml:"differences"`
}

// harnessKeys are the options a case may not set: the harness sets them.
var harnessKeys = []string{"database.", "topic.prefix", "slot.name", "publication.name", "snapshot.mode", "bootstrap.servers",
	"debezium.sink.kafka.producer.bootstrap.servers", "debezium.source.offset.storage"}

// LoadCases reads every *.yaml case of dir, in name order, and checks
// each.
func LoadCases(dir string) ([]Case, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []Case
	for _, p := range paths {
		c, err := LoadCase(p)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// LoadCase reads and checks one case file.
func LoadCase(path string) (Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Case{}, err
	}
	var c Case
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return Case{}, fmt.Errorf("compat: %s: %w", path, err)
	}
	c.Name = strings.TrimSuffix(filepath.Base(path), ".yaml")
	if err := c.Validate(); err != nil {
		return Case{}, fmt.Errorf("compat: %s: %w", path, err)
	}
	return c, nil
}

// Validate checks that the case is complete and leaves the harness's
// options to the harness.
func (c Case) Validate() error {
	switch {
	case strings.TrimSpace(c.Table) == "":
		return errors.New("no table")
	case len(c.Connect) == 0 && strings.TrimSpace(c.Server) == "":
		return errors.New("neither connect nor server configuration")
	case len(c.Rows) == 0:
		return errors.New("no rows")
	case c.Records < 0:
		return errors.New("records must not be negative")
	}
	for _, n := range c.Normalize {
		if !validNormalization(n) {
			return fmt.Errorf("unknown normalisation %q", n)
		}
	}
	keys := make([]string, 0, len(c.Connect))
	for k := range c.Connect {
		keys = append(keys, k)
	}
	if c.Server != "" {
		props, err := schema.ParseProperties([]byte(c.Server))
		if err != nil {
			return fmt.Errorf("server: %w", err)
		}
		for k := range props {
			if !strings.HasPrefix(k, "debezium.") {
				return fmt.Errorf("server: %q is not a Debezium Server option (debezium.*)", k)
			}
			keys = append(keys, strings.TrimPrefix(k, "debezium.source."))
		}
	}
	for _, k := range keys {
		for _, h := range harnessKeys {
			if strings.HasPrefix(k, h) {
				return fmt.Errorf("%q is the harness's to set", k)
			}
		}
	}
	return nil
}
