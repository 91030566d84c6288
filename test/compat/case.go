package compat

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pgoutbox/pgoutbox/debezium"
	"github.com/pgoutbox/pgoutbox/schema"
)

// Case is one comparison, as data: a user adds theirs as a file of
// testdata/cases. Its YAML fields:
//
//	about:       what it shows, and the Debezium test or option it follows
//	table:       the DDL of the outbox table (and anything else it needs);
//	             each case has a database of its own
//	connect:     the connector's configuration as Kafka Connect takes it
//	             (the "config" object of the JSON POSTed to Connect)
//	server:      the same as Debezium Server's application.properties
//	publication: a publication clause ("FOR TABLE public.outbox"): both
//	             sides' publications are made so before either starts, as
//	             when pgoutbox takes over Debezium's publication (of every
//	             operation); unset, each side creates its own
//	existing:    SQL statements run before either side starts, each as its
//	             own transaction: the rows already in the table, which
//	             both sides publish first (snapshot.mode unset: Debezium's
//	             default, initial; the case may set initial or
//	             when_needed)
//	rows:        SQL statements, each run as its own transaction, in order,
//	             once both sides stream; none where the case's
//	             snapshot.mode streams nothing (initial_only): both sides
//	             publish the existing rows and stop there
//	restart:     both sides are stopped and started again (Debezium's
//	             task restarted, pgoutbox by SIGTERM and the same command)
//	             once they published the first restart rows, with the
//	             slots and offsets kept; the other rows follow
//	records:     how many records Debezium writes for them (and for the
//	             existing rows)
//	normalize:   the normalisations the comparison needs (see
//	             Normalization)
//	covers:      options the case exercises at their defaults (those it
//	             sets are read from its configuration), for the option
//	             table of docs/debezium.md
//	differences: deliberate differences the case shows (see Deliberate);
//	             empty when the streams must be equal
//	topics:      topic configs (cleanup.policy, retention.ms) to compare
//	             on the topics each side created, with their partitions
//	             and replication factor (a case with topic.creation.*)
//	registry:    settings of a schema registry of the case's own
//	             (registry.rules.global.compatibility: BACKWARD, say), for
//	             a case whose converters use one; unset, the corpus's
//	             shared registry
//
// A case gives connect, server or both. Debezium runs as Kafka Connect
// with connect, or with the Connect form of server (ConnectForm) when
// connect is not given; pgoutbox runs once with each form given, as a
// user passes it (--config), and each of its streams is compared with
// Debezium's. The harness owns what ties a run to its machine and keeps
// the sides apart, and sets it on every form: database.*, topic.prefix,
// slot.name, publication.name, snapshot.mode (no_data: only the rows
// written; left to the case when it has existing rows), the Kafka
// bootstrap servers, and a topic prefix per side (Debezium's by a
// RegexRouter after the case's transforms; pgoutbox's by the same
// RegexRouter after its transforms when the case has transforms after the
// router or predicates, so that they see the topics Debezium's see, else
// prepended to route.topic.replacement, or --topic for change events),
// which Compare strips.
type Case struct {
	Name        string            `yaml:"-"`
	About       string            `yaml:"about"`
	Table       string            `yaml:"table"`
	Connect     map[string]string `yaml:"connect"`
	Server      string            `yaml:"server"`
	Publication string            `yaml:"publication"`
	Existing    []string          `yaml:"existing"`
	Rows        []string          `yaml:"rows"`
	Records     int               `yaml:"records"`
	Normalize   []Normalization   `yaml:"normalize"`
	Covers      []string          `yaml:"covers"`
	Differences []Deliberate      `yaml:"differences"`
	Registry    map[string]string `yaml:"registry"`
	Restart     *int              `yaml:"restart"`
	Topics      []string          `yaml:"topics"`
}

// streams tells whether the case's snapshot.mode streams after its
// snapshot (Debezium's initial_only does not).
func (c Case) streams() bool {
	conf := c.DebeziumConfig()
	switch strings.ToLower(strings.TrimSpace(conf["snapshot.mode"])) {
	case "initial_only":
		return false
	case "configuration_based":
		// start.stream defaults to false.
		return strings.EqualFold(strings.TrimSpace(conf["snapshot.mode.configuration.based.start.stream"]), "true")
	}
	return true
}

// Deliberate is a difference between Debezium and pgoutbox that pgoutbox
// keeps on purpose, listed in docs/debezium.md with its reason. What it
// expects is checked: a case passes only if each side does exactly what
// it says.
type Deliberate struct {
	// Option is the row of docs/debezium.md's option table it belongs to.
	Option string `yaml:"option"`
	// Reason says what differs and why pgoutbox does it its way.
	Reason string `yaml:"reason"`
	// DebeziumFails: Debezium's task fails, its trace containing this
	// text (at the case's last row: the records before it are compared).
	DebeziumFails string `yaml:"debezium-fails"`
	// DebeziumRefuses: Kafka Connect refuses the connector's
	// configuration (its REST answer containing this text), so there is
	// no task and no record; with PgoutboxRefuses, pgoutbox refuses it
	// too (the case's rows are not written).
	DebeziumRefuses string `yaml:"debezium-refuses"`
	// PgoutboxRefuses: pgoutbox refuses the configuration at start, its
	// output containing this text, and creates no slot.
	PgoutboxRefuses string `yaml:"pgoutbox-refuses"`
	// PgoutboxStops: pgoutbox stops at a row (after streaming), its
	// output containing this text.
	PgoutboxStops string `yaml:"pgoutbox-stops"`
	// DeadLetters is how many rows pgoutbox dead-letters (to <slot>.dlq).
	DeadLetters int `yaml:"dead-letters"`
	// DeadLetterReason is text every dead letter's reason contains.
	DeadLetterReason string `yaml:"dead-letter-reason"`
	// Records are texts of the differences Compare reports that this one
	// explains: each must match one, and every difference must be
	// matched by one of the case's.
	Records []string `yaml:"records"`
}

// hasApicurio tells whether a part's converter options name Apicurio's
// registry (apicurio.*).
func hasApicurio(opts ...map[string]string) bool {
	for _, o := range opts {
		for k := range o {
			if strings.HasPrefix(k, "apicurio.") {
				return true
			}
		}
	}
	return false
}

// harnessKeys are the options a case may not set: the harness sets them.
var harnessKeys = []string{"database.", "topic.prefix", "slot.name", "publication.name", "snapshot.mode", "bootstrap.servers",
	"key.converter.apicurio.registry.url", "value.converter.apicurio.registry.url",
	"key.converter.delegate.converter.type.apicurio.registry.url", "value.converter.delegate.converter.type.apicurio.registry.url",
	"value.converter.avro.apicurio.registry.url",
	"debezium.sink.kafka.producer.bootstrap.servers", "debezium.source.offset.storage"}

// caseKeys are options under a harness key's prefix that a case may set.
var caseKeys = []string{"database.initial.statements"}

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

// Validate checks that the case is complete, that its forms agree, and
// that it leaves the harness's options to the harness.
func (c Case) Validate() error {
	switch {
	case strings.TrimSpace(c.Table) == "":
		return errors.New("no table")
	case len(c.Connect) == 0 && strings.TrimSpace(c.Server) == "":
		return errors.New("neither connect nor server configuration")
	case len(c.Rows) == 0 && c.streams():
		return errors.New("no rows")
	case len(c.Rows) > 0 && !c.streams() && (c.Restart == nil || *c.Restart != len(c.Rows)):
		return errors.New("rows under a snapshot.mode that streams nothing: only the snapshot of a restart after all of them (restart: <their number>) would publish them")
	case c.Restart != nil && (*c.Restart < 0 || *c.Restart > len(c.Rows)):
		return fmt.Errorf("restart after %d rows of %d", *c.Restart, len(c.Rows))
	case c.Records < 0:
		return errors.New("records must not be negative")
	}
	for _, n := range c.Normalize {
		if !validNormalization(n) {
			return fmt.Errorf("unknown normalisation %q", n)
		}
	}
	for i, d := range c.Differences {
		if d.Option == "" || strings.TrimSpace(d.Reason) == "" {
			return fmt.Errorf("difference %d: an option and a reason are needed", i+1)
		}
	}
	for k := range c.Registry {
		if !strings.HasPrefix(k, "registry.") {
			return fmt.Errorf("registry: %q is not an Apicurio Registry setting (registry.*)", k)
		}
	}
	if len(c.Registry) > 0 && !c.UsesRegistry() {
		return errors.New("registry settings for a case whose converters use no registry")
	}
	keys := slices.Collect(maps.Keys(c.Connect))
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
		conn, err := ConnectForm(props)
		if err != nil {
			return fmt.Errorf("server: %w", err)
		}
		if c.Connect != nil && !maps.Equal(conn, c.Connect) {
			return fmt.Errorf("server and connect are not the same configuration: server is, as Kafka Connect takes it, %v", conn)
		}
	}
	for _, k := range keys {
		for _, h := range harnessKeys {
			if strings.HasPrefix(k, h) && !slices.Contains(caseKeys, k) && !(strings.HasPrefix(k, "snapshot.mode") && len(c.Existing) > 0) {
				return fmt.Errorf("%q is the harness's to set", k)
			}
		}
	}
	return nil
}

// harnessSnapshot is the snapshot.mode the harness sets: none for a case
// with existing rows, whose configuration says (Debezium's default when
// it does not).
func (c Case) harnessSnapshot() (string, bool) {
	if len(c.Existing) > 0 {
		return "", false
	}
	return "no_data", true
}

// DebeziumConfig is the configuration Debezium runs the case with, as
// Kafka Connect takes it: connect, or server's Connect form. A converter
// class Debezium 3.6 no longer ships is named by its successor
// (debezium.Successor), which pgoutbox writes as: Kafka Connect refuses a
// class it cannot load.
func (c Case) DebeziumConfig() map[string]string {
	conf := maps.Clone(c.Connect)
	if conf == nil {
		props, _ := schema.ParseProperties([]byte(c.Server)) // checked by Validate
		conf, _ = ConnectForm(props)
	}
	for k, v := range conf {
		if s, ok := debezium.Successor(v); ok {
			conf[k] = s
		}
	}
	return conf
}

// ConnectForm maps a Debezium Server configuration to the Kafka Connect
// configuration that makes the same records, as Debezium Server 3.6 builds
// its engine (DebeziumServer, DebeziumSerializationProducer):
// debezium.source.* are the connector's options, debezium.transforms.* and
// debezium.predicates.* the chain's; debezium.format.key/value/header pick
// the converters (json by default: JsonConverter with schemas, headers
// included, where Connect's default header converter is
// SimpleHeaderConverter), debezium.format.* configures all three and
// debezium.format.key.* (value., header.) one. The sink's options are
// Debezium Server's own and have no Connect form.
//
// Debezium Server's Kafka sink sends each record without its partition and
// timestamp (KafkaChangeConsumer: new ProducerRecord(topic, null, null,
// key, value, headers)): a partition placement or a timestamp column has
// no effect there, so Kafka Connect is not its oracle for them, and such a
// configuration is refused.
func ConnectForm(props map[string]string) (map[string]string, error) {
	out := map[string]string{}
	formats := map[string]string{"key": "json", "value": "json", "header": "json"}
	shared := map[string]string{}
	own := map[string]map[string]string{"key": {}, "value": {}, "header": {}}
	for k, v := range props {
		switch {
		case strings.HasPrefix(k, "debezium.source."):
			out[strings.TrimPrefix(k, "debezium.source.")] = v
		case strings.HasPrefix(k, "debezium.transforms"), strings.HasPrefix(k, "debezium.predicates"):
			out[strings.TrimPrefix(k, "debezium.")] = v
		case strings.HasPrefix(k, "debezium.sink."):
		case strings.HasPrefix(k, "debezium.format."):
			rest := strings.TrimPrefix(k, "debezium.format.")
			if _, ok := formats[rest]; ok {
				formats[rest] = v
				continue
			}
			part, opt, _ := strings.Cut(rest, ".")
			if m, ok := own[part]; ok && opt != "" {
				m[opt] = v
			} else {
				shared[rest] = v
			}
		default:
			return nil, fmt.Errorf("%q: the harness knows no Kafka Connect form of it", k)
		}
	}
	for _, part := range []string{"key", "value", "header"} {
		var class string
		switch f := formats[part]; {
		case (f == "json" || f == "jsonbytearray") && part != "header" && hasApicurio(own[part], shared):
			// Debezium Server's ConverterBuilder takes Apicurio's JSON
			// converter when the part has a registry.
			class = "io.apicurio.registry.utils.converter.ExtJsonConverter"
		case f == "json", f == "jsonbytearray":
			class = "org.apache.kafka.connect.json.JsonConverter"
		case f == "simplestring" && part != "header":
			class = "org.apache.kafka.connect.storage.StringConverter"
		case f == "binary" && part != "header":
			class = "io.debezium.converters.BinaryDataConverter"
		case f == "cloudevents" && part != "header":
			class = "io.debezium.converters.CloudEventsConverter"
		default:
			return nil, fmt.Errorf("debezium.format.%s=%s: Debezium Server 3.6 has no such %s format", part, f, part)
		}
		out[part+".converter"] = class
		for k, v := range shared {
			out[part+".converter."+k] = v
		}
		for k, v := range own[part] {
			out[part+".converter."+k] = v
		}
	}
	for k, v := range out {
		if strings.HasSuffix(k, ".table.fields.additional.placement") && strings.Contains(strings.ToLower(v), ":partition") {
			return nil, fmt.Errorf("%s: Debezium Server's Kafka sink does not set the partition", k)
		}
		if strings.HasSuffix(k, ".table.field.event.timestamp") {
			return nil, fmt.Errorf("%s: Debezium Server's Kafka sink does not set the timestamp", k)
		}
	}
	return out, nil
}
