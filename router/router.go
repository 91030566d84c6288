// Package router decides the Kafka topic of a record. The key is the
// aggregate id and the headers come from the envelope ([schema.Encoder]);
// partitioning is left to the producer's key hashing so that every event of
// an aggregate lands on one partition.
package router

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pgoutbox/pgoutbox/schema"
)

// DefaultTopic is the topic template used when Config.Topic is empty; it
// matches Debezium's outbox event router.
const DefaultTopic = "outbox.event.{aggregatetype}"

// maxTopicLen is Kafka's limit on a topic name's length.
const maxTopicLen = 249

// Config configures a [Router].
type Config struct {
	// Topic is the topic template: literal text of legal topic characters
	// ([a-zA-Z0-9._-]) and the placeholders {aggregatetype}, {aggregateid}
	// and {type}, replaced by the record's fields with their case kept.
	// Empty means DefaultTopic. {schema} and {table} are the source
	// table's (Debezium's change-event topics are
	// "<topic.prefix>.{schema}.{table}").
	Topic string

	// RouteReplacement, when set, routes as Debezium's Outbox Event Router
	// does instead of Topic: the aggregate type (route.by.field) is
	// matched in full against RouteRegex (route.topic.regex, default
	// DefaultRouteRegex) and, when it matches, replaced by
	// RouteReplacement (route.topic.replacement, Java syntax: $1, ${name},
	// \$ for a literal $); when it does not match, the aggregate type
	// itself is the topic (Kafka's RegexRouter).
	RouteReplacement string
	RouteRegex       string
}

// DefaultRouteRegex is route.topic.regex's default.
const DefaultRouteRegex = "(?<routedByValue>.*)"

// Validate reports whether the template parses: known placeholders, balanced
// braces, legal literal characters, and a rendering that can fit Kafka's 249
// characters. A template without placeholders must itself be a legal topic.
func (c Config) Validate() error {
	if c.RouteReplacement != "" {
		_, err := c.regexRoute()
		return err
	}
	_, err := parseTemplate(c.topic())
	return err
}

// regexRoute compiles RouteRegex and RouteReplacement.
func (c Config) regexRoute() (*Rename, error) {
	src := c.RouteRegex
	if src == "" {
		src = DefaultRouteRegex
	}
	rn, err := NewRename(src, c.RouteReplacement)
	if err != nil {
		return nil, fmt.Errorf("router: route.topic.%w", err)
	}
	return rn, nil
}

// Rename is Kafka Connect's RegexRouter: a topic that a Java regular
// expression matches in full is replaced (Matcher.replaceFirst) by a
// replacement in Java's syntax ($1, ${name}, \$ for a literal $); another
// topic is left as it is. The expression is RE2's: no lookaround or
// backreferences.
type Rename struct {
	full *regexp.Regexp // anchored, as Matcher.matches
	re   *regexp.Regexp // unanchored, as replaceFirst's find
	tmpl string
}

// NewRename compiles regex and replacement. Its error begins with the
// part that is wrong: "regex" or "replacement".
func NewRename(regex, replacement string) (*Rename, error) {
	full, err := regexp.Compile(`^(?:` + regex + `)$`)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", regex, err)
	}
	re := regexp.MustCompile(regex) // compiles, as its anchored form did
	tmpl, err := javaReplacement(replacement, re)
	if err != nil {
		return nil, fmt.Errorf("replacement %q: %w", replacement, err)
	}
	return &Rename{full: full, re: re, tmpl: tmpl}, nil
}

// Topic returns the topic renamed; ok is false when the regex does not
// match it in full, and topic is returned as it is.
func (r *Rename) Topic(topic string) (string, bool) {
	if !r.full.MatchString(topic) {
		return topic, false
	}
	// replaceFirst replaces the first match find() finds, which need not
	// be the whole topic (a|ab on "ab" replaces "a").
	m := r.re.FindStringSubmatchIndex(topic)
	out := make([]byte, 0, len(topic)+len(r.tmpl))
	out = append(out, topic[:m[0]]...)
	out = r.re.ExpandString(out, r.tmpl, topic, m)
	out = append(out, topic[m[1]:]...)
	return string(out), true
}

// javaReplacement converts a java.util.regex replacement ($n, ${name},
// backslash escapes) into a regexp.Expand template.
func javaReplacement(r string, re *regexp.Regexp) (string, error) {
	var b strings.Builder
	for i := 0; i < len(r); i++ {
		switch c := r[i]; c {
		case '\\':
			i++
			if i == len(r) {
				return "", errors.New("trailing backslash")
			}
			if r[i] == '$' {
				b.WriteString("$$")
			} else {
				b.WriteByte(r[i])
			}
		case '$':
			i++
			if i == len(r) {
				return "", errors.New("trailing $")
			}
			if r[i] == '{' {
				end := strings.IndexByte(r[i:], '}')
				if end < 0 {
					return "", errors.New("unclosed ${")
				}
				name := r[i+1 : i+end]
				if re.SubexpIndex(name) < 0 {
					return "", fmt.Errorf("no group named %q in the regex", name)
				}
				b.WriteString("${" + name + "}")
				i += end
				continue
			}
			if r[i] < '0' || r[i] > '9' {
				return "", errors.New("illegal group reference")
			}
			// Java takes as many digits as form a valid group number.
			n := int(r[i] - '0')
			for i+1 < len(r) && r[i+1] >= '0' && r[i+1] <= '9' && n*10+int(r[i+1]-'0') <= re.NumSubexp() {
				i++
				n = n*10 + int(r[i]-'0')
			}
			if n > re.NumSubexp() {
				return "", fmt.Errorf("no group %d in the regex", n)
			}
			b.WriteString("${" + strconv.Itoa(n) + "}")
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func (c Config) topic() string {
	if c.Topic == "" {
		return DefaultTopic
	}
	return c.Topic
}

// field is a placeholder's record field.
type field uint8

const (
	fieldAggregateType field = iota
	fieldAggregateID
	fieldType
	fieldSchema
	fieldTable
)

var placeholders = [...]struct {
	name   string // as written in a template, without braces
	column string // schema.RowError.Column when its value breaks the topic
}{
	fieldAggregateType: {"aggregatetype", "aggregatetype"},
	fieldAggregateID:   {"aggregateid", "aggregateid"},
	fieldType:          {"type", "type"},
	fieldSchema:        {"schema", "schema"},
	fieldTable:         {"table", "table"},
}

func (f field) value(r *schema.Record) string {
	switch f {
	case fieldAggregateType:
		return r.AggregateType
	case fieldAggregateID:
		return r.AggregateID
	case fieldSchema:
		return r.Origin.Schema
	case fieldTable:
		return r.Origin.Table
	default:
		return r.Type
	}
}

// segment is a literal, or a placeholder when isField is set.
type segment struct {
	lit     string
	field   field
	isField bool
}

type template struct {
	segs    []segment
	litLen  int  // total length of the literals
	onlyOne bool // every placeholder names the same field
	field   field
}

func parseTemplate(s string) (*template, error) {
	t := &template{}
	fields := 0
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '{':
			end := strings.IndexByte(s[i+1:], '}')
			if end < 0 {
				return nil, fmt.Errorf("router: topic template %q: unbalanced '{' at offset %d", s, i)
			}
			name := s[i+1 : i+1+end]
			if j := strings.IndexByte(name, '{'); j >= 0 {
				return nil, fmt.Errorf("router: topic template %q: unbalanced '{' at offset %d", s, i)
			}
			f, ok := lookupPlaceholder(name)
			if !ok {
				return nil, fmt.Errorf("router: topic template %q: unknown placeholder {%s} (want {aggregatetype}, {aggregateid}, {type}, {schema} or {table})", s, name)
			}
			if fields > 0 && f != t.field {
				t.onlyOne = false
			} else if fields == 0 {
				t.onlyOne, t.field = true, f
			}
			fields++
			t.segs = append(t.segs, segment{field: f, isField: true})
			i += end + 2
		case c == '}':
			return nil, fmt.Errorf("router: topic template %q: unbalanced '}' at offset %d", s, i)
		default:
			j := i
			for j < len(s) && s[j] != '{' && s[j] != '}' {
				if !legalTopicByte(s[j]) {
					return nil, fmt.Errorf("router: topic template %q: illegal topic character %q at offset %d (want [a-zA-Z0-9._-])", s, s[j], j)
				}
				j++
			}
			t.segs = append(t.segs, segment{lit: s[i:j]})
			t.litLen += j - i
			i = j
		}
	}
	// Each placeholder renders at least one character.
	if t.litLen+fields > maxTopicLen {
		return nil, fmt.Errorf("router: topic template %q: renders longer than %d characters", s, maxTopicLen)
	}
	if fields == 0 {
		if reason := topicReason(s); reason != "" {
			return nil, fmt.Errorf("router: topic %q: %s", s, reason)
		}
	}
	return t, nil
}

func lookupPlaceholder(name string) (field, bool) {
	for f, p := range placeholders {
		if p.name == name {
			return field(f), true
		}
	}
	return 0, false
}

func legalTopicByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// topicReason returns why s is not a legal Kafka topic name, or "".
func topicReason(s string) string {
	switch {
	case s == "":
		return "empty topic name"
	case s == "." || s == "..":
		return "topic name cannot be \".\" or \"..\""
	case len(s) > maxTopicLen:
		return fmt.Sprintf("topic name is %d characters, longer than %d", len(s), maxTopicLen)
	}
	for i := 0; i < len(s); i++ {
		if !legalTopicByte(s[i]) {
			return fmt.Sprintf("illegal topic character %q (want [a-zA-Z0-9._-])", s[i])
		}
	}
	return ""
}

// maxCached bounds the topic cache: past it, topics are rendered every time.
const maxCached = 1024

// Router renders topic names. It is safe for concurrent use.
type Router struct {
	rename   *Rename // RouteReplacement routing
	tmpl     *template
	constant string // the topic when the template has no placeholder

	// Templates whose placeholders all name one field (the default does)
	// cache rendered topics by that field's value: copy-on-write, so a hit
	// is a lock-free map read and allocates nothing.
	cache   atomic.Pointer[map[string]string]
	cacheMu sync.Mutex
}

// New returns a router for cfg.
func New(cfg Config) (*Router, error) {
	if cfg.RouteReplacement != "" {
		rn, err := cfg.regexRoute()
		if err != nil {
			return nil, err
		}
		r := &Router{rename: rn}
		empty := map[string]string{}
		r.cache.Store(&empty)
		return r, nil
	}
	t, err := parseTemplate(cfg.topic())
	if err != nil {
		return nil, err
	}
	r := &Router{tmpl: t}
	if len(t.segs) == 0 || (len(t.segs) == 1 && !t.segs[0].isField) {
		r.constant = cfg.topic()
	}
	empty := map[string]string{}
	r.cache.Store(&empty)
	return r, nil
}

// Topic returns the topic for rec. A rendered name that is not a legal Kafka
// topic (1 to 249 characters of [a-zA-Z0-9._-], not "." or "..") gives a
// *schema.RowError whose Column is the placeholder's field (aggregatetype,
// aggregateid or type). A template without placeholders returns its
// constant without allocating, as does a cached topic.
func (r *Router) Topic(rec *schema.Record) (string, error) {
	if r.constant != "" {
		return r.constant, nil
	}
	if r.rename != nil {
		v := rec.AggregateType
		if topic, ok := (*r.cache.Load())[v]; ok {
			return topic, nil
		}
		topic, _ := r.rename.Topic(v)
		if reason := topicReason(topic); reason != "" {
			return "", rowError(fieldAggregateType, fmt.Sprintf("routed topic %q: %s", topic, reason))
		}
		r.remember(v, topic)
		return topic, nil
	}
	t := r.tmpl
	if !t.onlyOne {
		return r.render(rec)
	}
	v := t.field.value(rec)
	if topic, ok := (*r.cache.Load())[v]; ok {
		return topic, nil
	}
	topic, err := r.render(rec)
	if err == nil {
		r.remember(v, topic)
	}
	return topic, err
}

// Routed is the topic rec is routed to before Kafka Connect's transforms
// after the router run: under RouteReplacement, whether or not Kafka
// would take it, as a transform may still rename it (CheckTopic checks
// the topic produced to).
func (r *Router) Routed(rec *schema.Record) (string, error) {
	if r.rename != nil {
		topic, _ := r.rename.Topic(rec.AggregateType)
		return topic, nil
	}
	return r.Topic(rec)
}

// CheckTopic returns an error when topic is not a legal Kafka topic name:
// 1 to 249 characters of [a-zA-Z0-9._-], not "." or "..".
func CheckTopic(topic string) error {
	if reason := topicReason(topic); reason != "" {
		return fmt.Errorf("topic %q: %s", topic, reason)
	}
	return nil
}

func (r *Router) remember(v, topic string) {
	r.cacheMu.Lock()
	defer r.cacheMu.Unlock()
	old := *r.cache.Load()
	if _, ok := old[v]; ok || len(old) >= maxCached {
		return
	}
	m := make(map[string]string, len(old)+1)
	for k, t := range old {
		m[k] = t
	}
	m[strings.Clone(v)] = topic // v may share memory with a larger record buffer
	r.cache.Store(&m)
}

func (r *Router) render(rec *schema.Record) (string, error) {
	t := r.tmpl
	n := t.litLen
	var longest field
	longestLen := -1
	for _, s := range t.segs {
		if !s.isField {
			continue
		}
		v := s.field.value(rec)
		if v == "" {
			return "", rowError(s.field, "empty value renders an empty topic segment")
		}
		for i := 0; i < len(v); i++ {
			if !legalTopicByte(v[i]) {
				return "", rowError(s.field, fmt.Sprintf("illegal topic character %q in %q (want [a-zA-Z0-9._-])", v[i], v))
			}
		}
		n += len(v)
		if len(v) > longestLen {
			longest, longestLen = s.field, len(v)
		}
	}
	if n > maxTopicLen {
		return "", rowError(longest, fmt.Sprintf("topic name would be %d characters, longer than %d", n, maxTopicLen))
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range t.segs {
		if s.isField {
			b.WriteString(s.field.value(rec))
		} else {
			b.WriteString(s.lit)
		}
	}
	topic := b.String()
	if topic == "." || topic == ".." {
		return "", rowError(longest, "topic name cannot be \".\" or \"..\"")
	}
	return topic, nil
}

func rowError(f field, reason string) error {
	return &schema.RowError{Column: placeholders[f].column, Reason: reason}
}
