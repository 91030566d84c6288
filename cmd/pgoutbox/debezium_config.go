package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pgoutbox/pgoutbox/debezium"
)

// readAnyConfig reads a --config file: pgoutbox's own "flag = value" lines,
// a Debezium Server application.properties (keys under debezium.), a Kafka
// Connect connector's JSON ({"name": …, "config": {…}}) or properties, or a
// Strimzi KafkaConnector (or an OpenShift Template of one). Debezium
// options become pgoutbox settings (package debezium); those pgoutbox
// ignores are named in one warning on stderr, and those it cannot honour
// make it fail. Settings for flags that fs does not have (a Debezium file
// given to migrate or slot) are dropped. in's Env is Debezium Server's
// configuration from the environment (debezium.ServerEnvironment), read
// over a Debezium Server file, and alone when path is "".
func readAnyConfig(path string, in debezium.Inputs, fs *flag.FlagSet, stderr io.Writer) ([]setting, error) {
	var data []byte
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
	}
	tr, ok, err := debezium.ReadWith(data, in)
	if path == "" {
		path = "the environment (DEBEZIUM_*)"
	}
	var unresolved *debezium.UnresolvedError
	if errors.As(err, &unresolved) {
		// Placeholders of the database's options only: a URL given on
		// the command line or in the environment replaces them.
		if u := fs.Lookup("database-url"); u != nil && u.Value.String() != "" {
			err = nil
		}
	}
	switch {
	case err != nil && tr.Form != "":
		return nil, fmt.Errorf("%s (%s): %w", path, tr.Form, err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", path, err)
	case !ok && len(data) == 0:
		return nil, nil
	case !ok:
		return readConfigFile(path)
	}
	for _, w := range tr.Warnings {
		fmt.Fprintf(stderr, "pgoutbox: warning: %s: %s\n", path, w)
	}
	if len(tr.Ignored) > 0 {
		fmt.Fprintf(stderr, "pgoutbox: warning: %s: ignoring Debezium options pgoutbox does not use: %s (see docs/debezium.md)\n",
			path, strings.Join(tr.Ignored, ", "))
	}
	var out []setting
	for _, s := range tr.Settings {
		if fs.Lookup(s.Flag) != nil {
			out = append(out, setting{key: s.Flag, value: s.Value})
		}
	}
	return out, nil
}

var errNoTable = errors.New("no such table")
