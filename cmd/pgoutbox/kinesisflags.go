package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/pgoutbox/pgoutbox/awsauth"
	"github.com/pgoutbox/pgoutbox/broker"
	"github.com/pgoutbox/pgoutbox/kinesis"
)

// sinkKinesis is Debezium Server's name of the Amazon Kinesis sink.
const sinkKinesis = "kinesis"

// kinesisFlags are the flags of the Kinesis sink, each Debezium Server's
// debezium.sink.kinesis.* key of the same name.
type kinesisFlags struct {
	region, endpoint, profile, roleARN, nullKey string
	batchSize, retries, maxRecordBytes          int
	timeout                                     time.Duration
}

func (k *kinesisFlags) register(fs *flag.FlagSet) {
	const p = "--sink kinesis: "
	fs.StringVar(&k.region, "kinesis-region", "", p+"the streams' region (region; default AWS_REGION, or the profile's)")
	fs.StringVar(&k.endpoint, "kinesis-endpoint", "", p+"an endpoint instead of the region's, http:// or https:// (endpoint)")
	fs.StringVar(&k.profile, "kinesis-profile", "", p+"the shared files' profile whose credentials sign the requests (credentials.profile; default AWS's chain: the environment, AWS_PROFILE, web identity, the container's or instance's role)")
	fs.StringVar(&k.roleARN, "kinesis-role-arn", "", p+"a role assumed with those credentials")
	fs.StringVar(&k.nullKey, "kinesis-null-key", kinesis.DefaultNullKey, p+"the partition key of an event without a key (null.key)")
	fs.IntVar(&k.batchSize, "kinesis-batch-size", kinesis.MaxBatch, p+"the most events in one PutRecords request (batch.size)")
	fs.IntVar(&k.retries, "kinesis-retries", kinesis.DefaultRetries, p+"how many times a request's entries Kinesis did not write are sent before the relay starts again from its last confirmed position (default.retries)")
	fs.IntVar(&k.maxRecordBytes, "kinesis-max-record-bytes", kinesis.DefaultMaxRecordBytes, p+"the largest event, data and partition key, the streams take: a larger one is dead-lettered")
	fs.DurationVar(&k.timeout, "kinesis-timeout", kinesis.DefaultTimeout, p+"how long a request may take")
}

// opener is the Kinesis sink these flags describe, its credentials read
// from AWS's chain now; maxPending is --max-buffered-records.
func (k *kinesisFlags) opener(ctx context.Context, maxPending int) (*broker.Kinesis, error) {
	creds, region, err := awsauth.Config{Profile: k.profile, Region: k.region, RoleARN: k.roleARN}.Credentials(ctx)
	if err != nil {
		return nil, fmt.Errorf("--sink kinesis: %w", err)
	}
	if k.region != "" {
		region = k.region
	}
	cfg := kinesis.Config{Region: region, Endpoint: k.endpoint, Credentials: creds, NullKey: k.nullKey,
		BatchSize: k.batchSize, Retries: k.retries, MaxRecordBytes: k.maxRecordBytes, Timeout: k.timeout, MaxPending: maxPending}
	return &broker.Kinesis{Config: cfg}, nil
}

// kinesisGuarantee is what run's start line says of the Kinesis sink.
const kinesisGuarantee = "at-least-once, each partition key's events written in order; Kinesis does not deduplicate a request sent again"
