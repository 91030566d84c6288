package debezium

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A DebeziumServer resource of the Debezium Operator (debezium.io), the
// form Debezium Server takes on Kubernetes under its operator:
//
//	apiVersion: debezium.io/v1alpha1
//	kind: DebeziumServer
//	spec:
//	  sink: {type: kafka, config: {producer.bootstrap.servers: …}}
//	  source: {class: io.debezium.connector.postgresql.PostgresConnector, config: {…}}
//	  format: {value: {type: json, config: {schemas.enable: false}}}
//	  transforms: [{type: …EventRouter, predicate: p, negate: false, config: {…}}]
//	  predicates: {p: {type: …, config: {…}}}
//
// The operator writes it as Debezium Server's application.properties
// (DebeziumServerSpec.asConfiguration, read from its 3.6.1 sources):
// debezium.source.connector.class and debezium.source.<config>;
// debezium.sink.type and debezium.sink.<type>.<config>;
// debezium.format.<part> and debezium.format.<part>.<config>; the
// transforms named t0, t1, … in their order, each with type, predicate,
// negate and its config; the predicates by their names. pgoutbox reads it
// so, as a Debezium Server file. quarkus, runtime, image, version and the
// source's offset and schema history stores configure the server around
// Debezium, which pgoutbox replaces.

// operatorResource is the part of a DebeziumServer resource read here.
type operatorResource struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Spec       struct {
		Sink   typedConfig `yaml:"sink"`
		Source struct {
			Class  string         `yaml:"class"`
			Config map[string]any `yaml:"config"`
		} `yaml:"source"`
		Format     map[string]typedConfig `yaml:"format"`
		Transforms []struct {
			typedConfig `yaml:",inline"`
			Predicate   string `yaml:"predicate"`
			Negate      bool   `yaml:"negate"`
		} `yaml:"transforms"`
		Predicates map[string]typedConfig `yaml:"predicates"`
	} `yaml:"spec"`
}

// typedConfig is a part of the resource named by its type, with its
// options: the sink, a format, a transform, a predicate.
type typedConfig struct {
	Type   string         `yaml:"type"`
	Config map[string]any `yaml:"config"`
}

// operatorServer is the Debezium Server properties of the DebeziumServer
// resource in data; ok is false when data holds none.
func operatorServer(data []byte) (props map[string]string, ok bool, err error) {
	if !bytes.Contains(data, []byte("DebeziumServer")) {
		return nil, false, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var found *operatorResource
	for {
		var node yaml.Node
		if err := dec.Decode(&node); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, false, nil
		}
		var head struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
		}
		if node.Decode(&head) != nil || head.Kind != "DebeziumServer" || !strings.HasPrefix(head.APIVersion, "debezium.io/") {
			continue
		}
		var d operatorResource
		if err := node.Decode(&d); err != nil {
			return nil, true, fmt.Errorf("DebeziumServer resource: %w", err)
		}
		if found != nil {
			return nil, true, errors.New("two DebeziumServer resources: a file of one, please (pgoutbox runs one pipeline per configuration)")
		}
		found = &d
	}
	if found == nil {
		return nil, false, nil
	}
	spec := found.Spec
	props = map[string]string{}
	put := func(prefix string, config map[string]any) {
		for k, v := range config {
			s, e := strimziScalar(k, v)
			if e != nil && err == nil {
				err = fmt.Errorf("%s%s: %w", prefix, k, e)
			}
			props[prefix+k] = s
		}
	}
	if spec.Source.Class != "" {
		props["debezium.source.connector.class"] = spec.Source.Class
	}
	put("debezium.source.", spec.Source.Config)
	if spec.Sink.Type != "" {
		props["debezium.sink.type"] = spec.Sink.Type
		put("debezium.sink."+spec.Sink.Type+".", spec.Sink.Config)
	}
	for _, part := range []string{"key", "value", "header"} {
		if f, ok := spec.Format[part]; ok {
			if f.Type == "" {
				f.Type = "json" // FormatType's default
			}
			props["debezium.format."+part] = f.Type
			put("debezium.format."+part+".", f.Config)
		}
	}
	var names []string
	for i, t := range spec.Transforms {
		name := "t" + strconv.Itoa(i)
		names = append(names, name)
		prefix := "debezium.transforms." + name + "."
		props[prefix+"type"] = t.Type
		if t.Predicate != "" {
			props[prefix+"predicate"] = t.Predicate
		}
		props[prefix+"negate"] = strconv.FormatBool(t.Negate)
		put(prefix, t.Config)
	}
	if len(names) > 0 {
		props["debezium.transforms"] = strings.Join(names, ",")
	}
	var preds []string
	for name, p := range spec.Predicates {
		preds = append(preds, name)
		props["debezium.predicates."+name+".type"] = p.Type
		put("debezium.predicates."+name+".", p.Config)
	}
	if len(preds) > 0 {
		sort.Strings(preds) // the operator's map is a TreeMap
		props["debezium.predicates"] = strings.Join(preds, ",")
	}
	return props, true, err
}
