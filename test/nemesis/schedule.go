// Package nemesis runs pgoutbox under faults combined at random: writers
// keep committing outbox events while a schedule drawn from a seed kills and
// partitions the relay, PostgreSQL and Kafka, alone and overlapping; a
// history records what was done and when; a checker reads everything back
// and reports what was lost, duplicated, reordered or published although it
// rolled back. The same seed gives the same schedule: the same faults, in
// the same order, at the same offsets from the start. How the system times
// its answers (how long a restart takes, which record is in flight when a
// fault lands) is not deterministic, so a seed replays the faults, not the
// run.
//
// It also holds the soak's sampling and its growth criterion (soak.go).
// Nothing here is part of the pgoutbox binary.
package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The faults. Each names what it does; Fault.Duration is how long the
// fault lasts before it is undone (a process started again, a link healed,
// a privilege granted back), zero for those that are done at once.
const (
	// RelayKill sends SIGKILL to a relay process and starts it again
	// after Duration.
	RelayKill Kind = "relay-sigkill"
	// RelayTerm sends SIGTERM, waits for the exit and starts it again
	// after Duration.
	RelayTerm Kind = "relay-sigterm"
	// PostgresRestart stops the primary in immediate mode (as a crash)
	// and starts it again after Duration.
	PostgresRestart Kind = "postgres-restart"
	// Failover stops the primary in immediate mode and promotes its
	// synchronous standby; it happens at most once per run.
	Failover Kind = "failover"
	// KafkaKill sends SIGKILL to the broker and starts it again on its
	// data after Duration.
	KafkaKill Kind = "kafka-kill"
	// PartitionPostgres and PartitionKafka black-hole the link between
	// the relays and PostgreSQL or Kafka for Duration: connections stay
	// up, nothing crosses.
	PartitionPostgres Kind = "partition-postgres"
	PartitionKafka    Kind = "partition-kafka"
	// DelayPostgres and DelayKafka add Fault.Latency to every chunk of
	// bytes crossing the link, each way, for Duration.
	DelayPostgres Kind = "delay-postgres"
	DelayKafka    Kind = "delay-kafka"
	// RevokeReplication takes REPLICATION from the relays' role and ends
	// their replication connections; it is granted back after Duration.
	RevokeReplication Kind = "revoke-replication"
	// DropSlot ends the replication connection and drops the slot.
	DropSlot Kind = "drop-slot"
	// AddColumn adds a nullable column to the outbox table.
	AddColumn Kind = "add-column"

	// The faults of a Kafka cluster (Env.Kafka a Cluster), where KafkaKill
	// kills every broker at once.
	//
	// LeaderKill sends SIGKILL to the broker that leads most of the
	// partitions the relays write events to, and starts it again on its
	// data after Duration.
	LeaderKill Kind = "kafka-leader-kill"
	// TwoBrokersDown sends SIGKILL to every broker but Fault.Broker; the
	// partitions are left with fewer in-sync replicas than
	// min.insync.replicas, and writes are refused (NOT_ENOUGH_REPLICAS).
	// After Duration one is started again, and once writes are accepted,
	// the other.
	TwoBrokersDown Kind = "kafka-two-brokers-down"
	// RollingRestart stops each broker with SIGTERM in turn (a controlled
	// shutdown), starts it again and waits until every partition has all
	// its replicas in sync before the next: an upgrade.
	RollingRestart Kind = "kafka-rolling-restart"
	// ControllerKill sends SIGKILL to the active controller, and starts it
	// again on its data after Duration.
	ControllerKill Kind = "kafka-controller-kill"
	// DiskFull fills the disk of the broker whose data lies on a small one
	// (it stops serving at its next write), frees it after Duration and
	// starts the broker again if it stopped.
	DiskFull Kind = "kafka-disk-full"
)

// ClusterKinds are the faults drawn only against a Kafka cluster.
var ClusterKinds = []Kind{LeaderKill, TwoBrokersDown, RollingRestart, ControllerKill, DiskFull}

// AllKinds are every kind of fault, in a fixed order (the order weights
// are drawn in). The cluster's come last, so that a schedule drawn
// without them is what it was before they existed.
var AllKinds = []Kind{RelayKill, RelayTerm, PostgresRestart, Failover, KafkaKill,
	PartitionPostgres, PartitionKafka, DelayPostgres, DelayKafka, RevokeReplication, DropSlot, AddColumn,
	LeaderKill, TwoBrokersDown, RollingRestart, ControllerKill, DiskFull}

// ParseKinds parses a comma-separated list of kinds.
func ParseKinds(s string) ([]Kind, error) {
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		k := Kind(strings.TrimSpace(f))
		if k == "" {
			continue
		}
		if !slices.Contains(AllKinds, k) {
			return nil, fmt.Errorf("nemesis: unknown fault kind %q", k)
		}
		out = append(out, k)
	}
	return out, nil
}

// resource is what a fault acts on: two faults on one resource never
// overlap (a relay is not killed while it is down), faults on different
// ones may.
func (k Kind) resource(relay int) string {
	switch k {
	case RelayKill, RelayTerm:
		return fmt.Sprintf("relay-%d", relay)
	case PostgresRestart, Failover:
		return "postgres"
	case PartitionPostgres, DelayPostgres:
		return "link-postgres"
	case PartitionKafka, DelayKafka:
		return "link-kafka"
	case KafkaKill, LeaderKill, TwoBrokersDown, RollingRestart, DiskFull:
		// One fault at a time on the brokers: two of them overlapping
		// would take three brokers down, which is KafkaKill's.
		return "kafka-brokers"
	}
	return string(k)
}

// weight is how often a kind is drawn relative to the others: the
// process faults most, the rare operator actions least.
func (k Kind) weight() int {
	switch k {
	case RelayKill, KafkaKill, LeaderKill:
		return 4
	case RelayTerm, PostgresRestart, PartitionPostgres, PartitionKafka, TwoBrokersDown, ControllerKill:
		return 3
	case DelayPostgres, DelayKafka, RevokeReplication, DropSlot, RollingRestart, DiskFull:
		return 2
	case Failover:
		return 1 // and at most once
	}
	return 1
}

// duration draws how long a fault of kind k lasts.
func (k Kind) duration(rng *rand.Rand) time.Duration {
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
	}
	switch k {
	case RelayKill, RelayTerm:
		return between(0, 2*time.Second)
	case PostgresRestart:
		return between(0, 3*time.Second)
	case KafkaKill, LeaderKill, ControllerKill:
		return between(500*time.Millisecond, 10*time.Second)
	case TwoBrokersDown:
		// Long enough for the controller to fence the two (3 s of
		// missed heartbeats) and the leader to refuse writes.
		return between(4*time.Second, 12*time.Second)
	case DiskFull:
		return between(2*time.Second, 10*time.Second)
	case PartitionPostgres, PartitionKafka:
		return between(time.Second, 12*time.Second)
	case DelayPostgres, DelayKafka:
		return between(2*time.Second, 10*time.Second)
	case RevokeReplication:
		return between(time.Second, 10*time.Second)
	}
	return 0
}

// Fault is one fault of a schedule.
type Fault struct {
	// At is when it starts, from the start of the run.
	At   time.Duration `json:"at"`
	Kind Kind          `json:"kind"`
	// Duration is how long it lasts before it is undone (0: done at once).
	Duration time.Duration `json:"duration,omitempty"`
	// Relay is the relay a kill or stop is sent to (an index into the
	// run's relays; with an HA pair, 0 or 1).
	Relay int `json:"relay,omitempty"`
	// Latency is what a delay fault adds to each chunk, each way.
	Latency time.Duration `json:"latency,omitempty"`
	// Broker is the broker TwoBrokersDown leaves up (1 to 3).
	Broker int32 `json:"broker,omitempty"`
}

// End is when the fault is undone, from the start of the run.
func (f Fault) End() time.Duration { return f.At + f.Duration }

func (f Fault) String() string {
	s := fmt.Sprintf("%8.3fs %s", f.At.Seconds(), f.Kind)
	if f.Kind == RelayKill || f.Kind == RelayTerm {
		s += fmt.Sprintf(" relay %d", f.Relay)
	}
	if f.Latency > 0 {
		s += fmt.Sprintf(" +%v", f.Latency)
	}
	if f.Broker > 0 {
		s += fmt.Sprintf(" broker %d left up", f.Broker)
	}
	if f.Duration > 0 {
		s += fmt.Sprintf(" for %v", f.Duration.Round(time.Millisecond))
	}
	return s
}

// Config is what a schedule is drawn from.
type Config struct {
	Seed uint64
	// Duration is the length of the run; faults start within
	// [Warmup, Duration-Cooldown) and end before Duration.
	Duration, Warmup, Cooldown time.Duration
	// MeanGap is the mean time between two faults' starts (exponential
	// gaps: faults come alone, in bursts and overlapping).
	MeanGap time.Duration
	// Overlap is the probability that a fault brings a second one of
	// another kind within the next two seconds.
	Overlap float64
	// Kinds are the kinds the run may inject (default: all but
	// ClusterKinds).
	Kinds []Kind
	// Relays is the number of relay processes (2: an HA pair).
	Relays int
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.Duration == 0 {
		c.Duration = 2 * time.Minute
	}
	if c.Warmup == 0 {
		c.Warmup = 3 * time.Second
	}
	if c.Cooldown == 0 {
		c.Cooldown = 2 * time.Second
	}
	if c.MeanGap == 0 {
		c.MeanGap = 8 * time.Second
	}
	if c.Overlap == 0 {
		c.Overlap = 0.25
	}
	if len(c.Kinds) == 0 {
		c.Kinds = KindsFor(ModeAuto, 17, true, false)
	}
	if c.Relays == 0 {
		c.Relays = 1
	}
}

// Schedule is the faults of one run, in the order they start.
type Schedule struct {
	Config Config  `json:"config"`
	Faults []Fault `json:"faults"`
}

// NewSchedule draws a schedule from cfg. It depends on nothing but cfg:
// the same Config gives the same Schedule.
func NewSchedule(cfg Config) Schedule {
	cfg.Defaults()
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6e656d65736973)) // "nemesis"
	s := Schedule{Config: cfg}
	busy := map[string]time.Duration{} // resource -> when it is free again
	failedOver := false
	last := cfg.Duration - cfg.Cooldown
	draw := func(at time.Duration, not Kind) (Fault, bool) {
		var kinds []Kind
		total := 0
		for _, k := range cfg.Kinds {
			if k == not || (k == Failover && failedOver) {
				continue
			}
			kinds = append(kinds, k)
			total += k.weight()
		}
		if total == 0 {
			return Fault{}, false
		}
		n := rng.IntN(total)
		var k Kind
		for _, c := range kinds {
			if n < c.weight() {
				k = c
				break
			}
			n -= c.weight()
		}
		f := Fault{At: at, Kind: k, Duration: k.duration(rng)}
		if k == RelayKill || k == RelayTerm {
			f.Relay = rng.IntN(cfg.Relays)
		}
		if k == DelayPostgres || k == DelayKafka {
			f.Latency = time.Duration(20+rng.IntN(281)) * time.Millisecond
		}
		if k == TwoBrokersDown {
			f.Broker = 1 + rng.Int32N(3)
		}
		// A fault never outlasts the run, and waits for its resource.
		if free := busy[k.resource(f.Relay)]; f.At < free {
			return Fault{}, false
		}
		if f.End() >= cfg.Duration {
			f.Duration = max(0, cfg.Duration-time.Second-f.At)
		}
		return f, true
	}
	at := cfg.Warmup
	for {
		at += time.Duration(rng.ExpFloat64() * float64(cfg.MeanGap))
		if at >= last {
			break
		}
		group := []Fault{}
		if f, ok := draw(at, ""); ok {
			group = append(group, f)
			if rng.Float64() < cfg.Overlap {
				if g, ok := draw(at+time.Duration(rng.Int64N(int64(2*time.Second))), f.Kind); ok && g.At < last {
					group = append(group, g)
				}
			}
		}
		for _, f := range group {
			if f.Kind == Failover {
				failedOver = true
			}
			// A second fault drawn for the same resource in the same
			// group is dropped, not queued.
			if free := busy[f.Kind.resource(f.Relay)]; f.At < free {
				continue
			}
			busy[f.Kind.resource(f.Relay)] = f.End() + 500*time.Millisecond
			s.Faults = append(s.Faults, f)
		}
	}
	slices.SortStableFunc(s.Faults, func(a, b Fault) int { return int(a.At - b.At) })
	return s
}

// Counts are the faults by kind.
func (s Schedule) Counts() map[Kind]int {
	out := map[Kind]int{}
	for _, f := range s.Faults {
		out[f.Kind]++
	}
	return out
}

func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d faults in %v\n", s.Config.Seed, len(s.Faults), s.Config.Duration)
	for _, f := range s.Faults {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Delivery is what the relay promises: at-least-once or exactly-once, as
// its --delivery flag spells them.
type Delivery string

const (
	AtLeastOnce Delivery = "at-least-once"
	ExactlyOnce Delivery = "exactly-once"
)

// Mode is the relay's --mode: auto, wal or poll.
type Mode string

const (
	ModeAuto Mode = "auto"
	ModeWAL  Mode = "wal"
	ModePoll Mode = "poll"
)

// PickMode is the mode a seed runs in when the run does not name one: auto
// half of the time (it switches between the others), wal and poll a
// quarter each.
func PickMode(seed uint64) Mode {
	switch rand.New(rand.NewPCG(seed, 0x6d6f6465)).IntN(4) { // "mode"
	case 0:
		return ModeWAL
	case 1:
		return ModePoll
	}
	return ModeAuto
}

// PickRelays is how many relays a seed runs: an HA pair one time in two.
func PickRelays(seed uint64) int {
	return 1 + rand.New(rand.NewPCG(seed, 0x70616972)).IntN(2) // "pair"
}

// KindsFor are the faults that apply to a relay in mode, on a PostgreSQL
// server of major version, with a standby (for the failover) or not, and
// a Kafka cluster (ClusterKinds) or one broker.
//
// Left out, with the reason:
//   - poll: a slot, REPLICATION and the WAL are not used, so dropping the
//     slot or revoking REPLICATION changes nothing.
//   - wal: a dropped slot, or one lost in a failover (15 and 16 have no
//     failover slots), stops the relay by design (ErrSlotLost: the rows
//     since are only in the table, and --mode wal does not poll them);
//     so does REPLICATION revoked (a permanent refusal, with the
//     statement that grants it: --mode wal has nothing to fall back to).
func KindsFor(mode Mode, major int, standby, cluster bool) []Kind {
	var out []Kind
	for _, k := range AllKinds {
		switch {
		case !cluster && slices.Contains(ClusterKinds, k):
		case k == Failover && !standby:
		case mode == ModePoll && (k == DropSlot || k == RevokeReplication):
		case mode == ModeWAL && (k == DropSlot || k == RevokeReplication):
		case mode == ModeWAL && k == Failover && major < 17:
		default:
			out = append(out, k)
		}
	}
	return out
}
