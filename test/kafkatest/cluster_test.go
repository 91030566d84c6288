package kafkatest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The three-broker cluster starts with production's replication, and each
// fault the nemesis injects does to it what it says: a partition's leader
// killed moves the leadership, the active controller killed moves the
// quorum's, two brokers down make the leader left refuse writes with
// NOT_ENOUGH_REPLICAS until one returns, a rolling restart keeps every
// write accepted, and a broker whose disk fills stops serving while the
// other two take writes. No acknowledged record is lost across them.
func TestKafkaCluster(t *testing.T) {
	start := time.Now()
	c := StartCluster(t, ClusterOptions{Secure: true, Proxied: true, Disk: 256 << 20})
	t.Logf("three brokers and three controllers serving after %v; %s", time.Since(start).Round(time.Millisecond), c.memory())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	const topic = "orders"
	w := &writer{t: t, c: c, topic: topic}
	w.write(ctx, 20)
	parts, err := c.Partitions(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 3 {
		t.Fatalf("%s has %d partitions, want 3", topic, len(parts))
	}
	for n, p := range parts {
		if len(p.Replicas) != 3 || len(p.ISR) != 3 {
			t.Fatalf("%s[%d]: replicas %v, in sync %v; want three of each", topic, n, p.Replicas, p.ISR)
		}
	}
	c.checkReplication(ctx, t, topic)

	t.Run("listeners", func(t *testing.T) {
		tlsConf := &tls.Config{RootCAs: c.CA.Pool}
		for _, tc := range []struct {
			name    string
			brokers []string
			opts    []kgo.Opt
		}{
			{"SCRAM-SHA-512 over TLS", c.SASLSSL, []kgo.Opt{kgo.SASL(scram.Auth{User: User, Pass: Password}.AsSha512Mechanism()), kgo.DialTLSConfig(tlsConf)}},
			{"PLAIN", c.SASLPlaintext, []kgo.Opt{kgo.SASL(plain.Auth{User: User, Pass: Password}.AsMechanism())}},
			{"proxied", c.Proxied, nil},
		} {
			if len(tc.brokers) != ClusterBrokers {
				t.Fatalf("%s: %v, want one address per broker", tc.name, tc.brokers)
			}
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tc.brokers...)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
			if err == nil && len(md.Brokers) != ClusterBrokers {
				err = fmt.Errorf("%d brokers listed, want %d", len(md.Brokers), ClusterBrokers)
			}
			for _, b := range md.Brokers {
				if err == nil && !slices.Contains(tc.brokers, fmt.Sprintf("%s:%d", b.Host, b.Port)) {
					err = fmt.Errorf("broker %d advertised as %s:%d, not one of %v", b.NodeID, b.Host, b.Port, tc.brokers)
				}
			}
			if err == nil {
				err = cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(tc.name)}).FirstErr()
			}
			cl.Close()
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
		}
	})

	t.Run("partition leader killed", func(t *testing.T) {
		leader := parts[0].Leader
		if err := c.Kill(leader); err != nil {
			t.Fatal(err)
		}
		moved := c.waitPartitions(ctx, t, topic, func(p map[int32]Partition) bool { return p[0].Leader >= 0 && p[0].Leader != leader })
		t.Logf("partition 0's leader %d killed; broker %d leads it", leader, moved[0].Leader)
		w.write(ctx, 20)
		c.restart(ctx, t, leader)
	})

	t.Run("active controller killed", func(t *testing.T) {
		active, err := c.ActiveController(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if active <= ClusterBrokers {
			t.Fatalf("the active controller is node %d, a broker", active)
		}
		if err := c.Kill(active); err != nil {
			t.Fatal(err)
		}
		var next int32
		for next == 0 || next == active {
			if ctx.Err() != nil {
				t.Fatalf("no other active controller after %d was killed", active)
			}
			next, _ = c.ActiveController(ctx)
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("active controller %d killed; %d took over", active, next)
		w.write(ctx, 20)
		c.restart(ctx, t, active)
	})

	t.Run("two brokers down", func(t *testing.T) {
		for _, id := range []int32{2, 3} {
			if err := c.Kill(id); err != nil {
				t.Fatal(err)
			}
		}
		down := time.Now()
		var err error
		for !errors.Is(err, kerr.NotEnoughReplicas) {
			if ctx.Err() != nil {
				t.Fatalf("with two brokers of three down, a write is answered %v, want NOT_ENOUGH_REPLICAS", err)
			}
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = c.ProbeWrite(pctx, topic)
			cancel()
		}
		t.Logf("brokers 2 and 3 killed: writes refused (%v) after %v", err, time.Since(down).Round(time.Millisecond))
		if err := c.Start(2); err != nil {
			t.Fatal(err)
		}
		back := time.Now()
		for err != nil {
			if ctx.Err() != nil {
				t.Fatalf("with broker 2 back, a write is answered %v", err)
			}
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = c.ProbeWrite(pctx, topic)
			cancel()
		}
		t.Logf("broker 2 started again: writes accepted %v after it served", time.Since(back).Round(time.Millisecond))
		w.write(ctx, 20)
		c.restart(ctx, t, 3)
	})

	t.Run("rolling restart", func(t *testing.T) {
		for id := int32(1); id <= ClusterBrokers; id++ {
			began := time.Now()
			if err := c.Stop(id); err != nil {
				t.Fatal(err)
			}
			w.write(ctx, 10)
			c.restart(ctx, t, id)
			t.Logf("broker %d stopped, started and in sync again in %v", id, time.Since(began).Round(time.Millisecond))
		}
	})

	t.Run("disk full", func(t *testing.T) {
		id := c.DiskBroker()
		if err := c.FillDisk(); err != nil {
			t.Fatal(err)
		}
		n, _ := c.Node(id)
		filled := time.Now()
		for n.Running() {
			if ctx.Err() != nil {
				t.Fatalf("broker %d still runs with its disk full", id)
			}
			// Writes to every partition: one that broker 1 holds fails
			// its write, and a broker that is going down may close the
			// connection under a request; what it did not acknowledge
			// does not count.
			if err := w.tryWrite(ctx, 3); err != nil {
				t.Logf("while broker %d stops: %v", id, err)
				time.Sleep(100 * time.Millisecond)
			}
		}
		t.Logf("broker %d stopped %v after its disk filled: %s", id, time.Since(filled).Round(time.Millisecond), lastLine(n.Log(), "ERROR"))
		w.write(ctx, 20)
		if err := c.FreeDisk(); err != nil {
			t.Fatal(err)
		}
		c.restart(ctx, t, id)
	})

	got := Consume(t, c.Brokers, []string{topic}, len(w.acked), time.Minute)
	seen := map[string]bool{}
	for _, r := range got {
		seen[string(r.Value)] = true
	}
	for _, v := range w.acked {
		if !seen[v] {
			t.Errorf("acknowledged record %s is not in %s", v, topic)
		}
	}
	t.Logf("%d acknowledged records read back", len(w.acked))
}

// writer produces numbered records, acks=all, and keeps those acknowledged.
type writer struct {
	t     *testing.T
	c     *ApacheCluster
	topic string
	acked []string
}

func (w *writer) write(ctx context.Context, n int) {
	w.t.Helper()
	if err := w.tryWrite(ctx, n); err != nil {
		w.t.Fatalf("produce: %v", err)
	}
}

// tryWrite is write, returning the error: only what was acknowledged
// counts as written.
func (w *writer) tryWrite(ctx context.Context, n int) error {
	// The topic is created on first use; a busy broker may not know it
	// for longer than kgo's four lookups: the context bounds the wait.
	cl, err := w.c.client(kgo.AllowAutoTopicCreation(), kgo.UnknownTopicRetries(-1))
	if err != nil {
		return err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range n {
		v := strconv.Itoa(len(w.acked) + i)
		recs = append(recs, &kgo.Record{Topic: w.topic, Key: []byte(v), Value: []byte(v)})
	}
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := cl.ProduceSync(pctx, recs...).FirstErr(); err != nil {
		return err
	}
	for _, r := range recs {
		w.acked = append(w.acked, string(r.Value))
	}
	return nil
}

// restart starts node id again and waits until every partition is in sync.
func (c *ApacheCluster) restart(ctx context.Context, t *testing.T, id int32) {
	t.Helper()
	if err := c.Start(id); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitInSync(ctx); err != nil {
		t.Fatal(err)
	}
}

func (c *ApacheCluster) waitPartitions(ctx context.Context, t *testing.T, topic string, ok func(map[int32]Partition) bool) map[int32]Partition {
	t.Helper()
	for {
		p, err := c.Partitions(ctx, topic)
		if err == nil && ok(p) {
			return p
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: partitions %v (%v)", topic, p, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkReplication checks that the consumer offsets and the transaction
// log are replicated as the topics are, and min.insync.replicas is 2.
func (c *ApacheCluster) checkReplication(ctx context.Context, t *testing.T, topic string) {
	t.Helper()
	// A transaction and a group's commit create the internal topics.
	cl, err := c.client(kgo.TransactionalID("kafkatest-cluster"), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("txn")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	if _, err := adm.CommitOffsets(ctx, "kafkatest-group", kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: 0})); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{topic, "__consumer_offsets", "__transaction_state"} {
		p := c.waitPartitions(ctx, t, name, func(p map[int32]Partition) bool { return len(p) > 0 })
		for n, part := range p {
			if len(part.Replicas) != 3 {
				t.Errorf("%s[%d] has replicas %v, want 3", name, n, part.Replicas)
			}
		}
		rcs, err := adm.DescribeTopicConfigs(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		isr, err := rcs.On(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, cf := range isr.Configs {
			if cf.Key == "min.insync.replicas" && (cf.Value == nil || *cf.Value != "2") {
				t.Errorf("%s: min.insync.replicas %v, want 2", name, cf.MaybeValue())
			}
		}
	}
}

// memory is the nodes' resident memory, and the CPU time they used so far:
// what a start costs, whatever else the machine runs.
func (c *ApacheCluster) memory() string {
	var parts []string
	cpu := 0.0
	for _, n := range c.Nodes {
		parts = append(parts, fmt.Sprintf("node %d %d MB", n.ID, rssMB(n.PID())))
		cpu += cpuSeconds(n.PID())
	}
	load, _ := os.ReadFile("/proc/loadavg")
	return fmt.Sprintf("resident: %s; CPU time %.1f s; load average %s", strings.Join(parts, ", "), cpu, strings.Join(strings.Fields(string(load))[:1], ""))
}

// cpuSeconds is the user and system time process pid used.
func cpuSeconds(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis: utime and
	// stime are the 12th and 13th, in clock ticks of 1/100 s.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return float64(u+s) / 100
}

func rssMB(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return kb / 1024
		}
	}
	return 0
}

// lastLine is the last line of log that holds word.
func lastLine(log, word string) string {
	for _, l := range slices.Backward(strings.Split(log, "\n")) {
		if strings.Contains(l, word) {
			return l
		}
	}
	return "(no " + word + " line)"
}
