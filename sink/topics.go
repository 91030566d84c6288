package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicCreation says how the topics records go to are created when they
// do not exist, as Kafka Connect's topic.creation.* options say for a
// source connector: the first group whose Include matches a topic and
// whose Exclude does not gives its settings, else Default. A topic that
// exists is never changed.
type TopicCreation struct {
	Groups  []TopicGroup `json:"groups,omitempty"`
	Default TopicGroup   `json:"default"`
}

// TopicGroup is one group's settings. Partitions and ReplicationFactor -1
// leave the number to the broker's defaults.
type TopicGroup struct {
	Name string `json:"name,omitempty"`
	// Include and Exclude are regular expressions matched against the
	// whole topic name; the default group has none (it takes every topic
	// no other group took).
	Include           []string          `json:"include,omitempty"`
	Exclude           []string          `json:"exclude,omitempty"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	Configs           map[string]string `json:"configs,omitempty"`

	include, exclude *regexp.Regexp
}

// ParseTopicCreation reads the JSON form of a TopicCreation (the value of
// --topic-creation) and checks it.
func ParseTopicCreation(s string) (*TopicCreation, error) {
	var tc TopicCreation
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tc); err != nil {
		return nil, fmt.Errorf("topic creation: %w", err)
	}
	if err := tc.compile(); err != nil {
		return nil, err
	}
	return &tc, nil
}

// String is the JSON form ParseTopicCreation reads.
func (tc *TopicCreation) String() string {
	b, _ := json.Marshal(tc) // strings, numbers and maps of strings
	return string(b)
}

// compile checks the numbers and compiles the patterns. A list of
// patterns matches a name that one of them matches whole.
func (tc *TopicCreation) compile() error {
	check := func(g *TopicGroup) error {
		if g.Partitions != -1 && g.Partitions < 1 {
			return fmt.Errorf("topic creation group %s: partitions %d: want a positive number, or -1 for the broker's default", g.Name, g.Partitions)
		}
		if g.ReplicationFactor != -1 && g.ReplicationFactor < 1 {
			return fmt.Errorf("topic creation group %s: replication factor %d: want a positive number, or -1 for the broker's default", g.Name, g.ReplicationFactor)
		}
		var err error
		if g.include, err = anyOf(g.Include); err != nil {
			return fmt.Errorf("topic creation group %s: include: %w", g.Name, err)
		}
		if g.exclude, err = anyOf(g.Exclude); err != nil {
			return fmt.Errorf("topic creation group %s: exclude: %w", g.Name, err)
		}
		return nil
	}
	if tc.Default.Name == "" {
		tc.Default.Name = "default"
	}
	if err := check(&tc.Default); err != nil {
		return err
	}
	for i := range tc.Groups {
		if err := check(&tc.Groups[i]); err != nil {
			return err
		}
	}
	return nil
}

// anyOf is one expression matching a whole name that one of patterns
// matches; nil for none, which matches nothing (Kafka Connect's empty
// pattern matches only an empty name, and a topic has none).
func anyOf(patterns []string) (*regexp.Regexp, error) {
	if len(patterns) == 0 {
		return nil, nil
	}
	for _, p := range patterns {
		if _, err := regexp.Compile(p); err != nil {
			return nil, err
		}
	}
	return regexp.Compile("^(?:" + strings.Join(patterns, "|") + ")$")
}

// Group is the group whose settings create topic.
func (tc *TopicCreation) Group(topic string) *TopicGroup {
	for i := range tc.Groups {
		g := &tc.Groups[i]
		if g.include != nil && g.include.MatchString(topic) && (g.exclude == nil || !g.exclude.MatchString(topic)) {
			return g
		}
	}
	return &tc.Default
}

// TopicCreationError is a topic that could not be created: the record
// waits (it is not dead-lettered) until it can be.
type TopicCreationError struct {
	Topic, Group string
	Err          error
}

func (e *TopicCreationError) Error() string {
	return fmt.Sprintf("kafka: topic %s does not exist and creating it (topic creation group %s) failed: %v; create it, or allow this client to create topics", e.Topic, e.Group, e.Err)
}

func (e *TopicCreationError) Unwrap() error { return e.Err }

// topicCreationWait bounds one look-up or creation of a topic.
const topicCreationWait = 30 * time.Second

// creator creates the topics records go to, once each: the first record
// to a topic waits until it exists.
type creator struct {
	c     *client
	tc    *TopicCreation
	known atomic.Pointer[map[string]bool] // topics seen to exist; read on every record
	mu    sync.Mutex                      // one look-up at a time; serializes writers
}

func newCreator(c *client, tc *TopicCreation) *creator {
	cr := &creator{c: c, tc: tc}
	cr.known.Store(&map[string]bool{})
	return cr
}

// ensure returns once topic exists: it exists already (left as it is),
// or it was created with its group's settings, or another client created
// it meanwhile.
func (cr *creator) ensure(ctx context.Context, topic string) error {
	if cr == nil || (*cr.known.Load())[topic] {
		return nil
	}
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if (*cr.known.Load())[topic] {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, topicCreationWait)
	defer cancel()
	g := cr.tc.Group(topic)
	if err := cr.create(ctx, topic, g); err != nil {
		return &TopicCreationError{Topic: topic, Group: g.Name, Err: err}
	}
	next := maps.Clone(*cr.known.Load())
	next[topic] = true
	cr.known.Store(&next)
	return nil
}

func (cr *creator) create(ctx context.Context, topic string, g *TopicGroup) error {
	cl := cr.c.load()
	// Asked first, as Kafka Connect asks: a client allowed to describe
	// but not to create topics still writes to those that exist. The
	// request is made here, not by kadm, whose metadata requests take the
	// client's auto-creation and would have the broker create the topic
	// with its defaults.
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	meta, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range meta.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		switch err := kerr.ErrorForCode(t.ErrorCode); {
		case err == nil:
			return nil
		case !errors.Is(err, kerr.UnknownTopicOrPartition):
			return err
		}
	}
	adm := kadm.NewClient(cl)
	configs := make(map[string]*string, len(g.Configs))
	for _, k := range slices.Sorted(maps.Keys(g.Configs)) {
		v := g.Configs[k]
		configs[k] = &v
	}
	resp, err := adm.CreateTopic(ctx, g.Partitions, g.ReplicationFactor, configs, topic)
	if err == nil {
		err = resp.Err
		if err != nil && resp.ErrMessage != "" {
			err = fmt.Errorf("%w: %s", err, resp.ErrMessage)
		}
	}
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		return nil
	case err != nil:
		return err
	}
	cr.c.log.Info("kafka: created topic", "topic", topic, "group", g.Name, "partitions", resp.NumPartitions, "replication_factor", resp.ReplicationFactor)
	return nil
}
