package debezium

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/pgoutbox/pgoutbox/schema"
)

// A Debezium configuration keeps its secrets out of the file with
// placeholders, resolved when it is read, as Debezium resolves them:
//
//	Kafka Connect  ${provider:[path:]key}, through the worker's config
//	               providers: env (EnvVarConfigProvider), file
//	               (FileConfigProvider) and directory
//	               (DirectoryConfigProvider), under those names or the ones
//	               config.providers.<name>.class gives them in the file
//	Debezium Server ${NAME} or ${NAME:default}: the environment variable
//	               NAME, else another key of the file, else the default
//
// A placeholder pgoutbox cannot resolve is an error that names the option
// and the placeholder, never a value; in a Debezium Server file only in the
// database.* options, since others hold templates of the router's own
// (route.topic.replacement's ${routedByValue}).

// connectPlaceholder is Kafka's ConfigTransformer pattern.
var connectPlaceholder = regexp.MustCompile(`\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}`)

// The provider classes pgoutbox reads, by the class a worker names.
var providerClasses = map[string]string{
	"org.apache.kafka.common.config.provider.EnvVarConfigProvider":    "env",
	"org.apache.kafka.common.config.provider.FileConfigProvider":      "file",
	"org.apache.kafka.common.config.provider.DirectoryConfigProvider": "directory",
}

// resolveConnect resolves the ${provider:path:key} placeholders of a Kafka
// Connect configuration in place, and drops its config.providers options.
func resolveConnect(props map[string]string) error {
	kinds := map[string]string{"env": "env", "file": "file", "directory": "directory"}
	for k, v := range props {
		if name, ok := strings.CutPrefix(k, "config.providers."); ok && strings.HasSuffix(name, ".class") {
			name = strings.TrimSuffix(name, ".class")
			if kind, ok := providerClasses[v]; ok {
				kinds[name] = kind
			} else {
				delete(kinds, name)
			}
		}
	}
	files := map[string]map[string]string{} // properties files read, by path
	var errs []string
	for _, k := range sortedKeys(props) {
		if strings.HasPrefix(k, "config.providers") {
			delete(props, k)
			continue
		}
		props[k] = connectPlaceholder.ReplaceAllStringFunc(props[k], func(ph string) string {
			m := connectPlaceholder.FindStringSubmatch(ph)
			provider, path, key := m[1], m[3], m[4]
			v, err := provide(kinds[provider], provider, path, key, files)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %s: %v", k, ph, err))
				return ph
			}
			return v
		})
	}
	return unresolved(errs)
}

// unresolved is the error of the placeholders errs names (each
// "option: placeholder: why"): an *UnresolvedError when they are all in
// the database's connection options, which --database-url replaces.
func unresolved(errs []string) error {
	if len(errs) == 0 {
		return nil
	}
	for _, e := range errs {
		if !dbOption(e) {
			return fmt.Errorf("cannot resolve: %s", strings.Join(errs, "; "))
		}
	}
	return &UnresolvedError{Problems: errs}
}

// dbOption tells a problem of an option the database's URL replaces.
func dbOption(problem string) bool {
	k, _, _ := strings.Cut(problem, ":")
	k = strings.TrimPrefix(k, "debezium.source.")
	switch k {
	case "database.hostname", "database.port", "database.user", "database.password", "database.dbname":
		return true
	}
	return false
}

// UnresolvedError is the database's connection options (hostname, port,
// user, password, dbname) only, unusable as written: placeholders
// pgoutbox cannot resolve, or one Debezium requires missing. A database
// URL given otherwise (--database-url, PGOUTBOX_DATABASE_URL) replaces
// them, and the configuration is read without them.
type UnresolvedError struct{ Problems []string }

func (e *UnresolvedError) Error() string {
	return "the database's options: " + strings.Join(e.Problems, "; ") + " (give the database's URL with --database-url or PGOUTBOX_DATABASE_URL, which replaces these options)"
}

// provide is what a provider of kind gives for path and key.
func provide(kind, provider, path, key string, files map[string]map[string]string) (string, error) {
	switch kind {
	case "env":
		v, ok := os.LookupEnv(key)
		if !ok {
			return "", fmt.Errorf("the environment has no %s", key)
		}
		return v, nil
	case "file":
		if path == "" {
			// Kafka Connect's FileConfigProvider reads a key of a
			// properties file; Connect fails on it too.
			return "", fmt.Errorf("${%s:PATH:KEY} names a key of a properties file, and %q has none: for a file's whole content, ${directory:DIR:NAME}", provider, key)
		}
		props, ok := files[path]
		if !ok {
			data, err := os.ReadFile(path)
			if err != nil {
				return "", err
			}
			if props, err = schema.ParseProperties(data); err != nil {
				return "", fmt.Errorf("%s: %w", path, err)
			}
			files[path] = props
		}
		v, ok := props[key]
		if !ok {
			return "", fmt.Errorf("%s has no key %s", path, key)
		}
		return v, nil
	case "directory":
		if path == "" {
			return "", fmt.Errorf("${%s:DIR:NAME} names a file of a directory, and %q has no directory", provider, key)
		}
		if strings.ContainsRune(key, filepath.Separator) || key == ".." {
			return "", fmt.Errorf("%q is not a file name", key)
		}
		data, err := os.ReadFile(filepath.Join(path, key))
		if err != nil {
			return "", err
		}
		return string(data), nil
	}
	return "", fmt.Errorf("config provider %q is not one pgoutbox reads (env, file, directory): give the value itself", provider)
}

// resolveServer resolves the expressions of a Debezium Server
// configuration in place, as Quarkus's SmallRye Config 3 reads them: ${NAME}
// and ${NAME:default} (a default may hold expressions), $$ and \$ a literal
// $ (so $${routedByValue} is the router's template ${routedByValue}).
func resolveServer(props map[string]string) error {
	var errs []string
	resolved := make(map[string]string, len(props))
	// lookup gives a name's value: the environment's, else another key's,
	// expanded in turn (to a depth that only a cycle reaches).
	var lookup func(name string, depth int) (string, bool)
	lookup = func(name string, depth int) (string, bool) {
		if v, ok := os.LookupEnv(name); ok {
			return v, true
		}
		v, ok := props[name]
		if !ok || depth > 8 {
			return "", false
		}
		return expandServer(v, func(n string) (string, bool) { return lookup(n, depth+1) }, func(_, _ string) {}), true
	}
	for _, k := range sortedKeys(props) {
		resolved[k] = expandServer(props[k], func(name string) (string, bool) { return lookup(name, 0) }, func(ph, name string) {
			if strings.HasPrefix(k, "debezium.source.database.") {
				errs = append(errs, fmt.Sprintf("%s: %s: neither the environment nor the file has %s", k, ph, name))
			}
		})
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return unresolved(errs)
	}
	for k, v := range resolved {
		props[k] = v
	}
	return nil
}

// expandServer expands one value: lookup gives a name's value; an
// expression without one and without a default is kept as written (a
// template of a transform's own), and reported to unresolved. An
// expression without its closing brace is kept too.
func expandServer(v string, lookup func(string) (string, bool), unresolved func(ph, name string)) string {
	if !strings.ContainsAny(v, "$\\") {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); {
		switch {
		case (v[i] == '$' || v[i] == '\\') && i+1 < len(v) && v[i+1] == '$':
			b.WriteByte('$')
			i += 2
		case v[i] == '$' && i+1 < len(v) && v[i+1] == '{':
			end := closingBrace(v, i+2)
			if end < 0 {
				b.WriteString(v[i:])
				return b.String()
			}
			ph := v[i : end+1]
			name, def, hasDefault := splitDefault(v[i+2 : end])
			name = expandServer(name, lookup, func(_, _ string) {})
			if val, ok := lookup(name); ok {
				b.WriteString(val)
			} else if hasDefault {
				b.WriteString(expandServer(def, lookup, unresolved))
			} else {
				unresolved(ph, name)
				b.WriteString(ph)
			}
			i = end + 1
		default:
			b.WriteByte(v[i])
			i++
		}
	}
	return b.String()
}

// closingBrace is the index of the brace that closes an expression whose
// content starts at from, past nested expressions; -1 when there is none.
func closingBrace(v string, from int) int {
	depth := 0
	for i := from; i < len(v); i++ {
		switch {
		case v[i] == '$' && i+1 < len(v) && v[i+1] == '{':
			depth++
			i++
		case v[i] == '}':
			if depth == 0 {
				return i
			}
			depth--
		}
	}
	return -1
}

// splitDefault splits an expression's content at its first colon outside
// nested expressions.
func splitDefault(s string) (name, def string, ok bool) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '$' && i+1 < len(s) && s[i+1] == '{':
			depth++
			i++
		case s[i] == '}':
			depth--
		case s[i] == ':' && depth == 0:
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
