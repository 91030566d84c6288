package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/store"
)

// pipelineStatus is what status reports; JSON field names are stable.
// Its parts, embedded, are flat in the JSON, in this order.
type pipelineStatus struct {
	Pipeline string `json:"pipeline"`
	Table    string `json:"table"`
	// Tables are the pipeline's outbox tables: Table alone, or the
	// several tables one slot streams (Table lists them, comma-separated).
	Tables []string `json:"tables"`
	modeStatus
	positionStatus
	rowsStatus
	opsStatus
	Problems []string `json:"problems"`
}

// modeStatus is the pipeline's mode, why, and its switches.
type modeStatus struct {
	Mode       string `json:"mode"`
	ModeReason string `json:"mode_reason"`
	// ModeReasonCode is ModeReason's code (store.ReasonCode): started,
	// handoff, handoff-done, wal-available, wal-unavailable; empty for a
	// reason saved by an older pgoutbox.
	ModeReasonCode string    `json:"mode_reason_code,omitempty"`
	ModeSince      time.Time `json:"mode_since"`
	Switches       int64     `json:"switches"`
	SlotLosses     int64     `json:"slot_losses"`
}

// positionStatus is where the pipeline stands: its saved positions, the
// cluster they were saved on, and its slot.
type positionStatus struct {
	ConfirmedLSN string `json:"confirmed_lsn,omitempty"`
	FloorXID     string `json:"floor_xid,omitempty"`
	FloorSeq     *int64 `json:"floor_seq,omitempty"`
	// Cluster is the system identifier of the cluster the positions were
	// saved on; ClusterChange is set once pgoutbox saw the pipeline's
	// state move to another cluster (a dump and restore, an upgrade).
	Cluster       *int64         `json:"system_identifier,omitempty"`
	ClusterChange *clusterChange `json:"cluster_change,omitempty"`
	Updated       time.Time      `json:"updated_at"`
	Slot          *slotView      `json:"slot"`
}

// slotView is the pipeline's slot.
type slotView struct {
	Active        bool   `json:"active"`
	ConfirmedLSN  string `json:"confirmed_flush_lsn"`
	RestartLSN    string `json:"restart_lsn"`
	WALStatus     string `json:"wal_status"`
	RetainedBytes int64  `json:"retained_wal_bytes"`
	LagBytes      int64  `json:"lag_bytes"`
}

// rowsStatus are the rows not published yet.
type rowsStatus struct {
	// Unpublished counts rows above the floor that polling has not marked;
	// in WAL mode these include rows the WAL already published.
	Unpublished      int64    `json:"unpublished_rows"`
	OldestUnpublishd *float64 `json:"oldest_unpublished_seconds,omitempty"`
	// UnpublishedByTable splits Unpublished by table, for a pipeline of
	// several tables: each above its own state row's floor.
	UnpublishedByTable map[string]int64 `json:"unpublished_rows_by_table,omitempty"`
}

// opsStatus is what the relay saves for operations.
type opsStatus struct {
	// LastPublish and Alive are saved by the relay every few seconds;
	// DeadLetters is set when the dead-letter table exists.
	LastPublish *time.Time `json:"last_publish_at,omitempty"`
	Alive       *time.Time `json:"alive_at,omitempty"`
	DeadLetters *int64     `json:"dead_letters,omitempty"`
	// HeldAggregates counts the aggregates held behind them.
	HeldAggregates *int64 `json:"held_aggregates,omitempty"`
	// Failover says whether the slot would survive a failover.
	Failover *failover `json:"failover,omitempty"`
	// KafkaProblem is the problem on the side of the broker the relay
	// publishes to that it last saved (an unreachable broker, a missing or
	// unauthorized topic, records failing, with the topic named), and
	// since when; empty when none. KafkaKnown is false before migration
	// 009. Broker names that broker ("kafka", "nats-jetstream"; empty where
	// an older relay saved no name, which was Kafka).
	KafkaProblem string     `json:"kafka_problem,omitempty"`
	KafkaSince   *time.Time `json:"kafka_problem_since,omitempty"`
	KafkaKnown   bool       `json:"kafka_known"`
	Broker       string     `json:"broker,omitempty"`
	// LostDeleted is set once polling found rows deleted before it
	// published them (migration 007): an upper bound of events lost.
	LostDeleted *lostDeleted `json:"lost_deleted,omitempty"`
	// Lease is the pipeline's lease (migration 013): which relay holds
	// it, or held it last.
	Lease *leaseStatus `json:"lease,omitempty"`
	// Stopped is why the relay last stopped on a problem retrying cannot
	// fix, until a session starts again (migration 014).
	Stopped   string     `json:"stopped,omitempty"`
	StoppedAt *time.Time `json:"stopped_at,omitempty"`
}

// broker names the broker the saved problem is of.
func (o *opsStatus) broker() string { return cmp.Or(o.Broker, "kafka") }

// leaseStatus is the pipeline's lease: its holder, the fencing token, and
// how long until another relay may take it over (negative: expired).
type leaseStatus struct {
	Holder           string  `json:"holder"`
	Token            int64   `json:"token"`
	ExpiresInSeconds float64 `json:"expires_in_seconds"`
}

// lostDeleted is what the relay saved about rows deleted before polling
// published them.
type lostDeleted struct {
	Rows    int64     `json:"rows"`
	FromSeq int64     `json:"from_seq"`
	ToSeq   int64     `json:"to_seq"`
	At      time.Time `json:"at"`
}

// clusterChange is the last change of cluster pgoutbox saw, and what it did.
type clusterChange struct {
	At       time.Time `json:"at"`
	Previous *int64    `json:"previous_system_identifier,omitempty"`
	What     string    `json:"what"`
	// OldFloorXID and OldFloorSeq are the floor kept for the rows copied
	// from the previous cluster.
	OldFloorXID string `json:"old_cluster_floor_xid,omitempty"`
	OldFloorSeq *int64 `json:"old_cluster_floor_seq,omitempty"`
}

// thresholds are when status says the pipeline needs a person.
type thresholds struct {
	maxAge   time.Duration // oldest unpublished row
	maxLag   int64         // slot lag or retained WAL, bytes
	maxQuiet time.Duration // since a relay last held the pipeline
	lostFor  time.Duration // how long a loss found by polling stays a problem
}

func (th *thresholds) register(fs *flag.FlagSet) {
	fs.DurationVar(&th.maxAge, "max-pending-age", 5*time.Minute, "a problem when the oldest unpublished row is older than this")
	fs.Int64Var(&th.maxLag, "max-lag-bytes", 1<<30, "a problem when the slot retains or trails by more WAL than this")
	fs.DurationVar(&th.maxQuiet, "max-relay-silence", time.Minute, "a problem when no relay has held the pipeline for this long")
	fs.DurationVar(&th.lostFor, "lost-events-window", 7*24*time.Hour, "a problem while rows deleted before polling published them were last found within this long")
}

// fromStore fills what the pipeline's state says (store.Status).
func (st *pipelineStatus) fromStore(s *store.Status) {
	st.Table, st.Mode, st.ModeReason, st.ModeSince = s.Table, string(s.Mode), s.Reason.String(), s.ModeSince
	st.ModeReasonCode = string(s.Reason.Code)
	st.Switches, st.SlotLosses, st.ConfirmedLSN, st.FloorXID, st.Updated = s.Switches, s.SlotLosses, s.Confirmed, s.FloorXID, s.Updated
	st.Cluster, st.FloorSeq = s.Cluster, s.FloorSeq
	if c := s.ClusterChange; c != nil {
		st.ClusterChange = &clusterChange{At: c.At, Previous: c.Previous, What: c.What, OldFloorXID: c.OldFloorXID, OldFloorSeq: c.OldFloorSeq}
	}
	st.LastPublish, st.Alive, st.DeadLetters, st.HeldAggregates = s.LastPublish, s.Alive, s.DeadLetters, s.HeldAggregates
	st.KafkaKnown, st.KafkaProblem, st.KafkaSince, st.Broker = s.KafkaKnown, s.KafkaProblem, s.KafkaSince, s.Broker
	if l := s.Lost; l != nil {
		st.LostDeleted = &lostDeleted{Rows: l.Rows, FromSeq: l.FromSeq, ToSeq: l.ToSeq, At: l.At}
	}
	if s.Stopped != nil {
		st.Stopped, st.StoppedAt = s.Stopped.Reason, &s.Stopped.At
	}
}

// operations adds the problems that what the relay saves for operations
// and the dead-letter count show.
func (st *pipelineStatus) operations(s *store.Status, th thresholds) {
	if st.StoppedAt != nil {
		st.Problems = append(st.Problems, fmt.Sprintf("the relay stopped at %s: %s", st.StoppedAt.Format(time.RFC3339), st.Stopped))
	}
	if s.Silence != nil && s.Silence.Seconds() > th.maxQuiet.Seconds() {
		st.Problems = append(st.Problems, fmt.Sprintf("no relay has held the pipeline for %s: is pgoutbox run running?",
			s.Silence.Truncate(time.Second)))
	}
	if st.KafkaKnown && st.KafkaProblem != "" {
		p := st.broker() + ": " + st.KafkaProblem
		if st.KafkaSince != nil {
			p += fmt.Sprintf(" (for %s)", time.Since(*st.KafkaSince).Round(time.Second))
		}
		st.Problems = append(st.Problems, p)
	}
	if l := s.Lost; l != nil && l.Recent {
		st.Problems = append(st.Problems, fmt.Sprintf("events lost: up to %d outbox rows of %s were deleted before polling published them (between seq %d and %d, last at %s); polling cannot relay rows the application deletes: stream the WAL (wal_level=logical) or delete only rows with published_at set",
			l.Rows, st.Table, l.FromSeq, l.ToSeq, l.At.Format(time.RFC3339)))
	}
	if n := st.DeadLetters; n != nil && *n > 0 {
		st.Problems = append(st.Problems, fmt.Sprintf("%d events are dead-lettered in %s (pgoutbox dlq list)", *n, store.DeadLetterTable))
	}
	if st.OldestUnpublishd != nil && *st.OldestUnpublishd > th.maxAge.Seconds() {
		st.Problems = append(st.Problems, fmt.Sprintf("the oldest unpublished row is %s old (over %s): is Kafka reachable?",
			(time.Duration(*st.OldestUnpublishd)*time.Second).Round(time.Second), th.maxAge))
	}
	if s := st.Slot; s != nil {
		if s.LagBytes > th.maxLag || s.RetainedBytes > th.maxLag {
			st.Problems = append(st.Problems, fmt.Sprintf("the slot retains %d bytes of WAL and trails by %d (limit %d): the relay is behind or stopped",
				s.RetainedBytes, s.LagBytes, th.maxLag))
		}
		if s.WALStatus == "unreserved" {
			st.Problems = append(st.Problems, "the slot is about to lose WAL it needs (wal_status unreserved, max_slot_wal_keep_size)")
		}
	}
}

func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pgoutbox status", flag.ContinueOnError)
	var (
		c      common
		asJSON bool
		th     thresholds
	)
	// run's mapping flags, so that the same flags count by the same
	// mark; of them status reads only the polling columns.
	var mc mappingCheck
	c.register(fs)
	th.register(fs)
	mc.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	ownPublished(fs, &mc.cfg.Poll)
	conn, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	st, err := readStatus(ctx, conn, c.slot, mc.cfg.Poll, th)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			return err
		}
	} else {
		st.print(stdout)
	}
	if len(st.Problems) > 0 {
		return errors.New("the pipeline needs attention")
	}
	return nil
}

// readStatus reads the status of pipeline slot on conn; pc says how its
// tables are polled, th when something needs a person.
func readStatus(ctx context.Context, conn *pgx.Conn, slot string, pc poll.Config, th thresholds) (*pipelineStatus, error) {
	st := &pipelineStatus{Pipeline: slot, Problems: []string{}}
	own := store.Pipeline{Name: slot}
	saved, err := own.Status(ctx, conn, th.lostFor)
	switch {
	case errors.Is(err, store.ErrNoPipeline):
		if _, serr := replication.SlotStatus(ctx, conn, slot); errors.Is(serr, replication.ErrSlotElsewhere) {
			return nil, fmt.Errorf("no pipeline %q here: %w", slot, serr)
		}
		return nil, fmt.Errorf("no pipeline %q: pgoutbox run has not started it yet", slot)
	case errors.Is(err, store.ErrNoState):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("read state: %w", err)
	}
	st.fromStore(saved)
	if err := st.readSlot(ctx, conn, saved.Mode); err != nil {
		return nil, err
	}
	st.Tables = []string{st.Table}
	if ts, err := outbox.ParseTables(st.Table); err == nil {
		st.Tables = st.Tables[:0]
		for _, t := range ts {
			st.Tables = append(st.Tables, t.String())
		}
	}
	st.countUnpublished(ctx, conn, pc)
	if saved.PollingInsteadOfWAL() {
		st.Problems = append(st.Problems, "polling instead of streaming the WAL: "+st.ModeReason)
	}
	if h, err := own.LeaseHolder(ctx, conn); err == nil && h != nil {
		st.Lease = &leaseStatus{Holder: h.Holder, Token: h.Token, ExpiresInSeconds: h.ExpiresIn.Seconds()}
	}
	st.operations(saved, th)
	if st.Failover, err = failoverView(ctx, conn, slot); err != nil {
		st.Problems = append(st.Problems, fmt.Sprintf("cannot tell whether the slot survives a failover: %v", err))
	}
	return st, nil
}

// readSlot reads the pipeline's slot, of a pipeline saved in mode.
func (st *pipelineStatus) readSlot(ctx context.Context, conn *pgx.Conn, mode store.Mode) error {
	s, err := replication.SlotStatus(ctx, conn, st.Pipeline)
	switch {
	case err == nil:
		st.Slot = &slotView{s.Active, s.ConfirmedLSN.String(), s.RestartLSN.String(), s.WALStatus, s.RetainedBytes, s.LagBytes}
		if s.WALStatus == "lost" {
			st.Problems = append(st.Problems, "the slot is invalidated: WAL it needed was removed (auto mode replaces it and polls the gap)")
		}
	case errors.Is(err, replication.ErrSlotMissing):
		if mode == store.ModeWAL {
			st.Problems = append(st.Problems, "the pipeline's slot does not exist")
		}
	case errors.Is(err, replication.ErrSlotElsewhere):
		st.Problems = append(st.Problems, err.Error())
	default:
		return err
	}
	return nil
}

// countUnpublished counts each table's unpublished rows, polled as pc
// says.
func (st *pipelineStatus) countUnpublished(ctx context.Context, conn *pgx.Conn, pc poll.Config) {
	if len(st.Tables) > 1 {
		st.UnpublishedByTable = map[string]int64{}
	}
	own := store.Pipeline{Name: st.Pipeline}
	for i, table := range st.Tables {
		// The first table's positions are in the pipeline's row; every
		// other table's in a row of its own, once a relay wrote it (the
		// pipeline's floor holds for every table until then).
		rowOwn := own
		if i > 0 {
			if o := store.TablePipeline(st.Pipeline, table); knownRow(ctx, conn, o) {
				rowOwn = o
			}
		}
		pc.Table = table
		t, err := outbox.ParseTable(table)
		var (
			n      int64
			oldest time.Duration
		)
		if err == nil {
			n, oldest, err = rowOwn.Unpublished(ctx, conn, t, pc, "created_at")
		}
		if err != nil {
			st.Problems = append(st.Problems, fmt.Sprintf("cannot count the unpublished rows of %s: %v", table, err))
			continue
		}
		st.Unpublished += n
		if st.UnpublishedByTable != nil {
			st.UnpublishedByTable[table] = n
		}
		if s := oldest.Seconds(); oldest > 0 && (st.OldestUnpublishd == nil || s > *st.OldestUnpublishd) {
			st.OldestUnpublishd = &s
		}
	}
}

// print writes the status as text.
func (st *pipelineStatus) print(stdout io.Writer) {
	fmt.Fprintf(stdout, "pipeline     %s (%s)\n", st.Pipeline, strings.Join(st.Tables, ", "))
	fmt.Fprintf(stdout, "mode         %s since %s (%d switches)\n", st.Mode, st.ModeSince.Format(time.RFC3339), st.Switches)
	fmt.Fprintf(stdout, "reason       %s\n", st.ModeReason)
	fmt.Fprintf(stdout, "confirmed    %s\n", st.ConfirmedLSN)
	fmt.Fprintf(stdout, "floor xid    %s\n", st.FloorXID)
	if st.Cluster != nil {
		fmt.Fprintf(stdout, "cluster      %d\n", *st.Cluster)
	}
	if c := st.ClusterChange; c != nil {
		from := "another cluster"
		if c.Previous != nil {
			from = fmt.Sprintf("cluster %d", *c.Previous)
		}
		fmt.Fprintf(stdout, "new cluster  seen %s, state came from %s: %s\n", c.At.Format(time.RFC3339), from, c.What)
	}
	if st.Slot != nil {
		fmt.Fprintf(stdout, "slot         active=%t confirmed_flush_lsn=%s wal_status=%s retained=%d bytes lag=%d bytes\n",
			st.Slot.Active, st.Slot.ConfirmedLSN, st.Slot.WALStatus, st.Slot.RetainedBytes, st.Slot.LagBytes)
	} else {
		fmt.Fprintln(stdout, "slot         none")
	}
	fmt.Fprintf(stdout, "slot losses  %d\n", st.SlotLosses)
	fmt.Fprintf(stdout, "unpublished  %d rows above the floor", st.Unpublished)
	if st.OldestUnpublishd != nil {
		fmt.Fprintf(stdout, ", oldest %.1fs", *st.OldestUnpublishd)
	}
	fmt.Fprintln(stdout)
	if len(st.UnpublishedByTable) > 0 {
		for _, table := range st.Tables {
			fmt.Fprintf(stdout, "             %s: %d\n", table, st.UnpublishedByTable[table])
		}
	}
	st.opsStatus.print(stdout)
	for _, p := range st.Problems {
		fmt.Fprintf(stdout, "problem: %s\n", p)
	}
}

// print writes what the relay saved for operations as text.
func (o *opsStatus) print(stdout io.Writer) {
	if o.LastPublish != nil {
		fmt.Fprintf(stdout, "published    last at %s\n", o.LastPublish.Format(time.RFC3339))
	}
	if o.Alive != nil {
		fmt.Fprintf(stdout, "relay        last seen %s\n", o.Alive.Format(time.RFC3339))
	}
	if l := o.Lease; l != nil && l.ExpiresInSeconds > 0 {
		fmt.Fprintf(stdout, "lease        held by %s (token %d), %.1fs left unless renewed\n", l.Holder, l.Token, l.ExpiresInSeconds)
	} else if l != nil {
		fmt.Fprintf(stdout, "lease        free: last held by %s (token %d), expired %.1fs ago\n", l.Holder, l.Token, -l.ExpiresInSeconds)
	}
	switch {
	case !o.KafkaKnown:
		fmt.Fprintf(stdout, "%-12s not recorded (run pgoutbox migrate)\n", o.broker())
	case o.KafkaProblem == "":
		fmt.Fprintf(stdout, "%-12s no problem seen by the relay\n", o.broker())
	default:
		fmt.Fprintf(stdout, "%-12s %s\n", o.broker(), o.KafkaProblem)
	}
	if o.DeadLetters != nil {
		fmt.Fprintf(stdout, "dead letters %d", *o.DeadLetters)
		if h := o.HeldAggregates; h != nil && *h > 0 {
			fmt.Fprintf(stdout, " (%d %s held)", *h, plural(*h, "aggregate", "aggregates"))
		}
		fmt.Fprintln(stdout)
	}
	if o.Failover != nil {
		o.Failover.print(stdout)
	}
	if l := o.LostDeleted; l != nil {
		fmt.Fprintf(stdout, "lost         up to %d rows deleted before polling published them (seq %d-%d, last at %s)\n",
			l.Rows, l.FromSeq, l.ToSeq, l.At.Format(time.RFC3339))
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// knownRow tells whether the state table has a row for own.
func knownRow(ctx context.Context, conn *pgx.Conn, own store.Pipeline) bool {
	known, _, err := own.Check(ctx, conn)
	return err == nil && known
}

// plural is one when n is 1, else many.
func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
