package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of primaries without replicas, each a Server
// (which a test may kill and start again on its data), the hash slots
// shared out evenly.
type Cluster struct {
	Nodes []*Server
	t     testing.TB
}

// StartCluster starts n servers in cluster mode, shares the slots out,
// joins them and waits until the cluster is ok.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	for range n {
		c.Nodes = append(c.Nodes, Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000"))
	}
	ctx := context.Background()
	per := 16384 / n
	for i, s := range c.Nodes {
		first, last := i*per, (i+1)*per-1
		if i == n-1 {
			last = 16383
		}
		if err := s.Client().Do(ctx, "cluster", "addslotsrange", first, last).Err(); err != nil {
			t.Fatalf("redistest: CLUSTER ADDSLOTSRANGE on %s: %v", s.Addr, err)
		}
		if i > 0 {
			if err := c.Nodes[0].Client().ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(s.port)).Err(); err != nil {
				t.Fatalf("redistest: CLUSTER MEET %s: %v", s.Addr, err)
			}
		}
	}
	c.AwaitOK()
	return c
}

// Addrs are the nodes' addresses, comma-separated.
func (c *Cluster) Addrs() string {
	var out []string
	for _, s := range c.Nodes {
		out = append(out, s.Addr)
	}
	return strings.Join(out, ",")
}

// AwaitOK waits until every node says the cluster is ok.
func (c *Cluster) AwaitOK() {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok := true
		for _, s := range c.Nodes {
			info, err := s.Client().ClusterInfo(context.Background()).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("redistest: the cluster %s is not ok after 60 s", c.Addrs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Client is a cluster client, closed when the test ends.
func (c *Cluster) Client() *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(c.Addrs(), ","), Protocol: 2, DisableIdentity: true,
		ReadTimeout: 30 * time.Second})
	c.t.Cleanup(func() { cc.Close() })
	return cc
}

// Entries reads every entry of stream in order, from the node that holds
// it.
func (c *Cluster) Entries(stream string) []Entry {
	c.t.Helper()
	return entries(c.t, c.Node(stream).Client(), stream)
}

// Node is the node that holds key's slot.
func (c *Cluster) Node(key string) *Server {
	c.t.Helper()
	for _, s := range c.Nodes {
		// The node that owns the slot answers without MOVED.
		if err := s.Client().XLen(context.Background(), key).Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED") {
			return s
		}
	}
	c.t.Fatalf("redistest: no node holds %s", key)
	return nil
}
