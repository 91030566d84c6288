package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pgoutbox/pgoutbox/debezium"
	"github.com/pgoutbox/pgoutbox/replication"
)

// parseFlags parses args, then fills every flag not given on the command
// line from PGOUTBOX_<FLAG> in the environment, then from the --config file
// if the set has one.
//
// Help (-h, -help, --help) is not an error: it prints the flags to stdout
// and returns errHelp, which exits 0.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	if wantsHelp(args) {
		fs.SetOutput(stdout)
		fmt.Fprintf(stdout, "Usage of %s:\n", fs.Name())
		fs.PrintDefaults()
		return errHelp
	}
	fs.SetOutput(stderr)
	// The reason, then where the flags are: the whole list would push the
	// reason off the screen.
	fs.Usage = func() { usageHint(fs, args, stderr) }
	if err := fs.Parse(args); err != nil {
		return errUsage // flag already printed the reason and the hint
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected argument %q\n", fs.Arg(0))
		return errUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", envName(f.Name), e)
			}
			set[f.Name] = true
		}
	})
	if err != nil {
		return err
	}
	cfg := fs.Lookup("config")
	if cfg == nil {
		return nil
	}
	// Debezium Server's configuration may come from the environment, over
	// its file or alone, as Debezium Server reads it.
	env := debezium.ServerEnvironment(os.Environ())
	if cfg.Value.String() == "" && env["DEBEZIUM_SINK_TYPE"] == "" && env["DEBEZIUM_SOURCE_CONNECTOR_CLASS"] == "" {
		return nil
	}
	in := debezium.Inputs{Env: env}
	if tp := fs.Lookup("template-param"); tp != nil {
		if p, ok := tp.Value.(paramsFlag); ok && p.p != nil {
			in.TemplateParams = *p.p
		}
	}
	values, err := readAnyConfig(cfg.Value.String(), in, fs, stderr) // Debezium files too: debezium_config.go
	if err != nil {
		return err
	}
	for _, kv := range values {
		f := fs.Lookup(kv.key)
		if f == nil {
			// One file serves every command: a setting of another
			// command is not this one's business; only a setting no
			// command has is a mistake.
			if anyCommandHas(kv.key) {
				continue
			}
			err := fmt.Errorf("%s:%d: unknown setting %q", cfg.Value.String(), kv.line, kv.key)
			if name := settingName(kv.key); name != kv.key && (fs.Lookup(name) != nil || anyCommandHas(name)) {
				err = fmt.Errorf("%w: write it %s, the flag's name without its dashes", err, name)
			}
			return err
		}
		if set[kv.key] {
			continue
		}
		if err := fs.Set(kv.key, kv.value); err != nil {
			return fmt.Errorf("%s:%d: %s: %w", cfg.Value.String(), kv.line, kv.key, err)
		}
	}
	return nil
}

// settingName is key as a flag's name, where key was written as its
// environment variable (PGOUTBOX_KAFKA_BROKERS), with underscores, capitals
// or the command line's dashes.
func settingName(key string) string {
	key = strings.TrimLeft(key, "-")
	if upper := strings.ToUpper(key); strings.HasPrefix(upper, "PGOUTBOX_") {
		key = key[len("PGOUTBOX_"):]
	}
	return strings.ToLower(strings.ReplaceAll(key, "_", "-"))
}

// envName maps a flag name to its environment variable: kafka-brokers ->
// PGOUTBOX_KAFKA_BROKERS.
func envName(flagName string) string {
	return "PGOUTBOX_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

type setting struct {
	key, value string
	line       int
}

// readConfigFile reads "flag = value" lines; '#' starts a comment line.
func readConfigFile(path string) ([]setting, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	var out []setting
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			if k, _, yaml := strings.Cut(line, ":"); yaml && anyCommandHas(settingName(strings.TrimSpace(k))) {
				// The line itself is not shown: its value may be a secret.
				return nil, fmt.Errorf("%s:%d: expected flag = value, not %s: value", path, n, k)
			}
			return nil, fmt.Errorf("%s:%d: expected flag = value", path, n)
		}
		k = strings.TrimPrefix(strings.TrimSpace(k), "--")
		out = append(out, setting{key: k, value: unquote(strings.TrimSpace(v)), line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return out, nil
}

// unquote removes one pair of matching double or single quotes around a
// value that holds no other of them: table = "my-app"."Outbox" is a
// quoted table name, kept as it is.
func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] && !strings.ContainsRune(v[1:len(v)-1], rune(v[0])) {
		return v[1 : len(v)-1]
	}
	return v
}

// wantsHelp tells whether args ask for help before any "--", the way the
// flag package reads them.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--h", "--help":
			return true
		}
	}
	return false
}

// anyCommandHas tells whether some command that reads --config has a flag
// of this name.
func anyCommandHas(name string) bool {
	fs := flag.NewFlagSet("all", flag.ContinueOnError)
	var (
		f  relayFlags
		th thresholds
	)
	f.register(fs) // run's and dlq replay's: common, mapping, polling, Kafka, operations
	th.register(fs)
	fs.String("procs", "", "")
	fs.String("id", "", "")                                                              // dlq skip and replay
	for _, b := range []string{"force", "failover", "json", "keep-publication", "all"} { // slot, status, dlq
		fs.Bool(b, false, "")
	}
	return fs.Lookup(name) != nil
}

// usageHint follows a flag error: a flag of run given to another command
// (the same command line, another verb) is named as run's, and -h is
// offered for the rest.
func usageHint(fs *flag.FlagSet, args []string, w io.Writer) {
	if fs.Name() != "pgoutbox run" {
		runFlags := flag.NewFlagSet("", flag.ContinueOnError)
		(&relayFlags{}).register(runFlags)
		for _, a := range args {
			if a == "--" || !strings.HasPrefix(a, "-") {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if fs.Lookup(name) == nil && runFlags.Lookup(name) != nil {
				fmt.Fprintf(w, "--%s is a flag of pgoutbox run, not of %s\n", name, fs.Name())
				break
			}
		}
	}
	fmt.Fprintf(w, "%s -h lists its flags\n", fs.Name())
}

// flagSet tells whether the flag named was given, on the command line or
// by a --config file.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// failoverFlag is --slot-failover: true (refused before PostgreSQL 17),
// false, or auto (a failover slot where the server has them, as
// Debezium's slot.failover). Given alone, it is true.
type failoverFlag struct{ cfg *replication.Config }

func (f failoverFlag) String() string {
	switch {
	case f.cfg == nil || !f.cfg.Failover && !f.cfg.FailoverWhereSupported:
		return "false"
	case f.cfg.Failover:
		return "true"
	}
	return "auto"
}

func (f failoverFlag) Set(s string) error {
	switch strings.ToLower(s) {
	case "true":
		f.cfg.Failover, f.cfg.FailoverWhereSupported = true, false
	case "false":
		f.cfg.Failover, f.cfg.FailoverWhereSupported = false, false
	case "auto":
		f.cfg.Failover, f.cfg.FailoverWhereSupported = false, true
	default:
		return fmt.Errorf("%q: use true, false or auto", s)
	}
	return nil
}

func (failoverFlag) IsBoolFlag() bool { return true }
