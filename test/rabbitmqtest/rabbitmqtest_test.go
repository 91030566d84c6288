package rabbitmqtest

import (
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A server started, a persistent message confirmed to a durable queue,
// the server killed and started again on its data: the message is there.
func TestKillKeepsConfirmedMessages(t *testing.T) {
	s := Start(t, Options{})
	s.Queue("q", "", "")
	ch := s.Channel()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "q", true, false,
		amqp.Publishing{Body: []byte("kept"), DeliveryMode: amqp.Persistent})
	if err != nil {
		t.Fatal(err)
	}
	if !dc.Wait() {
		t.Fatal("nacked")
	}
	s.Kill()
	s.Start()
	msgs := s.Await("q", 1, 10*time.Second)
	if len(msgs) != 1 || string(msgs[0].Body) != "kept" {
		t.Fatalf("after the restart: %v\n%s", msgs, s.Log())
	}
}
