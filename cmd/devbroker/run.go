package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/rawconn"
)

// defaultMaxMessageBytes is Kafka's default message.max.bytes, which kfake
// also uses when nothing is configured.
const defaultMaxMessageBytes = 1048588

// config is the parsed command line.
type config struct {
	listen          string
	advertise       string
	dataDir         string
	syncWrites      bool
	partitions      int
	maxMessageBytes int  // only applied when maxMessageSet
	maxMessageSet   bool // whether --max-message-bytes was given
	logLevel        slog.Level
	logOff          bool
}

// parseFlags parses args into a config. Errors other than flag.ErrHelp are
// *usageError. On -h or --help the usage text goes to usage.
func parseFlags(args []string, usage io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("devbroker", flag.ContinueOnError)
	// Silent while parsing: main prints the error once, with a hint,
	// instead of the flag package printing it with the whole usage.
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:9092",
		"`host:port` to serve the Kafka protocol on; port 0 picks a free port (the ready line names it)")
	fs.StringVar(&cfg.advertise, "advertise", "",
		"`host:port` clients are told to connect to (default: the listen address); required when listening on all interfaces")
	fs.StringVar(&cfg.dataDir, "data-dir", "",
		"`directory` to keep topics, records, offsets and producer state in across restarts (default: memory only)")
	fs.BoolVar(&cfg.syncWrites, "sync-writes", true,
		"with --data-dir, fsync every produced batch before acknowledging it, so acknowledged records survive SIGKILL and power loss")
	fs.IntVar(&cfg.partitions, "partitions", 3, "number of partitions of topics created on first use")
	fs.IntVar(&cfg.maxMessageBytes, "max-message-bytes", defaultMaxMessageBytes,
		"largest record batch, in bytes after compression, a produce may carry (the broker's message.max.bytes)")
	logLevel := fs.String("log-level", "error", "broker log `level` on stderr: none, error, warn, info or debug")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: devbroker [flags]\n\nServes the Kafka protocol (franz-go's kfake) for development and tests.\n\nFlags:\n")
		fs.PrintDefaults()
	}

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(usage)
			fs.Usage()
			return cfg, err
		}
		return cfg, &usageError{err}
	}
	if fs.NArg() > 0 {
		return cfg, &usageError{fmt.Errorf("unexpected arguments: %q", fs.Args())}
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "max-message-bytes" {
			cfg.maxMessageSet = true
		}
	})

	host, _, err := splitHostPort(cfg.listen)
	if err != nil {
		return cfg, &usageError{fmt.Errorf("--listen: %w", err)}
	}
	if cfg.advertise != "" {
		if _, _, err := splitHostPort(cfg.advertise); err != nil {
			return cfg, &usageError{fmt.Errorf("--advertise: %w", err)}
		}
	} else if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		// The broker tells clients its own address in metadata responses;
		// "0.0.0.0" only works for clients on the same machine.
		return cfg, &usageError{fmt.Errorf("--listen %s listens on all interfaces: also give --advertise host:port, the address clients should connect to", cfg.listen)}
	}
	if cfg.partitions < 1 {
		return cfg, &usageError{fmt.Errorf("--partitions must be at least 1, got %d", cfg.partitions)}
	}
	if cfg.maxMessageBytes < 1 {
		return cfg, &usageError{fmt.Errorf("--max-message-bytes must be at least 1, got %d", cfg.maxMessageBytes)}
	}
	switch strings.ToLower(*logLevel) {
	case "none":
		cfg.logOff = true
	case "error":
		cfg.logLevel = slog.LevelError
	case "warn":
		cfg.logLevel = slog.LevelWarn
	case "info":
		cfg.logLevel = slog.LevelInfo
	case "debug":
		cfg.logLevel = slog.LevelDebug
	default:
		return cfg, &usageError{fmt.Errorf("--log-level must be none, error, warn, info or debug, got %q", *logLevel)}
	}
	return cfg, nil
}

func splitHostPort(addr string) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("want host:port: %w", err)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("invalid port %q", p)
	}
	return host, port, nil
}

// run serves the Kafka protocol until ctx is done, then closes the broker,
// which writes its state to the data directory. It prints the ready line to
// stdout and logs to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var handler slog.Handler = slog.DiscardHandler
	if !cfg.logOff {
		handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel})
	}
	logger := slog.New(handler)

	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		// kfake always listens on 127.0.0.1 itself; ListenFn lets the
		// listen flag choose the interface, and the advertised address.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			ln, err := net.Listen(network, cfg.listen)
			if err != nil {
				return nil, err
			}
			// Each produce request and fetch answer crosses these
			// connections: see package rawconn.
			ln = rawconn.Listener(ln)
			if cfg.advertise == "" {
				return ln, nil
			}
			return advertisedListener{ln, advertisedAddr(cfg.advertise)}, nil
		}),
		// Not kfake.AllowAutoTopicCreation: see createTopicsOnFirstUse.
		kfake.DefaultNumPartitions(cfg.partitions),
		kfake.WithLogger(slogAdapter{logger}),
	}
	// kfake checks each partition's record batch in a produce request, as
	// sent (after compression, with its 61-byte header), against the
	// topic's max.message.bytes, else the broker's message.max.bytes,
	// else 1048588, and answers MESSAGE_TOO_LARGE; that matches Kafka.
	// It enforces no request size limit (socket.request.max.bytes) and no
	// replica.fetch.max.bytes. Only an explicit flag is applied, so that a
	// value changed at run time with AlterConfigs and persisted in the data
	// directory is not reset to the default on restart.
	if cfg.maxMessageSet {
		opts = append(opts, kfake.BrokerConfigs(map[string]string{
			"message.max.bytes": strconv.Itoa(cfg.maxMessageBytes),
		}))
	}
	if cfg.dataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.dataDir))
		if cfg.syncWrites {
			opts = append(opts, kfake.SyncWrites())
		}
	}

	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("starting the broker on %s: %w", cfg.listen, err)
	}
	createTopicsOnFirstUse(cluster, logger)
	// The listener is bound once NewCluster returns, so connections are
	// accepted (queued by the kernel until kfake's accept loop runs).
	addr := cfg.advertise
	if addr == "" {
		addr = cluster.ListenAddrs()[0]
	}
	logger.Info("broker started", "addr", addr, "data_dir", cfg.dataDir,
		"partitions", cfg.partitions, "sync_writes", cfg.syncWrites)
	if _, err := fmt.Fprintf(stdout, "devbroker ready on %s\n", addr); err != nil {
		cluster.Close()
		return fmt.Errorf("printing the ready line: %w", err)
	}

	<-ctx.Done()
	logger.Info("shutting down")
	cluster.Close()
	return nil
}

// createTopicsOnFirstUse creates the missing topics a Metadata request names
// when it allows auto-creation, as Kafka's auto.create.topics.enable does,
// but through kfake's CreateTopic, which writes the topic list to the data
// directory at once. kfake's own AllowAutoTopicCreation keeps an auto-created
// topic in memory until a clean shutdown: after a SIGKILL the topic is gone
// from topics.json, and with it every acknowledged record in it, although
// the records themselves were synced to disk. With auto-creation left off
// in kfake, this hook is the only path that creates topics on first use, so
// no Metadata request can create one that is not recorded.
func createTopicsOnFirstUse(cluster *kfake.Cluster, logger *slog.Logger) {
	cluster.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req, ok := kreq.(*kmsg.MetadataRequest)
		if !ok || !req.AllowAutoTopicCreation {
			return nil, nil, false
		}
		var names []string
		for _, t := range req.Topics {
			if t.Topic != nil && *t.Topic != "" {
				names = append(names, *t.Topic)
			}
		}
		if len(names) == 0 {
			return nil, nil, false
		}
		// Control functions run on the cluster's loop, and TopicInfo and
		// CreateTopic wait for that loop: sleeping yields it to them.
		cluster.SleepControl(func() {
			for _, name := range names {
				if cluster.TopicInfo(name) != nil {
					continue
				}
				// -1: the --partitions default. A concurrent request
				// may have created it meanwhile, also durably.
				err := cluster.CreateTopic(name, -1, nil)
				switch {
				case err == nil:
					logger.Info("created topic on first use", "topic", name)
				case errors.Is(err, kerr.TopicAlreadyExists):
				default:
					// An invalid name: the Metadata answer says the
					// topic is unknown, as for a topic not created.
					logger.Warn("creating topic on first use", "topic", name, "err", err)
				}
			}
		})
		// Not handled: kfake answers the request, now that the topics
		// exist.
		return nil, nil, false
	})
}

// advertisedListener reports the advertised address as its own, because
// kfake puts the listener's address in metadata responses.
type advertisedListener struct {
	net.Listener
	addr net.Addr
}

func (l advertisedListener) Addr() net.Addr { return l.addr }

// advertisedAddr is a net.Addr for a host:port that need not be an IP.
type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

// slogAdapter routes kfake's printf-style logs to a *slog.Logger.
type slogAdapter struct{ logger *slog.Logger }

func (a slogAdapter) Logf(level kfake.LogLevel, format string, args ...any) {
	var l slog.Level
	switch level {
	case kfake.LogLevelNone:
		return
	case kfake.LogLevelError:
		l = slog.LevelError
	case kfake.LogLevelWarn:
		l = slog.LevelWarn
	case kfake.LogLevelInfo:
		l = slog.LevelInfo
	default:
		l = slog.LevelDebug
	}
	if !a.logger.Enabled(context.Background(), l) {
		return
	}
	a.logger.Log(context.Background(), l, fmt.Sprintf(format, args...), "component", "kfake")
}
