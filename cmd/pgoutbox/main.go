// Command pgoutbox relays transactional-outbox rows from PostgreSQL to Kafka.
//
//	pgoutbox migrate --database-url URL
//	pgoutbox slot create|status|drop --database-url URL
//	pgoutbox run --database-url URL --kafka-brokers HOST:PORT
//	pgoutbox status --database-url URL
//	pgoutbox demo
//
// Every flag can also be set as PGOUTBOX_<FLAG> in the environment or as
// "flag = value" in a --config file; the command line wins, then the
// environment, then the file.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	// The server's TimeZone is read where the system has no zone files
	// (a scratch image): a timestamp without time zone is wall time in it.
	_ "time/tzdata"
)

// version is set at build time with -ldflags "-X main.version=..."; a
// plain go build or go install takes it from the module or the commit.
var version = "dev"

func init() {
	if version == "dev" {
		version = builtVersion()
	}
}

// builtVersion is the module's version (go install ...@v1.2.3), else the
// commit the binary was built from, else "dev".
func builtVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value[:min(len(s.Value), 12)]
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "dev"
	}
	return "dev-" + rev + dirty
}

const usage = `pgoutbox relays transactional-outbox rows from PostgreSQL to Kafka.

Usage:
  pgoutbox migrate --database-url URL        create or update the outbox and state tables
  pgoutbox slot create|status|drop ...       manage the publication and replication slot
  pgoutbox run --database-url URL --kafka-brokers HOST:PORT
                                             relay events until SIGTERM
  pgoutbox status --database-url URL [--json] the pipeline's mode, slot, lag and problems
  pgoutbox dlq list|replay|skip ...           dead letters: rows that could not be published
  pgoutbox demo                              the whole pipeline on a throwaway Postgres and broker
  pgoutbox bench                             latency and throughput, WAL against polling, with the floor
  pgoutbox version

Run "pgoutbox COMMAND -h" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// errUsage marks a usage error already explained to the user; errHelp, help
// that was asked for and printed.
var (
	errUsage = errors.New("usage")
	errHelp  = errors.New("help")
)

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "migrate":
		err = migrateCmd(ctx, rest, stdout, stderr)
	case "slot":
		err = slotCmd(ctx, rest, stdout, stderr)
	case "run":
		err = runCmd(ctx, rest, stdout, stderr)
	case "status":
		err = statusCmd(ctx, rest, stdout, stderr)
	case "dlq":
		err = dlqCmd(ctx, rest, stdout, stderr)
	case "demo":
		err = demoCmd(ctx, rest, stdout, stderr)
	case "bench":
		err = benchCmd(ctx, rest, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "pgoutbox", version)
	case "help", "-h", "--help":
		if cmd == "help" && len(rest) == 1 && rest[0] != "help" && rest[0] != "-h" && rest[0] != "--help" {
			// help COMMAND is COMMAND -h, as in git and go.
			return run(ctx, []string{rest[0], "-h"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "pgoutbox: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintf(stderr, "pgoutbox: %v\n", err)
		return 1
	}
}
