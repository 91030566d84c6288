package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/pgoutbox/pgoutbox/awsauth"
	"github.com/pgoutbox/pgoutbox/broker"
	"github.com/pgoutbox/pgoutbox/sqs"
)

// sinkSQS is Debezium Server's name of the Amazon SQS sink.
const sinkSQS = "sqs"

// sqsFlags are the flags of the SQS sink, each Debezium Server's
// debezium.sink.sqs.* key of the same name.
type sqsFlags struct {
	region, endpoint, profile, roleARN string
	queueURL, dlqURL, groupID          string
	groupByKey                         bool
	maxMessageBytes, retries           int
	timeout                            time.Duration
}

func (s *sqsFlags) register(fs *flag.FlagSet) {
	const p = "--sink sqs: "
	fs.StringVar(&s.region, "sqs-region", "", p+"the queue's region (region; default AWS_REGION, or the profile's)")
	fs.StringVar(&s.endpoint, "sqs-endpoint", "", p+"an endpoint instead of the region's, http:// or https:// (endpoint)")
	fs.StringVar(&s.profile, "sqs-profile", "", p+"the shared files' profile whose credentials sign the requests (credentials.profile; default AWS's chain: the environment, AWS_PROFILE, web identity, the container's or instance's role)")
	fs.StringVar(&s.roleARN, "sqs-role-arn", "", p+"a role assumed with those credentials")
	fs.StringVar(&s.queueURL, "sqs-queue-url", "", p+"the queue every event goes to; a URL ending in .fifo is a FIFO queue (queue.url)")
	fs.StringVar(&s.dlqURL, "sqs-dlq-url", "", p+"the queue dead letters go to; empty: they stay in pgoutbox's dead-letter table (pgoutbox dlq list)")
	fs.StringVar(&s.groupID, "sqs-group-id", sqs.DefaultGroupID, p+"a FIFO queue's message group (fifo.message.group.id)")
	fs.BoolVar(&s.groupByKey, "sqs-group-by-key", false, p+"a FIFO queue's message group is each event's key, its aggregate: each aggregate's order kept, the groups read side by side")
	fs.IntVar(&s.maxMessageBytes, "sqs-max-message-bytes", sqs.DefaultMaxMessageBytes, p+"the largest body, when the queue's MaximumMessageSize cannot be read: a larger event is dead-lettered")
	fs.IntVar(&s.retries, "sqs-retries", sqs.DefaultRetries, p+"how many times a request's messages SQS did not take are sent before the relay starts again from its last confirmed position")
	fs.DurationVar(&s.timeout, "sqs-timeout", sqs.DefaultTimeout, p+"how long a request may take")
}

// opener is the SQS sink these flags describe, its credentials read from
// AWS's chain now; deadLetters is the dead-letter topic ("" under
// --on-poison halt) and maxPending is --max-buffered-records.
func (s *sqsFlags) opener(ctx context.Context, deadLetters string, maxPending int) (*broker.SQS, error) {
	creds, region, err := awsauth.Config{Profile: s.profile, Region: s.region, RoleARN: s.roleARN}.Credentials(ctx)
	if err != nil {
		return nil, fmt.Errorf("--sink sqs: %w", err)
	}
	if s.region != "" {
		region = s.region
	}
	cfg := sqs.Config{Region: region, Endpoint: s.endpoint, Credentials: creds, QueueURL: s.queueURL, DeadLetterURL: s.dlqURL,
		DeadLetterTopic: deadLetters, GroupID: s.groupID, GroupByKey: s.groupByKey, MaxMessageBytes: s.maxMessageBytes,
		Retries: s.retries, Timeout: s.timeout, MaxPending: maxPending}
	return &broker.SQS{Config: cfg}, nil
}

// sqsGuarantee is what run's start line says of the SQS sink.
const sqsGuarantee = "at-least-once; a FIFO queue keeps each group's order and drops a copy with the same event id within five minutes"
