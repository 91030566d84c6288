package sink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// plaintextAfter is how long Ping waits for a TLS answer before it checks
// whether the broker speaks plaintext Kafka instead: a plaintext listener
// takes the ClientHello for the start of a huge request and waits for the
// rest, so the handshake only ends at the dial timeout.
const plaintextAfter = time.Second

// Health tells whether a Kafka sink's brokers answer, and if not, why.
type Health struct {
	c         *client
	brokers   []string
	sasl, tls bool
	mechanism string
	// who is whom SASL authenticates, for errors: "user relay"; clientCert
	// tells a TLS client certificate configured.
	who         string
	clientCert  bool
	dialTimeout time.Duration
	// dial connects as the client does, TLS handshake included (Ping's
	// probes).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// written and positionTopic are the topics Writable checks.
	written       *writtenTopics
	positionTopic string
}

// Ping checks that a broker answers. A SASL or TLS failure wraps ErrAuth
// and says which. A broker that only closes the connection is taken to
// refuse what was sent only when a fresh connection shows it up: a broker
// that is restarting, or cut off, closes connections too, and that is
// retried. With TLS, a seed broker that answers a plaintext Kafka request
// is a plaintext listener: ErrAuth at once, without waiting for the dial
// timeout. Without TLS, a seed broker that answers one with a TLS alert
// is a TLS listener (Apache Kafka answers so; kfake closes): ErrAuth too.
func (h *Health) Ping(ctx context.Context) error {
	probe := h.probeTimeout()
	if !h.tls {
		err := h.ping(ctx)
		if err == nil || ctx.Err() != nil {
			return h.explain(ctx, err)
		}
		if addr, ok := askSeeds(ctx, h.brokers, probe, tlsAlert); ok {
			return fmt.Errorf("%w: the broker at %s requires TLS: it answered with a TLS alert (add --kafka-tls, and --kafka-tls-ca if its certificate is not signed by a public CA)", ErrAuth, addr)
		}
		return h.explain(ctx, err)
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.ping(pctx) }()
	var (
		err      error
		finished bool
	)
	select {
	case err = <-done:
		finished = true
		if err == nil {
			return nil
		}
	case <-time.After(plaintextAfter):
	case <-ctx.Done():
	}
	if addr, ok := askSeeds(ctx, h.brokers, probe, kafkaAnswer); ok {
		cancel()
		if !finished {
			<-done
		}
		return fmt.Errorf("%w: the broker at %s speaks plaintext, not TLS: drop --kafka-tls, or use its TLS listener", ErrAuth, addr)
	}
	if !finished {
		err = <-done
	}
	return h.explain(ctx, err)
}

// ping pings, again after a connection closed at once (up to 3 tries);
// a timeout is not tried again.
func (h *Health) ping(ctx context.Context) error {
	var (
		err     error
		closed  error // the first close right after a request: it says the most
		firstRd *kgo.ErrFirstReadEOF
	)
	for attempt := 0; attempt < 3; attempt++ {
		if err = h.c.load().Ping(ctx); err == nil {
			return nil
		}
		// A later try may find the client's broker already dead from the
		// close before and say only that.
		if closed == nil && errors.As(err, &firstRd) {
			closed = err
		}
		// A connection closed at once shows as EOF, or, when the close
		// came while the request waited, as a dead connection the client
		// would retry: both are tried again, so that the third close says
		// what the listener wants.
		var netErr net.Error
		timeout := errors.As(err, &netErr) && netErr.Timeout() || ctx.Err() != nil
		if timeout || !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !kgo.IsRetryableBrokerErr(err) {
			break
		}
	}
	if closed != nil {
		return closed
	}
	return err
}

// explain turns a ping's error into one that says what to change. Callers
// say that it is Kafka's.
func (h *Health) explain(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var certErr *tls.CertificateVerificationError
	var recordHeader tls.RecordHeaderError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var netErr net.Error
	var firstEOF *kgo.ErrFirstReadEOF
	var tokenErr *TokenError
	var awsErr *AWSCredentialsError
	var opErr *net.OpError
	eof := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	probe := h.probeTimeout()
	switch {
	case errors.As(err, &tokenErr):
		if tokenErr.Permanent() {
			return fmt.Errorf("%w: %v", ErrAuth, tokenErr)
		}
		return tokenErr // the endpoint may come back: retried
	case errors.As(err, &awsErr):
		return fmt.Errorf("%w: %v", ErrAuth, awsErr)
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Errorf("%w: the broker at %s does not offer SASL %s on this listener (check --kafka-sasl-mechanism and the listener's sasl.enabled.mechanisms): %v", ErrAuth, h.seeds(), h.mechanism, err)
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.IllegalSaslState):
		return fmt.Errorf("%w: SASL %s authentication failed for %s on broker %s (%s): %v", ErrAuth, h.mechanism, h.who, h.seeds(), h.check(), err)
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		// A TLS alert from the broker: with TLS 1.3 a client certificate
		// it refuses shows on the first read after the handshake.
		if !h.clientCert {
			return fmt.Errorf("%w: the broker at %s refused the TLS handshake (%v): it requires a client certificate (--kafka-tls-cert, --kafka-tls-key)", ErrAuth, h.seeds(), err)
		}
		return fmt.Errorf("%w: the broker at %s refused the TLS handshake (%v): it does not take the client certificate (--kafka-tls-cert): is it signed by a CA in the broker's ssl.truststore, and valid now?", ErrAuth, h.seeds(), err)
	case h.sasl && eof:
		// kfake, and some proxies, close instead of answering
		// SASL_AUTHENTICATION_FAILED; so does a broker going down.
		if _, up := seeds(ctx, h.brokers, probe, h.dial, answers); !up {
			return fmt.Errorf("the broker closed the connection, and does not answer now (restarting, or cut off?): %w", err)
		}
		return fmt.Errorf("%w: the broker closed the connection during SASL authentication (check the mechanism, --kafka-username and --kafka-password)", ErrAuth)
	case errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr):
		return fmt.Errorf("%w: the broker's TLS certificate is not trusted (check --kafka-tls-ca and the broker's name): %v", ErrAuth, err)
	case errors.As(err, &recordHeader):
		return fmt.Errorf("%w: the broker does not speak TLS (drop --kafka-tls, or use its TLS listener): %v", ErrAuth, err)
	case errors.As(err, &firstEOF):
		// Closed right after a request: a listener that wants SASL does
		// so, and so does a broker going down.
		if addr, ok := seeds(ctx, h.brokers, probe, h.dial, wantsSASL); ok {
			return fmt.Errorf("%w: the broker at %s requires SASL: it answers ApiVersions and closes the connection on the next request (set --kafka-sasl-mechanism, --kafka-username and --kafka-password)", ErrAuth, addr)
		}
		return fmt.Errorf("the broker closed the connection right after a request (restarting, or cut off?): %w", err)
	case h.tls && errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Errorf("no TLS handshake within the dial timeout: is this the broker's TLS listener? (%v)", err)
	case !h.tls && eof:
		return fmt.Errorf("the broker closed the connection: does it require TLS (--kafka-tls) or SASL (--kafka-sasl-mechanism)? (%v)", err)
	}
	return err
}

// seeds names the seed brokers.
func (h *Health) seeds() string { return strings.Join(h.brokers, ",") }

// check says what to check when SASL authentication fails.
func (h *Health) check() string {
	switch h.mechanism {
	case MechanismOAuthBearer:
		return "check that the broker trusts the token endpoint's tokens: its JWKS, expected audience and issuer"
	case MechanismAWSMSKIAM:
		return "check the IAM policy of the AWS credentials: kafka-cluster:Connect"
	}
	return "check --kafka-sasl-mechanism, --kafka-username and --kafka-password"
}

// probeTimeout bounds each of Ping's own connections to a seed broker.
func (h *Health) probeTimeout() time.Duration { return min(h.dialTimeout, 3*time.Second) }

// correlation is the id of the requests Ping's probes send.
const correlation = 0x70676f78

// kafkaAnswer tells an answer to askSeeds's request with its correlation
// id: a Kafka listener without TLS.
func kafkaAnswer(resp [8]byte) bool {
	return binary.BigEndian.Uint32(resp[4:]) == correlation && binary.BigEndian.Uint32(resp[:4]) >= 4
}

// tlsAlert tells a TLS alert record (content type 21, major version 3): a
// TLS listener that took the request for a broken handshake.
func tlsAlert(resp [8]byte) bool { return resp[0] == 21 && resp[1] == 3 }

// askSeeds sends each seed broker a plaintext ApiVersions request (v0) and
// reports the first whose answer's first 8 bytes match.
func askSeeds(ctx context.Context, brokers []string, timeout time.Duration, match func([8]byte) bool) (string, bool) {
	return seeds(ctx, brokers, timeout, (&net.Dialer{}).DialContext, func(conn net.Conn) bool {
		if _, err := conn.Write(apiVersions); err != nil {
			return false
		}
		// An alert record is 7 bytes: the rest may never come.
		var resp [8]byte
		n, err := io.ReadAtLeast(conn, resp[:], 3)
		if err == nil && n < len(resp) && !tlsAlert(resp) {
			_, err = io.ReadFull(conn, resp[n:])
		}
		return err == nil && match(resp)
	})
}

// seeds runs probe on a fresh connection to each seed broker, dialled with
// dial, and reports the first for which it holds. Each connection lives
// for timeout at most.
func seeds(ctx context.Context, brokers []string, timeout time.Duration, dial func(context.Context, string, string) (net.Conn, error), probe func(net.Conn) bool) (string, bool) {
	for _, addr := range brokers {
		dctx, cancel := context.WithTimeout(ctx, timeout)
		conn, err := dial(dctx, "tcp", addr)
		cancel()
		if err != nil {
			continue
		}
		_ = conn.SetDeadline(time.Now().Add(timeout))
		ok := probe(conn)
		conn.Close()
		if ok {
			return addr, true
		}
	}
	return "", false
}

var (
	// apiVersions is an ApiVersions request (v0): every Kafka listener
	// answers it, before any authentication.
	apiVersions = []byte{
		0, 0, 0, 18, // size of what follows
		0, 18, // api key: ApiVersions
		0, 0, // version 0
		0x70, 0x67, 0x6f, 0x78, // correlation id
		0, 8, 'p', 'g', 'o', 'u', 't', 'b', 'o', 'x', // client id
	}
	// metadata is a Metadata request (v0, every topic): a listener that
	// requires SASL closes the connection on it before authentication.
	metadata = []byte{
		0, 0, 0, 22, // size of what follows
		0, 3, // api key: Metadata
		0, 0, // version 0
		0x70, 0x67, 0x6f, 0x78, // correlation id
		0, 8, 'p', 'g', 'o', 'u', 't', 'b', 'o', 'x', // client id
		0, 0, 0, 0, // no topics named: all of them
	}
)

// answers reports whether the broker answers an ApiVersions request: it is
// up, and speaks Kafka on this connection.
func answers(conn net.Conn) bool {
	if _, err := conn.Write(apiVersions); err != nil {
		return false
	}
	var head [8]byte
	if _, err := io.ReadFull(conn, head[:]); err != nil || !kafkaAnswer(head) {
		return false
	}
	size := int64(binary.BigEndian.Uint32(head[:4])) - 4
	if size > 1<<20 {
		return false
	}
	_, err := io.CopyN(io.Discard, conn, size)
	return err == nil
}

// wantsSASL reports whether the broker answers ApiVersions and then closes
// the connection on a Metadata request: a listener that requires SASL,
// which allows only ApiVersions and the SASL handshake before it.
func wantsSASL(conn net.Conn) bool {
	if !answers(conn) {
		return false
	}
	if _, err := conn.Write(metadata); err != nil {
		return closedByPeer(err)
	}
	var b [1]byte
	n, err := conn.Read(b[:])
	return n == 0 && closedByPeer(err)
}

// closedByPeer tells an error of a connection the other side closed or
// reset from a timeout or any other failure.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
