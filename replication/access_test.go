//go:build unix

package replication

import (
	"net"
	"testing"

	"github.com/pgoutbox/pgoutbox/rawconn"
)

// The replication connection carries every event: it must be dialled
// through rawconn, whatever the URL.
func TestReplicationConnectionIsRaw(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg, err := replicationConfig("postgres://relay@" + ln.Addr().String() + "/app")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cfg.DialFunc(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*rawconn.Conn); !ok {
		t.Fatalf("replication connection is a %T, want *rawconn.Conn", c)
	}
	if cfg.RuntimeParams["replication"] != "database" {
		t.Fatalf("replication = %q", cfg.RuntimeParams["replication"])
	}
}
