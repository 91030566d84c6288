package mototest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// TestSQSRoundTrip sends messages to a standard queue and to a FIFO
// queue and receives them back with their attributes; on the FIFO queue
// a second message of a deduplication id not yet received is dropped.
func TestSQSRoundTrip(t *testing.T) {
	s := Start(t)
	c := s.SQSClient()
	ctx := context.Background()

	std := s.CreateQueue(t, "round-trip", nil)
	_, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(std), Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("0"), MessageBody: aws.String(`{"n": 1}`)},
		{Id: aws.String("1"), MessageBody: aws.String("café"), MessageAttributes: map[string]types.MessageAttributeValue{
			"kind": {DataType: aws.String("String"), StringValue: aws.String("note")},
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	// moto takes an empty body, which SQS refuses (its minimum is one
	// character): a test cannot count on moto to refuse one.
	_, emptyErr := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(std), MessageBody: aws.String("")})
	if emptyErr != nil {
		t.Logf("moto refuses an empty body now: %v", emptyErr)
	}
	// moto delivers a standard queue's messages in the order sent.
	want := []Message{{Body: `{"n": 1}`}, {Body: "café", MessageAttributes: map[string]string{"kind": "note"}}}
	if emptyErr == nil {
		want = append(want, Message{})
	}
	got := s.ReceiveAll(t, std, len(want), 30*time.Second, nil)
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("received\n  %q\nwant\n  %q", got, want)
	}

	fifo := s.CreateQueue(t, "round-trip.fifo", nil)
	for _, m := range []struct{ body, group, dedup string }{
		{"a1", "a", "e1"}, {"b1", "b", "e2"}, {"a1 again", "a", "e1"}, {"a2", "a", "e3"},
	} {
		_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(fifo), MessageBody: aws.String(m.body),
			MessageGroupId: aws.String(m.group), MessageDeduplicationId: aws.String(m.dedup)})
		if err != nil {
			t.Fatal(err)
		}
	}
	got = s.ReceiveAll(t, fifo, 3, 30*time.Second, nil)
	for i := range got {
		if got[i].SequenceNumber == "" {
			t.Errorf("message %d: no sequence number", i)
		}
		got[i].SequenceNumber = ""
	}
	want = []Message{
		{Body: "a1", MessageGroupId: "a", MessageDeduplicationId: "e1"},
		{Body: "b1", MessageGroupId: "b", MessageDeduplicationId: "e2"},
		{Body: "a2", MessageGroupId: "a", MessageDeduplicationId: "e3"},
	}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("received\n  %q\nwant\n  %q", got, want)
	}
}
