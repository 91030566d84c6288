package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/replication"
)

const slotUsage = `Usage:
  pgoutbox slot create --database-url URL   check the server, create the publication and slot
  pgoutbox slot status --database-url URL   show the slot's positions, retained WAL and activity
  pgoutbox slot drop   --database-url URL   drop the slot and the publication
`

func slotCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, slotUsage)
		return errUsage
	}
	sub := args[0]
	fs := flag.NewFlagSet("pgoutbox slot "+sub, flag.ContinueOnError)
	var (
		c       common
		asJSON  bool
		force   bool
		keepPub bool
	)
	c.register(fs)
	switch sub {
	case "create":
		fs.BoolVar(&force, "force", false, "create the slot even though an earlier one of this pipeline was lost (accepts the gap)")
	case "status":
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	case "drop":
		fs.BoolVar(&keepPub, "keep-publication", false, "drop only the slot")
	default:
		fmt.Fprintf(stderr, "unknown slot command %q\n%s", sub, slotUsage)
		return errUsage
	}
	if err := parseFlags(fs, args[1:], stderr); err != nil {
		return err
	}
	if err := c.requireURL(); err != nil {
		return err
	}
	rcfg := replication.Config{DatabaseURL: c.databaseURL, Table: c.table, Slot: c.slot, Publication: c.publication}
	rcfg.Defaults()
	if err := rcfg.Validate(); err != nil {
		return err
	}
	conn, err := connect(ctx, c.databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())

	switch sub {
	case "create":
		if force {
			if err := relay.Forget(ctx, conn, c.slot); err != nil {
				return err
			}
		}
		res, err := relay.Setup(ctx, conn, rcfg, true, false)
		if err != nil {
			return err
		}
		if res.PublicationCreated {
			fmt.Fprintf(stdout, "publication %s created for %s\n", c.publication, c.table)
		} else {
			fmt.Fprintf(stdout, "publication %s already covers %s\n", c.publication, c.table)
		}
		if res.SlotCreated {
			fmt.Fprintf(stdout, "slot %s created at %s\n", c.slot, res.SlotLSN)
		} else {
			fmt.Fprintf(stdout, "slot %s already exists\n", c.slot)
		}
		return nil
	case "status":
		ready, err := replication.Inspect(ctx, conn)
		if err != nil {
			return err
		}
		s, err := replication.SlotStatus(ctx, conn, c.slot)
		exists := err == nil
		if err != nil && !errors.Is(err, replication.ErrSlotMissing) {
			return err
		}
		problems := ready.Problems(exists)
		var refused *replication.RefusedError
		if err := replication.TryReplication(ctx, conn, c.databaseURL); errors.As(err, &refused) {
			problems = append(problems, refused.Advice)
		} else if err != nil {
			problems = append(problems, redact(err.Error(), secretsOf(c.databaseURL)))
		}
		if asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(map[string]any{
				"slot": c.slot, "exists": exists, "active": s.Active, "active_pid": s.ActivePID,
				"restart_lsn": s.RestartLSN.String(), "confirmed_flush_lsn": s.ConfirmedLSN.String(),
				"wal_status": s.WALStatus, "retained_wal_bytes": s.RetainedBytes, "lag_bytes": s.LagBytes,
				"wal_level": ready.WALLevel, "problems": problems,
			})
		}
		if !exists {
			fmt.Fprintf(stdout, "slot %s does not exist\n", c.slot)
		} else {
			fmt.Fprintf(stdout, "slot                %s\n", s.Name)
			fmt.Fprintf(stdout, "active              %t", s.Active)
			if s.Active {
				fmt.Fprintf(stdout, " (pid %d)", s.ActivePID)
			}
			fmt.Fprintln(stdout)
			fmt.Fprintf(stdout, "confirmed_flush_lsn %s\n", s.ConfirmedLSN)
			fmt.Fprintf(stdout, "restart_lsn         %s\n", s.RestartLSN)
			fmt.Fprintf(stdout, "retained WAL        %d bytes\n", s.RetainedBytes)
			fmt.Fprintf(stdout, "lag                 %d bytes behind the current WAL position\n", s.LagBytes)
			fmt.Fprintf(stdout, "wal_status          %s\n", s.WALStatus)
		}
		for _, p := range problems {
			fmt.Fprintf(stdout, "problem: %s\n", p)
		}
		if !exists || s.WALStatus == "lost" || len(problems) > 0 {
			return errors.New("the slot needs attention")
		}
		return nil
	default: // drop
		if err := replication.DropSlot(ctx, conn, c.slot); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "slot %s dropped\n", c.slot)
		if !keepPub {
			if err := replication.DropPublication(ctx, conn, c.publication); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "publication %s dropped\n", c.publication)
		}
		return relay.Forget(ctx, conn, c.slot)
	}
}
