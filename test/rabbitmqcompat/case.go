package rabbitmqcompat

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
	// database, the connection and the slot, which the harness adds.
	Server string `yaml:"server"`
	// Bindings bind the case's queue: each declares its exchange, of its
	// kind, and binds the queue to it with its key (the AMQP corpus).
	Bindings []Binding `yaml:"bindings"`
	// Streams are the streams the case's messages go to, read in this
	// order (the streams corpus).
	Streams []string `yaml:"streams"`
	// Rows are SQL statements, each committed on its own, while both
	// sides stream.
	Rows []string `yaml:"rows"`
	// Messages is how many messages each side publishes.
	Messages int `yaml:"messages"`
	// Varies are headers whose values differ by nature (a run's id): both
	// sides must carry them, their values are not compared.
	Varies []string `yaml:"varies"`
	// Heartbeats is the exchange of the heartbeat records, when the case
	// writes them (heartbeat.interval.ms above 0, the AMQP corpus): they
	// come at a rate, so each side must publish one and their first ones
	// are compared, ts_ms set aside; Messages counts the others.
	Heartbeats string `yaml:"heartbeats"`
	// WithoutID are the exchanges of records that carry no event id
	// (transaction metadata): pgoutbox sets no message-id on them.
	WithoutID []string `yaml:"without_id"`
}

// Binding is an exchange the case's queue is bound to.
type Binding struct {
	Exchange string `yaml:"exchange"`
	Kind     string `yaml:"kind"`
	Key      string `yaml:"key"`
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
		if c.Table == "" || c.Server == "" || len(c.Rows) == 0 || c.Messages <= 0 || len(c.Bindings)+len(c.Streams) == 0 {
			return nil, fmt.Errorf("%s: table, server, bindings or streams, rows and messages are required", p)
		}
		out = append(out, c)
	}
	return out, nil
}
