package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
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

// A message limit above the default buffer raises the buffer's default
// with it, instead of making the configuration invalid; an explicit buffer
// is kept.
func TestDefaultBufferFitsTheLargestMessage(t *testing.T) {
	for _, tt := range []struct{ message, buffer, want int }{
		{0, 0, DefaultMaxBufferedBytes},
		{100_000_000, 0, 200_000_000},
		{2_000, 1_000, 1_000},
	} {
		c := Config{Brokers: []string{"127.0.0.1:9092"}, MaxMessageBytes: tt.message, MaxBufferedBytes: tt.buffer}
		c.Defaults()
		if c.MaxBufferedBytes != tt.want {
			t.Errorf("message %d, buffer %d: buffer default %d, want %d", tt.message, tt.buffer, c.MaxBufferedBytes, tt.want)
		}
		if err := c.Validate(); (err == nil) != (tt.buffer == 0) {
			t.Errorf("message %d, buffer %d: Validate() = %v", tt.message, tt.buffer, err)
		}
	}
}

// Size must never underestimate: a record Produce lets through must be
// accepted by Apache Kafka on a topic whose max.message.bytes equals the
// limit, and one just above the limit is refused before it reaches the
// client.
func TestSizeCheckMatchesBroker(t *testing.T) {
	const limit = 2048
	b := kafkatest.Shared(t)
	createTopic(t, b.Brokers, "t", map[string]string{"max.message.bytes": strconv.Itoa(limit)})
	k, err := New(Config{Brokers: b.Brokers, MaxMessageBytes: limit, CreateTopics: true}, slog.New(slog.NewTextHandler(io.Discard, nil)))
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

// With --max-message-bytes at its default, the broker's lower limits
// apply: the topic's max.message.bytes, else the broker's
// message.max.bytes. A record over them is refused before it reaches the
// client, and batches of small records stay under them, so that a burst
// is not refused as a whole.
func TestLimitLearnedFromBroker(t *testing.T) {
	const brokerLimit, topicLimit = 100_000, 50_000
	b := kafkatest.SharedLocal(t)
	b.SetConfig(t, "message.max.bytes", strconv.Itoa(brokerLimit))
	createTopic(t, b.Brokers, "small", map[string]string{"max.message.bytes": strconv.Itoa(topicLimit)})
	k, err := New(Config{Brokers: b.Brokers, CreateTopics: true, MaxBufferedRecords: 100_000}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	for _, tt := range []struct {
		topic string
		want  int
	}{{"small", topicLimit}, {"created-on-first-use", brokerLimit}} {
		if got := k.Limit(ctx, tt.topic); got != tt.want {
			t.Errorf("limit of %s: %d, want %d", tt.topic, got, tt.want)
		}
		rec := &kgo.Record{Topic: tt.topic, Key: []byte("k"), Value: make([]byte, tt.want)}
		var tl *TooLargeError
		if err := k.Fits(ctx, rec); !errors.As(err, &tl) || tl.Max != tt.want || tl.Topic != tt.topic {
			t.Errorf("a record of %d bytes for %s: %v", len(rec.Value), tt.topic, err)
		}
	}
	// A burst of small records: with franz-go's default batch limit
	// (1,000,012 bytes) its batches would exceed the broker's limit.
	var failed atomic.Int64
	for i := 0; i < 20_000; i++ {
		rec := &kgo.Record{Topic: "created-on-first-use", Key: []byte("k"), Value: make([]byte, 200)}
		if err := k.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of 20,000 small records failed", n)
	}
}

// A topic's first record waits at most limitLookup for its limit when the
// broker does not answer (here: it takes connections and never answers,
// as a broker starting or cut off by a partition does), and uses the
// configured limit until it can be read.
func TestLimitWhileBrokerAway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	k, err := New(Config{Brokers: []string{ln.Addr().String()}, MaxMessageBytes: 123_456}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	start := time.Now()
	if got := k.Limit(context.Background(), "events"); got != 123_456 {
		t.Fatalf("limit %d, want the configured 123456", got)
	}
	if took := time.Since(start); took > limitLookup+time.Second {
		t.Fatalf("the lookup took %v, more than %v and a second's margin", took, limitLookup)
	}
	start = time.Now()
	k.Limit(context.Background(), "events")
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Fatalf("asked again at once: %v", took)
	}
}

// createTopic creates a topic of one partition with settings.
func createTopic(t *testing.T, brokers []string, topic string, settings map[string]string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	configs := map[string]*string{}
	for k, v := range settings {
		configs[k] = &v
	}
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", topic, err)
	}
}

func TestRefused(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{kerr.MessageTooLarge, true},
		{fmt.Errorf("produce: %w (uncompressed_bytes=1)", kerr.MessageTooLarge), true},
		{kerr.InvalidRecord, true},
		{kerr.TopicAuthorizationFailed, true},
		{kerr.InvalidTopicException, true},
		{kerr.NotLeaderForPartition, false},
		{kerr.UnknownTopicOrPartition, false},
		{kerr.RequestTimedOut, false},
		{context.DeadlineExceeded, false},
		{errors.New("MESSAGE_TOO_LARGE"), false},
	}
	for _, tt := range tests {
		if got := Refused(tt.err); got != tt.want {
			t.Errorf("Refused(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// A topic that appears a few seconds after its first record (a busy
// cluster creating it on first use) takes the record; franz-go's default
// of four lookups failed it after about 2 s, and the relay sent its batch
// again.
func TestTopicAppearsLate(t *testing.T) {
	b := kafkatest.Start(t, kafkatest.Options{Config: map[string]string{"auto.create.topics.enable": "false"}})
	k, err := New(Config{Brokers: b.Brokers, CreateTopics: true}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	done := make(chan error, 1)
	if err := k.Produce(context.Background(), &kgo.Record{Topic: "late", Value: []byte("x")}, func(_ *kgo.Record, err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(6 * time.Second)
	createTopic(t, b.Brokers, "late", nil)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the record failed: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the record was neither taken nor failed within a minute of its topic's creation")
	}
}
