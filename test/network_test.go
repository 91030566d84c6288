package test

import (
	"net/url"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/faultproxy"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// The network between the relay and Postgres, or between the relay and the
// broker, is black-holed (connections stay open, nothing crosses) or reset,
// under continuous load. The relay notices, reconnects with backoff, and
// delivers every event in order.
func TestNetworkFaults(t *testing.T) {
	for _, tc := range []struct {
		target, fault string
	}{
		{"postgres", "blackhole"}, {"postgres", "reset"},
		{"kafka", "blackhole"}, {"kafka", "reset"},
	} {
		t.Run(tc.target+"/"+tc.fault, func(t *testing.T) {
			// Apache Kafka's listener behind the proxy: the broker
			// advertises the proxy's address there, so every connection
			// the relay makes crosses it.
			e := testenv.NewKafka(t)
			broker := kafkatest.SharedLocal(t)
			e.Brokers = broker.Proxied
			kProxy := broker.Proxy
			t.Cleanup(kProxy.Heal)
			pgProxy, err := faultproxy.Forward(hostOf(t, e.URL))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pgProxy.Close)

			cfg := e.Config()
			cfg.Replication.DatabaseURL = throughProxy(t, e.URL, pgProxy.Addr())
			cfg.Replication.ReceiveTimeout = 1500 * time.Millisecond
			e.Setup(cfg)
			r := e.Start(cfg)
			testenv.Eventually(t, 10*time.Second, "streaming", func() bool { return e.Slot("pgoutbox").Active })

			proxy := pgProxy
			if tc.target == "kafka" {
				proxy = kProxy
			}
			load := e.StartLoad(t, 2)
			time.Sleep(time.Second)
			sessions := r.Stats.Sessions.Load()
			faultAt := time.Now()
			if tc.fault == "blackhole" {
				proxy.Blackhole()
				time.Sleep(3 * time.Second)
				proxy.Heal()
			} else {
				proxy.Reset()
			}
			if tc.target == "postgres" {
				testenv.Eventually(t, 20*time.Second, "a new replication session", func() bool { return r.Stats.Sessions.Load() > sessions })
				t.Logf("reconnected %v after the fault began", time.Since(faultAt).Round(10*time.Millisecond))
			}
			time.Sleep(time.Second)
			committed := load.Finish()
			rep := testenv.Check(t, e.Brokers, "outbox.event.account", committed)
			t.Logf("%v", rep)
			if rep.Lost != 0 || rep.OrderViolations != 0 {
				t.Fatalf("lost %d, order violations %d", rep.Lost, rep.OrderViolations)
			}
		})
	}
}

// throughProxy points a database URL at the proxy, with a short connect
// timeout so that connecting through a black hole fails quickly.
func throughProxy(t *testing.T, dbURL, addr string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	return u.String()
}

func hostOf(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
