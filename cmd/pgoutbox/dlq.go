package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/store"
)

const dlqUsage = `Usage:
  pgoutbox dlq list   --database-url URL [--all] [--json]   the dead letters and why
  pgoutbox dlq replay --database-url URL --kafka-brokers B  publish them again, in order (same flags as run)
  pgoutbox dlq skip   --database-url URL --id N             resolve one without publishing it
`

func dlqCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, dlqUsage)
		return errUsage
	}
	sub := args[0]
	if wantsHelp(args[:1]) {
		fmt.Fprint(stdout, dlqUsage)
		return errHelp
	}
	fs := flag.NewFlagSet("pgoutbox dlq "+sub, flag.ContinueOnError)
	switch sub {
	case "list", "skip":
		var (
			c      common
			all    bool
			asJSON bool
			id     int64
		)
		c.register(fs)
		if sub == "list" {
			fs.BoolVar(&all, "all", false, "include dead letters already replayed or skipped")
			fs.BoolVar(&asJSON, "json", false, "print JSON")
		} else {
			fs.Int64Var(&id, "id", 0, "the dead letter to skip (see dlq list)")
		}
		if err := parseFlags(fs, args[1:], stdout, stderr); err != nil {
			return err
		}
		conn, err := c.open(ctx)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		if sub == "skip" {
			if id <= 0 {
				return fmt.Errorf("--id is required")
			}
			if err := (store.Pipeline{Name: c.slot}).SkipDeadLetter(ctx, conn, id); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "dead letter %d skipped: it will not be published\n", id)
			return nil
		}
		list, err := (store.Pipeline{Name: c.slot}).DeadLetters(ctx, conn, all)
		if err != nil {
			return err
		}
		if asJSON {
			if list == nil {
				list = []store.DeadLetter{}
			}
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(list)
		}
		if len(list) == 0 {
			fmt.Fprintln(stdout, "no dead letters")
			return nil
		}
		for _, d := range list {
			state := "open"
			if d.ReplayedAt != nil {
				state = d.Resolution
			}
			fmt.Fprintf(stdout, "%-6s %-8s %s  event %s  aggregate %s\n       %s\n",
				strconv.FormatInt(d.ID, 10), state, d.CreatedAt.Format("2006-01-02 15:04:05"), d.EventID, d.AggregateID, d.Reason)
		}
		return nil
	case "replay":
		var f relayFlags
		f.register(fs)
		if err := parseFlags(fs, args[1:], stdout, stderr); err != nil {
			return err
		}
		cfg, log, err := f.build(ctx, fs, stderr)
		if err != nil {
			return err
		}
		n, err := relay.Replay(ctx, cfg, log)
		fmt.Fprintf(stdout, "%d dead letters published\n", n)
		if err != nil {
			return fmt.Errorf("%s", redact(err.Error(), secretsOf(f.c.databaseURL)))
		}
		return nil
	}
	fmt.Fprintf(stderr, "unknown dlq command %q\n%s", sub, dlqUsage)
	return errUsage
}
