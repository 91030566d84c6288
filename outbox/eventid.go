package outbox

import "context"

// A record's event id travels on the context a record carries (a
// *kgo.Record's Context), for a broker that deduplicates by it (NATS
// JetStream's Nats-Msg-Id): the relay sets it only for such a broker, so
// that no other record pays for it.

type eventIDKey struct{}

// WithEventID returns parent carrying id as the event id.
func WithEventID(parent context.Context, id string) context.Context {
	if parent == nil {
		parent = context.Background()
	}
	return context.WithValue(parent, eventIDKey{}, id)
}

// EventID is the event id ctx carries; "" when it carries none.
func EventID(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	id, _ := ctx.Value(eventIDKey{}).(string)
	return id
}
