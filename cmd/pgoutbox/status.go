package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/replication"
)

// pipelineStatus is what status reports; JSON field names are stable.
type pipelineStatus struct {
	Pipeline     string    `json:"pipeline"`
	Table        string    `json:"table"`
	Mode         string    `json:"mode"`
	ModeReason   string    `json:"mode_reason"`
	ModeSince    time.Time `json:"mode_since"`
	Switches     int64     `json:"switches"`
	SlotLosses   int64     `json:"slot_losses"`
	ConfirmedLSN string    `json:"confirmed_lsn,omitempty"`
	FloorXID     string    `json:"floor_xid,omitempty"`
	FloorSeq     *int64    `json:"floor_seq,omitempty"`
	// Cluster is the system identifier of the cluster the positions were
	// saved on; ClusterChange is set once pgoutbox saw the pipeline's
	// state move to another cluster (a dump and restore, an upgrade).
	Cluster       *int64         `json:"system_identifier,omitempty"`
	ClusterChange *clusterChange `json:"cluster_change,omitempty"`
	Updated       time.Time      `json:"updated_at"`
	Slot          *struct {
		Active        bool   `json:"active"`
		ConfirmedLSN  string `json:"confirmed_flush_lsn"`
		RestartLSN    string `json:"restart_lsn"`
		WALStatus     string `json:"wal_status"`
		RetainedBytes int64  `json:"retained_wal_bytes"`
		LagBytes      int64  `json:"lag_bytes"`
	} `json:"slot"`
	// Unpublished counts rows above the floor that polling has not marked;
	// in WAL mode these include rows the WAL already published.
	Unpublished      int64    `json:"unpublished_rows"`
	OldestUnpublishd *float64 `json:"oldest_unpublished_seconds,omitempty"`
	// LastPublish and Alive are saved by the relay every few seconds;
	// DeadLetters is set when the dead-letter table exists.
	LastPublish *time.Time `json:"last_publish_at,omitempty"`
	Alive       *time.Time `json:"alive_at,omitempty"`
	DeadLetters *int64     `json:"dead_letters,omitempty"`
	// Failover says whether the slot would survive a failover.
	Failover *failover `json:"failover,omitempty"`
	// KafkaProblem is the Kafka-side problem the relay last saved (an
	// unreachable broker, a missing or unauthorized topic, records
	// failing, with the topic named), and since when; empty when none.
	// KafkaKnown is false before migration 009.
	KafkaProblem string     `json:"kafka_problem,omitempty"`
	KafkaSince   *time.Time `json:"kafka_problem_since,omitempty"`
	KafkaKnown   bool       `json:"kafka_known"`
	// LostDeleted is set once polling found rows deleted before it
	// published them (migration 007): an upper bound of events lost.
	LostDeleted *lostDeleted `json:"lost_deleted,omitempty"`
	Problems    []string     `json:"problems"`
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

// cluster adds what the relay recorded about the cluster (migration 010).
func (st *pipelineStatus) cluster(ctx context.Context, conn *pgx.Conn) {
	var (
		at                  *time.Time
		prev, current, fseq *int64
		oseq                *int64
		what, oxid          *string
	)
	err := conn.QueryRow(ctx, `SELECT system_identifier, floor_seq, cluster_changed_at, previous_system_identifier, cluster_change,
  foreign_floor_xid::text, foreign_floor_seq FROM pgoutbox_state WHERE pipeline = $1`, st.Pipeline).Scan(
		&current, &fseq, &at, &prev, &what, &oxid, &oseq)
	if err != nil {
		return
	}
	st.Cluster, st.FloorSeq = current, fseq
	if at != nil {
		st.ClusterChange = &clusterChange{At: *at, Previous: prev, What: deref(what), OldFloorXID: deref(oxid), OldFloorSeq: oseq}
	}
}

// deadLetterTable is where dead-lettered events are kept, when it exists.
const deadLetterTable = "pgoutbox_dead_letter"

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

// operations adds what the relay saves for operations (migration 004) and
// the dead-letter count, and the problems they show.
func (st *pipelineStatus) operations(ctx context.Context, conn *pgx.Conn, th thresholds) {
	var silence *float64
	err := conn.QueryRow(ctx, `SELECT last_publish_at, alive_at, extract(epoch FROM now() - alive_at)::float8
FROM pgoutbox_state WHERE pipeline = $1`, st.Pipeline).Scan(&st.LastPublish, &st.Alive, &silence)
	if err == nil && silence != nil && *silence > th.maxQuiet.Seconds() {
		st.Problems = append(st.Problems, fmt.Sprintf("no relay has held the pipeline for %s: is pgoutbox run running?",
			(time.Duration(*silence)*time.Second).Round(time.Second)))
	}
	var kafkaProblem *string
	if conn.QueryRow(ctx, `SELECT kafka_problem, kafka_problem_since FROM pgoutbox_state WHERE pipeline = $1`,
		st.Pipeline).Scan(&kafkaProblem, &st.KafkaSince) == nil {
		st.KafkaKnown = true
		if st.KafkaProblem = deref(kafkaProblem); st.KafkaProblem != "" {
			p := "kafka: " + st.KafkaProblem
			if st.KafkaSince != nil {
				p += fmt.Sprintf(" (for %s)", time.Since(*st.KafkaSince).Round(time.Second))
			}
			st.Problems = append(st.Problems, p)
		}
	}
	var (
		lost       int64
		from, to   *int64
		lostAt     *time.Time
		lostRecent bool
	)
	err = conn.QueryRow(ctx, `SELECT lost_deleted, lost_deleted_from_seq, lost_deleted_to_seq, lost_deleted_at,
  coalesce(lost_deleted_at > now() - make_interval(secs => $2), false)
FROM pgoutbox_state WHERE pipeline = $1`, st.Pipeline, th.lostFor.Seconds()).Scan(&lost, &from, &to, &lostAt, &lostRecent)
	if err == nil && lost > 0 && lostAt != nil {
		st.LostDeleted = &lostDeleted{Rows: lost, At: *lostAt}
		if from != nil && to != nil {
			st.LostDeleted.FromSeq, st.LostDeleted.ToSeq = *from, *to
		}
		if lostRecent {
			st.Problems = append(st.Problems, fmt.Sprintf("events lost: up to %d outbox rows of %s were deleted before polling published them (between seq %d and %d, last at %s); polling cannot relay rows the application deletes: stream the WAL (wal_level=logical) or delete only rows with published_at set",
				lost, st.Table, st.LostDeleted.FromSeq, st.LostDeleted.ToSeq, lostAt.Format(time.RFC3339)))
		}
	}
	var hasDLQ bool
	if conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", deadLetterTable).Scan(&hasDLQ) == nil && hasDLQ {
		var n int64
		// Open ones: a replayed or skipped dead letter is resolved.
		if conn.QueryRow(ctx, "SELECT count(*) FROM "+deadLetterTable+" WHERE pipeline = $1 AND replayed_at IS NULL", st.Pipeline).Scan(&n) == nil {
			st.DeadLetters = &n
			if n > 0 {
				st.Problems = append(st.Problems, fmt.Sprintf("%d events are dead-lettered in %s (pgoutbox dlq list)", n, deadLetterTable))
			}
		}
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
	var poll replication.PollConfig
	c.register(fs)
	th.register(fs)
	registerPollFlags(fs, &poll)
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	conn, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())

	st := pipelineStatus{Pipeline: c.slot, Problems: []string{}}
	var confirmed, floor, reason *string
	err = conn.QueryRow(ctx, `SELECT outbox_table, mode, mode_reason, mode_since, switches, slot_losses,
  confirmed_lsn::text, floor_xid::text, updated_at FROM pgoutbox_state WHERE pipeline = $1`, c.slot).Scan(
		&st.Table, &st.Mode, &reason, &st.ModeSince, &st.Switches, &st.SlotLosses, &confirmed, &floor, &st.Updated)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("no pipeline %q: pgoutbox run has not started it yet", c.slot)
	case err != nil:
		return fmt.Errorf("read state (has pgoutbox migrate run?): %w", err)
	}
	st.ModeReason, st.ConfirmedLSN, st.FloorXID = deref(reason), deref(confirmed), deref(floor)

	if s, err := replication.SlotStatus(ctx, conn, c.slot); err == nil {
		st.Slot = &struct {
			Active        bool   `json:"active"`
			ConfirmedLSN  string `json:"confirmed_flush_lsn"`
			RestartLSN    string `json:"restart_lsn"`
			WALStatus     string `json:"wal_status"`
			RetainedBytes int64  `json:"retained_wal_bytes"`
			LagBytes      int64  `json:"lag_bytes"`
		}{s.Active, s.ConfirmedLSN.String(), s.RestartLSN.String(), s.WALStatus, s.RetainedBytes, s.LagBytes}
		if s.WALStatus == "lost" {
			st.Problems = append(st.Problems, "the slot is invalidated: WAL it needed was removed (auto mode replaces it and polls the gap)")
		}
	} else if errors.Is(err, replication.ErrSlotMissing) {
		if st.Mode == "wal" {
			st.Problems = append(st.Problems, "the pipeline's slot does not exist")
		}
	} else {
		return err
	}
	st.cluster(ctx, conn)
	poll.Table = st.Table
	if n, oldest, err := relay.Unpublished(ctx, conn, st.Pipeline, poll, "created_at"); err != nil {
		st.Problems = append(st.Problems, fmt.Sprintf("cannot count the unpublished rows of %s: %v", st.Table, err))
	} else {
		st.Unpublished = n
		if oldest > 0 {
			s := oldest.Seconds()
			st.OldestUnpublishd = &s
		}
	}
	if st.Mode == "poll" && st.ModeReason != "started in poll mode" {
		st.Problems = append(st.Problems, "polling instead of streaming the WAL: "+st.ModeReason)
	}

	st.operations(ctx, conn, th)
	if st.Failover, err = failoverView(ctx, conn, c.slot); err != nil {
		st.Problems = append(st.Problems, fmt.Sprintf("cannot tell whether the slot survives a failover: %v", err))
	}

	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "pipeline     %s (%s)\n", st.Pipeline, st.Table)
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
		if st.LastPublish != nil {
			fmt.Fprintf(stdout, "published    last at %s\n", st.LastPublish.Format(time.RFC3339))
		}
		if st.Alive != nil {
			fmt.Fprintf(stdout, "relay        last seen %s\n", st.Alive.Format(time.RFC3339))
		}
		switch {
		case !st.KafkaKnown:
			fmt.Fprintln(stdout, "kafka        not recorded (run pgoutbox migrate)")
		case st.KafkaProblem == "":
			fmt.Fprintln(stdout, "kafka        no problem seen by the relay")
		default:
			fmt.Fprintf(stdout, "kafka        %s\n", st.KafkaProblem)
		}
		if st.DeadLetters != nil {
			fmt.Fprintf(stdout, "dead letters %d\n", *st.DeadLetters)
		}
		if st.Failover != nil {
			st.Failover.print(stdout)
		}
		if l := st.LostDeleted; l != nil {
			fmt.Fprintf(stdout, "lost         up to %d rows deleted before polling published them (seq %d-%d, last at %s)\n",
				l.Rows, l.FromSeq, l.ToSeq, l.At.Format(time.RFC3339))
		}
		for _, p := range st.Problems {
			fmt.Fprintf(stdout, "problem: %s\n", p)
		}
	}
	if len(st.Problems) > 0 {
		return errors.New("the pipeline needs attention")
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
