package main

import (
	"flag"
	"time"

	"github.com/pgoutbox/pgoutbox/broker"
	"github.com/pgoutbox/pgoutbox/pubsub"
)

// sinkPubSub is Debezium Server's name of the Google Cloud Pub/Sub sink.
const sinkPubSub = "pubsub"

// pubsubFlags are the flags of the Pub/Sub sink, each Debezium Server's
// debezium.sink.pubsub.* key of the same name.
type pubsubFlags struct {
	project, address, region, orderingKey, nullKey string
	ordering                                       bool
	timeout                                        time.Duration
	count, bytes                                   int
}

func (f *pubsubFlags) register(fs *flag.FlagSet) {
	const p = "--sink pubsub: "
	fs.StringVar(&f.project, "pubsub-project", "", p+"the project of every topic (project.id; default the credentials' project, GOOGLE_CLOUD_PROJECT)")
	fs.StringVar(&f.address, "pubsub-address", "", p+"an emulator's host:port, reached without TLS or credentials (address)")
	fs.StringVar(&f.region, "pubsub-region", "", p+"a regional endpoint, <region>-pubsub.googleapis.com (region)")
	fs.BoolVar(&f.ordering, "pubsub-ordering", true, p+"give each message an ordering key, its event's key (ordering.enabled)")
	fs.StringVar(&f.orderingKey, "pubsub-ordering-key", "", p+"one ordering key for every message (ordering.key)")
	fs.StringVar(&f.nullKey, "pubsub-null-key", pubsub.DefaultNullKey, p+"the ordering key of an event without a key (null.key)")
	fs.IntVar(&f.count, "pubsub-batch-count", pubsub.DefaultCountThreshold, p+"the most messages in a request, up to 1000 (batch.element.count.threshold)")
	fs.IntVar(&f.bytes, "pubsub-batch-bytes", pubsub.DefaultByteThreshold, p+"the most bytes in a request (batch.request.byte.threshold)")
	fs.DurationVar(&f.timeout, "pubsub-timeout", pubsub.DefaultTimeout, p+"how long a request may take (wait.message.delivery.timeout.ms)")
}

// opener is the Pub/Sub sink these flags describe; maxPending is
// --max-buffered-records.
func (f *pubsubFlags) opener(maxPending int) *broker.PubSub {
	return &broker.PubSub{Config: pubsub.Config{ProjectID: f.project, Address: f.address, Region: f.region, Ordering: f.ordering,
		OrderingKey: f.orderingKey, NullKey: f.nullKey, CountThreshold: f.count, ByteThreshold: f.bytes,
		Timeout: f.timeout, MaxPending: maxPending}}
}

// pubsubGuarantee is what run's start line says of the Pub/Sub sink.
const pubsubGuarantee = "at-least-once, each message answered by Pub/Sub, each ordering key's in order"
