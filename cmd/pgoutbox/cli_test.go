package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pgcluster"
)

func TestMain(m *testing.M) { pgcluster.Main(m) }

// unreachable is a database URL nothing listens on.
const unreachable = "postgres://u:p@127.0.0.1:1/db"

// isolateEnv unsets every PGOUTBOX_<FLAG> variable for the test, so the
// environment the tests run in cannot fill flags.
func isolateEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PGOUTBOX_") && !strings.HasPrefix(k, "PGOUTBOX_TEST_") && k != "PGOUTBOX_PG_BINDIR" {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

// runCLI calls run in-process with a bounded context and returns the exit
// code, stdout and stderr.
func runCLI(t *testing.T, timeout time.Duration, args ...string) (int, string, string) {
	t.Helper()
	isolateEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func contains(t *testing.T, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, got)
		}
	}
}

func TestCommandLine(t *testing.T) {
	url := []string{"--database-url", unreachable}
	runArgs := func(extra ...string) []string {
		return append([]string{"run", "--kafka-brokers", "127.0.0.1:1", "--database-url", unreachable}, extra...)
	}
	tests := []struct {
		name      string
		args      []string
		code      int
		stdout    []string
		stderr    []string
		connected bool // may mention connecting
	}{
		{"no command", nil, 2, nil, []string{"Usage:"}, false},
		{"unknown command", []string{"bogus"}, 2, nil, []string{`unknown command "bogus"`, "Usage:"}, false},
		{"unknown flag", []string{"migrate", "--nope"}, 2, nil, []string{"flag provided but not defined: -nope", "pgoutbox migrate -h lists its flags"}, false},
		{"run's flag to migrate", append([]string{"migrate", "--topic", "t"}, url...), 2, nil, []string{"flag provided but not defined: -topic", "--topic is a flag of pgoutbox run, not of pgoutbox migrate"}, false},
		{"stray argument", append([]string{"migrate", "extra"}, url...), 2, nil, []string{`unexpected argument "extra"`}, false},
		{"slot without subcommand", []string{"slot"}, 2, nil, []string{"slot create"}, false},
		{"unknown slot subcommand", []string{"slot", "bogus"}, 2, nil, []string{`unknown slot command "bogus"`}, false},
		{"migrate without url", []string{"migrate"}, 1, nil, []string{"--database-url", "PGOUTBOX_DATABASE_URL"}, false},
		{"slot without url", []string{"slot", "status"}, 1, nil, []string{"--database-url", "PGOUTBOX_DATABASE_URL"}, false},
		{"run without url", []string{"run", "--kafka-brokers", "h:1"}, 1, nil, []string{"--database-url", "PGOUTBOX_DATABASE_URL"}, false},
		{"run without brokers", append([]string{"run"}, url...), 1, nil, []string{"--kafka-brokers", "PGOUTBOX_KAFKA_BROKERS"}, false},
		{"run bad mode", runArgs("--mode", "bogus"), 1, nil, []string{`--mode "bogus"`}, false},
		{"run bad format", runArgs("--format", "bogus"), 1, nil, []string{"--format"}, false},
		{"run bad procs", runArgs("--procs", "0"), 1, nil, []string{`--procs "0"`}, false},
		{"run buffer below one message", runArgs("--max-buffered-bytes", "1000", "--max-message-bytes", "2000"), 1, nil, []string{"max buffered bytes 1000 is smaller than max message bytes 2000"}, false},
		{"run lease shorter than three renewals", runArgs("--lease-ttl", "2s", "--lease-renew", "1s"), 1, nil, []string{"lease TTL 2s and renewal interval 1s", "at least three times"}, false},
		{"run --pprof without --metrics-addr", runArgs("--pprof"), 1, nil, []string{"--pprof needs --metrics-addr"}, false},
		{"run bad log level", runArgs("--log-level", "loud"), 1, nil, []string{`--log-level "loud"`}, false},
		{"run bad log format", runArgs("--log-format", "xml"), 1, nil, []string{`--log-format "xml"`}, false},
		{"run bad slot", runArgs("--slot", "x;drop"), 1, nil, []string{"invalid name", `slot "x;drop"`}, false},
		{"run bad publication", runArgs("--publication", "Bad-Name"), 1, nil, []string{"invalid name", `publication "Bad-Name"`}, false},
		{"slot create bad slot", append([]string{"slot", "create", "--slot", "x;drop"}, url...), 1, nil, []string{"invalid name", `slot "x;drop"`}, false},
		{"slot status bad publication", append([]string{"slot", "status", "--publication", "Bad-Name"}, url...), 1, nil, []string{"invalid name", `publication "Bad-Name"`}, false},
		{"slot drop bad slot", append([]string{"slot", "drop", "--slot", "x;drop"}, url...), 1, nil, []string{"invalid name"}, false},
		{"migrate bad table", append([]string{"migrate", "--table", "a.b;c"}, url...), 1, nil, []string{"invalid name", `table list "a.b;c"`, `"b;c" must be quoted`}, false},
		{"unreachable database", append([]string{"migrate"}, url...), 1, nil, []string{"connect:"}, true},
		{"version", []string{"version"}, 0, []string{"pgoutbox "}, nil, false},
		{"help", []string{"help"}, 0, []string{"Usage:"}, nil, false},
		{"--help", []string{"--help"}, 0, []string{"Usage:"}, nil, false},
		{"help run", []string{"help", "run"}, 0, []string{"-database-url", "-kafka-brokers"}, nil, false},
		{"help with an unknown command", []string{"help", "nope"}, 2, nil, []string{`unknown command "nope"`}, false},
		{"run -h", []string{"run", "-h"}, 0, []string{"-database-url", "-kafka-brokers"}, nil, false},
		{"run --help after flags", runArgs("--help"), 0, []string{"-kafka-brokers"}, nil, false},
		{"migrate --help", []string{"migrate", "--help"}, 0, []string{"-database-url"}, nil, false},
		{"status -h", []string{"status", "-h"}, 0, []string{"-database-url"}, nil, false},
		{"bench --help", []string{"bench", "--help"}, 0, []string{"-rate"}, nil, false},
		{"bench -h, the load's shape", []string{"bench", "-h"}, 0, []string{"-rates", "-aggregates", "MIN-MAX"}, nil, false},
		{"bench bad rates", []string{"bench", "--rates", "500,x"}, 1, nil, []string{`--rates: "x"`}, false},
		{"bench zero rate", []string{"bench", "--rates", "0"}, 1, nil, []string{`--rates: "0"`}, false},
		{"bench repeated rate", []string{"bench", "--rates", "500,2000,2000.0"}, 1, nil, []string{`--rates: 2000.0 is listed twice; --repeat repeats every run`}, false},
		{"bench bad events per tx", []string{"bench", "--events-per-tx", "3-1"}, 2, nil, []string{`invalid value "3-1" for flag -events-per-tx`}, false},
		{"bench -h, the brokers", []string{"bench", "-h"}, 0, []string{"-nats-url", "-rabbitmq-url", "-redis-address"}, nil, false},
		{"bench two brokers", []string{"bench", "--kafka-brokers", "127.0.0.1:1", "--redis-address", "127.0.0.1:2"}, 1, nil,
			[]string{"--kafka-brokers and --redis-address: the bench measures one broker at a time"}, false},
		{"bench three brokers", []string{"bench", "--nats-url", "nats://127.0.0.1:1", "--rabbitmq-url", "amqp://u:hidden@127.0.0.1:2/", "--redis-address", "127.0.0.1:3"}, 1, nil,
			[]string{"--nats-url and --rabbitmq-url and --redis-address: the bench measures one broker at a time"}, false},
		{"bench floor without slot", []string{"bench", "floor"}, 1, nil, []string{"--slot is required"}, false},
		{"bench floor -h", []string{"bench", "floor", "-h"}, 0, []string{"-slot", "-publication"}, nil, false},
		{"demo -h", []string{"demo", "-h"}, 0, []string{"-duration"}, nil, false},
		{"slot -h", []string{"slot", "-h"}, 0, []string{"slot create"}, nil, false},
		{"slot create -h", []string{"slot", "create", "-h"}, 0, []string{"-force"}, nil, false},
		{"dlq --help", []string{"dlq", "--help"}, 0, []string{"dlq replay"}, nil, false},
		{"dlq replay -h", []string{"dlq", "replay", "-h"}, 0, []string{"-kafka-brokers"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, 10*time.Second, tt.args...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			contains(t, "stdout", stdout, tt.stdout...)
			contains(t, "stderr", stderr, tt.stderr...)
			if !tt.connected && (strings.Contains(stderr, "connect:") || strings.Contains(stderr, "reconnecting")) {
				t.Errorf("failed only after trying to connect:\n%s", stderr)
			}
			if tt.name == "version" && !strings.HasPrefix(stdout, "pgoutbox ") {
				t.Errorf("version output %q does not start with %q", stdout, "pgoutbox ")
			}
		})
	}
}

// A --max-message-bytes above the default buffer is accepted on its own:
// the buffer's default grows with it. run goes on to connect (and fails
// to, here); what it must not do is refuse the flags.
func TestRunLargeMessageLimitAlone(t *testing.T) {
	_, _, stderr := runCLI(t, 3*time.Second, "run", "--kafka-brokers", "127.0.0.1:1", "--database-url", unreachable,
		"--max-message-bytes", "100000000")
	if strings.Contains(stderr, "max buffered bytes") {
		t.Fatalf("--max-message-bytes 100000000 refused:\n%s", stderr)
	}
}

// testFlags is a flag set shaped like a command's.
func testFlags() (*flag.FlagSet, *common, *string, *bool) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var c common
	c.register(fs)
	brokers := fs.String("kafka-brokers", "", "")
	createSlot := fs.Bool("create-slot", true, "")
	return fs, &c, brokers, createSlot
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pgoutbox.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFlagPrecedence(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		config     string // written to a file passed as --config, unless env names it
		slot       string
		brokers    string
		createSlot bool
	}{
		{name: "defaults", slot: "pgoutbox", createSlot: true},
		{name: "file", config: "# comment\n\nslot = from_file\n--kafka-brokers = \"a:1,b:2\"\n  create-slot=false  \n",
			slot: "from_file", brokers: "a:1,b:2"},
		{name: "env over file", config: "slot = from_file\nkafka-brokers = f:1\n",
			env:  map[string]string{"PGOUTBOX_SLOT": "from_env", "PGOUTBOX_CREATE_SLOT": "false"},
			slot: "from_env", brokers: "f:1"},
		{name: "command line over env and file", args: []string{"--slot", "from_cli", "--create-slot=true"},
			config: "slot = from_file\ncreate-slot = false\n",
			env:    map[string]string{"PGOUTBOX_SLOT": "from_env", "PGOUTBOX_KAFKA_BROKERS": "e:1"},
			slot:   "from_cli", brokers: "e:1", createSlot: true},
		{name: "config named by env", env: map[string]string{"PGOUTBOX_CONFIG": "FILE"},
			config: "slot = via_env_config\n", slot: "via_env_config", createSlot: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolateEnv(t)
			fs, c, brokers, createSlot := testFlags()
			args := tt.args
			if tt.config != "" {
				path := writeConfig(t, tt.config)
				if tt.env["PGOUTBOX_CONFIG"] == "FILE" {
					tt.env["PGOUTBOX_CONFIG"] = path
				} else {
					args = append([]string{"--config", path}, args...)
				}
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			if err := parseFlags(fs, args, io.Discard, io.Discard); err != nil {
				t.Fatalf("parseFlags: %v", err)
			}
			if c.slot != tt.slot || *brokers != tt.brokers || *createSlot != tt.createSlot {
				t.Errorf("slot %q, brokers %q, create-slot %t; want %q, %q, %t",
					c.slot, *brokers, *createSlot, tt.slot, tt.brokers, tt.createSlot)
			}
		})
	}
}

func TestFlagErrors(t *testing.T) {
	tests := []struct {
		name   string
		env    map[string]string
		config string
		want   []string // in the error; "FILE" stands for the config path
		not    string   // not in the error
	}{
		{name: "unknown key", config: "slot = a\n# note\nno-such-flag = 1\n", want: []string{"FILE:3:", `"no-such-flag"`}},
		{name: "bad value in file", config: "\ncreate-slot = maybe\n", want: []string{"FILE:2:", "create-slot"}},
		{name: "line without =", config: "slot\n", want: []string{"FILE:1:"}},
		{name: "a YAML line", config: "kafka-brokers: k:9092\n", want: []string{"FILE:1:", "expected flag = value, not kafka-brokers: value"}},
		{name: "a YAML line holding a secret", config: "database-url: postgres://u:hunter2@db/shop\n", want: []string{"not database-url: value"}, not: "hunter2"},
		{name: "an environment variable's name", config: "PGOUTBOX_KAFKA_BROKERS = k:9092\n", want: []string{`"PGOUTBOX_KAFKA_BROKERS": write it kafka-brokers`}},
		{name: "underscores", config: "kafka_brokers = k:9092\n", want: []string{`"kafka_brokers": write it kafka-brokers`}},
		{name: "bad value in env", env: map[string]string{"PGOUTBOX_CREATE_SLOT": "maybe"}, want: []string{"PGOUTBOX_CREATE_SLOT"}},
		{name: "missing file", config: "-", want: []string{"config"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolateEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			fs, _, _, _ := testFlags()
			var args []string
			path := ""
			if tt.config == "-" {
				path = filepath.Join(t.TempDir(), "absent.conf")
			} else if tt.config != "" {
				path = writeConfig(t, tt.config)
			}
			if path != "" {
				args = []string{"--config", path}
			}
			err := parseFlags(fs, args, io.Discard, io.Discard)
			if err == nil || errors.Is(err, errUsage) {
				t.Fatalf("parseFlags = %v, want an error", err)
			}
			for _, w := range tt.want {
				contains(t, "error", err.Error(), strings.ReplaceAll(w, "FILE", path))
			}
			if tt.not != "" && strings.Contains(err.Error(), tt.not) {
				t.Errorf("the error shows %q: %v", tt.not, err)
			}
		})
	}
}

func TestRedactor(t *testing.T) {
	const secret = "hunter22"
	logs := map[string]func(*slog.Logger){
		"message":     func(l *slog.Logger) { l.Info("password " + secret) },
		"string attr": func(l *slog.Logger) { l.Info("m", "dsn", "password="+secret) },
		"error attr":  func(l *slog.Logger) { l.Warn("m", "err", errors.New("auth "+secret+" failed")) },
		"other attr":  func(l *slog.Logger) { l.Info("m", "v", struct{ P string }{secret}) },
		"group attr": func(l *slog.Logger) {
			l.Info("m", slog.Group("g", "k", secret, slog.Group("h", "e", errors.New(secret))))
		},
		"with attrs":   func(l *slog.Logger) { l.With("k", secret, "e", errors.New(secret)).Info("m") },
		"with group":   func(l *slog.Logger) { l.WithGroup("g").With("k", secret).Info("m", "k2", secret) },
		"debug record": func(l *slog.Logger) { l.Debug("m", "k", secret) },
	}
	for _, format := range []string{"json", "text", "pretty"} {
		for name, log := range logs {
			t.Run(format+"/"+name, func(t *testing.T) {
				var buf bytes.Buffer
				l, err := newLogger(&buf, format, "debug", []string{secret})
				if err != nil {
					t.Fatal(err)
				}
				log(l)
				if out := buf.String(); strings.Contains(out, secret) || !strings.Contains(out, "*****") {
					t.Errorf("not redacted:\n%s", out)
				}
			})
		}
	}
	for _, bad := range [][2]string{{"json", "loud"}, {"xml", "info"}} {
		if _, err := newLogger(io.Discard, bad[0], bad[1], nil); err == nil {
			t.Errorf("newLogger(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

// A duration in a JSON log line reads as one ("1.5s"), not as
// nanoseconds; in a group too.
func TestLogDurations(t *testing.T) {
	var buf bytes.Buffer
	l, err := newLogger(&buf, "json", "info", nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Info("reconnecting", "in", 1500*time.Millisecond, slog.Group("poll", "interval", 500*time.Millisecond))
	var line struct {
		In   string `json:"in"`
		Poll struct {
			Interval string `json:"interval"`
		} `json:"poll"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	if line.In != "1.5s" || line.Poll.Interval != "500ms" {
		t.Errorf("durations: %s", buf.String())
	}
}

func TestSecretsOf(t *testing.T) {
	t.Setenv("PGPASSWORD", "")
	os.Unsetenv("PGPASSWORD")
	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
	tests := []struct {
		dsn  string
		want []string
	}{
		{"postgres://u:S3cret@h:5432/db", []string{"S3cret"}},
		{"postgresql://u:p%40ss%2Fw@h/db?sslmode=disable", []string{"p@ss/w", "p%40ss%2Fw"}},
		{"host=h user=u password=S3cret dbname=db", []string{"S3cret"}},
		{"host=h user=u password='two words' dbname=db", []string{"two words"}},
		{"postgres://u@h/db", nil},
		{"", nil},
	}
	for _, tt := range tests {
		got := secretsOf(tt.dsn)
		for _, w := range tt.want {
			if !slices.Contains(got, w) {
				t.Errorf("secretsOf(%q) = %q, missing %q", tt.dsn, got, w)
			}
		}
		if tt.want == nil && len(got) != 0 {
			t.Errorf("secretsOf(%q) = %q, want none", tt.dsn, got)
		}
	}
}

// Every flag of every command that reads --config is known to
// anyCommandHas, so that one file serves them all: a setting of another
// command is skipped, and only one no command has is an error.
func TestOneConfigKnowsEveryFlag(t *testing.T) {
	isolateEnv(t)
	for _, args := range [][]string{
		{"migrate"}, {"slot", "create"}, {"slot", "status"}, {"slot", "drop"}, {"run"}, {"status"},
		{"dlq", "list"}, {"dlq", "skip"}, {"dlq", "replay"},
	} {
		code, out, _ := runCLI(t, 5*time.Second, append(args, "-h")...)
		if code != 0 {
			t.Fatalf("%v -h: exit %d", args, code)
		}
		n := 0
		for _, line := range strings.Split(out, "\n") {
			name, ok := strings.CutPrefix(line, "  -")
			if !ok {
				continue
			}
			name, _, _ = strings.Cut(name, " ")
			n++
			if !anyCommandHas(name) {
				t.Errorf("%v: --%s is unknown to anyCommandHas: a config file with it would fail the other commands", args, name)
			}
		}
		if n < 3 {
			t.Fatalf("%v -h listed %d flags:\n%s", args, n, out)
		}
	}
	if anyCommandHas("no-such-flag") {
		t.Fatal("anyCommandHas accepts anything")
	}
}

// --transaction-settle takes a duration, or auto: ask the coordinator,
// with the default wait where it cannot tell.
func TestTransactionSettleFlag(t *testing.T) {
	for _, c := range []struct {
		args   []string
		settle time.Duration
		ask    bool
		err    bool
	}{
		{nil, defaultSettle, false, false},
		{[]string{"--transaction-settle", "1ms"}, time.Millisecond, false, false},
		{[]string{"--transaction-settle", "0"}, 0, false, false},
		{[]string{"--transaction-settle", "auto"}, defaultSettle, true, false},
		{[]string{"--transaction-settle", "soon"}, 0, false, true},
	} {
		f := &relayFlags{}
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.register(fs)
		err := fs.Parse(c.args)
		if (err != nil) != c.err {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if !c.err && (f.cfg.Transactions.Settle != c.settle || f.cfg.Transactions.SettleAsk != c.ask) {
			t.Errorf("%v: settle %s, ask %v; want %s, %v", c.args, f.cfg.Transactions.Settle, f.cfg.Transactions.SettleAsk, c.settle, c.ask)
		}
	}
}
