package mototest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
)

// TestSNSRoundTrip publishes to a standard topic and to a FIFO topic and
// receives the messages from their subscribed queues, as published.
func TestSNSRoundTrip(t *testing.T) {
	s := Start(t)
	c := s.SNSClient()
	ctx := context.Background()

	std, stdQ := s.CreateTopic(t, "round-trip", nil)
	_, err := c.PublishBatch(ctx, &sns.PublishBatchInput{TopicArn: aws.String(std), PublishBatchRequestEntries: []types.PublishBatchRequestEntry{
		{Id: aws.String("0"), Message: aws.String(`{"n": 1}`)},
		{Id: aws.String("1"), Message: aws.String("café"), MessageAttributes: map[string]types.MessageAttributeValue{
			"kind": {DataType: aws.String("String"), StringValue: aws.String("note")},
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Message{{Body: `{"n": 1}`}, {Body: "café", MessageAttributes: map[string]string{"kind": "note"}}}
	got := s.ReceiveAll(t, stdQ, len(want), 30*time.Second, nil)
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("received\n  %q\nwant\n  %q", got, want)
	}

	fifo, fifoQ := s.CreateTopic(t, "round-trip.fifo", nil)
	_, err = c.PublishBatch(ctx, &sns.PublishBatchInput{TopicArn: aws.String(fifo), PublishBatchRequestEntries: []types.PublishBatchRequestEntry{
		{Id: aws.String("0"), Message: aws.String("a1"), MessageGroupId: aws.String("a"), MessageDeduplicationId: aws.String("e1")},
		{Id: aws.String("1"), Message: aws.String("b1"), MessageGroupId: aws.String("b"), MessageDeduplicationId: aws.String("e2")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got = s.ReceiveAll(t, fifoQ, 2, 30*time.Second, nil)
	for i := range got {
		got[i].SequenceNumber = ""
	}
	want = []Message{{Body: "a1", MessageGroupId: "a", MessageDeduplicationId: "e1"}, {Body: "b1", MessageGroupId: "b", MessageDeduplicationId: "e2"}}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("received\n  %q\nwant\n  %q", got, want)
	}
}
