package compat

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// topicShape is what a topic was created with: its partitions, its
// replication factor and its configs set on the topic itself.
type topicShape struct {
	partitions, replicas int
	configs              map[string]string
}

// topicShapes describes the topics whose names start with prefix (but
// exclude), by their names after it.
func topicShapes(ctx context.Context, brokers []string, prefix, exclude string) (map[string]topicShape, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]topicShape{}
	var names []string
	for name, d := range topics {
		if !strings.HasPrefix(name, prefix) || name == exclude {
			continue
		}
		s := topicShape{partitions: len(d.Partitions), configs: map[string]string{}}
		for _, p := range d.Partitions {
			s.replicas = len(p.Replicas)
		}
		out[strings.TrimPrefix(name, prefix)] = s
		names = append(names, name)
	}
	if len(names) == 0 {
		return out, nil
	}
	configs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return nil, err
	}
	for _, rc := range configs {
		if rc.Err != nil {
			return nil, fmt.Errorf("describing topic %s: %w", rc.Name, rc.Err)
		}
		s := out[strings.TrimPrefix(rc.Name, prefix)]
		for _, c := range rc.Configs {
			if c.Source == 1 && c.Value != nil { // DYNAMIC_TOPIC_CONFIG: set on the topic
				s.configs[c.Key] = *c.Value
			}
		}
	}
	return out, nil
}

// compareTopics compares the topics a pgoutbox side created with those
// Debezium's Connect worker created, for a case that names topic
// configs: the same topics, each with the same partitions, replication
// factor and named configs.
func (r *run) compareTopics(ctx context.Context, p *Side) error {
	if len(r.c.Topics) == 0 {
		return nil
	}
	d := r.result.Debezium
	want, err := topicShapes(ctx, r.env.Brokers, d.Prefix, d.Prefix+r.fenceTopic())
	if err != nil {
		return err
	}
	got, err := topicShapes(ctx, r.env.Brokers, p.Prefix, "")
	if err != nil {
		return err
	}
	for _, name := range unionNames(want, got) {
		w, inW := want[name]
		g, inG := got[name]
		switch {
		case !inW:
			r.problem("%s: topic %s, which Debezium did not write", p.Name, name)
			continue
		case !inG:
			r.problem("%s: no topic %s", p.Name, name)
			continue
		}
		if w.partitions != g.partitions || w.replicas != g.replicas {
			r.problem("%s: topic %s: %d partitions, replication factor %d; Debezium's: %d, %d", p.Name, name, g.partitions, g.replicas, w.partitions, w.replicas)
		}
		for _, k := range r.c.Topics {
			if w.configs[k] != g.configs[k] {
				r.problem("%s: topic %s: %s=%q; Debezium's: %q", p.Name, name, k, g.configs[k], w.configs[k])
			}
		}
		p.Topics = append(p.Topics, fmt.Sprintf("%s: %d partitions, replication factor %d, %v", name, g.partitions, g.replicas, g.configs))
	}
	return nil
}

func unionNames(a, b map[string]topicShape) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
