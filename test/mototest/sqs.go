package mototest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Message is an SQS message as ReceiveMessage returns it: its body, the
// FIFO system attributes (empty on a standard queue) and its message
// attributes, each as its string (or binary) value.
type Message struct {
	Body                   string
	MessageGroupId         string
	MessageDeduplicationId string
	// SequenceNumber is moto's: 20 random digits, and only when the
	// sender gave a deduplication id; no order can be read from it.
	SequenceNumber    string
	MessageAttributes map[string]string
}

// SQSClient is an SQS client of the server.
func (s *Server) SQSClient() *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
		BaseEndpoint: aws.String(s.Endpoint()),
	})
}

// CreateQueue creates queue name with attrs (e.g. ContentBasedDeduplication)
// and returns its URL; a name ending in .fifo makes a FIFO queue, as SQS
// requires FifoQueue=true of it.
func (s *Server) CreateQueue(t testing.TB, name string, attrs map[string]string) string {
	t.Helper()
	a := maps.Clone(attrs)
	if strings.HasSuffix(name, ".fifo") {
		if a == nil {
			a = map[string]string{}
		}
		a["FifoQueue"] = "true"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := s.SQSClient().CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: a})
	if err != nil {
		t.Fatalf("mototest: creating queue %s: %v", name, err)
	}
	return aws.ToString(out.QueueUrl)
}

// ReceiveAll receives, and deletes, the messages of queueURL until n have
// arrived, then for a second more, and returns them all in the order
// received, any past n included for the caller to see in the count. It
// fails the test when exited is closed first (the sender died), or after
// within. moto forgets a deleted FIFO message's deduplication id: a
// duplicate sent after ReceiveAll took the first is delivered again.
func (s *Server) ReceiveAll(t testing.TB, queueURL string, n int, within time.Duration, exited <-chan struct{}) []Message {
	t.Helper()
	c := s.SQSClient()
	deadline := time.Now().Add(within)
	var got []Message
	var extra time.Time // when to stop once n have arrived
	for {
		// A receive that timed out (a slow or paused moto) took nothing
		// and is tried again; one that took messages and failed to delete
		// them would see them again.
		msgs, err := receive(c, queueURL)
		if err != nil && (len(msgs) > 0 || !errors.Is(err, context.DeadlineExceeded)) {
			t.Fatalf("mototest: receiving from %s: %v", queueURL, err)
		}
		got = append(got, msgs...)
		if len(got) >= n {
			if extra.IsZero() {
				extra = time.Now().Add(time.Second)
			}
			if time.Now().After(extra) {
				return got
			}
			continue
		}
		select {
		case <-exited:
			t.Fatalf("mototest: the sender exited with %d of %d messages received from %s", len(got), n, queueURL)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("mototest: %d of %d messages received from %s after %s", len(got), n, queueURL, within)
		}
	}
}

// receive takes up to ten messages from queueURL, waiting up to a
// second for one (so that ReceiveAll sees exited and its deadline in
// time), and deletes them.
func receive(c *sqs.Client, queueURL string) ([]Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(queueURL),
		MaxNumberOfMessages:         10,
		WaitTimeSeconds:             1,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return nil, fmt.Errorf("receiving: %w", err)
	}
	if len(out.Messages) == 0 {
		return nil, nil
	}
	msgs := make([]Message, 0, len(out.Messages))
	del := make([]types.DeleteMessageBatchRequestEntry, 0, len(out.Messages))
	for i, m := range out.Messages {
		msg := Message{
			Body:                   aws.ToString(m.Body),
			MessageGroupId:         m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)],
			MessageDeduplicationId: m.Attributes[string(types.MessageSystemAttributeNameMessageDeduplicationId)],
			SequenceNumber:         m.Attributes[string(types.MessageSystemAttributeNameSequenceNumber)],
		}
		for k, v := range m.MessageAttributes {
			if msg.MessageAttributes == nil {
				msg.MessageAttributes = map[string]string{}
			}
			if v.StringValue != nil {
				msg.MessageAttributes[k] = *v.StringValue
			} else {
				msg.MessageAttributes[k] = string(v.BinaryValue)
			}
		}
		msgs = append(msgs, msg)
		del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
	}
	res, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: del})
	// What was received is returned even so, for ReceiveAll to tell.
	if err != nil {
		return msgs, fmt.Errorf("deleting: %w", err)
	}
	if len(res.Failed) > 0 {
		return msgs, fmt.Errorf("deleting: %s: %s", aws.ToString(res.Failed[0].Code), aws.ToString(res.Failed[0].Message))
	}
	return msgs, nil
}

// Consume receives, and deletes, the messages of queueURL on a goroutine
// of its own until the test ends, keeping the queue short: moto looks
// through every message a queue holds on each send. Got is what it has
// received so far, in order. moto drops a FIFO copy only while the first
// is in the queue: a consumer lets copies through that SQS would drop.
func (s *Server) Consume(t testing.TB, queueURL string) *Consumer {
	t.Helper()
	c := &Consumer{stop: make(chan struct{}), done: make(chan struct{})}
	client := s.SQSClient()
	go func() {
		defer close(c.done)
		for {
			select {
			case <-c.stop:
				return
			default:
			}
			msgs, err := receive(client, queueURL)
			c.mu.Lock()
			c.got = append(c.got, msgs...)
			if err != nil && c.err == nil {
				c.err = err
			}
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		close(c.stop)
		<-c.done
	})
	return c
}

// Consumer is Consume's goroutine.
type Consumer struct {
	stop, done chan struct{}
	mu         sync.Mutex
	got        []Message
	err        error
}

// Got is what the consumer received so far, and its first error.
func (c *Consumer) Got() ([]Message, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got), c.err
}
