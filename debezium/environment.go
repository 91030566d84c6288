package debezium

import (
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Debezium Server reads its configuration from the environment too, over
// application.properties, as SmallRye Config (MicroProfile Config) reads
// it, checked with the distribution's own jars:
//   - a variable overrides the file's key whose environment spelling it
//     is: capitals, '_' for any other character than a letter or a digit
//     (DEBEZIUM_SINK_NATS_JETSTREAM_URL overrides
//     debezium.sink.nats-jetstream.url);
//   - a variable no key of the file spells is a key of its own, in lower
//     case, each '_' a '.' (DEBEZIUM_SOURCE_DATABASE_HOSTNAME is
//     debezium.source.database.hostname). A key with a '-' or a '_' cannot
//     be written so: DEBEZIUM_SINK_NATS_JETSTREAM_URL alone is
//     debezium.sink.nats.jetstream.url, which the nats-jetstream sink never
//     reads.

// shellName is a variable name Debezium Server reads as a property
// (DebeziumServer's SHELL_PROPERTY_NAME_PATTERN).
var shellName = regexp.MustCompile(`^[a-zA-Z0-9_]+_+[a-zA-Z0-9_]+$`)

// ServerEnvironment is the DEBEZIUM_* variables of environ ("NAME=value"
// pairs, as os.Environ gives them; the prefix in any case), by name; nil
// when there is none.
func ServerEnvironment(environ []string) map[string]string {
	var out map[string]string
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(strings.ToUpper(name), "DEBEZIUM_") || !shellName.MatchString(name) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = value
	}
	return out
}

// withEnvironment sets env's variables (ServerEnvironment) into props, a
// Debezium Server file's keys, as Debezium Server reads them. It returns
// the keys the variables no file key spells gave, each with its variable.
func withEnvironment(props, env map[string]string) (own map[string]string) {
	own = map[string]string{}
	spelled := map[string]bool{}
	for k := range props {
		// SmallRye looks a key up as written, then with '_' for any
		// other character, then that in capitals: the first found wins.
		lower := strings.ToLower(envNameOf(k))
		found := false
		for _, name := range []string{k, lower, envNameOf(k)} {
			if v, ok := env[name]; ok {
				if !found {
					props[k], found = v, true
				}
				spelled[name] = true
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(env)) {
		if spelled[name] {
			continue
		}
		k := strings.ToLower(strings.ReplaceAll(name, "_", "."))
		if prev, ok := own[k]; ok && prev == strings.ToLower(prev) {
			continue // the lower-case spelling is looked up first
		}
		props[k] = env[name]
		own[k] = name
	}
	return own
}

// unspellable is the option a key a variable gave (own, of
// withEnvironment) stands for when the variable cannot spell it: a known
// option whose '-' or '_' became a '.'; "" when there is none.
func unspellable(key string) string {
	for _, o := range options {
		if o.Part != Server || strings.Contains(o.Key, "<") || strings.HasSuffix(o.Key, ".") || o.Key == key {
			continue
		}
		if strings.NewReplacer("-", ".", "_", ".").Replace(o.Key) == key {
			return o.Key
		}
	}
	return ""
}

// envNameOf is the environment's spelling of a property: capitals, and '_'
// for anything but letters and digits.
func envNameOf(key string) string {
	b := []byte(strings.ToUpper(key))
	for i, c := range b {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			b[i] = '_'
		}
	}
	return string(b)
}
