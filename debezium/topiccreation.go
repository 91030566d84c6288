package debezium

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pgoutbox/pgoutbox/sink"
)

// topicCreationPrefix starts Kafka Connect's topic creation options.
const topicCreationPrefix = "topic.creation."

// readTopicCreation is the topic.creation.* row's read: the options are
// read together (topicCreation); under Debezium Server they are ignored,
// as its Kafka sink creates no topics.
func readTopicCreation(r *reading, k, _ string) {
	if r.server {
		r.ignore(k + " (Debezium Server's Kafka sink creates no topics: they are left to the broker's auto-creation)")
	}
}

// topicCreation reads Kafka Connect's topic.creation.* options into
// --topic-creation, as a Connect worker with topic.creation.enable (its
// default) reads them for a source connector: any option under the
// prefix turns creation on, and then the default group's partitions and
// replication factor are required; a group listed in
// topic.creation.groups takes what it does not set from the default
// group, but not the default group's topic configs; the default group's
// include and exclude are dropped.
func (c config) topicCreation(r *reading) {
	if r.server {
		return
	}
	on := false
	for k := range c.connector {
		if strings.HasPrefix(k, topicCreationPrefix) {
			on = true
			break
		}
	}
	if !on {
		return
	}
	// Connect's ConfigDef numbers: trimmed, then parsed.
	number := func(key string, bits int) (int64, bool) {
		v, ok := c.connector[key]
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, bits)
		if err != nil {
			typ := "INT"
			if bits == 16 {
				typ = "SHORT"
			}
			r.refuse(r.src(key), fmt.Sprintf("%q: not a number of type %s, which Kafka Connect refuses", v, typ))
			return 0, false
		}
		return n, true
	}
	settings := func(group string, def *sink.TopicGroup) (sink.TopicGroup, bool) {
		prefix := topicCreationPrefix + group + "."
		g := sink.TopicGroup{Name: group}
		ok := true
		pk, rk := prefix+"partitions", prefix+"replication.factor"
		if n, set := number(pk, 32); set {
			if n != -1 && n < 1 {
				r.refuse(r.src(pk), fmt.Sprintf("%d: Kafka Connect refuses it (the number of partitions must be positive, or -1 for the broker's default)", n))
				ok = false
			}
			g.Partitions = int32(n)
		} else if _, given := c.connector[pk]; given {
			ok = false
		} else if def == nil {
			r.refuse(r.src(pk), "missing: with any topic.creation.* option Kafka Connect requires it (and topic.creation.default.replication.factor), and refuses the configuration without it")
			ok = false
		} else {
			g.Partitions = def.Partitions
		}
		if n, set := number(rk, 16); set {
			if n != -1 && n < 1 {
				r.refuse(r.src(rk), fmt.Sprintf("%d: Kafka Connect refuses it (the replication factor must be positive, or -1 for the broker's default)", n))
				ok = false
			}
			g.ReplicationFactor = int16(n)
		} else if _, given := c.connector[rk]; given {
			ok = false
		} else if def == nil {
			r.refuse(r.src(rk), "missing: with any topic.creation.* option Kafka Connect requires it (and topic.creation.default.partitions), and refuses the configuration without it")
			ok = false
		} else {
			g.ReplicationFactor = def.ReplicationFactor
		}
		if def != nil {
			for _, which := range []string{"include", "exclude"} {
				list := connectList(c.connector[prefix+which])
				for _, p := range list {
					if _, err := regexp.Compile(p); err != nil {
						r.refuse(r.src(prefix+which), fmt.Sprintf("%q: not a regular expression pgoutbox can match (%v)", p, err))
						ok = false
					}
				}
				if which == "include" {
					g.Include = list
				} else {
					g.Exclude = list
				}
			}
		}
		for k, v := range c.connector {
			name, found := strings.CutPrefix(k, prefix)
			if !found || name == "" {
				continue
			}
			switch name {
			case "include", "exclude", "partitions", "replication.factor":
				continue
			}
			if g.Configs == nil {
				g.Configs = map[string]string{}
			}
			g.Configs[name] = v
		}
		return g, ok
	}
	def, ok := settings("default", nil)
	tc := sink.TopicCreation{Default: def}
	var seen []string
	for _, name := range connectList(c.connector[topicCreationPrefix+"groups"]) {
		switch {
		case slices.Contains(seen, name):
			r.refuse(r.src(topicCreationPrefix+"groups"), fmt.Sprintf("%q twice: Kafka Connect refuses it (Duplicate alias provided.)", name))
			ok = false
			continue
		case name == "default":
			// Connect drops it with a warning: the default group is
			// always there, last.
			seen = append(seen, name)
			continue
		}
		seen = append(seen, name)
		g, gok := settings(name, &def)
		ok = ok && gok
		tc.Groups = append(tc.Groups, g)
	}
	if ok {
		r.set("topic-creation", tc.String())
	}
}

// connectList splits a Kafka Connect LIST value: comma separated, each
// item trimmed, an empty value an empty list.
func connectList(v string) []string {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		out = append(out, strings.TrimSpace(s))
	}
	return out
}
