package debezium

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A Kafka Connect connector kept in YAML, by tools and charts that post it
// to Connect's REST API: a document {name: …, config: {connector.class:
// …}} as the connector's JSON in YAML, or a Helm chart's values holding a
// list of them (connectors: [{name: …, config: {…}}]). pgoutbox reads the
// one map holding connector.class, anywhere in the file, as that JSON's
// config; a file of several connectors is refused, naming them.

// connectorYAML is the config of the one connector in the YAML data, ok
// false when data is no YAML or holds none.
func connectorYAML(data []byte) (props map[string]string, ok bool, err error) {
	if !bytes.Contains(data, []byte("connector.class")) {
		return nil, false, nil
	}
	type found struct {
		name   string
		config map[string]any
	}
	var all []found
	var walk func(v any, name string)
	walk = func(v any, name string) {
		switch x := v.(type) {
		case map[string]any:
			if _, ok := x["connector.class"]; ok {
				all = append(all, found{name, x})
				return
			}
			n, _ := x["name"].(string)
			for _, k := range sortedAnyKeys(x) {
				walk(x[k], n)
			}
		case []any:
			for _, e := range x {
				walk(e, name)
			}
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, false, nil
		}
		m, isMap := doc.(map[string]any)
		if !isMap {
			return nil, false, nil
		}
		if _, server := m["debezium"]; server {
			return nil, false, nil // Debezium Server's application.yaml (serveryaml.go)
		}
		walk(doc, "")
	}
	switch len(all) {
	case 0:
		return nil, false, nil
	case 1:
	default:
		var names []string
		for _, f := range all {
			names = append(names, fmt.Sprintf("%q", f.name))
		}
		return nil, true, fmt.Errorf("%d connectors in the file (%s): a file of one, please (pgoutbox runs one pipeline per configuration)", len(all), strings.Join(names, ", "))
	}
	props = map[string]string{}
	for k, v := range all[0].config {
		s, err := strimziScalar(k, v)
		if err != nil {
			return nil, true, err
		}
		props[k] = s
	}
	return props, true, nil
}

func sortedAnyKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
