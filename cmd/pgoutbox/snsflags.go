package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/pgoutbox/pgoutbox/awsauth"
	"github.com/pgoutbox/pgoutbox/broker"
	"github.com/pgoutbox/pgoutbox/sns"
)

// sinkSNS is Debezium Server's name of the Amazon SNS sink.
const sinkSNS = "sns"

// snsFlags are the flags of the SNS sink, each Debezium Server's
// debezium.sink.sns.* key of the same name.
type snsFlags struct {
	region, endpoint, profile, roleARN string
	topicARN, topicARNPrefix, dlqARN   string
	groupHeader, dedupHeader, groupID  string
	retries                            int
	timeout                            time.Duration
}

func (s *snsFlags) register(fs *flag.FlagSet) {
	const p = "--sink sns: "
	fs.StringVar(&s.region, "sns-region", "", p+"the topics' region (region; default AWS_REGION, or the profile's)")
	fs.StringVar(&s.endpoint, "sns-endpoint", "", p+"an endpoint instead of the region's, http:// or https:// (endpoint)")
	fs.StringVar(&s.profile, "sns-profile", "", p+"the shared files' profile whose credentials sign the requests (credentials.profile; default AWS's chain: the environment, AWS_PROFILE, web identity, the container's or instance's role)")
	fs.StringVar(&s.roleARN, "sns-role-arn", "", p+"a role assumed with those credentials")
	fs.StringVar(&s.topicARN, "sns-topic-arn", "", p+"the topic every event goes to whose topic is not an ARN, without --sns-topic-arn-prefix; an ARN ending in .fifo is a FIFO topic (topic.arn)")
	fs.StringVar(&s.topicARNPrefix, "sns-topic-arn-prefix", "", p+"an event goes to this prefix and its topic, e.g. arn:aws:sns:us-east-1:123456789012: (topic.arn.prefix)")
	fs.StringVar(&s.dlqARN, "sns-dlq-topic-arn", "", p+"the topic dead letters go to; empty: they stay in pgoutbox's dead-letter table (pgoutbox dlq list)")
	fs.StringVar(&s.groupHeader, "sns-group-header", sns.DefaultGroupHeader, p+"the header whose value is a FIFO message's group; without it, the event's key, its aggregate (fifo.message.group.id.header)")
	fs.StringVar(&s.dedupHeader, "sns-dedup-header", "", p+"the header whose value is a FIFO message's deduplication id; without it, the event id (fifo.message.dedup.id.header)")
	fs.StringVar(&s.groupID, "sns-group-id", sns.DefaultGroupID, p+"a FIFO message's group without the header or a key (fifo.default.group.id)")
	fs.IntVar(&s.retries, "sns-retries", sns.DefaultRetries, p+"how many times a request's messages SNS did not take are sent before the relay starts again from its last confirmed position (default.retries)")
	fs.DurationVar(&s.timeout, "sns-timeout", sns.DefaultTimeout, p+"how long a request may take")
}

// opener is the SNS sink these flags describe, its credentials read from
// AWS's chain now; deadLetters is the dead-letter topic ("" under
// --on-poison halt) and maxPending is --max-buffered-records.
func (s *snsFlags) opener(ctx context.Context, deadLetters string, maxPending int) (*broker.SNS, error) {
	creds, region, err := awsauth.Config{Profile: s.profile, Region: s.region, RoleARN: s.roleARN}.Credentials(ctx)
	if err != nil {
		return nil, fmt.Errorf("--sink sns: %w", err)
	}
	if s.region != "" {
		region = s.region
	}
	cfg := sns.Config{Region: region, Endpoint: s.endpoint, Credentials: creds, TopicARN: s.topicARN, TopicARNPrefix: s.topicARNPrefix,
		DeadLetterARN: s.dlqARN, DeadLetterTopic: deadLetters, GroupHeader: s.groupHeader, DedupHeader: s.dedupHeader, GroupID: s.groupID,
		Retries: s.retries, Timeout: s.timeout, MaxPending: maxPending}
	return &broker.SNS{Config: cfg}, nil
}

// snsGuarantee is what run's start line says of the SNS sink.
const snsGuarantee = "at-least-once; a FIFO topic keeps each group's order and drops a copy with the same event id within five minutes"
