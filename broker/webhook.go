package broker

import (
	"errors"
	"log/slog"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/webhook"
)

// Webhook opens an HTTP publisher (*webhook.Publisher): each record
// POSTed in order, at-least-once, signed with the event id as the
// Standard Webhooks message id.
type Webhook struct {
	Config webhook.Config
}

var _ relay.Opener = (*Webhook)(nil)

// errWebhookExactlyOnce is exactly-once delivery asked of an HTTP
// endpoint.
var errWebhookExactlyOnce = errors.New("exactly-once delivery needs Kafka transactions; an HTTP endpoint has none " +
	"(a request sent again carries the same webhook-id when signed, by which the endpoint recognises it): run with --delivery at-least-once")

// Open creates the publisher; it sends nothing.
func (w *Webhook) Open(_ relay.SinkUse, log *slog.Logger) (relay.Broker, error) {
	p, err := webhook.New(w.Config, log)
	if err != nil {
		return relay.Broker{}, err
	}
	return relay.Broker{Sink: p, EventIDs: true}, nil
}

// Validate checks the publisher's settings; it refuses exactly-once
// delivery.
func (w *Webhook) Validate(d relay.Delivery) error {
	if d == relay.ExactlyOnce {
		return errWebhookExactlyOnce
	}
	cfg := w.Config
	cfg.Defaults()
	return cfg.Validate()
}

// Name is "http", Debezium Server's name of the sink.
func (w *Webhook) Name() string { return "http" }
