package mototest

import (
	"context"
	"crypto/md5"
	"fmt"
	"math/big"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// TestKinesisRoundTrip puts records, one of them of no data (which
// Kinesis allows), into a stream of two shards and reads them back, each
// in the shard the MD5 of its partition key picks, in order.
func TestKinesisRoundTrip(t *testing.T) {
	s := Start(t)
	s.CreateStream(t, "round-trip", 2)
	ctx := context.Background()
	in := []types.PutRecordsRequestEntry{
		{PartitionKey: aws.String("a"), Data: []byte("first")},
		{PartitionKey: aws.String("b"), Data: []byte{}},
		{PartitionKey: aws.String("a"), Data: []byte(`{"n": 3}`)},
		{PartitionKey: aws.String("café"), Data: []byte{0, 0xff, '\n'}},
	}
	out, err := s.Client().PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("round-trip"), Records: in})
	if err != nil {
		t.Fatal(err)
	}
	if n := aws.ToInt32(out.FailedRecordCount); n != 0 {
		t.Fatalf("%d records failed: %+v", n, out.Records)
	}
	desc, err := s.Client().DescribeStream(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String("round-trip")})
	if err != nil {
		t.Fatal(err)
	}
	// The shard each record belongs in, as Kinesis picks it.
	shardOf := func(key string) string {
		sum := md5.Sum([]byte(key))
		h := new(big.Int).SetBytes(sum[:])
		for _, sh := range desc.StreamDescription.Shards {
			lo, _ := new(big.Int).SetString(*sh.HashKeyRange.StartingHashKey, 10)
			hi, _ := new(big.Int).SetString(*sh.HashKeyRange.EndingHashKey, 10)
			if h.Cmp(lo) >= 0 && h.Cmp(hi) <= 0 {
				return *sh.ShardId
			}
		}
		t.Fatalf("no shard for %q", key)
		return ""
	}
	var want []Record
	for _, shard := range []string{"shardId-000000000000", "shardId-000000000001"} {
		for i, e := range in {
			if shardOf(*e.PartitionKey) != shard {
				continue
			}
			if *out.Records[i].ShardId != shard {
				t.Errorf("record %d: PutRecords put it in %s, want %s", i, *out.Records[i].ShardId, shard)
			}
			want = append(want, Record{Shard: shard, SequenceNumber: *out.Records[i].SequenceNumber, PartitionKey: *e.PartitionKey, Data: e.Data})
		}
	}
	got := s.ReadStream(t, "round-trip")
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("read\n  %q\nwant\n  %q", got, want)
	}
	if shardOf("a") == shardOf("b") {
		t.Errorf("a and b hash to one shard: the test shows no routing")
	}
}
