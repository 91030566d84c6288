// Package pubsubtest starts Google's Cloud Pub/Sub emulator for the
// tests: the one this machine's image carries (Debian's
// google-cloud-cli-pubsub-emulator, a Java program), on a free loopback
// port, and creates topics with a subscription each, from which it pulls
// every message in order.
package pubsubtest

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/pgoutbox/pgoutbox/freeport"
	"github.com/pgoutbox/pgoutbox/proc"
)

// EmulatorEnv names the emulator's start script; unset, the image's.
const EmulatorEnv = "PGOUTBOX_PUBSUB_EMULATOR"

// defaultEmulator is where Debian's package puts it.
const defaultEmulator = "/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator"

// Project is the tests' project: the emulator takes any of 3 or more
// characters.
const Project = "pgoutbox-test"

// Server is an emulator process.
type Server struct {
	port   int
	p      *proc.Process
	client *pubsub.Client
}

// Message is a pulled message.
type Message struct {
	Data        []byte
	Attributes  map[string]string
	OrderingKey string
}

// Start starts the emulator on a free port and waits until it answers;
// it is stopped when the test ends, its output logged if the test
// failed. Without the emulator the test fails.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := os.Getenv(EmulatorEnv)
	if bin == "" {
		bin = defaultEmulator
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("pubsubtest: no Pub/Sub emulator at %s (Debian's google-cloud-cli-pubsub-emulator; or set %s)", bin, EmulatorEnv)
	}
	s := &Server{}
	var err error
	if s.port, err = freeport.Port(); err != nil {
		t.Fatalf("pubsubtest: %v", err)
	}
	if s.p, err = proc.Start("pubsub-emulator", bin, []string{"--host=127.0.0.1", "--port=" + strconv.Itoa(s.port)}, nil, nil); err != nil {
		t.Fatalf("pubsubtest: %v", err)
	}
	t.Cleanup(func() {
		_ = s.p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("pubsubtest: the emulator on %s; its output ends:\n%s", s.Address(), tail(s.p.Output(), 4096))
		}
	})
	s.client, err = pubsub.NewClient(context.Background(), Project, option.WithEndpoint(s.Address()), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatalf("pubsubtest: %v", err)
	}
	t.Cleanup(func() { _ = s.client.Close() })
	// Seen: ready in under a second on 2 idle cores.
	err = s.p.Await(time.Minute, 100*time.Millisecond, func(ctx context.Context) error {
		_, err := s.client.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: "projects/" + Project + "/topics/ready"})
		if err != nil && strings.Contains(err.Error(), "NotFound") {
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatalf("pubsubtest: the emulator did not answer: %v\n%s", err, s.p.Output())
	}
	return s
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// Address is the emulator's host:port.
func (s *Server) Address() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// CreateTopic creates topic id in Project with a subscription of the same
// name that keeps each ordering key's order: it gets every message
// published after this.
func (s *Server) CreateTopic(t testing.TB, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := "projects/" + Project + "/topics/" + id
	if _, err := s.client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatalf("pubsubtest: creating topic %s: %v", id, err)
	}
	if _, err := s.client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/" + Project + "/subscriptions/" + id, Topic: topic, EnableMessageOrdering: true, AckDeadlineSeconds: 60,
	}); err != nil {
		t.Fatalf("pubsubtest: creating the subscription of %s: %v", id, err)
	}
}

// Pull pulls (and acknowledges) topic id's messages until n have come,
// then for a second more, and returns them all in the order pulled; it
// fails the test when exited is closed first, or after within.
func (s *Server) Pull(t testing.TB, id string, n int, within time.Duration, exited <-chan struct{}) []Message {
	t.Helper()
	sub := "projects/" + Project + "/subscriptions/" + id
	deadline := time.Now().Add(within)
	var got []Message
	var extra time.Time
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := s.client.SubscriptionAdminClient.Pull(ctx, &pubsubpb.PullRequest{Subscription: sub, MaxMessages: 1000})
		if err == nil && len(res.ReceivedMessages) > 0 {
			var acks []string
			for _, m := range res.ReceivedMessages {
				got = append(got, Message{Data: m.Message.Data, Attributes: m.Message.Attributes, OrderingKey: m.Message.OrderingKey})
				acks = append(acks, m.AckId)
			}
			err = s.client.SubscriptionAdminClient.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: sub, AckIds: acks})
		}
		cancel()
		if err != nil && ctx.Err() == nil {
			t.Fatalf("pubsubtest: pulling %s: %v", id, err)
		}
		if len(got) >= n {
			if extra.IsZero() {
				extra = time.Now().Add(time.Second)
			}
			if time.Now().After(extra) {
				return slices.Clip(got)
			}
		}
		select {
		case <-exited:
			if len(got) < n {
				t.Fatalf("pubsubtest: the publisher exited with %d of %d messages pulled from %s", len(got), n, id)
			}
		default:
		}
		if len(got) < n && time.Now().After(deadline) {
			t.Fatalf("pubsubtest: %d of %d messages pulled from %s after %s", len(got), n, id, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Signal sends sig to the emulator: SIGSTOP, and SIGCONT after it, make a
// Pub/Sub that does not answer for a while, its messages kept.
func (s *Server) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(s.p.PID(), sig); err != nil {
		t.Fatalf("pubsubtest: %v", err)
	}
}
