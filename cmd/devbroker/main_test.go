package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

// readyWriter collects output and reports the address of the ready line.
type readyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan string
	once  sync.Once
}

func newReadyWriter() *readyWriter { return &readyWriter{ready: make(chan string, 1)} }

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for _, line := range strings.Split(w.buf.String(), "\n") {
		if addr, ok := strings.CutPrefix(line, "devbroker ready on "); ok {
			w.once.Do(func() { w.ready <- strings.TrimSpace(addr) })
		}
	}
	return len(p), nil
}

// startInProcess runs the broker in a goroutine and returns its address and
// a function that stops it and returns run's error.
func startInProcess(t *testing.T, args ...string) (addr string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := newReadyWriter()
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, append([]string{"--listen", "127.0.0.1:0"}, args...), out, &stderr) }()

	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })

	select {
	case addr = <-out.ready:
		return addr, stop
	case err := <-done:
		t.Fatalf("run returned before it was ready: %v\nstderr: %s", err, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("no ready line within 30s")
	}
	return "", nil
}

func produce(t *testing.T, addr string, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func TestProduceConsume(t *testing.T) {
	addr, stop := startInProcess(t)
	produce(t, addr, &kgo.Record{Topic: "orders", Key: []byte("k1"), Value: []byte("hello")})

	got := kafkatest.Consume(t, []string{addr}, []string{"orders"}, 1, 20*time.Second)
	if string(got[0].Key) != "k1" || string(got[0].Value) != "hello" {
		t.Fatalf("consumed key %q value %q, want k1 hello", got[0].Key, got[0].Value)
	}
	if err := stop(); err != nil {
		t.Fatalf("run returned %v after cancel, want nil", err)
	}
}

func TestAutoCreatedTopicsUsePartitionsFlag(t *testing.T) {
	addr, _ := startInProcess(t, "--partitions", "5")
	produce(t, addr, &kgo.Record{Topic: "five", Value: []byte("x")})

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	parts, err := partitionCount(ctx, cl, "five")
	if err != nil {
		t.Fatal(err)
	}
	if parts != 5 {
		t.Fatalf("topic has %d partitions, want 5", parts)
	}
}

func TestDataSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	addr, stop := startInProcess(t, "--data-dir", dir)
	produce(t, addr, &kgo.Record{Topic: "kept", Key: []byte("a"), Value: []byte("1")})
	if err := stop(); err != nil {
		t.Fatalf("stopping: %v", err)
	}

	addr, _ = startInProcess(t, "--data-dir", dir)
	produce(t, addr, &kgo.Record{Topic: "kept", Key: []byte("a"), Value: []byte("2")})
	got := kafkatest.Consume(t, []string{addr}, []string{"kept"}, 2, 20*time.Second)
	if len(got) != 2 || string(got[0].Value) != "1" || string(got[1].Value) != "2" {
		var vals []string
		for _, r := range got {
			vals = append(vals, string(r.Value))
		}
		t.Fatalf("after restart the topic holds %q, want [1 2]", vals)
	}
}

func TestMaxMessageBytesIsEnforced(t *testing.T) {
	addr, _ := startInProcess(t, "--max-message-bytes", "1000")
	// The client's own limit is raised so the broker is the one to refuse.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: make([]byte, 2000)}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("producing 2000 bytes with a 1000 byte limit: got %v, want MESSAGE_TOO_LARGE", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: make([]byte, 500)}).FirstErr(); err != nil {
		t.Fatalf("producing 500 bytes with a 1000 byte limit: %v", err)
	}
}

func TestParseFlags(t *testing.T) {
	bad := [][]string{
		{"--partitions", "0"},
		{"--listen", "nohostport"},
		{"--listen", "127.0.0.1:99999"},
		{"--listen", "0.0.0.0:9092"},
		{"--max-message-bytes", "0"},
		{"--log-level", "loud"},
		{"--no-such-flag"},
		{"extra"},
	}
	for _, args := range bad {
		_, err := parseFlags(args, io.Discard)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("parseFlags(%q) = %v, want a usage error", args, err)
		}
	}
	cfg, err := parseFlags([]string{"--listen", "0.0.0.0:0", "--advertise", "broker.example:9092"}, io.Discard)
	if err != nil || cfg.advertise != "broker.example:9092" {
		t.Errorf("listening on all interfaces with --advertise: cfg %+v, err %v", cfg, err)
	}
	cfg, err = parseFlags(nil, io.Discard)
	if err != nil || cfg.listen != "127.0.0.1:9092" || cfg.partitions != 3 || !cfg.syncWrites || cfg.maxMessageSet {
		t.Errorf("defaults: cfg %+v, err %v", cfg, err)
	}
}

// TestBinary checks what only the real process shows: exit codes and
// signal handling.
func TestBinary(t *testing.T) {
	bin := testbin.Build(t, "github.com/pgoutbox/pgoutbox/cmd/devbroker")

	t.Run("bad flag exits 2", func(t *testing.T) {
		var stderr bytes.Buffer
		cmd := exec.Command(bin, "--partitions", "-1")
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 2 {
			t.Fatalf("got %v, want exit status 2", err)
		}
		if !strings.Contains(stderr.String(), "--partitions must be at least 1") {
			t.Fatalf("stderr does not explain the error: %q", stderr.String())
		}
	})

	t.Run("SIGTERM exits 0", func(t *testing.T) {
		out := newReadyWriter()
		var stderr bytes.Buffer
		cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir())
		cmd.Stdout = out
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		select {
		case addr := <-out.ready:
			produce(t, addr, &kgo.Record{Topic: "t", Value: []byte("v")})
		case <-time.After(30 * time.Second):
			t.Fatalf("no ready line; stderr: %s", stderr.String())
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("after SIGTERM: %v, want exit 0; stderr: %s", err, stderr.String())
		}
	})
}

// partitionCount asks the broker's metadata how many partitions topic has.
func partitionCount(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	topics, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return 0, err
	}
	td, ok := topics[topic]
	if !ok {
		return 0, fmt.Errorf("topic %s missing from metadata", topic)
	}
	if td.Err != nil {
		return 0, td.Err
	}
	return len(td.Partitions), nil
}
