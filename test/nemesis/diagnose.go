package nemesis

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// dumpTopic writes, for a stuck exactly-once run, what the broker holds at
// the end of every partition of topic: its start, last stable and end
// offsets, and the last records as a read_uncommitted and a
// read_committed consumer get them (with the transaction markers: key
// 0000 0000 aborts, 0000 0001 commits), to tell an open or unended
// transaction from a reader that stops short; and what the coordinators
// and the partitions say of every transaction, to tell how an open one
// came to be left open. Values longer than width are cut.
func dumpTopic(ctx context.Context, brokers []string, topic, path string, width int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var b strings.Builder
	offsets := map[string]func(context.Context, ...string) (kadm.ListedOffsets, error){
		"start": adm.ListStartOffsets, "last stable": adm.ListCommittedOffsets, "end": adm.ListEndOffsets,
	}
	ends := map[int32]int64{}
	for _, name := range []string{"start", "last stable", "end"} {
		o, err := offsets[name](ctx, topic)
		if err != nil {
			fmt.Fprintf(&b, "%s offsets: %v\n", name, err)
			continue
		}
		o.Each(func(l kadm.ListedOffset) {
			fmt.Fprintf(&b, "%s offset of %s/%d: %d (err %v)\n", name, topic, l.Partition, l.Offset, l.Err)
			if name == "end" {
				ends[l.Partition] = l.Offset
			}
		})
	}
	describeTransactions(ctx, adm, &b)
	for partition := int32(0); partition < int32(len(ends)); partition++ {
		end := ends[partition]
		for _, iso := range []kgo.IsolationLevel{kgo.ReadUncommitted(), kgo.ReadCommitted()} {
			name := "read_uncommitted"
			if iso == kgo.ReadCommitted() {
				name = "read_committed"
			}
			fmt.Fprintf(&b, "\n%s/%d, %s from %d:\n", topic, partition, name, max(0, end-100))
			c, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords(),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(max(0, end-100))}}))
			if err != nil {
				return err
			}
			pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
			for pctx.Err() == nil {
				fs := c.PollFetches(pctx)
				fs.EachError(func(_ string, _ int32, err error) {
					if pctx.Err() == nil {
						fmt.Fprintf(&b, "  fetch error: %v\n", err)
					}
				})
				fs.EachRecord(func(r *kgo.Record) {
					v := string(r.Value)
					if r.Attrs.IsControl() {
						v = ""
					}
					if len(v) > width {
						v = v[:width] + "..."
					}
					fmt.Fprintf(&b, "  %d control=%t txn=%t pid=%d epoch=%d key=%q %s\n", r.Offset, r.Attrs.IsControl(), r.Attrs.IsTransactional(),
						r.ProducerID, r.ProducerEpoch, r.Key, v)
				})
			}
			pcancel()
			c.Close()
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// describeTransactions writes every transactional id's state as its
// coordinator has it, and every producer every partition knows of (last
// epoch, open transaction).
func describeTransactions(ctx context.Context, adm *kadm.Client, b *strings.Builder) {
	listed, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		fmt.Fprintf(b, "\ntransactions: %v\n", err)
	} else if ds, err := adm.DescribeTransactions(ctx, listed.TransactionalIDs()...); err != nil {
		fmt.Fprintf(b, "\ntransactions: %v\n", err)
	} else {
		fmt.Fprintf(b, "\ntransactions (coordinator's state):\n")
		for _, d := range ds.Sorted() {
			fmt.Fprintf(b, "  %s: %s producer id %d epoch %d started %d partitions %v err %v\n",
				d.TxnID, d.State, d.ProducerID, d.ProducerEpoch, d.StartTimestamp, d.Topics, d.Err)
		}
	}
	topics, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		fmt.Fprintf(b, "\nproducers: %v\n", err)
		return
	}
	ps, err := adm.DescribeProducers(ctx, topics.TopicsSet())
	if err != nil {
		fmt.Fprintf(b, "\nproducers: %v\n", err)
		return
	}
	fmt.Fprintf(b, "\nproducers (per partition):\n")
	for _, p := range ps.SortedProducers() {
		fmt.Fprintf(b, "  %s/%d: producer id %d epoch %d last sequence %d coordinator epoch %d open from %d\n",
			p.Topic, p.Partition, p.ProducerID, p.ProducerEpoch, p.LastSequence, p.CoordinatorEpoch, p.CurrentTxnStartOffset)
	}
}
