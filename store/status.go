package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPipeline means the state table has no row for the pipeline: no
// relay has started it.
var ErrNoPipeline = errors.New("no such pipeline")

// Status is what the pipeline's state says, for pgoutbox status. Parts
// saved by a migration the database lacks are left empty.
type Status struct {
	Table      string
	Mode       Mode
	Reason     Reason
	ModeSince  time.Time
	Switches   int64
	SlotLosses int64
	Confirmed  string // empty: none saved
	FloorXID   string
	Updated    time.Time

	// Migration 010: the cluster the positions were saved on, and the
	// last change of cluster seen.
	Cluster       *int64
	FloorSeq      *int64
	ClusterChange *ClusterChangeSeen

	// Migration 004: what a relay saves every few seconds. Silence is
	// how long since a relay last held the pipeline (nil: never).
	LastPublish *time.Time
	Alive       *time.Time
	Silence     *time.Duration

	// Migration 009: the Kafka-side problem the relay last saved, empty
	// when none; KafkaKnown is false before the migration.
	KafkaKnown   bool
	KafkaProblem string
	KafkaSince   *time.Time
	// Broker is the broker KafkaProblem is the problem of, as the relay
	// last saved it ("kafka", "nats-jetstream"); empty before migration
	// 018 or before a relay saved it.
	Broker string

	// Migration 007: rows found deleted before polling published them.
	Lost *Lost

	// DeadLetters counts the open dead letters and HeldAggregates the
	// aggregates held behind them; both nil without the table.
	DeadLetters    *int64
	HeldAggregates *int64

	// Migration 014: why the relay last stopped on a problem retrying
	// cannot fix, until a session starts again (nil: none).
	Stopped *Stopped
}

// Stopped is why the relay stopped, and when.
type Stopped struct {
	Reason string
	At     time.Time
}

// PollingInsteadOfWAL tells whether the pipeline polls though it was not
// started to: auto mode's fallback, or the handoff to a new slot.
func (s *Status) PollingInsteadOfWAL() bool {
	return s.Mode == ModePoll && s.Reason.Code != ReasonStarted
}

// ClusterChangeSeen is the last change of cluster the relay saw.
type ClusterChangeSeen struct {
	At       time.Time
	Previous *int64
	What     string
	// OldFloorXID and OldFloorSeq are the floor kept for the rows copied
	// from the previous cluster.
	OldFloorXID string
	OldFloorSeq *int64
}

// Lost is what the relay saved about rows deleted before polling
// published them: an upper bound of events lost.
type Lost struct {
	Rows           int64
	FromSeq, ToSeq int64
	At             time.Time
	// Recent says At is within the window Status was asked about.
	Recent bool
}

// Status reads the pipeline's state. A pipeline with no row is
// ErrNoPipeline; any other failure of the main row is the server's error.
// lostWithin is the window in which a loss counts as Recent.
func (p Pipeline) Status(ctx context.Context, q Querier, lostWithin time.Duration) (*Status, error) {
	st := &Status{}
	var confirmed, floor, reason *string
	var mode string
	err := q.QueryRow(ctx, `SELECT outbox_table, mode, mode_reason, mode_since, switches, slot_losses,
  confirmed_lsn::text, floor_xid::text, updated_at FROM pgoutbox_state WHERE pipeline = $1`, p.Name).Scan(
		&st.Table, &mode, &reason, &st.ModeSince, &st.Switches, &st.SlotLosses, &confirmed, &floor, &st.Updated)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, ErrNoPipeline
	case IsMissing(err):
		return nil, fmt.Errorf("%w: run pgoutbox migrate", ErrNoState)
	case err != nil:
		return nil, err
	}
	st.Mode, st.Reason = Mode(mode), decodeReason(deref(reason))
	st.Confirmed, st.FloorXID = deref(confirmed), deref(floor)
	p.statusCluster(ctx, q, st)
	p.statusOperations(ctx, q, st, lostWithin)
	return st, nil
}

func (p Pipeline) statusCluster(ctx context.Context, q Querier, st *Status) {
	var (
		at                  *time.Time
		prev, current, fseq *int64
		oseq                *int64
		what, oxid          *string
	)
	err := q.QueryRow(ctx, `SELECT system_identifier, floor_seq, cluster_changed_at, previous_system_identifier, cluster_change,
  foreign_floor_xid::text, foreign_floor_seq FROM pgoutbox_state WHERE pipeline = $1`, p.Name).Scan(
		&current, &fseq, &at, &prev, &what, &oxid, &oseq)
	if err != nil {
		return
	}
	st.Cluster, st.FloorSeq = current, fseq
	if at != nil {
		st.ClusterChange = &ClusterChangeSeen{At: *at, Previous: prev, What: deref(what), OldFloorXID: deref(oxid), OldFloorSeq: oseq}
	}
}

func (p Pipeline) statusOperations(ctx context.Context, q Querier, st *Status, lostWithin time.Duration) {
	var silence *float64
	if q.QueryRow(ctx, `SELECT last_publish_at, alive_at, extract(epoch FROM now() - alive_at)::float8
FROM pgoutbox_state WHERE pipeline = $1`, p.Name).Scan(&st.LastPublish, &st.Alive, &silence) == nil && silence != nil {
		d := time.Duration(*silence * float64(time.Second))
		st.Silence = &d
	}
	var kafkaProblem, broker *string
	if q.QueryRow(ctx, `SELECT kafka_problem, kafka_problem_since FROM pgoutbox_state WHERE pipeline = $1`,
		p.Name).Scan(&kafkaProblem, &st.KafkaSince) == nil {
		st.KafkaKnown, st.KafkaProblem = true, deref(kafkaProblem)
	} else {
		st.KafkaSince = nil
	}
	if q.QueryRow(ctx, `SELECT broker FROM pgoutbox_state WHERE pipeline = $1`, p.Name).Scan(&broker) == nil {
		st.Broker = deref(broker)
	}
	var (
		lost       int64
		from, to   *int64
		lostAt     *time.Time
		lostRecent bool
	)
	err := q.QueryRow(ctx, `SELECT lost_deleted, lost_deleted_from_seq, lost_deleted_to_seq, lost_deleted_at,
  coalesce(lost_deleted_at > now() - make_interval(secs => $2), false)
FROM pgoutbox_state WHERE pipeline = $1`, p.Name, lostWithin.Seconds()).Scan(&lost, &from, &to, &lostAt, &lostRecent)
	if err == nil && lost > 0 && lostAt != nil {
		st.Lost = &Lost{Rows: lost, At: *lostAt, Recent: lostRecent}
		if from != nil && to != nil {
			st.Lost.FromSeq, st.Lost.ToSeq = *from, *to
		}
	}
	var (
		stopped   *string
		stoppedAt *time.Time
	)
	if q.QueryRow(ctx, `SELECT stopped_reason, stopped_at FROM pgoutbox_state WHERE pipeline = $1`, p.Name).Scan(&stopped, &stoppedAt) == nil &&
		stopped != nil && stoppedAt != nil {
		st.Stopped = &Stopped{Reason: *stopped, At: *stoppedAt}
	}
	var hasDLQ bool
	if q.QueryRow(ctx, "SELECT to_regclass('pgoutbox_dead_letter') IS NOT NULL").Scan(&hasDLQ) == nil && hasDLQ {
		var n, held int64
		// Open ones: a replayed or skipped dead letter is resolved.
		if q.QueryRow(ctx, "SELECT count(*), count(DISTINCT aggregate_id) FROM pgoutbox_dead_letter WHERE pipeline = $1 AND replayed_at IS NULL",
			p.Name).Scan(&n, &held) == nil {
			st.DeadLetters, st.HeldAggregates = &n, &held
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
