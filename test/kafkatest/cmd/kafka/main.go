// Command kafka runs one Apache Kafka broker (combined broker and
// controller, KRaft) with the test harness's settings until interrupted,
// for trying pgoutbox or its bench against Apache Kafka by hand, or with
// --cluster three brokers and three controllers (kafkatest.StartCluster's
// cluster, on free ports):
//
//	make kafka-run                      # 127.0.0.1:9092
//	go run ./test/kafkatest/cmd/kafka --port 9092 --secure
//	go run ./test/kafkatest/cmd/kafka --set add.partitions.to.txn.retry.backoff.ms=1
//	go run ./test/kafkatest/cmd/kafka --cluster
//
// Its data lives in temporary directories, removed when it stops.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

func main() {
	port := flag.Int("port", 9092, "port of the plaintext listener on 127.0.0.1 (0: a free one)")
	secure := flag.Bool("secure", false, "add the SASL_SSL and SASL_PLAINTEXT listeners and the authorizer, as the tests use them")
	jvm := flag.String("jvm", strings.Join(kafkatest.ScriptJVM, " "), "JVM options (the default: Kafka's start scripts'; the tests use the C1 compiler only, which a benchmark should not)")
	cluster := flag.Bool("cluster", false, "three brokers (replication factor 3, min.insync.replicas=2) and three controllers, on free ports, instead of one node; --jvm applies to the brokers")
	conf := map[string]string{}
	flag.Func("set", "a broker setting, key=value, added to or overriding the harness's (repeatable)", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q: want key=value", s)
		}
		conf[k] = v
		return nil
	})
	flag.Parse()
	if *cluster {
		runCluster(kafkatest.ClusterOptions{Secure: *secure, JVMOptions: strings.Fields(*jvm), Config: conf})
		return
	}
	b, err := kafkatest.Launch(kafkatest.Options{Port: *port, Secure: *secure, JVMOptions: strings.Fields(*jvm), Config: conf})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafka:", err)
		os.Exit(1)
	}
	fmt.Printf("Apache Kafka %s ready: --kafka-brokers %s\n", kafkatest.Version, strings.Join(b.Brokers, ","))
	if *secure {
		fmt.Printf("SASL_SSL %s, SASL_PLAINTEXT %s, user %s password %s\n", b.SASLSSL[0], b.SASLPlaintext[0], kafkatest.User, kafkatest.Password)
	}
	fmt.Printf("data and broker.log in %s (removed on exit); Ctrl-C stops it\n", b.Dir)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	b.Close()
}

func runCluster(opts kafkatest.ClusterOptions) {
	c, err := kafkatest.LaunchCluster(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafka:", err)
		os.Exit(1)
	}
	fmt.Printf("Apache Kafka %s, three brokers, ready: --kafka-brokers %s\n", kafkatest.Version, strings.Join(c.Brokers, ","))
	if opts.Secure {
		fmt.Printf("SASL_SSL %s, SASL_PLAINTEXT %s, user %s password %s\n", strings.Join(c.SASLSSL, ","), strings.Join(c.SASLPlaintext, ","), kafkatest.User, kafkatest.Password)
	}
	for _, n := range c.Nodes {
		fmt.Printf("node %d: data and broker.log in %s (removed on exit)\n", n.ID, n.Dir)
	}
	fmt.Println("Ctrl-C stops it")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	c.Close()
}
