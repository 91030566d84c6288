package debezium

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/pgoutbox/pgoutbox/schema"
)

// Form is the kind of file a configuration came in.
type Form string

// The forms.
const (
	ConnectJSON       Form = "Kafka Connect connector configuration"
	ConnectProperties Form = "Kafka Connect connector properties"
	ConnectYAML       Form = "Kafka Connect connector configuration (YAML)"
	ServerProperties  Form = "Debezium Server configuration"
	ServerYAML        Form = "Debezium Server configuration (application.yaml)"
	OperatorServer    Form = "Debezium Operator DebeziumServer resource"
	StrimziConnector  Form = "Strimzi KafkaConnector resource"
)

// Setting is one setting of pgoutbox's run: a flag's name and its value.
type Setting struct {
	Flag, Value string
}

// Translation is what a Debezium configuration gives pgoutbox.
type Translation struct {
	Form     Form
	Settings []Setting
	// Ignored names the options pgoutbox does not use, sorted, some with
	// why in parentheses.
	Ignored []string
	// Warnings are lines to show once at start: options taken in a
	// meaning of their own (an older name, a safer reading).
	Warnings []string
}

// Read reads data as a Debezium configuration: a Kafka Connect connector
// JSON ({"name": …, "config": {…}} or the config object alone) or
// properties file (Kafka Connect standalone's, with connector.class), a
// Strimzi KafkaConnector resource (YAML, strimzi.go), or Debezium Server
// properties (keys under debezium.). ok is false for
// anything else, such as pgoutbox's own flag = value file. Placeholders
// are resolved as Debezium resolves them (placeholders.go). The error of a
// configuration pgoutbox cannot honour names every option it refuses.
func Read(data []byte) (tr Translation, ok bool, err error) { return ReadWith(data, Inputs{}) }

// Inputs are what a configuration is read with besides its file.
type Inputs struct {
	// Env is the DEBEZIUM_* variables of the environment
	// (ServerEnvironment), read over a Debezium Server file as Debezium
	// Server reads them.
	Env map[string]string
	// TemplateParams are an OpenShift Template's parameters by name, as
	// oc process -p NAME=value gives them (template.go).
	TemplateParams map[string]string
}

// ReadWith is Read with in: its Env over a Debezium Server file, as
// Debezium Server reads its environment over application.properties
// (environment.go), and alone with no data; a Kafka Connect or Strimzi
// configuration, and a file of pgoutbox's own, take nothing of it. Its
// TemplateParams fill an OpenShift Template's parameters.
func ReadWith(data []byte, in Inputs) (tr Translation, ok bool, err error) {
	env := in.Env
	var (
		conf    config
		fromEnv map[string]string // keys the environment gave, with their variables
		quoted  []string          // YAML keys of a segment holding a '.'
		pending *UnresolvedError  // the database's options a URL replaces
		extra   []string          // warnings of the file's form
	)
	// deferred keeps placeholders of the database's options only for
	// later, without those options: false for any other error.
	deferred := func(props map[string]string, err error) bool {
		var ue *UnresolvedError
		if err == nil {
			return true
		}
		if !errors.As(err, &ue) {
			return false
		}
		for _, p := range ue.Problems {
			k, _, _ := strings.Cut(p, ":")
			delete(props, k)
		}
		pending = ue
		return true
	}
	// finish gives the deferred placeholders as the error of a
	// translation without the database's URL.
	finish := func(tr Translation, ok bool, err error) (Translation, bool, error) {
		var missing *UnresolvedError
		if errors.As(err, &missing) && pending != nil {
			missing.Problems = append(pending.Problems, missing.Problems...)
		} else if err == nil && pending != nil {
			err = pending
		}
		if errors.As(err, &missing) {
			tr.Settings = slices.DeleteFunc(tr.Settings, func(s Setting) bool { return s.Flag == "database-url" })
		}
		tr.Warnings = append(extra, tr.Warnings...)
		return tr, ok, err
	}
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		tr.Form = ConnectJSON
		props, err := parseConnectJSON(data)
		if err != nil {
			return tr, true, err
		}
		if err := resolveConnect(props); !deferred(props, err) {
			return tr, true, err
		}
		conf = fromConnect(props)
	} else if isStrimzi(data) {
		tr.Form = StrimziConnector
		props, warnings, err := parseStrimzi(data, in.TemplateParams)
		extra = append(extra, warnings...)
		if err != nil {
			return tr, true, err
		}
		if err := resolveConnect(props); !deferred(props, err) {
			return tr, true, err
		}
		conf = fromConnect(props)
	} else if props, ok, err := operatorServer(data); ok {
		tr.Form = OperatorServer
		if err != nil {
			return tr, true, err
		}
		fromEnv = withEnvironment(props, env)
		if err := resolveServer(props); !deferred(props, err) {
			return tr, true, err
		}
		conf = fromServer(props)
	} else if props, ok, err := connectorYAML(data); ok {
		tr.Form = ConnectYAML
		if err != nil {
			return tr, true, err
		}
		if err := resolveConnect(props); !deferred(props, err) {
			return tr, true, err
		}
		conf = fromConnect(props)
	} else if props, ok := serverYAML(data); ok {
		tr.Form = ServerYAML
		fromEnv = withEnvironment(props, env)
		if err := resolveServer(props); !deferred(props, err) {
			return tr, true, err
		}
		conf = fromServer(props)
		for k := range props {
			if strings.Contains(k, `"`) {
				quoted = append(quoted, k)
			}
		}
	} else {
		props, err := schema.ParseProperties(data)
		if err != nil {
			return tr, false, err
		}
		if _, connector := props["connector.class"]; connector && !hasServerKeys(props) {
			// Kafka Connect standalone's connector file
			// (connect-standalone.sh worker.properties connector.properties).
			tr.Form = ConnectProperties
			if err := resolveConnect(props); !deferred(props, err) {
				return tr, true, err
			}
			return finish(translated(tr, fromConnect(props), nil))
		}
		if fileEnv := ServerEnvironment(envLines(props)); len(fileEnv) > 0 && !hasServerKeys(props) && len(fileEnv) == len(props) {
			// A file of DEBEZIUM_* variables (docker's --env-file, a
			// Compose env_file): Debezium Server's environment form,
			// under the environment's own.
			maps.Copy(fileEnv, env)
			env, props = fileEnv, map[string]string{}
			data = nil
		}
		if connectWorker(props) {
			tr.Form = ConnectProperties
			return tr, true, errors.New("a Kafka Connect worker's configuration, not a connector's: give --config the connector's file " +
				"(its properties or JSON, with connector.class); write the worker's converters (key.converter, value.converter and their options) " +
				"in it, as Kafka Connect lets a connector override them, and its bootstrap.servers as --kafka-brokers")
		}
		if hasServerKeys(props) || len(bytes.TrimSpace(data)) == 0 {
			fromEnv = withEnvironment(props, env)
		}
		if !hasServerKeys(props) {
			return tr, false, nil
		}
		tr.Form = ServerProperties
		if err := resolveServer(props); !deferred(props, err) {
			return tr, true, err
		}
		conf = fromServer(props)
	}
	tr, ok, err = finish(translated(tr, conf, fromEnv))
	sort.Strings(quoted)
	for _, k := range quoted {
		tr.Warnings = append(tr.Warnings, fmt.Sprintf("%s: a YAML key holding a '.' is one segment of the property's name, in quotes, as Debezium Server reads it, and no option of Debezium's: "+
			"write it nested (connector: {class: …}), as application.yaml.example does", k))
	}
	return tr, ok, err
}

// envLines is props as environ's NAME=value pairs.
func envLines(props map[string]string) []string {
	out := make([]string, 0, len(props))
	for k, v := range props {
		out = append(out, k+"="+v)
	}
	return out
}

// connectWorker tells a Kafka Connect worker's properties
// (connect-standalone.properties, connect-distributed.properties): options
// only a worker has, and no connector.
func connectWorker(props map[string]string) bool {
	if _, ok := props["connector.class"]; ok {
		return false
	}
	for _, k := range []string{"plugin.path", "offset.storage.file.filename", "offset.storage.topic", "group.id", "offset.flush.interval.ms"} {
		if _, ok := props[k]; ok {
			_, servers := props["bootstrap.servers"]
			return servers || k == "plugin.path" || k == "offset.storage.file.filename"
		}
	}
	return false
}

// translated is tr with conf's translation; fromEnv are the keys the
// environment gave (withEnvironment), with their variables.
func translated(tr Translation, conf config, fromEnv map[string]string) (Translation, bool, error) {
	r := conf.translate()
	var unread []string
	for k, name := range fromEnv {
		if want := unspellable(k); want != "" {
			unread = append(unread, fmt.Sprintf("%s is read as %s, not as %s: a variable's name cannot spell its '-', and Debezium Server does not read it there either; "+
				"set %s in application.properties (where %s overrides it)", name, k, want, want, name))
		}
	}
	sort.Strings(unread)
	r.warnings = append(r.warnings, unread...)
	tr.Settings, tr.Ignored, tr.Warnings = r.out, r.ignored, r.warnings
	if len(r.refused) > 0 {
		sort.Strings(r.refused)
		return tr, true, fmt.Errorf("options pgoutbox cannot honour:\n  %s", strings.Join(r.refused, "\n  "))
	}
	if len(r.dbMissing) > 0 {
		return tr, true, &UnresolvedError{Problems: r.dbMissing}
	}
	return tr, true, nil
}

// parseConnectJSON reads {"name": …, "config": {…}} or a bare config
// object; values may be strings, numbers or booleans.
func parseConnectJSON(data []byte) (map[string]string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("not a connector JSON: %w", err)
	}
	obj := top
	if raw, ok := top["config"]; ok {
		obj = nil
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, fmt.Errorf("\"config\" is not an object: %w", err)
		}
	}
	props := make(map[string]string, len(obj))
	for k, raw := range obj {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		switch v := v.(type) {
		case string:
			props[k] = v
		case float64, bool:
			props[k] = strings.TrimSpace(string(raw))
		case nil:
		default:
			return nil, fmt.Errorf("%s: want a string, number or boolean", k)
		}
	}
	return props, nil
}

func hasServerKeys(props map[string]string) bool {
	for k := range props {
		if strings.HasPrefix(k, "debezium.") {
			return true
		}
	}
	return false
}

// config is a Debezium configuration split by role.
type config struct {
	connector map[string]string // connector options (debezium.source.* for the Server), transforms, predicates
	other     map[string]string // runtime options: converters, sink, offsets, …
	server    bool
}

func fromConnect(props map[string]string) config {
	resolveAliases(props)
	c := config{connector: map[string]string{}, other: map[string]string{}}
	for k, v := range props {
		switch {
		case strings.HasPrefix(k, "key.converter"), strings.HasPrefix(k, "value.converter"), strings.HasPrefix(k, "header.converter"):
			c.other[k] = v
		default:
			c.connector[k] = v
		}
	}
	return c
}

func fromServer(props map[string]string) config {
	c := config{connector: map[string]string{}, other: map[string]string{}, server: true}
	for k, v := range props {
		switch {
		case strings.HasPrefix(k, "debezium.source."):
			c.connector[strings.TrimPrefix(k, "debezium.source.")] = v
		case strings.HasPrefix(k, "debezium.transforms"), strings.HasPrefix(k, "debezium.predicates"):
			c.connector[strings.TrimPrefix(k, "debezium.")] = v
		default:
			c.other[k] = v
		}
	}
	return c
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
