package mototest

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SNSClient is an SNS client of the server.
func (s *Server) SNSClient() *sns.Client {
	return sns.New(sns.Options{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
		BaseEndpoint: aws.String(s.Endpoint()),
	})
}

// CreateTopic creates topic name with attrs (e.g.
// ContentBasedDeduplication; a name ending in .fifo makes a FIFO topic)
// and a queue of the same name subscribed to it with raw message
// delivery, where a message arrives as published: its body, its
// attributes, a FIFO topic's group and deduplication id. It returns the
// topic's ARN and the queue's URL, for ReceiveAll.
func (s *Server) CreateTopic(t testing.TB, name string, attrs map[string]string) (arn, queueURL string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	attrs = maps.Clone(attrs)
	if strings.HasSuffix(name, ".fifo") {
		if attrs == nil {
			attrs = map[string]string{}
		}
		attrs["FifoTopic"] = "true"
	}
	c := s.SNSClient()
	out, err := c.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("mototest: creating topic %s: %v", name, err)
	}
	arn = aws.ToString(out.TopicArn)
	// moto passes no deduplication id of its own to the queue: a FIFO
	// topic that deduplicates by content needs a queue that does too.
	var qattrs map[string]string
	if attrs["ContentBasedDeduplication"] == "true" {
		qattrs = map[string]string{"ContentBasedDeduplication": "true"}
	}
	queueURL = s.CreateQueue(t, name, qattrs)
	q, err := s.SQSClient().GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatalf("mototest: reading queue %s: %v", name, err)
	}
	_, err = c.Subscribe(ctx, &sns.SubscribeInput{TopicArn: aws.String(arn), Protocol: aws.String("sqs"),
		Endpoint: aws.String(q.Attributes[string(types.QueueAttributeNameQueueArn)]), Attributes: map[string]string{"RawMessageDelivery": "true"}})
	if err != nil {
		t.Fatalf("mototest: subscribing queue %s to topic %s: %v", name, arn, err)
	}
	return arn, queueURL
}
