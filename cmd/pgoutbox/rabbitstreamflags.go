package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pgoutbox/pgoutbox/broker"
	"github.com/pgoutbox/pgoutbox/rabbitstream"
)

// sinkRabbitStream is Debezium Server's name of the RabbitMQ Streams sink.
const sinkRabbitStream = "rabbitmqstream"

// rabbitstreamFlags are the flags of the RabbitMQ Streams sink, each
// Debezium Server's debezium.sink.rabbitmqstream.* key of the same name.
type rabbitstreamFlags struct {
	url, host, user, password, vhost string
	port                             int
	stream                           string
	maxAge                           time.Duration
	maxLength, maxSegment            string
	producerName                     string
	batchSize                        int
	ackTimeout, rpcTimeout           time.Duration
	nullValue                        string
	maxFrameBytes                    int
	tls                              tlsFiles
}

func (r *rabbitstreamFlags) register(fs *flag.FlagSet) {
	const p = "--sink rabbitmqstream: "
	fs.StringVar(&r.url, "rabbitmqstream-url", "", p+"the server, rabbitmq-stream://user:password@host:port/vhost or rabbitmq-stream+tls:// (default rabbitmq-stream://localhost:5552/ as guest); prefer PGOUTBOX_RABBITMQSTREAM_URL")
	fs.StringVar(&r.host, "rabbitmqstream-host", "", p+"the server's host, over --rabbitmqstream-url's (host)")
	fs.IntVar(&r.port, "rabbitmqstream-port", 0, p+"the server's stream port, over --rabbitmqstream-url's (port)")
	fs.StringVar(&r.user, "rabbitmqstream-user", "", p+"user name, over --rabbitmqstream-url's (username)")
	fs.StringVar(&r.password, "rabbitmqstream-password", "", p+"password, over --rabbitmqstream-url's (password); prefer PGOUTBOX_RABBITMQSTREAM_PASSWORD")
	fs.StringVar(&r.vhost, "rabbitmqstream-vhost", "", p+"virtual host, over --rabbitmqstream-url's (virtualHost)")
	fs.StringVar(&r.stream, "rabbitmqstream-stream", "", p+"every message's stream; empty: the stream named like the message's topic (stream)")
	fs.DurationVar(&r.maxAge, "rabbitmqstream-max-age", 0, p+"the max age of the streams pgoutbox creates (stream.maxAge); 0: the server's")
	fs.StringVar(&r.maxLength, "rabbitmqstream-max-length", "", p+"the max length of the streams pgoutbox creates: bytes, or with kb, mb, gb, tb (powers of 1000) (stream.maxLength)")
	fs.StringVar(&r.maxSegment, "rabbitmqstream-max-segment-size", "", p+"the max segment size of the streams pgoutbox creates, as --rabbitmqstream-max-length (stream.maxSegmentSize)")
	fs.StringVar(&r.producerName, "rabbitmqstream-producer-name", "", p+"the producers' name, under which the broker keeps their last publishing id (producer.name)")
	fs.IntVar(&r.batchSize, "rabbitmqstream-batch-size", rabbitstream.DefaultBatchSize, p+"the most messages sent in one frame (producer.batchSize)")
	fs.DurationVar(&r.ackTimeout, "rabbitmqstream-ack-timeout", rabbitstream.DefaultAckTimeout, p+"how long a message's confirm may take (producer.confirmTimeout)")
	fs.DurationVar(&r.rpcTimeout, "rabbitmqstream-rpc-timeout", rabbitstream.DefaultRPCTimeout, p+"how long the server may take to answer a request (rpcTimeout)")
	fs.StringVar(&r.nullValue, "rabbitmqstream-null-value", rabbitstream.DefaultNullValue, p+"the body of a tombstone (null.value)")
	fs.IntVar(&r.maxFrameBytes, "rabbitmqstream-max-frame-bytes", rabbitstream.DefaultMaxFrameBytes, p+"the largest frame the server takes, its stream.frame_max: a larger event is dead-lettered (requestedMaxFrameSize)")
	r.tls.register(fs, "rabbitmqstream-tls", "the RabbitMQ stream server")
}

// secrets are the values the logger must mask: the password, given alone
// or in the URL.
func (r *rabbitstreamFlags) secrets() []string {
	out := r.tls.secrets()
	if r.password != "" {
		out = append(out, r.password)
	}
	if u, err := url.Parse(r.url); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" && pw != "guest" {
			out = append(out, pw)
		}
	}
	return out
}

// serverURL is --rabbitmqstream-url with the other connection flags over
// it. TLS turns rabbitmq-stream:// into rabbitmq-stream+tls://, on 5551
// unless a port is given. Errors never show the URL.
func (r *rabbitstreamFlags) serverURL(tlsOn bool) (string, error) {
	base := r.url
	if base == "" {
		base = "rabbitmq-stream://guest:guest@localhost:5552/%2f"
	}
	bad := errors.New("--rabbitmqstream-url is not rabbitmq-stream://[user:password@]host[:port][/vhost] or rabbitmq-stream+tls://...")
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "rabbitmq-stream" && u.Scheme != "rabbitmq-stream+tls") {
		return "", bad
	}
	host, port := u.Hostname(), u.Port()
	if tlsOn && u.Scheme == "rabbitmq-stream" {
		u.Scheme = "rabbitmq-stream+tls"
		if port == "" || port == "5552" {
			port = "5551"
		}
	}
	if r.host != "" {
		host = r.host
	}
	if r.port != 0 {
		if r.port < 0 || r.port > 65535 {
			return "", fmt.Errorf("--rabbitmqstream-port %d: not a port", r.port)
		}
		port = strconv.Itoa(r.port)
	}
	u.Host = host
	if port != "" {
		u.Host = net.JoinHostPort(host, port)
	}
	user, pass := "guest", "guest"
	if u.User != nil {
		user = u.User.Username()
		pass, _ = u.User.Password()
	}
	if r.user != "" {
		user = r.user
	}
	if r.password != "" {
		pass = r.password
	}
	u.User = url.UserPassword(user, pass)
	vhost := strings.TrimPrefix(u.Path, "/")
	if r.vhost != "" {
		vhost = r.vhost
	}
	if vhost == "" {
		vhost = "/"
	}
	u.Path, u.RawPath = "/"+vhost, "/"+url.PathEscape(vhost)
	return u.String(), nil
}

// parseByteCapacity reads a size as RabbitMQ's stream client's
// ByteCapacity does: digits, then kb, mb, gb or tb (powers of 1000) or
// nothing (bytes).
func parseByteCapacity(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	digits, mult := strings.ToLower(s), int64(1)
	for unit, m := range map[string]int64{"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12} {
		if strings.HasSuffix(digits, unit) {
			digits, mult = strings.TrimSuffix(digits, unit), m
			break
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult || strings.ContainsAny(digits, "+-") {
		return 0, fmt.Errorf("%q is not a size: digits, then kb, mb, gb, tb or nothing (bytes)", s)
	}
	return n * mult, nil
}

// opener is the RabbitMQ Streams sink these flags describe; deadLetters
// is the dead-letter stream ("" under --on-poison halt), contentType
// tells a CloudEvents format, whose content-type header is the message's
// property, and maxPending is --max-buffered-records.
func (r *rabbitstreamFlags) opener(deadLetters string, contentType bool, maxPending int) (*broker.RabbitStream, error) {
	t, err := r.tls.config()
	if err != nil {
		return nil, err
	}
	u, err := r.serverURL(t != nil)
	if err != nil {
		return nil, err
	}
	maxLength, err := parseByteCapacity(r.maxLength)
	if err != nil {
		return nil, fmt.Errorf("--rabbitmqstream-max-length: %w", err)
	}
	maxSegment, err := parseByteCapacity(r.maxSegment)
	if err != nil {
		return nil, fmt.Errorf("--rabbitmqstream-max-segment-size: %w", err)
	}
	cfg := rabbitstream.Config{
		URI: u, TLS: t, Stream: r.stream, DeadLetterStream: deadLetters, MaxAge: r.maxAge, MaxLengthBytes: maxLength, MaxSegmentBytes: maxSegment,
		ProducerName: r.producerName, BatchSize: r.batchSize, NullValue: r.nullValue, ContentType: contentType,
		AckTimeout: r.ackTimeout, RPCTimeout: r.rpcTimeout, MaxPending: maxPending, MaxFrameBytes: r.maxFrameBytes,
	}
	return &broker.RabbitStream{Config: cfg}, nil
}

// rabbitstreamGuarantee is what run's start line says of the RabbitMQ
// Streams sink.
const rabbitstreamGuarantee = "at-least-once, each message confirmed by the broker; a message sent again is not deduplicated: consumers recognise a copy by its id header (the event id)"

// streamClientLog takes the lines RabbitMQ's stream client writes through
// its one global logger (by default to the standard logger, mid-output)
// into the run's log, at debug: what goes wrong reaches the relay as the
// client's errors.
type streamClientLog struct{ log *slog.Logger }

func (l streamClientLog) line(format string, v ...any) {
	l.log.Debug("rabbitmq stream client: " + fmt.Sprintf(format, v...))
}

func (l streamClientLog) Info(format string, v ...any)  { l.line(format, v...) }
func (l streamClientLog) Error(format string, v ...any) { l.line(format, v...) }
func (l streamClientLog) Debug(format string, v ...any) { l.line(format, v...) }
func (l streamClientLog) Warn(format string, v ...any)  { l.line(format, v...) }
