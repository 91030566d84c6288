package rabbitmqtest

import (
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
)

// streamReady tells whether the stream listener at url, on port, takes a
// client.
func streamReady(url string, port int) error {
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetUri(url).
		SetAddressResolver(stream.AddressResolver{Host: "127.0.0.1", Port: port}))
	if err != nil {
		return err
	}
	return env.Close()
}

// StreamMessage is a stream's message as an AMQP 0-9-1 consumer receives
// it: RabbitMQ hands an AMQP 1.0 message's application properties over as
// headers.
type StreamMessage struct {
	MessageID   string
	ContentType string
	Properties  amqp.Table
	Data        []byte
}

// ReadStream reads name from its first message until it gave n messages
// or timeout passed, and returns what it gave; a message beyond n that
// arrives within a moment is returned too. None when there is no such
// stream by then. It reads over AMQP 0-9-1 (a stream is a queue there):
// the Go stream client's consumer stops after a thousand or so messages
// on this server.
func (s *Server) ReadStream(name string, n int, timeout time.Duration) []StreamMessage {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for s.Count(name) < 0 {
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A stream just created may not take consumers yet (its member on
	// the node still starting: INTERNAL_ERROR, "does not have a replica
	// on the local node"), longer on a loaded machine: tried again, each
	// time on a channel of its own, which the refusal closes.
	var (
		ch         *amqp.Channel
		deliveries <-chan amqp.Delivery
	)
	for {
		var err error
		ch = s.Channel()
		if err = ch.Qos(1000, 0, false); err == nil { // a stream's consumer needs a prefetch
			deliveries, err = ch.Consume(name, "rabbitmqtest-stream", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
		}
		if err == nil {
			break
		}
		_ = ch.Close()
		if time.Now().After(deadline.Add(30 * time.Second)) {
			s.t.Fatalf("rabbitmqtest: consume stream %s: %v", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	defer ch.Close()
	var (
		out  []StreamMessage
		more time.Time // once n are read: until when the messages after them are taken
	)
	for {
		wait := time.Until(deadline)
		if len(out) >= n {
			if more.IsZero() {
				more = time.Now().Add(300 * time.Millisecond) // a message too many would show
			}
			wait = time.Until(more)
		}
		select {
		case d, ok := <-deliveries:
			if !ok {
				s.t.Fatalf("rabbitmqtest: stream %s: the consumer ended after %d messages", name, len(out))
			}
			if err := d.Ack(false); err != nil {
				s.t.Fatalf("rabbitmqtest: ack: %v", err)
			}
			props := d.Headers
			delete(props, "x-stream-offset") // RabbitMQ's, not the message's
			out = append(out, StreamMessage{MessageID: d.MessageId, ContentType: d.ContentType, Properties: props, Data: d.Body})
		case <-time.After(max(wait, 0)):
			// Deliveries still on their way would hold the channel's
			// close up: taken and dropped until it ends.
			go func() {
				for range deliveries {
				}
			}()
			return out
		}
	}
}
