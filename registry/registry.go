package registry

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// API is the registry API a converter speaks.
type API string

const (
	// Apicurio is Apicurio Registry's own API (v2), as Apicurio's
	// converters use it.
	Apicurio API = "apicurio"
	// Confluent is Confluent Schema Registry's API, which Apicurio
	// Registry also serves (/apis/ccompat/v6), as Confluent's
	// converters use it.
	Confluent API = "confluent"
)

// Strategy is a subject naming strategy: Apicurio's
// ArtifactReferenceResolverStrategy, Confluent's subject.name.strategy.
type Strategy string

const (
	// TopicStrategy: <topic>-key, <topic>-value (TopicIdStrategy,
	// TopicNameStrategy).
	TopicStrategy Strategy = "topic"
	// SimpleTopicStrategy: <topic> (Apicurio's SimpleTopicIdStrategy).
	SimpleTopicStrategy Strategy = "simple-topic"
	// RecordStrategy: the record's name, in the group of its namespace
	// under Apicurio (RecordIdStrategy), its full name under Confluent
	// (RecordNameStrategy).
	RecordStrategy Strategy = "record"
	// TopicRecordStrategy: <topic>-<record name> in the group of its
	// namespace under Apicurio (TopicRecordIdStrategy),
	// <topic>-<full name> under Confluent (TopicRecordNameStrategy).
	TopicRecordStrategy Strategy = "topic-record"
	// QualifiedRecordStrategy: the record's full name (Apicurio's
	// QualifiedRecordIdStrategy).
	QualifiedRecordStrategy Strategy = "qualified-record"
)

// Config configures one part's converter (a key's or a value's).
type Config struct {
	// URL is the API's base: Apicurio's ends in /apis/registry/v2, the
	// Confluent-compatible one is Confluent's root or Apicurio's
	// /apis/ccompat/v6. Required.
	URL string
	// API is Apicurio (default) or Confluent.
	API API
	// NoAutoRegister looks schemas up instead of registering them
	// (auto-register false): a schema the registry does not have is
	// refused (RefusedError).
	NoAutoRegister bool
	// FindLatest (Apicurio's find-latest), with NoAutoRegister, takes
	// the subject's latest version instead of the version of the
	// record's schema.
	FindLatest bool
	// Headers (Apicurio's headers.enabled, on by default there) puts
	// the id in headers apicurio.key|value.globalId (or contentId) and
	// the encoding in apicurio.key|value.encoding, before a bare datum;
	// otherwise the datum follows a magic byte 0 and the id.
	Headers bool
	// IDSize is the id's width after the magic byte: 8 (Apicurio's
	// default id handler) or 4 (as-confluent, and Confluent's).
	IDSize int
	// ContentID (Apicurio's use-id=contentId) writes the content id
	// instead of the global id.
	ContentID bool
	// Strategy names the subject (Apicurio's artifact) of a schema:
	// TopicStrategy (default), SimpleTopicStrategy, RecordStrategy,
	// TopicRecordStrategy or QualifiedRecordStrategy.
	Strategy Strategy
	// Group is the Apicurio artifact group of the topic strategies;
	// default "default".
	Group string
	// Username and Password authenticate with HTTP basic auth.
	Username, Password string
	// CAFile is a PEM file of the CAs that sign the registry's
	// certificate, for an https URL (default: the system's).
	CAFile string
	// Timeout bounds one request; default 10 s.
	Timeout time.Duration
	// JSON is Apicurio's JSON converter (ExtJsonConverter): the schema
	// is a Kafka Connect schema in JsonConverter's JSON, registered as a
	// KCONNECT artifact, and the datum JSON, framed as
	// {"schemaId":<global id>,"payload":<datum>} whatever Headers, IDSize
	// and ContentID say, which that converter does not read.
	JSON bool
}

// Defaults fills what is unset.
func (c *Config) Defaults() {
	if c.API == "" {
		c.API = Apicurio
	}
	if c.IDSize == 0 {
		c.IDSize = 8
		if c.API == Confluent {
			c.IDSize = 4
		}
	}
	if c.Group == "" {
		c.Group = "default"
	}
	if c.Strategy == "" {
		c.Strategy = TopicStrategy
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
}

// Validate names the first setting that cannot work.
func (c Config) Validate() error {
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		return errors.New("registry: no URL")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("registry: URL %q: want http(s)://host[:port]/path", redact(c.URL))
	case u.User != nil:
		return errors.New("registry: URL: give the user and password as basic auth settings, not in the URL")
	case c.API != Apicurio && c.API != Confluent:
		return fmt.Errorf("registry: API %q: want %q or %q", c.API, Apicurio, Confluent)
	case c.IDSize != 4 && c.IDSize != 8:
		return fmt.Errorf("registry: id size %d: want 4 or 8", c.IDSize)
	case c.API == Confluent && (c.Headers || c.IDSize != 4 || c.ContentID):
		return errors.New("registry: Confluent's framing is a magic byte and a 4-byte schema id")
	case c.API == Confluent && (c.Strategy == SimpleTopicStrategy || c.Strategy == QualifiedRecordStrategy):
		return fmt.Errorf("registry: strategy %q is Apicurio's", c.Strategy)
	case c.JSON && c.API != Apicurio:
		return errors.New("registry: Apicurio's JSON converter speaks Apicurio's API")
	case c.JSON && c.Strategy != TopicStrategy && c.Strategy != SimpleTopicStrategy:
		return fmt.Errorf("registry: strategy %q names subjects after an Avro record: Apicurio's JSON converter registers Kafka Connect schemas (use topic or simple-topic)", c.Strategy)
	}
	switch c.Strategy {
	case TopicStrategy, SimpleTopicStrategy, RecordStrategy, TopicRecordStrategy, QualifiedRecordStrategy:
	default:
		return fmt.Errorf("registry: strategy %q: want topic, simple-topic, record, topic-record or qualified-record", c.Strategy)
	}
	return nil
}

// Serde frames one part's datums with the ids of their schemas.
type Serde struct {
	cfg    Config
	isKey  bool
	client *http.Client
	mu     sync.Mutex
	ids    map[string]ids // by schema content, as Apicurio's resolver caches
}

type ids struct{ global, content int64 }

// New returns the serde of a key's (isKey) or a value's converter.
func New(cfg Config, isKey bool) (*Serde, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("registry: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("registry: CA file %s holds no PEM certificate", cfg.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &Serde{cfg: cfg, isKey: isKey, client: &http.Client{Transport: tr, Timeout: cfg.Timeout}, ids: map[string]ids{}}, nil
}

// Header is a record header the framing adds.
type Header struct {
	Key   string
	Value []byte
}

// Frame returns datum framed for topic: the registry's id of schema
// (registered, or looked up, once per content) before it or in headers.
func (s *Serde) Frame(ctx context.Context, topic, schema string, datum []byte) ([]byte, []Header, error) {
	id, err := s.id(ctx, topic, schema)
	if err != nil {
		return nil, nil, err
	}
	if s.cfg.JSON {
		// PrettyFormatStrategy: the global id, the datum as it is.
		out := make([]byte, 0, len(datum)+40)
		out = append(out, `{"schemaId":`...)
		out = strconv.AppendInt(out, id.global, 10)
		out = append(out, `,"payload":`...)
		out = append(out, datum...)
		return append(out, '}'), nil, nil
	}
	n := id.global
	if s.cfg.ContentID {
		n = id.content
	}
	if s.cfg.Headers {
		part := "value"
		if s.isKey {
			part = "key"
		}
		which := "globalId"
		if s.cfg.ContentID {
			which = "contentId"
		}
		return datum, []Header{
			{Key: "apicurio." + part + "." + which, Value: binary.BigEndian.AppendUint64(nil, uint64(n))},
			{Key: "apicurio." + part + ".encoding", Value: []byte("BINARY")},
		}, nil
	}
	out := make([]byte, 0, 1+s.cfg.IDSize+len(datum))
	out = append(out, 0)
	if s.cfg.IDSize == 4 {
		out = binary.BigEndian.AppendUint32(out, uint32(n))
	} else {
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	return append(out, datum...), nil, nil
}

// Subject is the group (Apicurio's; "" for the configured one) and the
// subject (artifact id) of schema in topic's part, by the strategy; a
// record strategy refuses a schema that is not an Avro record, as
// Apicurio's and Confluent's do.
func (s *Serde) Subject(topic, schema string) (group, subject string, err error) {
	switch s.cfg.Strategy {
	case SimpleTopicStrategy:
		return "", topic, nil
	case RecordStrategy, TopicRecordStrategy, QualifiedRecordStrategy:
	default:
		if s.isKey {
			return "", topic + "-key", nil
		}
		return "", topic + "-value", nil
	}
	var rec struct {
		Type, Name, Namespace string
	}
	if json.Unmarshal([]byte(schema), &rec) != nil || rec.Type != "record" {
		return "", "", &RefusedError{Subject: topic, Answer: "the " + string(s.cfg.Strategy) + " strategy names subjects after an Avro record, and this schema is none: " + truncate([]byte(schema))}
	}
	full := rec.Name
	if rec.Namespace != "" {
		full = rec.Namespace + "." + rec.Name
	}
	switch {
	case s.cfg.Strategy == QualifiedRecordStrategy:
		return "", full, nil
	case s.cfg.API == Confluent && s.cfg.Strategy == RecordStrategy:
		return "", full, nil
	case s.cfg.API == Confluent:
		return "", topic + "-" + full, nil
	}
	group = rec.Namespace
	if group == "" {
		group = "default"
	}
	if s.cfg.Strategy == TopicRecordStrategy {
		return group, topic + "-" + rec.Name, nil
	}
	return group, rec.Name, nil
}

func (s *Serde) id(ctx context.Context, topic, schema string) (ids, error) {
	s.mu.Lock()
	id, ok := s.ids[schema]
	s.mu.Unlock()
	if ok {
		return id, nil
	}
	group, subject, err := s.Subject(topic, schema)
	if err != nil {
		return ids{}, err
	}
	if s.cfg.API == Confluent {
		id, err = s.confluent(ctx, subject, schema)
	} else {
		id, err = s.apicurio(ctx, group, subject, schema)
	}
	if err != nil {
		return ids{}, err
	}
	s.mu.Lock()
	s.ids[schema] = id
	s.mu.Unlock()
	return id, nil
}

// apicurio registers schema under subject (ifExists=RETURN_OR_UPDATE, as
// the converter's auto-register does), or looks it up: the subject's
// latest version (FindLatest) or the version of this content.
func (s *Serde) apicurio(ctx context.Context, group, subject, schema string) (ids, error) {
	if group == "" {
		group = s.cfg.Group
	}
	base := strings.TrimRight(s.cfg.URL, "/") + "/groups/" + url.PathEscape(group) + "/artifacts"
	var (
		method = http.MethodPost
		path   string
		body   io.Reader
		hdr    = map[string]string{}
	)
	switch {
	case !s.cfg.NoAutoRegister:
		path = base + "?ifExists=RETURN_OR_UPDATE&canonical=false"
		body = strings.NewReader(schema)
		hdr["X-Registry-ArtifactId"] = subject
		hdr["X-Registry-ArtifactType"] = "AVRO"
		if s.cfg.JSON {
			hdr["X-Registry-ArtifactType"] = "KCONNECT"
		}
	case s.cfg.FindLatest:
		method, path = http.MethodGet, base+"/"+url.PathEscape(subject)+"/meta"
	default:
		path = base + "/" + url.PathEscape(subject) + "/meta?canonical=true"
		body = strings.NewReader(schema)
	}
	var meta struct {
		GlobalID  int64 `json:"globalId"`
		ContentID int64 `json:"contentId"`
	}
	if err := s.do(ctx, method, path, body, hdr, subject, &meta); err != nil {
		return ids{}, err
	}
	return ids{global: meta.GlobalID, content: meta.ContentID}, nil
}

// confluent registers schema under subject (POST /subjects/S/versions),
// or looks it up (POST /subjects/S).
func (s *Serde) confluent(ctx context.Context, subject, schema string) (ids, error) {
	path := strings.TrimRight(s.cfg.URL, "/") + "/subjects/" + url.PathEscape(subject)
	if !s.cfg.NoAutoRegister {
		path += "/versions"
	}
	body, err := json.Marshal(map[string]string{"schema": schema})
	if err != nil {
		return ids{}, err
	}
	var resp struct {
		ID int64 `json:"id"`
	}
	if err := s.do(ctx, http.MethodPost, path, bytes.NewReader(body), map[string]string{"Content-Type": "application/vnd.schemaregistry.v1+json"}, subject, &resp); err != nil {
		return ids{}, err
	}
	return ids{global: resp.ID, content: resp.ID}, nil
}

// do makes one request: a 4xx is the registry's refusal of the schema, a
// 5xx or no answer is unreachable.
func (s *Serde) do(ctx context.Context, method, path string, body io.Reader, hdr map[string]string, subject string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if s.cfg.Username != "" {
		req.SetBasicAuth(s.cfg.Username, s.cfg.Password)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return &UnreachableError{URL: redact(s.cfg.URL), Err: stripURL(err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return &UnreachableError{URL: redact(s.cfg.URL), Err: err}
	}
	switch {
	case resp.StatusCode >= 500, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusRequestTimeout:
		return &UnreachableError{URL: redact(s.cfg.URL), Err: fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(data))}
	case resp.StatusCode == http.StatusUnauthorized, resp.StatusCode == http.StatusForbidden:
		// The credentials, not the schema: the relay waits until they
		// are fixed.
		return &UnreachableError{URL: redact(s.cfg.URL), Err: errors.New(resp.Status)}
	case resp.StatusCode > 299:
		return &RefusedError{Subject: subject, Status: resp.StatusCode, Answer: answer(data)}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &UnreachableError{URL: redact(s.cfg.URL), Err: fmt.Errorf("answer %q: %w", truncate(data), err)}
	}
	return nil
}

// answer is the message of a registry's error body (both APIs name it
// "message"), or the body.
func answer(data []byte) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(data, &e) == nil && e.Message != "" {
		return e.Message
	}
	return truncate(data)
}

func truncate(b []byte) string {
	s := string(bytes.TrimSpace(b))
	if len(s) > 500 {
		s = s[:500] + "..."
	}
	return s
}

// redact is a URL without its user information.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	return u.String()
}

// stripURL is a client error without the URL it names (which the
// UnreachableError names, redacted).
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
