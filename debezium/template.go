package debezium

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// An OpenShift Template (template.openshift.io) holding a Strimzi
// KafkaConnector among its objects, as teams on OpenShift keep one and
// apply it with `oc process -f FILE -p NAME=value | oc apply -f -`:
//
//	kind: Template
//	objects:
//	- kind: KafkaConnector
//	  spec: {config: {database.hostname: ${DB_HOST}, tasksMax: ${{MAX_TASKS}}}}
//	parameters:
//	- {name: DB_HOST, required: true}
//	- {name: MAX_TASKS, value: "1"}
//
// pgoutbox processes it as oc process does, each parameter's value as
// given (--template-param NAME=value, as oc process -p), else its value:
// ${NAME} is the value within a string, ${{NAME}} alone the value as YAML
// reads it (a number stays a number). A required parameter without a
// value, and one oc would generate, are refused, naming it.

// template is the part of an OpenShift Template read here.
type template struct {
	Objects    []yaml.Node `yaml:"objects"`
	Parameters []struct {
		Name     string `yaml:"name"`
		Value    string `yaml:"value"`
		Required bool   `yaml:"required"`
		Generate string `yaml:"generate"`
	} `yaml:"parameters"`
}

// Parameters as oc process writes them: ${{NAME}} as a whole value,
// ${NAME} within a string.
var (
	wholeParam  = regexp.MustCompile(`^\$\{\{([a-zA-Z0-9_]+)\}\}$`)
	stringParam = regexp.MustCompile(`\$\{([a-zA-Z0-9_]+)\}`)
)

// processTemplate returns the objects of the Template in data, with its
// parameters put in, as YAML documents.
func processTemplate(data []byte, params map[string]string) ([]byte, error) {
	var t template
	if err := yaml.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("not an OpenShift Template: %w", err)
	}
	values := map[string]string{}
	var missing []string
	for _, p := range t.Parameters {
		v, ok := params[p.Name]
		switch {
		case ok:
		case p.Value != "":
			v = p.Value
		case p.Generate != "":
			missing = append(missing, p.Name+" (oc process would generate it)")
		case p.Required:
			missing = append(missing, p.Name)
		}
		values[p.Name] = v
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the OpenShift Template's parameters %s have no value: give each with --template-param NAME=value, as oc process -p NAME=value gives it",
			strings.Join(missing, ", "))
	}
	var out bytes.Buffer
	for i := range t.Objects {
		fill(&t.Objects[i], values)
		b, err := yaml.Marshal(&t.Objects[i])
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	return out.Bytes(), nil
}

// fill puts the parameters' values into n's strings; a parameter the
// Template does not declare stays as written, as oc leaves it.
func fill(n *yaml.Node, values map[string]string) {
	for _, c := range n.Content {
		fill(c, values)
	}
	if n.Kind != yaml.ScalarNode || !strings.Contains(n.Value, "${") {
		return
	}
	if m := wholeParam.FindStringSubmatch(n.Value); m != nil {
		if v, ok := values[m[1]]; ok {
			// The value as YAML reads it.
			n.Value, n.Tag, n.Style = v, "", 0
		}
		return
	}
	n.Value = stringParam.ReplaceAllStringFunc(n.Value, func(ph string) string {
		if v, ok := values[stringParam.FindStringSubmatch(ph)[1]]; ok {
			return v
		}
		return ph
	})
}
