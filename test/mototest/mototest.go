// Package mototest starts moto's server, PyPI's AWS emulator, from the
// virtual environment .ci/install-moto makes (make moto), on a free port
// for the tests, and reads and writes its Kinesis streams: the Kinesis
// the tests publish to, there being no AWS here. moto assigns records to
// shards as Kinesis does, by the MD5 of the partition key.
package mototest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/pgoutbox/pgoutbox/freeport"
	"github.com/pgoutbox/pgoutbox/proc"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

const (
	// DirEnv names the virtual environment .ci/install-moto made (make
	// sets it from MOTO_DIR). Unset, the module's .cache/moto.
	DirEnv = "PGOUTBOX_MOTO_DIR"
	// Region, AccessKey and SecretKey are what clients of the server
	// sign with: moto takes any.
	Region    = "us-east-1"
	AccessKey = "test"
	SecretKey = "test"
)

// Server is a moto_server process.
type Server struct {
	port   int
	p      *proc.Process
	client *kinesis.Client
}

// Record is a Kinesis record as GetRecords returns it, with its shard.
type Record struct {
	Shard          string
	SequenceNumber string
	PartitionKey   string
	Data           []byte
}

// Binary is DirEnv's (or the module's .cache/moto's) moto_server; the
// test fails, saying to run make moto, when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(DirEnv)
	if dir == "" {
		root, err := testbin.ModuleRoot()
		if err != nil {
			t.Fatalf("mototest: %v", err)
		}
		dir = filepath.Join(root, ".cache", "moto")
	}
	bin := filepath.Join(dir, "bin", "moto_server")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("mototest: no moto_server in %s: run make moto (.ci/install-moto %s), or set %s", dir, dir, DirEnv)
	}
	return bin
}

// serve is moto_server's main with one thread instead of one per
// request: moto's Kinesis reads a shard's records while another thread's
// PutRecords adds to them and fails (RuntimeError: OrderedDict mutated
// during iteration, seen here under load). One thread answers a request
// at a time over HTTP/1.0, a connection each.
const serve = `import sys
from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
run_simple("127.0.0.1", int(sys.argv[1]), DomainDispatcherApplication(create_backend_app), threaded=False, request_handler=MotoRequestHandler)
`

// Start starts moto_server on a free port and waits until its Kinesis
// answers. It is stopped when the test ends, and its output logged if
// the test failed.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	var err error
	for range 5 {
		s := &Server{}
		if s.port, err = freeport.Port(); err != nil {
			break
		}
		py := filepath.Join(filepath.Dir(bin), "python")
		if s.p, err = proc.Start("moto_server", py, []string{"-c", serve, strconv.Itoa(s.port)}, nil, nil); err != nil {
			break
		}
		s.client = kinesis.New(kinesis.Options{
			Region:       Region,
			Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
			BaseEndpoint: aws.String(s.Endpoint()),
		})
		// Seen: under a second on 2 idle cores, most of it importing moto.
		err = s.p.Await(60*time.Second, 100*time.Millisecond, func(ctx context.Context) error {
			_, err := s.client.ListStreams(ctx, &kinesis.ListStreamsInput{})
			return err
		})
		if err == nil {
			t.Cleanup(func() {
				_ = s.p.Stop(10 * time.Second)
				if t.Failed() {
					t.Logf("mototest: moto_server on %s; its output ends:\n%s", s.Endpoint(), s.p.Output())
				}
			})
			return s
		}
		s.p.Kill()
		if !strings.Contains(s.p.Output(), "Address already in use") {
			err = fmt.Errorf("%w; its output:\n%s", err, s.p.Output())
			break
		}
	}
	t.Fatalf("mototest: starting moto_server: %v", err)
	return nil
}

// Endpoint is the server's URL, http://127.0.0.1:PORT, for every service.
func (s *Server) Endpoint() string { return "http://127.0.0.1:" + strconv.Itoa(s.port) }

// Client is a Kinesis client of the server.
func (s *Server) Client() *kinesis.Client { return s.client }

// CreateStream creates stream name with shards shards, and waits until it
// is ACTIVE.
func (s *Server) CreateStream(t testing.TB, name string, shards int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.client.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(int32(shards))}); err != nil {
		t.Fatalf("mototest: creating stream %s: %v", name, err)
	}
	w := kinesis.NewStreamExistsWaiter(s.client, func(o *kinesis.StreamExistsWaiterOptions) { o.MinDelay = 100 * time.Millisecond })
	if err := w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(name)}, 30*time.Second); err != nil {
		t.Fatalf("mototest: stream %s not active: %v", name, err)
	}
}

// ReadStream reads every record of every shard of stream name from the
// start, ordered by shard, then sequence number.
func (s *Server) ReadStream(t testing.TB, name string) []Record {
	t.Helper()
	recs, err := s.readStream(name)
	if err != nil {
		t.Fatalf("mototest: reading stream %s: %v", name, err)
	}
	return recs
}

func (s *Server) readStream(name string) ([]Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var shards []types.Shard
	// A page's token stands for the stream too: the next asks by it alone.
	for in := (&kinesis.ListShardsInput{StreamName: aws.String(name)}); ; {
		page, err := s.client.ListShards(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("listing shards: %w", err)
		}
		shards = append(shards, page.Shards...)
		if page.NextToken == nil {
			break
		}
		in = &kinesis.ListShardsInput{NextToken: page.NextToken}
	}
	slices.SortFunc(shards, func(a, b types.Shard) int { return strings.Compare(*a.ShardId, *b.ShardId) })
	var out []Record
	for _, sh := range shards {
		it, err := s.client.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
			StreamName: aws.String(name), ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", *sh.ShardId, err)
		}
		var recs []Record
		for iter := it.ShardIterator; iter != nil; {
			page, err := s.client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				return nil, fmt.Errorf("shard %s: %w", *sh.ShardId, err)
			}
			for _, r := range page.Records {
				recs = append(recs, Record{Shard: *sh.ShardId, SequenceNumber: *r.SequenceNumber, PartitionKey: *r.PartitionKey, Data: r.Data})
			}
			// An open shard's iterator never ends: caught up is no
			// records and nothing behind.
			if len(page.Records) == 0 && aws.ToInt64(page.MillisBehindLatest) == 0 {
				break
			}
			iter = page.NextShardIterator
		}
		// Sequence numbers are decimal, of up to 128 bits: longer is later.
		slices.SortStableFunc(recs, func(a, b Record) int {
			if c := len(a.SequenceNumber) - len(b.SequenceNumber); c != 0 {
				return c
			}
			return strings.Compare(a.SequenceNumber, b.SequenceNumber)
		})
		out = append(out, recs...)
	}
	return out, nil
}

// TryReadStream is ReadStream, with ok false when moto did not answer
// the reads in time (single-threaded, it may lag behind a load): for a
// test's Eventually, which asks again.
func (s *Server) TryReadStream(t testing.TB, name string) (recs []Record, ok bool) {
	t.Helper()
	recs, err := s.readStream(name)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return nil, false
	case err != nil:
		t.Fatalf("mototest: reading stream %s: %v", name, err)
	}
	return recs, true
}

// Len is how many records stream name holds, or -1 when moto did not
// answer the reads in time (TryReadStream).
func (s *Server) Len(t testing.TB, name string) int {
	t.Helper()
	recs, ok := s.TryReadStream(t, name)
	if !ok {
		return -1
	}
	return len(recs)
}

// Await reads stream name until it holds n records, and returns them; it
// fails the test when exited is closed first (the publisher died), or
// after within. It waits a second more for any record past n, which the
// caller sees in the count.
func (s *Server) Await(t testing.TB, name string, n int, within time.Duration, exited <-chan struct{}) []Record {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		recs, err := s.readStream(name)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("mototest: reading stream %s: %v", name, err)
		}
		if len(recs) >= n {
			time.Sleep(time.Second)
			return s.ReadStream(t, name)
		}
		select {
		case <-exited:
			t.Fatalf("mototest: the publisher exited with %d of %d records in stream %s", len(recs), n, name)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("mototest: %d of %d records in stream %s after %s", len(recs), n, name, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
