//go:build unix

package sink

import (
	"crypto/tls"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/pgoutbox/pgoutbox/rawconn"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

// Every broker connection, plaintext or TLS, runs over rawconn.
func TestBrokerConnectionsAreRaw(t *testing.T) {
	ca := tlstest.New(t)
	for _, tt := range []struct {
		name string
		tls  *tls.Config
		opts []kfake.Opt
	}{
		{"plaintext", nil, nil},
		{"TLS", &tls.Config{RootCAs: ca.Pool}, []kfake.Opt{kfake.TLS(ca.ServerConfig())}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := kfake.NewCluster(append(tt.opts, kfake.NumBrokers(1))...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			cfg := Config{Brokers: c.ListenAddrs(), TLS: tt.tls}
			cfg.Defaults()
			conn, err := dialer(cfg)(t.Context(), "tcp", c.ListenAddrs()[0])
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if tc, ok := conn.(*tls.Conn); ok {
				conn = tc.NetConn()
			}
			if _, ok := conn.(*rawconn.Conn); !ok {
				t.Fatalf("broker connection is a %T, want *rawconn.Conn", conn)
			}
		})
	}
}
