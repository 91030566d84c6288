package redisstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
)

// defaultMaxBulk is Redis's default proto-max-bulk-len (512 MB), for a
// server that does not say its own.
const defaultMaxBulk = 512 << 20

// Streams appends records to Redis streams. One goroutine produces;
// promises run on the writer's.
type Streams struct {
	cfg Config
	log *slog.Logger

	mu sync.Mutex // starting, replacing and closing the writer
	w  atomic.Pointer[writer]
	// halted is set by AbortBuffered, cleared by Resume and Renew.
	halted atomic.Bool
	// recall outlives writers; only the running writer touches it.
	recall *recall
}

// New creates a publisher. It does not connect; Ping and the first
// record do.
func New(cfg Config, log *slog.Logger) (*Streams, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	quietClient.Do(func() { redis.SetLogger(clientLog{log}) })
	if len(cfg.Addrs) > 1 && !cfg.Cluster {
		// As Debezium Server does.
		log.Warn("redis: several addresses without cluster.enabled: only the first is used", "address", cfg.Addrs[0])
	}
	return &Streams{cfg: cfg, log: log, recall: newRecall(cfg.Window)}, nil
}

// quietClient routes go-redis's own log lines (dial failures, which the
// relay reports itself) to the first publisher's logger, at debug.
var quietClient sync.Once

type clientLog struct{ log *slog.Logger }

func (l clientLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}

// newClient is a client of the server, or of the cluster.
func (s *Streams) newClient() redis.UniversalClient {
	readTimeout := s.cfg.SocketTimeout
	if s.cfg.Wait {
		readTimeout += s.cfg.WaitTimeout // WAIT blocks up to its timeout
	}
	if s.cfg.Cluster {
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: s.cfg.Addrs, Username: s.cfg.User, Password: s.cfg.Password, TLSConfig: s.cfg.TLS,
			ClientName: "pgoutbox", Protocol: 2, DisableIdentity: true,
			DialTimeout: s.cfg.ConnectTimeout, ReadTimeout: readTimeout, WriteTimeout: s.cfg.SocketTimeout,
			// A MOVED or ASK reply is followed (the command was not run
			// there); nothing else is sent twice by the client.
			MaxRetries: -1,
			PoolSize:   4,
		})
	}
	return redis.NewClient(&redis.Options{
		Addr: s.cfg.Addrs[0], Username: s.cfg.User, Password: s.cfg.Password, DB: s.cfg.DB, TLSConfig: s.cfg.TLS,
		ClientName: "pgoutbox", Protocol: 2, DisableIdentity: true,
		DialTimeout: s.cfg.ConnectTimeout, ReadTimeout: readTimeout, WriteTimeout: s.cfg.SocketTimeout,
		// A command is never sent twice by the client: a batch sent again
		// could be written twice. The relay sends again what failed.
		MaxRetries: -1,
		PoolSize:   4,
	})
}

// writer returns the running writer, starting one first when there is
// none.
func (s *Streams) writer() *writer {
	if w := s.w.Load(); w != nil {
		return w
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.w.Load(); w != nil {
		return w
	}
	w := newWriter(s, s.newClient())
	s.w.Store(w)
	return w
}

// Fits returns *TooLargeError when r's entry exceeds what the server or
// the configured cap accepts, and *WrongTypeError when its stream's key
// holds another type.
func (s *Streams) Fits(ctx context.Context, r *kgo.Record) error {
	_, err := s.writer().checker.check(ctx, r)
	return err
}

// Produce hands r over; promise is called once with its outcome, in
// produce order, after its batch's reply. Produce blocks while
// MaxPending records wait, until ctx ends.
func (s *Streams) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) error {
	w := s.writer()
	e, err := w.checker.check(ctx, r)
	if err != nil {
		return err
	}
	if s.halted.Load() || w.broken.Load() {
		return ErrHalted
	}
	if err := w.backlog.acquire(ctx, w.ctx.Done()); err != nil {
		return err
	}
	w.queue <- pending{rec: r, promise: promise, id: outbox.EventID(r.Context), e: e}
	return nil
}

// AbortBuffered fails what is not written yet and writes nothing more
// until Resume or Renew.
func (s *Streams) AbortBuffered() { s.halted.Store(true) }

// Resume lets records through again, after AbortBuffered or a failed
// batch: the relay's next session sends again what was not acknowledged.
// Call it only while nothing is produced.
func (s *Streams) Resume() {
	s.halted.Store(false)
	if w := s.w.Load(); w != nil {
		w.broken.Store(false)
	}
}

// Flush waits until every record is written or failed.
func (s *Streams) Flush(ctx context.Context) error {
	if w := s.w.Load(); w != nil {
		return w.backlog.wait(ctx)
	}
	return nil
}

// Buffered is how many records wait for their batch's reply.
func (s *Streams) Buffered() int64 {
	if w := s.w.Load(); w != nil {
		return w.backlog.count()
	}
	return 0
}

// Renew closes the connections, failing what still waits; the next record
// connects again and forgets the limits it learned. Call it only while
// nothing is produced.
func (s *Streams) Renew() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.w.Swap(nil); w != nil {
		w.close()
	}
	s.halted.Store(false)
	return nil
}

// Close fails what still waits and closes the connections.
func (s *Streams) Close() { _ = s.Renew() }

// Ping checks that the server answers and takes the credentials.
func (s *Streams) Ping(ctx context.Context) error {
	w := s.writer()
	if err := w.client.Ping(ctx).Err(); err != nil {
		if c := classify("", err); c != err {
			var ae *AuthError
			if errors.As(c, &ae) {
				return ae
			}
		}
		return fmt.Errorf("redis: ping %s: %w", s.cfg.Addrs[0], err)
	}
	return nil
}
