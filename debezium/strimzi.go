package debezium

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A Strimzi KafkaConnector resource (kafka.strimzi.io), the form teams on
// Kubernetes keep a connector in:
//
//	apiVersion: kafka.strimzi.io/v1beta2
//	kind: KafkaConnector
//	spec:
//	  class: io.debezium.connector.postgresql.PostgresConnector
//	  tasksMax: 1
//	  config: {…}
//
// spec.class is connector.class, spec.config the connector's options. A
// file may hold several YAML documents: a KafkaConnect resource in it
// gives its worker's converter options (key.converter…, value.converter…,
// header.converter…) to the connector, as Kafka Connect does, unless the
// connector sets its own.

// strimziResource is the part of a Strimzi resource read here.
type strimziResource struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Class    string         `yaml:"class"`
		TasksMax any            `yaml:"tasksMax"`
		Config   map[string]any `yaml:"config"`
		State    string         `yaml:"state"`
		Pause    any            `yaml:"pause"`
	} `yaml:"spec"`
}

// isStrimzi tells a YAML file with a KafkaConnector resource.
func isStrimzi(data []byte) bool {
	if !bytes.Contains(data, []byte("KafkaConnector")) {
		return false
	}
	docs, err := strimziDocs(data)
	if err != nil {
		return false
	}
	for _, d := range docs {
		if d.Kind == "KafkaConnector" || d.Kind == "Template" {
			return true
		}
	}
	return false
}

func strimziDocs(data []byte) ([]strimziResource, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []strimziResource
	for {
		var d strimziResource
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
}

// parseStrimzi reads the connector's options from a file of Strimzi
// resources: one KafkaConnector, and the converters of a KafkaConnect.
func parseStrimzi(data []byte) (map[string]string, error) {
	docs, err := strimziDocs(data)
	if err != nil {
		return nil, fmt.Errorf("not a Strimzi resource file: %w", err)
	}
	for _, d := range docs {
		if d.Kind == "Template" {
			processed, err := processTemplate(data)
			if err != nil {
				return nil, err
			}
			return parseStrimzi(processed)
		}
	}
	var conn, worker *strimziResource
	for i := range docs {
		switch docs[i].Kind {
		case "KafkaConnector":
			if conn != nil {
				return nil, fmt.Errorf("KafkaConnector %s and %s: a file of one connector, please (pgoutbox runs one pipeline per configuration)",
					conn.Metadata.Name, docs[i].Metadata.Name)
			}
			conn = &docs[i]
		case "KafkaConnect":
			worker = &docs[i]
		}
	}
	if conn == nil {
		return nil, errors.New("no KafkaConnector in the file")
	}
	if err := running(conn); err != nil {
		return nil, err
	}
	props := map[string]string{}
	if worker != nil {
		for k, v := range worker.Spec.Config {
			if strings.HasPrefix(k, "key.converter") || strings.HasPrefix(k, "value.converter") || strings.HasPrefix(k, "header.converter") ||
				strings.HasPrefix(k, "config.providers") {
				s, err := strimziScalar(k, v)
				if err != nil {
					return nil, err
				}
				props[k] = s
			}
		}
	}
	for k, v := range conn.Spec.Config {
		s, err := strimziScalar(k, v)
		if err != nil {
			return nil, err
		}
		props[k] = s
	}
	if conn.Spec.Class != "" {
		props["connector.class"] = conn.Spec.Class
	}
	if conn.Spec.TasksMax != nil {
		if s, err := strimziScalar("tasksMax", conn.Spec.TasksMax); err == nil {
			props["tasks.max"] = s
		}
	}
	return props, nil
}

// running refuses a connector Strimzi runs no task of: spec.state stopped
// or paused, or the older spec.pause true. Strimzi's enum takes running,
// paused and stopped, in lower case.
func running(conn *strimziResource) error {
	switch conn.Spec.State {
	case "", "running":
	case "stopped", "paused":
		return fmt.Errorf("KafkaConnector %s: spec.state is %s: Strimzi runs no task of a %s connector, and pgoutbox runs none either; set it to running (in an OpenShift Template, its parameter)",
			conn.Metadata.Name, conn.Spec.State, conn.Spec.State)
	default:
		return fmt.Errorf("KafkaConnector %s: spec.state %q: Strimzi takes running, paused or stopped", conn.Metadata.Name, conn.Spec.State)
	}
	if p, _ := strimziScalar("pause", conn.Spec.Pause); p == "true" {
		return fmt.Errorf("KafkaConnector %s: spec.pause is true: Strimzi runs no task of a paused connector, and pgoutbox runs none either", conn.Metadata.Name)
	}
	return nil
}

// strimziScalar is a config value as Strimzi passes it to Kafka Connect:
// the text of a string, number or boolean.
func strimziScalar(key string, v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case nil:
		return "", nil
	}
	return "", fmt.Errorf("%s: want a string, number or boolean", key)
}
