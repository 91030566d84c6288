package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// codecs are Kafka's compression codecs by their id in a record batch's
// attributes.
var codecs = map[string]uint8{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

// The binary with --kafka-compression writes batches compressed with the
// codec asked, which Apache Kafka stores as they came: the codec is read
// back from each batch's attributes, and the topic's size on the broker's
// disk is logged for a typical order event. The rows are in the table
// before pgoutbox starts (--snapshot-mode initial publishes them).
func TestKafkaCompressionThroughBinary(t *testing.T) {
	e := testenv.NewKafka(t)
	const rows = 1000
	var batch []testenv.Row
	for i := 0; i < rows; i++ {
		batch = append(batch, testenv.NewRow("order", fmt.Sprintf("order-%d", i%200), "OrderPlaced", fmt.Sprintf(
			`{"orderId":"order-%d","customerId":"customer-%d","currency":"EUR","total":"%d.%02d","lines":[{"sku":"SKU-%05d","quantity":%d,"unitPrice":"19.90"},{"sku":"SKU-%05d","quantity":1,"unitPrice":"4.50"}],"shipping":{"method":"standard","country":"DE","postcode":"1%04d"}}`,
			i, i%977, 24+i%300, i%100, i%5000, 1+i%3, (i*7)%5000, i%10000)))
		if len(batch) == 500 {
			e.Insert(batch...)
			batch = nil
		}
	}
	sizes := map[string]int64{}
	var valueBytes int
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		topic := "compressed." + codec
		args := []string{"run", "--database-url", e.URL, "--kafka-brokers", strings.Join(e.Brokers, ","),
			"--slot", "compress_" + codec, "--topic", topic, "--snapshot-mode", "initial", "--linger", "5ms",
			"--kafka-compression", codec, "--log-format", "json"}
		if codec == "zstd" {
			args = append(args, "--kafka-compression-level", "3")
		}
		started := time.Now()
		r := testenv.StartBinaryEnv(t, nil, args...)
		recs := kafkatest.Consume(t, e.Brokers, []string{topic}, rows, 60*time.Second)
		r.Stop(t)
		// franz-go sends a batch that compression would not shrink as it
		// is; for these events that is at most a batch of one record.
		other, plain := 0, 0
		valueBytes = 0
		for _, r := range recs {
			valueBytes += len(r.Value)
			switch r.Attrs.CompressionType() {
			case codecs[codec]:
			case 0:
				plain++
			default:
				other++
			}
		}
		if other > 0 || plain > rows/100 {
			t.Errorf("%s: %d records of another codec, %d uncompressed, of %d", codec, other, plain, len(recs))
		}
		sizes[codec] = topicBytes(t, e.Brokers, topic)
		t.Logf("%s: %d records in %v", codec, len(recs), time.Since(started).Round(time.Millisecond))
	}
	for _, codec := range []string{"gzip", "snappy", "lz4", "zstd"} {
		if sizes[codec] >= sizes["none"] {
			t.Errorf("%s: %d bytes on disk, not fewer than uncompressed %d", codec, sizes[codec], sizes["none"])
		}
		t.Logf("%d CloudEvents of %d bytes on average, --linger 5ms: %-6s %7d bytes on disk (%.0f%% of none's %d)",
			rows, valueBytes/rows, codec, sizes[codec], 100*float64(sizes[codec])/float64(sizes["none"]), sizes["none"])
	}
}

// topicBytes is the size of topic's partitions on the broker's disk.
func topicBytes(t *testing.T, brokers []string, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dirs, err := kadm.NewClient(cl).DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == topic {
				n += p.Size
			}
		})
	})
	if n == 0 {
		t.Fatalf("%s: no bytes on disk", topic)
	}
	return n
}
