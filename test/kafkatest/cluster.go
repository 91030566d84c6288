package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/test/faultproxy"
	"github.com/pgoutbox/pgoutbox/test/testbin"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

// An Apache Kafka cluster of a test's own, as production runs Kafka: three
// brokers, every topic (the consumer offsets and the transaction log too)
// with three replicas and min.insync.replicas=2, and a KRaft quorum of
// three controllers. The controllers run apart from the brokers (nodes
// 4-6 and 1-3) so that two brokers down leave the quorum standing: it
// fences them, takes them out of the in-sync replicas, and the leader left
// refuses writes with NOT_ENOUGH_REPLICAS until one returns. With combined
// nodes two brokers down take two of three voters with them: the metadata
// freezes, and writes time out instead.

// ClusterSettings are the settings of StartCluster's brokers and
// controllers: Settings with Kafka's replication for three brokers.
var ClusterSettings = func() map[string]string {
	s := maps.Clone(Settings)
	maps.Copy(s, map[string]string{
		"default.replication.factor":                       "3",
		"min.insync.replicas":                              "2",
		"offsets.topic.replication.factor":                 "3",
		"transaction.state.log.replication.factor":         "3",
		"transaction.state.log.min.isr":                    "2",
		"share.coordinator.state.topic.replication.factor": "3",
		"share.coordinator.state.topic.min.isr":            "2",
	})
	return s
}()

// ClusterBrokers is the number of brokers (node ids 1 to 3) and of
// controllers (4 to 6) of a cluster.
const ClusterBrokers = 3

// controllerJVM are a controller's JVM options: it keeps the metadata
// only, in a smaller heap than a broker's.
var controllerJVM = []string{"-Xms64m", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
	"-Xshare:auto", "-XX:-UsePerfData", "-Djava.awt.headless=true"}

// ClusterOptions configure a cluster of a test's own (StartCluster).
type ClusterOptions struct {
	// Config adds settings to, or overrides, ClusterSettings on every node.
	Config map[string]string
	// Secure and Proxied add those listeners to every broker, as
	// Options' do for one; each broker has a fault proxy of its own.
	Secure, Proxied bool
	// Disk, when positive, puts broker 1's data on a disk of that many
	// bytes, which FillDisk fills: a tmpfs in a mount namespace of its
	// own, which nothing outside the broker sees and which is gone with
	// the broker and the harness.
	Disk int64
	// JVMOptions replace the brokers' test default (Options.JVMOptions).
	JVMOptions []string
}

// ApacheCluster is an Apache Kafka cluster started by StartCluster.
type ApacheCluster struct {
	// Brokers are every broker's plaintext address; SASLSSL,
	// SASLPlaintext and Proxied those of the other listeners.
	Brokers, SASLSSL, SASLPlaintext, Proxied []string
	CA                                       *tlstest.CA
	// Nodes are the brokers (ids 1 to 3), then the controllers (4 to 6).
	Nodes []*Broker
}

// StartCluster starts a cluster for the test, stopped and removed when the
// test ends. Its nodes can be killed, stopped and started again on their
// data (Kill, Stop, Start), from any goroutine.
func StartCluster(t testing.TB, opts ClusterOptions) *ApacheCluster {
	t.Helper()
	c, err := startCluster(opts)
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// LaunchCluster starts a cluster outside any test; Close stops it and
// removes its data.
func LaunchCluster(opts ClusterOptions) (*ApacheCluster, error) { return startCluster(opts) }

// Close kills every node and removes their directories.
func (c *ApacheCluster) Close() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Go(n.close)
	}
	wg.Wait()
}

func startCluster(opts ClusterOptions) (*ApacheCluster, error) {
	java, jars, err := install()
	if err != nil {
		return nil, err
	}
	c := &ApacheCluster{}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	// Ports: each controller's, and each broker's four listeners.
	ports, err := freePorts(ClusterBrokers * 5)
	if err != nil {
		return nil, err
	}
	var voters []string
	for i := range ClusterBrokers {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", ClusterBrokers+1+i, ports[i]))
	}
	common := maps.Clone(ClusterSettings)
	common["controller.quorum.voters"] = strings.Join(voters, ",")
	common["controller.listener.names"] = "CONTROLLER"
	if opts.Secure {
		c.CA = tlstest.New(nopTB{})
	}
	for i := range 2 * ClusterBrokers {
		dir, err := os.MkdirTemp("", "pgoutbox-kafka-")
		if err != nil {
			return nil, err
		}
		n := &Broker{Dir: dir, ID: int32(i + 1), java: java, jars: jars, jvm: opts.JVMOptions, CA: c.CA}
		c.Nodes = append(c.Nodes, n)
		if err := testbin.RemoveAtExit(dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(n.DataDir(), 0o755); err != nil {
			return nil, err
		}
		conf := maps.Clone(common)
		conf["node.id"] = strconv.Itoa(i + 1)
		conf["log.dirs"] = n.DataDir()
		if i >= ClusterBrokers {
			n.jvm = controllerJVM
			n.Controller = strings.Split(voters[i-ClusterBrokers], "@")[1]
			conf["process.roles"] = "controller"
			conf["listeners"] = "CONTROLLER://" + n.Controller
			conf["listener.security.protocol.map"] = "CONTROLLER:PLAINTEXT"
		} else {
			if n.jvm == nil {
				n.jvm = defaultJVM
			}
			base := ClusterBrokers + 4*i
			if err := brokerListeners(n, conf, opts, ports[base:base+4]); err != nil {
				return nil, err
			}
			c.Brokers, c.Proxied = append(c.Brokers, n.Brokers...), append(c.Proxied, n.Proxied...)
			c.SASLSSL, c.SASLPlaintext = append(c.SASLSSL, n.SASLSSL...), append(c.SASLPlaintext, n.SASLPlaintext...)
			if i == 0 && opts.Disk > 0 {
				if n.disk, err = newDisk(n.DataDir(), opts.Disk); err != nil {
					return nil, err
				}
			}
		}
		if err := n.writeConfig(conf, opts.Config); err != nil {
			return nil, err
		}
	}
	if err := formatStorage(c.Nodes, opts.Secure); err != nil {
		return nil, err
	}
	// Started side by side: a broker waits for the quorum, and is up once
	// the controllers have unfenced it.
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Go(func() { errs[i] = n.run() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// metadataSnapshot is the snapshot the storage tool writes into a
// controller's metadata log: the features and, when secure, the SCRAM
// users that the quorum starts from.
var metadataSnapshot = filepath.Join("__cluster_metadata-0", "00000000000000000000-0000000000.checkpoint")

// formatStorage formats the first controller's storage with Kafka's
// storage tool and writes the other nodes' as the tool would, which saves
// five JVM starts of about a second: a broker's storage is its
// meta.properties alone, a controller's that and the same snapshot as the
// first one's.
func formatStorage(nodes []*Broker, secure bool) error {
	first := nodes[ClusterBrokers]
	if err := first.format(secure); err != nil {
		return err
	}
	snapshot, err := os.ReadFile(filepath.Join(first.DataDir(), metadataSnapshot))
	if err != nil {
		return fmt.Errorf("reading the formatted controller's storage: %w", err)
	}
	for _, n := range nodes {
		if n == first {
			continue
		}
		if n.Controller != "" {
			dir := filepath.Join(n.DataDir(), filepath.Dir(metadataSnapshot))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(n.DataDir(), metadataSnapshot), snapshot, 0o400); err != nil {
				return err
			}
		}
		if err := n.writeMeta(); err != nil {
			return err
		}
	}
	return nil
}

// writeMeta writes the node's meta.properties, as the storage tool does:
// its node id, a directory id of its own, the cluster id.
func (b *Broker) writeMeta() error {
	id := make([]byte, 16)
	for {
		if _, err := rand.Read(id); err != nil {
			return err
		}
		// Kafka's Uuid.randomUuid draws again for these: a leading dash
		// reads as a command-line flag, and the lowest ids are reserved.
		if s := base64.RawURLEncoding.EncodeToString(id); s[0] != '-' && binary.BigEndian.Uint64(id) != 0 {
			meta := fmt.Sprintf("node.id=%d\ndirectory.id=%s\nversion=1\ncluster.id=%s\n", b.ID, s, clusterID)
			return os.WriteFile(b.dataPath("meta.properties"), []byte(meta), 0o644)
		}
	}
}

// dataPath is name in the node's data directory, as this process reaches
// it: through the mount namespace of its small disk when it has one.
func (b *Broker) dataPath(name string) string {
	if b.disk != nil {
		return b.disk.path(name)
	}
	return filepath.Join(b.DataDir(), name)
}

// brokerListeners sets up broker n's listeners on ports (plaintext,
// SASL_SSL, SASL_PLAINTEXT, proxied) in conf, and its addresses.
func brokerListeners(n *Broker, conf map[string]string, opts ClusterOptions, ports []int) error {
	addr := func(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
	names := []string{"PLAINTEXT://" + addr(ports[0])}
	advertised := slices.Clone(names)
	protocols := []string{"PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"}
	n.Brokers = []string{addr(ports[0])}
	if opts.Secure {
		names = append(names, "SASL_SSL://"+addr(ports[1]), "SASL_PLAINTEXT://"+addr(ports[2]))
		advertised = append(advertised, "SASL_SSL://"+addr(ports[1]), "SASL_PLAINTEXT://"+addr(ports[2]))
		protocols = append(protocols, "SASL_SSL:SASL_SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT")
		n.SASLSSL, n.SASLPlaintext = []string{addr(ports[1])}, []string{addr(ports[2])}
		if err := n.secure(conf); err != nil {
			return err
		}
	}
	if opts.Proxied {
		var err error
		if n.Proxy, err = faultproxy.Forward(addr(ports[3])); err != nil {
			return err
		}
		names = append(names, "PROXIED://"+addr(ports[3]))
		advertised = append(advertised, "PROXIED://"+n.Proxy.Addr())
		protocols = append(protocols, "PROXIED:PLAINTEXT")
		n.Proxied = []string{n.Proxy.Addr()}
	}
	conf["process.roles"] = "broker"
	conf["inter.broker.listener.name"] = "PLAINTEXT"
	conf["listeners"] = strings.Join(names, ",")
	conf["advertised.listeners"] = strings.Join(advertised, ",")
	conf["listener.security.protocol.map"] = strings.Join(protocols, ",")
	return nil
}

// DeleteNewTopics deletes, when the test ends, the topics created while it
// ran, for a cluster that tests share one after the other.
func (c *ApacheCluster) DeleteNewTopics(t testing.TB) {
	t.Helper()
	deleteNewTopics(t, c.Brokers)
}

// Node is the node of id (1 to 3: a broker, 4 to 6: a controller).
func (c *ApacheCluster) Node(id int32) (*Broker, error) {
	if id < 1 || int(id) > len(c.Nodes) {
		return nil, fmt.Errorf("kafkatest: no node %d in the cluster", id)
	}
	return c.Nodes[id-1], nil
}

// Kill sends SIGKILL to node id and waits for its exit.
func (c *ApacheCluster) Kill(id int32) error {
	n, err := c.Node(id)
	if err != nil {
		return err
	}
	return n.kill()
}

// Stop stops node id with SIGTERM (a controlled shutdown: a broker's
// leaderships move first) and waits for its exit.
func (c *ApacheCluster) Stop(id int32) error {
	n, err := c.Node(id)
	if err != nil {
		return err
	}
	return n.stop()
}

// Start starts node id again on its data and waits until it serves (a
// broker: registered and unfenced; a controller: listening). A node that
// exited by itself (its disk full) is started again too.
func (c *ApacheCluster) Start(id int32) error {
	n, err := c.Node(id)
	if err != nil {
		return err
	}
	return n.restart()
}

// Proxies are the brokers' fault proxies (ClusterOptions.Proxied).
func (c *ApacheCluster) Proxies() []*faultproxy.Proxy {
	var out []*faultproxy.Proxy
	for _, n := range c.Nodes {
		if n.Proxy != nil {
			out = append(out, n.Proxy)
		}
	}
	return out
}

// client is a client of the brokers that run, with opts.
func (c *ApacheCluster) client(opts ...kgo.Opt) (*kgo.Client, error) {
	var seeds []string
	for _, n := range c.Nodes[:ClusterBrokers] {
		if n.Running() {
			seeds = append(seeds, n.Brokers...)
		}
	}
	if len(seeds) == 0 {
		return nil, errors.New("kafkatest: no broker of the cluster runs")
	}
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryTimeout(5 * time.Second)}, opts...)...)
}

// Partition is where a partition's replicas are.
type Partition struct {
	// Leader is the broker that leads it (-1: none).
	Leader        int32
	Replicas, ISR []int32
}

// Partitions are the partitions of topic by number.
func (c *ApacheCluster) Partitions(ctx context.Context, topic string) (map[int32]Partition, error) {
	cl, err := c.client()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("kafkatest: topic %s: %v", topic, td.Err)
	}
	out := map[int32]Partition{}
	for _, p := range td.Partitions {
		out[p.Partition] = Partition{Leader: p.Leader, Replicas: p.Replicas, ISR: p.ISR}
	}
	return out, nil
}

// ActiveController is the node id of the quorum's leader, the active
// controller, as a controller that runs says (a broker forwards the
// question to the active controller, and may be down).
func (c *ApacheCluster) ActiveController(ctx context.Context) (int32, error) {
	var errs []error
	for _, n := range c.Nodes[ClusterBrokers:] {
		if !n.Running() {
			continue
		}
		id, err := describeQuorum(ctx, n.Controller)
		if err == nil {
			return id, nil
		}
		errs = append(errs, fmt.Errorf("controller %d: %w", n.ID, err))
	}
	if len(errs) == 0 {
		return 0, errors.New("kafkatest: no controller of the cluster runs")
	}
	return 0, errors.Join(errs...)
}

// describeQuorum asks the controller at addr which node leads the quorum.
func describeQuorum(ctx context.Context, addr string) (int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	req := kmsg.NewPtrDescribeQuorumRequest()
	tp := kmsg.NewDescribeQuorumRequestTopic()
	tp.Topic = "__cluster_metadata"
	tp.Partitions = append(tp.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, tp)
	raw, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return 0, err
	}
	resp := raw.(*kmsg.DescribeQuorumResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, errors.New("DescribeQuorum answered no partition")
	}
	rp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		return 0, err
	}
	if rp.LeaderID < 0 {
		return 0, errors.New("the quorum has no leader")
	}
	return rp.LeaderID, nil
}

// WaitInSync waits until every broker is registered and every partition
// of every topic has all its replicas in sync: the cluster is whole again
// after a broker returned.
func (c *ApacheCluster) WaitInSync(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var last string
	for {
		md, err := adm.Metadata(ctx)
		switch {
		case err != nil:
			last = err.Error()
		case len(md.Brokers) < ClusterBrokers:
			last = fmt.Sprintf("%d of %d brokers registered", len(md.Brokers), ClusterBrokers)
		default:
			last = ""
			for _, td := range md.Topics.Sorted() {
				for _, p := range td.Partitions.Sorted() {
					if p.Leader < 0 || len(p.ISR) < len(p.Replicas) {
						last = fmt.Sprintf("%s[%d]: leader %d, in sync %v of %v", td.Topic, p.Partition, p.Leader, p.ISR, p.Replicas)
						break
					}
				}
				if last != "" {
					break
				}
			}
			if last == "" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafkatest: the cluster is not in sync: %s", last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// DiskBroker is the broker whose data lies on ClusterOptions.Disk (0:
// none).
func (c *ApacheCluster) DiskBroker() int32 {
	for _, n := range c.Nodes {
		if n.disk != nil {
			return n.ID
		}
	}
	return 0
}

// FillDisk fills the small disk (ClusterOptions.Disk) to its last byte:
// the broker's next write fails, and it stops serving (Kafka takes a log
// directory that fails a write offline, and with it the broker whose only
// one it is). FreeDisk frees the space again.
func (c *ApacheCluster) FillDisk() error {
	n, err := c.Node(c.DiskBroker())
	if err != nil {
		return errors.New("kafkatest: no broker of the cluster has a small disk")
	}
	return n.disk.fill()
}

// FreeDisk removes what FillDisk wrote; the broker, if it stopped, does
// not start by itself.
func (c *ApacheCluster) FreeDisk() error {
	n, err := c.Node(c.DiskBroker())
	if err != nil {
		return errors.New("kafkatest: no broker of the cluster has a small disk")
	}
	return n.disk.free()
}

// ProbeWrite produces one record to topic with acks=all and no retry, and
// returns the broker's answer: nil once the record is in sync on
// min.insync.replicas brokers, kerr.NotEnoughReplicas while too few
// brokers are, or what else failed it within ctx.
func (c *ApacheCluster) ProbeWrite(ctx context.Context, topic string) error {
	cl, err := c.client(kgo.AllowAutoTopicCreation(), kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
	if err != nil {
		return err
	}
	defer cl.Close()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("probe"), Value: []byte(time.Now().Format(time.RFC3339Nano))}).FirstErr()
}
