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
// resources: one KafkaConnector, and the converters of a KafkaConnect, or
// an OpenShift Template of them, processed with params; warnings are
// lines to show at start.
func parseStrimzi(data []byte, params map[string]string) (props map[string]string, warnings []string, err error) {
	docs, err := strimziDocs(data)
	if err != nil {
		return nil, nil, fmt.Errorf("not a Strimzi resource file: %w", err)
	}
	for _, d := range docs {
		if d.Kind == "Template" {
			processed, err := processTemplate(data, params)
			if err != nil {
				return nil, nil, err
			}
			return parseStrimzi(processed, nil)
		}
	}
	var conn, worker *strimziResource
	for i := range docs {
		switch docs[i].Kind {
		case "KafkaConnector":
			if conn != nil {
				return nil, nil, fmt.Errorf("KafkaConnector %s and %s: a file of one connector, please (pgoutbox runs one pipeline per configuration)",
					conn.Metadata.Name, docs[i].Metadata.Name)
			}
			conn = &docs[i]
		case "KafkaConnect":
			worker = &docs[i]
		}
	}
	if conn == nil {
		return nil, nil, errors.New("no KafkaConnector in the file")
	}
	warning, err := stoppedWarning(conn)
	if err != nil {
		return nil, nil, err
	}
	if warning != "" {
		warnings = append(warnings, warning)
	}
	props = map[string]string{}
	if worker != nil {
		for k, v := range worker.Spec.Config {
			if strings.HasPrefix(k, "key.converter") || strings.HasPrefix(k, "value.converter") || strings.HasPrefix(k, "header.converter") ||
				strings.HasPrefix(k, "config.providers") {
				s, err := strimziScalar(k, v)
				if err != nil {
					return nil, nil, err
				}
				props[k] = s
			}
		}
	}
	for k, v := range conn.Spec.Config {
		s, err := strimziScalar(k, v)
		if err != nil {
			return nil, nil, err
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
	return props, warnings, nil
}

// stoppedWarning says that Strimzi runs no task of conn, stopped or
// paused ("" when it runs): spec.state, else the older spec.pause, as
// Strimzi takes them (state wins when both are set). pgoutbox, which
// replaces the connector, runs it all the same: stopping it in the
// cluster is how a team hands over. Another state, which Strimzi's enum
// (running, paused, stopped) refuses, is an error.
func stoppedWarning(conn *strimziResource) (string, error) {
	state := conn.Spec.State
	switch state {
	case "running", "stopped", "paused":
	case "":
		if p, _ := strimziScalar("pause", conn.Spec.Pause); p == "true" {
			state = "paused"
		}
	default:
		return "", fmt.Errorf("KafkaConnector %s: spec.state %q: Strimzi takes running, paused or stopped", conn.Metadata.Name, state)
	}
	if state != "stopped" && state != "paused" {
		return "", nil
	}
	return fmt.Sprintf("KafkaConnector %s is %s (spec.state, spec.pause): Strimzi runs no task of it; pgoutbox, which replaces it, runs it: keep it %s in the cluster while pgoutbox runs",
		conn.Metadata.Name, state, state), nil
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
