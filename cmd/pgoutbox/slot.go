package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/store"
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
	if wantsHelp(args[:1]) {
		fmt.Fprint(stdout, slotUsage)
		return errHelp
	}
	fs := flag.NewFlagSet("pgoutbox slot "+sub, flag.ContinueOnError)
	var (
		c        common
		asJSON   bool
		force    bool
		keepPub  bool
		failover bool
		mc       mappingCheck
	)
	c.register(fs)
	switch sub {
	case "create":
		mc.register(fs)
		fs.BoolVar(&force, "force", false, "create the slot even though an earlier one of this pipeline was lost (accepts the gap)")
		fs.BoolVar(&failover, "failover", false, "create a failover slot, which standbys with sync_replication_slots keep a copy of (PostgreSQL 17+)")
	case "status":
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	case "drop":
		fs.BoolVar(&keepPub, "keep-publication", false, "drop only the slot")
	default:
		fmt.Fprintf(stderr, "unknown slot command %q\n%s", sub, slotUsage)
		return errUsage
	}
	if err := parseFlags(fs, args[1:], stdout, stderr); err != nil {
		return err
	}
	if err := c.requireURL(); err != nil {
		return err
	}
	tables, _, err := c.resolveTables(ctx)
	if err != nil {
		return err
	}
	rcfg := replication.Config{DatabaseURL: c.databaseURL, Table: tables[0], Slot: c.slot, Publication: c.publication, Failover: failover}
	if sub == "create" && mc.changeEvents() {
		// The publication run would make: of updates and deletes too, and
		// of all tables where patterns capture those created later.
		rcfg.ChangeEvents = true
		rcfg.PublishAllTables = c.publicationAllTables && c.tableInclude != ""
	}
	if len(tables) > 1 {
		rcfg.Tables = tables
	}
	rcfg.Defaults()
	if err := rcfg.Validate(); err != nil {
		return err
	}
	conn, err := c.connectUser(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())

	switch sub {
	case "create":
		// No slot for a table run could not relay: the slot would hold
		// WAL from now on for a relay that cannot start.
		if err := mc.check(ctx, fs, conn, tables, false); err != nil {
			return err
		}
		return slotCreate(ctx, conn, c, rcfg, tables, force, stdout)
	case "status":
		return slotStatus(ctx, conn, c, asJSON, stdout)
	default: // drop
		return slotDrop(ctx, conn, c, keepPub, stdout)
	}
}

// slotCreate creates the publication and the slot (slot create).
func slotCreate(ctx context.Context, conn *pgx.Conn, c common, rcfg replication.Config, tables []string, force bool, stdout io.Writer) error {
	if force {
		if err := (store.Pipeline{Name: c.slot}).Forget(ctx, conn); err != nil {
			return err
		}
	}
	res, err := relay.Setup(ctx, conn, rcfg, true, false)
	if err != nil {
		return err
	}
	switch {
	case res.Publication.Created:
		fmt.Fprintf(stdout, "publication %s created for %s\n", c.publication, strings.Join(tables, ", "))
	case len(res.Publication.Fixed) > 0:
		fmt.Fprintf(stdout, "publication %s fixed (%s): ran %s\n", c.publication, strings.Join(res.Publication.Problems, "; "), strings.Join(res.Publication.Fixed, " "))
	default:
		fmt.Fprintf(stdout, "publication %s already covers %s\n", c.publication, strings.Join(tables, ", "))
	}
	if res.SlotCreated {
		kind := ""
		if rcfg.Failover {
			kind = " as a failover slot"
		}
		fmt.Fprintf(stdout, "slot %s created%s at %s\n", c.slot, kind, res.SlotLSN)
	} else {
		fmt.Fprintf(stdout, "slot %s already exists\n", c.slot)
	}
	if f, err := replication.FailoverStatus(ctx, conn, c.slot); err == nil {
		for _, w := range f.Warnings {
			fmt.Fprintf(stdout, "failover warning: %s\n", w)
		}
	}
	return nil
}

// slotStatus says what the slot and the server's settings are, and what
// needs attention (slot status).
func slotStatus(ctx context.Context, conn *pgx.Conn, c common, asJSON bool, stdout io.Writer) error {
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
	fo, err := failoverView(ctx, conn, c.slot)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{
			"slot": c.slot, "exists": exists, "active": s.Active, "active_pid": s.ActivePID,
			"restart_lsn": s.RestartLSN.String(), "confirmed_flush_lsn": s.ConfirmedLSN.String(),
			"wal_status": s.WALStatus, "retained_wal_bytes": s.RetainedBytes, "lag_bytes": s.LagBytes,
			"wal_level": ready.WALLevel, "problems": problems, "failover": fo,
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
	fo.print(stdout)
	for _, p := range problems {
		fmt.Fprintf(stdout, "problem: %s\n", p)
	}
	if !exists || s.WALStatus == "lost" || len(problems) > 0 {
		return errors.New("the slot needs attention")
	}
	return nil
}

// slotDrop drops the slot, the publication unless kept, and the
// pipeline's state (slot drop).
func slotDrop(ctx context.Context, conn *pgx.Conn, c common, keepPub bool, stdout io.Writer) error {
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
	return (store.Pipeline{Name: c.slot}).Forget(ctx, conn)
}

// failover is what slot status and status say about a failover.
type failover struct {
	// Survives is false when something found would lose the slot (or
	// what it published) in a failover; the warnings say what.
	Survives     bool `json:"survives"`
	ServerMajor  int  `json:"server_major"`
	Standby      bool `json:"standby"`
	SlotFailover bool `json:"slot_failover"`
	SlotSynced   bool `json:"slot_synced"`
	// SynchronizedStandbySlots is the primary's setting; a primary cannot
	// see its standbys' sync_replication_slots.
	SynchronizedStandbySlots []string `json:"synchronized_standby_slots"`
	InactiveStandbySlots     []string `json:"inactive_standby_slots,omitempty"`
	// SyncReplicationSlots is read on a standby only.
	SyncReplicationSlots *bool    `json:"sync_replication_slots,omitempty"`
	Warnings             []string `json:"warnings"`
}

func failoverView(ctx context.Context, conn *pgx.Conn, slot string) (*failover, error) {
	f, err := replication.FailoverStatus(ctx, conn, slot)
	if err != nil {
		return nil, err
	}
	v := &failover{
		Survives: f.Survives(), ServerMajor: f.ServerMajor, Standby: f.InRecovery,
		SlotFailover: f.SlotFailover, SlotSynced: f.SlotSynced,
		SynchronizedStandbySlots: f.StandbySlots, InactiveStandbySlots: f.InactiveStandbySlots,
		Warnings: f.Warnings,
	}
	if v.SynchronizedStandbySlots == nil {
		v.SynchronizedStandbySlots = []string{}
	}
	if v.Warnings == nil {
		v.Warnings = []string{}
	}
	if f.InRecovery {
		v.SyncReplicationSlots = &f.SyncReplicationSlots
	}
	return v, nil
}

func (f *failover) print(w io.Writer) {
	fmt.Fprintf(w, "failover slot       %t", f.SlotFailover)
	if len(f.SynchronizedStandbySlots) > 0 {
		fmt.Fprintf(w, " (synchronized_standby_slots %s)", strings.Join(f.SynchronizedStandbySlots, ","))
	}
	if f.SyncReplicationSlots != nil {
		fmt.Fprintf(w, " (standby: sync_replication_slots %t, synced %t)", *f.SyncReplicationSlots, f.SlotSynced)
	}
	fmt.Fprintln(w)
	if f.Survives {
		fmt.Fprintln(w, "survives failover   yes, as far as this server can tell (the standbys need sync_replication_slots = on)")
	} else {
		fmt.Fprintln(w, "survives failover   no")
	}
	for _, m := range f.Warnings {
		fmt.Fprintf(w, "failover warning: %s\n", m)
	}
}
