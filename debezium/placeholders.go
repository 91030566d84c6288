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

// serverPlaceholder is a Quarkus property expression without nesting.
var serverPlaceholder = regexp.MustCompile(`\$\{([^}:]+)(:([^}]*))?\}`)

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
	if len(errs) > 0 {
		return fmt.Errorf("cannot resolve: %s", strings.Join(errs, "; "))
	}
	return nil
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
		if strings.ContainsRune(key, filepath.Separator) || key == ".." {
			return "", fmt.Errorf("%q is not a file name", key)
		}
		data, err := os.ReadFile(filepath.Join(path, key))
		if err != nil {
			return "", err
		}
		return string(data), nil
	}
	return "", fmt.Errorf("config provider %q is not one pgoutbox reads (env, file, directory): give the value itself, or the database URL with --database-url or PGOUTBOX_DATABASE_URL", provider)
}

// resolveServer resolves the ${NAME} and ${NAME:default} expressions of a
// Debezium Server configuration in place.
func resolveServer(props map[string]string) error {
	var errs []string
	resolved := make(map[string]string, len(props))
	for _, k := range sortedKeys(props) {
		resolved[k] = serverPlaceholder.ReplaceAllStringFunc(props[k], func(ph string) string {
			m := serverPlaceholder.FindStringSubmatch(ph)
			name, hasDefault, def := m[1], m[2] != "", m[3]
			if v, ok := os.LookupEnv(name); ok {
				return v
			}
			if v, ok := props[name]; ok && !strings.Contains(v, "${") {
				return v
			}
			if hasDefault {
				return def
			}
			if strings.HasPrefix(k, "debezium.source.database.") {
				errs = append(errs, fmt.Sprintf("%s: %s: neither the environment nor the file has %s", k, ph, name))
			}
			return ph
		})
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return fmt.Errorf("cannot resolve: %s", strings.Join(errs, "; "))
	}
	for k, v := range resolved {
		props[k] = v
	}
	return nil
}
