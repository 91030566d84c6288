package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Cluster is a Kafka of several brokers and a quorum of controllers, for
// the faults that act on some of its nodes (ClusterKinds).
type Cluster interface {
	Kafka
	// Nodes are the node ids of the brokers and of the controllers.
	Nodes() (brokers, controllers []int32)
	// KillNode sends SIGKILL to a node and StopNode SIGTERM (a controlled
	// shutdown); both wait for the exit. StartNode starts a node that does
	// not run (killed, stopped, or exited by itself) again on its data,
	// waits until it serves and says it started it; it leaves one that
	// runs alone.
	KillNode(id int32) error
	StopNode(id int32) error
	StartNode(id int32) (started bool, err error)
	// Running tells whether a node runs: started, and not killed,
	// stopped or exited by itself since.
	Running(id int32) bool
	// Leaders are the leader of each partition of topic, by partition.
	Leaders(ctx context.Context, topic string) (map[int32]int32, error)
	ActiveController(ctx context.Context) (int32, error)
	// WaitInSync waits until every partition has all its replicas in sync.
	WaitInSync(ctx context.Context) error
	// ProbeWrite writes one record to topic, acks=all and no retry, and
	// returns the broker's answer.
	ProbeWrite(ctx context.Context, topic string) error
	// Disk fills the small disk one broker's data lies on (full), or
	// frees it, and returns that broker.
	Disk(full bool) (int32, error)
}

// probeTopic is where the faults write to see whether the cluster takes
// writes (the checker does not read it). It is created while every broker
// runs, with the cluster's replication.
const probeTopic = "nemesis.probe"

// prepareCluster creates the probe topic.
func prepareCluster(ctx context.Context, c Cluster) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		err := c.ProbeWrite(ctx, probeTopic)
		if err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// clusterFault does f, one of ClusterKinds, and returns what undoes it.
func (in *injector) clusterFault(ctx context.Context, c Cluster, f Fault) (undo func() error, detail string, err error) {
	switch f.Kind {
	case LeaderKill:
		return killLeader(ctx, c)
	case TwoBrokersDown:
		return in.twoBrokersDown(ctx, c, f)
	case RollingRestart:
		detail, err := rollingRestart(ctx, c)
		return nil, detail, err
	case ControllerKill:
		var id int32
		err := retry(ctx, 15*time.Second, func(ctx context.Context) (err error) {
			id, err = c.ActiveController(ctx)
			return err
		})
		if err != nil {
			return nil, "", fmt.Errorf("finding the active controller: %w", err)
		}
		if err := c.KillNode(id); err != nil {
			return nil, "", err
		}
		return startAgain(c, id), fmt.Sprintf("controller %d", id), nil
	case DiskFull:
		return diskFull(ctx, c, f)
	}
	return nil, "", fmt.Errorf("nemesis: %s is not a fault of the cluster", f.Kind)
}

// diskFull fills the disk of the broker that has a small one and waits
// until the broker stops (its next write fails), or a while, for it may
// take no write (the relays down meanwhile); what it returns frees the
// disk and starts the broker again if it stopped.
func diskFull(ctx context.Context, c Cluster, f Fault) (func() error, string, error) {
	id, err := c.Disk(true)
	if err != nil {
		return nil, "", err
	}
	began := time.Now()
	wait := max(f.Duration, 30*time.Second)
	for c.Running(id) && time.Since(began) < wait {
		time.Sleep(100 * time.Millisecond)
	}
	detail := fmt.Sprintf("broker %d stopped %.1fs after its disk filled", id, time.Since(began).Seconds())
	if c.Running(id) {
		detail = fmt.Sprintf("broker %d served on for %v with its disk full: no write reached it", id, wait)
	}
	return func() error {
		if _, err := c.Disk(false); err != nil {
			return err
		}
		return startInSync(ctx, c, id)
	}, detail, nil
}

// startAgain starts node id again.
func startAgain(c Cluster, id int32) func() error {
	return func() error {
		_, err := c.StartNode(id)
		return err
	}
}

// startInSync starts brokers again and waits until every partition has
// all its replicas in sync, so that the next fault on the brokers finds
// the cluster whole. A broker that serves again is not yet a replica in
// sync: two brokers down right after a third returned left partitions
// without any replica in sync to lead them (NOT_LEADER_FOR_PARTITION until
// the last one in sync returned), three down in effect.
func startInSync(ctx context.Context, c Cluster, ids ...int32) error {
	for _, id := range ids {
		if _, err := c.StartNode(id); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return c.WaitInSync(wctx)
}

// killLeader kills the broker that leads most partitions of the events'
// topic (the lowest id among equals).
func killLeader(ctx context.Context, c Cluster) (func() error, string, error) {
	var leaders map[int32]int32
	err := retry(ctx, 15*time.Second, func(ctx context.Context) (err error) {
		leaders, err = c.Leaders(ctx, eventTopic)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("finding the leaders of %s: %w", eventTopic, err)
	}
	led := map[int32][]int32{}
	for _, p := range slices.Sorted(maps.Keys(leaders)) {
		if l := leaders[p]; l >= 0 {
			led[l] = append(led[l], p)
		}
	}
	if len(led) == 0 {
		return nil, "", fmt.Errorf("no partition of %s has a leader: %v", eventTopic, leaders)
	}
	var id int32 = -1
	for _, b := range slices.Sorted(maps.Keys(led)) {
		if id < 0 || len(led[b]) > len(led[id]) {
			id = b
		}
	}
	if err := c.KillNode(id); err != nil {
		return nil, "", err
	}
	return func() error { return startInSync(ctx, c, id) }, fmt.Sprintf("broker %d, leader of partitions %v", id, led[id]), nil
}

// twoBrokersDown kills every broker but f.Broker and probes until writes
// are refused for want of in-sync replicas (or the fault's time is up);
// what it returns starts one broker, probes until writes are accepted
// again, then starts the other.
func (in *injector) twoBrokersDown(ctx context.Context, c Cluster, f Fault) (func() error, string, error) {
	brokers, _ := c.Nodes()
	// The broker left up runs, with every replica in sync: two down, not
	// three.
	if err := startInSync(ctx, c, f.Broker); err != nil {
		return nil, "", err
	}
	down := slices.DeleteFunc(slices.Clone(brokers), func(id int32) bool { return id == f.Broker })
	for _, id := range down {
		if err := c.KillNode(id); err != nil {
			return nil, "", err
		}
	}
	began := time.Now()
	detail := fmt.Sprintf("brokers %v killed; ", down)
	// The refusal comes once the controller has fenced the two (3 s of
	// missed heartbeats): the fault lasts until then, however short.
	wait := max(f.Duration, 15*time.Second)
	var last error
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = c.ProbeWrite(pctx, probeTopic)
		cancel()
		if errors.Is(last, kerr.NotEnoughReplicas) || errors.Is(last, kerr.NotEnoughReplicasAfterAppend) {
			detail += fmt.Sprintf("writes refused %.1fs later: %v", time.Since(began).Seconds(), last)
			break
		}
		if time.Since(began) > wait || ctx.Err() != nil {
			detail += fmt.Sprintf("no write refused for want of in-sync replicas within %v (last answer: %v)", wait, last)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	undo := func() error {
		if _, err := c.StartNode(down[0]); err != nil {
			return err
		}
		back := time.Now()
		err := retry(ctx, time.Minute, func(ctx context.Context) error { return c.ProbeWrite(ctx, probeTopic) })
		msg := fmt.Sprintf("writes accepted %.1fs after broker %d served again", time.Since(back).Seconds(), down[0])
		if err != nil {
			msg = fmt.Sprintf("writes still refused a minute after broker %d served again: %v", down[0], err)
		}
		in.h.Add(Event{Type: EventNote, Msg: msg, Fault: &f})
		return errors.Join(err, startInSync(ctx, c, down[1]))
	}
	return undo, detail, nil
}

// rollingRestart stops and starts each broker in turn, waiting after each
// until every partition has all its replicas in sync.
func rollingRestart(ctx context.Context, c Cluster) (string, error) {
	brokers, _ := c.Nodes()
	var took []string
	for _, id := range brokers {
		began := time.Now()
		if err := c.StopNode(id); err != nil {
			return strings.Join(took, ", "), err
		}
		if _, err := c.StartNode(id); err != nil {
			return strings.Join(took, ", "), err
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := c.WaitInSync(wctx)
		cancel()
		if err != nil {
			return strings.Join(took, ", "), err
		}
		took = append(took, fmt.Sprintf("broker %d in %.1fs", id, time.Since(began).Seconds()))
	}
	return "in sync after " + strings.Join(took, ", "), nil
}

// healCluster frees the disk and starts every node that does not run.
func healCluster(c Cluster) error {
	_, err := c.Disk(false)
	errs := []error{err}
	brokers, controllers := c.Nodes()
	for _, id := range append(controllers, brokers...) {
		_, err := c.StartNode(id)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// retry calls fn, with a context of its own, until it succeeds or timeout
// passes.
func retry(ctx context.Context, timeout time.Duration, fn func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := fn(fctx)
		cancel()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
