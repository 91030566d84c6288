package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// StandbyOptions configure a streaming standby of a cluster.
type StandbyOptions struct {
	// Name is the standby's application_name on the primary, which
	// synchronous_standby_names and pg_stat_replication use; default
	// "standby".
	Name string
	// Slot, when set, is a physical replication slot created on the
	// primary for the standby (primary_slot_name): the primary keeps the
	// WAL the standby has not received, and PostgreSQL 17's slot
	// synchronization needs it.
	Slot string
	// Synchronous makes the primary wait for the standby at each commit
	// (synchronous_standby_names), so that a commit the application saw
	// survives a failover.
	Synchronous bool
	// Settings are extra settings for the standby, as in Options, for
	// example {"sync_replication_slots": "on", "hot_standby_feedback": "on"}.
	Settings map[string]string
}

// StartStandby makes a physical streaming standby of c on a free loopback
// port, waits until it streams, and returns it. Promote turns it into a
// primary; Stop(ctx, "immediate") on c is a primary that dies.
//
// The copy is taken with pg_basebackup when c's binaries have it (Debian's
// do). Otherwise (the npm build of 18 has none, and an older pg_basebackup
// cannot copy a newer server) c is stopped cleanly, its data directory copied
// and c started again, on the same port: connections to c are cut, so start
// the standby before the connections that must survive.
func (c *Cluster) StartStandby(ctx context.Context, opts StandbyOptions) (*Cluster, error) {
	if c.External() {
		return nil, ErrExternalServer
	}
	if opts.Name == "" {
		opts.Name = "standby"
	}
	for what, name := range map[string]string{"name": opts.Name, "slot": opts.Slot} {
		if name != "" && !settingName.MatchString(name) {
			return nil, fmt.Errorf("pgcluster: invalid standby %s %q", what, name)
		}
	}
	root, err := os.MkdirTemp("", "pgtest-standby-")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: creating the standby directory: %w", err)
	}
	srv := newServer(root, c.srv.binDir, Options{WALLevel: c.srv.opts.WALLevel, Settings: opts.Settings, Fsync: c.srv.opts.Fsync, Logger: c.logger},
		c.srv.cred)
	s := &Cluster{Dir: srv.dir, srv: srv, logger: c.logger}
	if err := s.initStandby(ctx, c, opts); err != nil {
		if cerr := s.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	c.logger.Info("postgres standby started", "url", s.URL, "primary_port", c.Port)
	return s, nil
}

func (c *Cluster) initStandby(ctx context.Context, primary *Cluster, opts StandbyOptions) error {
	s := c.srv
	// The primary's settings first, then the standby's own on top of them.
	s.opts.Settings = mergeSettings(primary.srv.opts.Settings, opts.Settings)
	config, err := s.config()
	if err != nil {
		return err
	}
	if err := s.prepareDirs(); err != nil {
		return err
	}
	if s.watchdog, err = startWatchdog(s); err != nil {
		return err
	}

	conn, err := pgx.Connect(ctx, primary.URL)
	if err != nil {
		return fmt.Errorf("pgcluster: connecting to the primary: %w", err)
	}
	defer func() { conn.Close(context.Background()) }()
	if opts.Slot != "" {
		if _, err := conn.Exec(ctx, "SELECT pg_create_physical_replication_slot($1, true)", opts.Slot); err != nil {
			return fmt.Errorf("pgcluster: creating the standby's slot %s: %w", opts.Slot, err)
		}
	}
	if _, err := os.Stat(filepath.Join(s.binDir, "pg_basebackup")); err == nil {
		cmd := s.command(ctx, "pg_basebackup", "-D", s.dir, "-h", "127.0.0.1", "-p", fmt.Sprint(primary.Port),
			"-U", "postgres", "-X", "stream", "--checkpoint=fast", "--no-sync")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("pgcluster: pg_basebackup: %w\n%s", err, out)
		}
	} else {
		conn.Close(ctx)
		if err := primary.coldCopy(ctx, s.dir); err != nil {
			return err
		}
		if conn, err = pgx.Connect(ctx, primary.URL); err != nil {
			return fmt.Errorf("pgcluster: connecting to the primary: %w", err)
		}
	}

	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s", primary.Port, opts.Name)
	if strings.EqualFold(opts.Settings["sync_replication_slots"], "on") {
		// Slot synchronization reads the database from primary_conninfo.
		conninfo += " dbname=postgres"
	}
	extra := fmt.Sprintf("primary_conninfo = '%s'\nhot_standby = 'on'\n", conninfo)
	if opts.Slot != "" {
		extra += fmt.Sprintf("primary_slot_name = '%s'\n", opts.Slot)
	}
	// The copy holds the primary's postgresql.auto.conf and
	// postgresql.conf, whose pgtest lines name the primary's socket
	// directory: the standby's lines come after and win.
	if err := s.writeConfig(config + extra); err != nil {
		return err
	}
	signal := filepath.Join(s.dir, "standby.signal")
	if err := os.WriteFile(signal, nil, 0o600); err != nil {
		return fmt.Errorf("pgcluster: writing standby.signal: %w", err)
	}
	if s.cred != nil {
		if err := os.Chown(signal, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
	}
	if err := c.started(s.startOnFreePort(ctx)); err != nil {
		return err
	}
	if opts.Synchronous {
		if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET synchronous_standby_names = '%s'", opts.Name)); err != nil {
			return fmt.Errorf("pgcluster: making the standby synchronous: %w", err)
		}
		if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
	}
	return waitStreaming(ctx, primary.URL, opts.Name, opts.Synchronous)
}

// coldCopy stops the cluster cleanly, copies its data directory to dst and
// starts it again on its port.
func (c *Cluster) coldCopy(ctx context.Context, dst string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.srv.pgctlStop(ctx, "fast"); err != nil {
		return err
	}
	// cp -a keeps the owner (the postgres user, when root) and modes.
	out, cpErr := exec.CommandContext(ctx, "cp", "-a", c.Dir, dst).CombinedOutput()
	if err := c.srv.pgctlStart(ctx, c.Port); err != nil {
		return err
	}
	if cpErr != nil {
		return fmt.Errorf("pgcluster: copying the data directory: %w\n%s", cpErr, out)
	}
	// As pg_basebackup does: the primary's slots are not the standby's,
	// and a copied logical slot would block PostgreSQL 17's slot
	// synchronization of the same name.
	slots, err := filepath.Glob(filepath.Join(dst, "pg_replslot", "*"))
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	for _, slot := range slots {
		if err := os.RemoveAll(slot); err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
	}
	// A clean stop leaves no postmaster.pid; these are the primary's.
	for _, f := range []string{"postmaster.opts", "postmaster.pid"} {
		if err := os.Remove(filepath.Join(dst, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("pgcluster: %w", err)
		}
	}
	return nil
}

func mergeSettings(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// waitStreaming waits until the primary at url shows the standby name
// streaming (and, if sync, as synchronous).
func waitStreaming(ctx context.Context, url, name string, sync bool) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("pgcluster: connecting to the primary: %w", err)
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(setupTimeout)
	for {
		var state, syncState string
		err := conn.QueryRow(ctx, `SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1`, name).Scan(&state, &syncState)
		if err == nil && state == "streaming" && (!sync || syncState == "sync") {
			return nil
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("pgcluster: waiting for the standby: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgcluster: standby %s not streaming after %s (state %q, sync_state %q)", name, setupTimeout, state, syncState)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: waiting for the standby: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Promote turns a standby into a primary and waits until it accepts writes.
func (c *Cluster) Promote(ctx context.Context) error {
	if c.External() {
		return ErrExternalServer
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cmd := c.srv.command(ctx, "pg_ctl", "promote", "-D", c.Dir, "-w", "-t", pgctlWaitSeconds)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgcluster: pg_ctl promote: %w\n%s", err, out)
	}
	c.logger.Info("postgres standby promoted", "port", c.Port)
	return nil
}

// NewStandby starts a streaming standby of primary for the test, closed when
// the test ends; see StartStandby.
func NewStandby(t TB, primary *Cluster, opts StandbyOptions) *Cluster {
	t.Helper()
	if primary.External() {
		t.Skip("a standby needs the throwaway cluster, not " + DatabaseURLEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	s, err := primary.StartStandby(ctx, opts)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return s
}
