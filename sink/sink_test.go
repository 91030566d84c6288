package sink

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"no brokers", func(c *Config) { c.Brokers = nil }, false},
		{"empty broker", func(c *Config) { c.Brokers = []string{""} }, false},
		{"negative linger", func(c *Config) { c.Linger = -time.Millisecond }, false},
		{"tiny messages", func(c *Config) { c.MaxMessageBytes = 100 }, false},
		{"buffer below one message", func(c *Config) { c.MaxBufferedBytes = 1000; c.MaxMessageBytes = 2000 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Brokers: []string{"127.0.0.1:9092"}}
			c.Defaults()
			tt.mod(&c)
			if err := c.Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v", err)
			}
		})
	}
}

// Size must never underestimate: a record Produce lets through must be
// accepted by a broker whose message.max.bytes equals the limit, and one
// just above the limit is refused before it reaches the client.
func TestSizeCheckMatchesBroker(t *testing.T) {
	const limit = 2048
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(limit)}))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	k, err := New(Config{Brokers: cluster.ListenAddrs(), MaxMessageBytes: limit, CreateTopics: true}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	headers := []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/json")}, {Key: "ce_id", Value: []byte("5f0c6a4e-8a53")}}
	fits := func(n int) *kgo.Record {
		return &kgo.Record{Topic: "t", Key: []byte("order-1"), Value: []byte(strings.Repeat("x", n)), Headers: headers}
	}
	// The largest value Size still accepts.
	n := limit
	for Size(fits(n)) > limit {
		n--
	}
	done := make(chan error, 1)
	if err := k.Produce(ctx, fits(n), func(_ *kgo.Record, err error) { done <- err }); err != nil {
		t.Fatalf("a record of %d bytes by Size was refused: %v", Size(fits(n)), err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the broker refused a record Size counted at %d of %d bytes: %v", Size(fits(n)), limit, err)
	}
	err = k.Produce(ctx, fits(n+1), func(*kgo.Record, error) { t.Error("promise called for a refused record") })
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Max != limit {
		t.Fatalf("one byte over: %v", err)
	}
}
