package transform

import "regexp"

// topicNameMatches is TopicNameMatches: the topic matches pattern in full.
type topicNameMatches struct{ re *regexp.Regexp }

func newTopicNameMatches(o *options) predicate {
	src := o.nonEmpty("pattern")
	if o.failed {
		return nil
	}
	re := o.regex("pattern", src)
	if re == nil {
		return nil
	}
	return topicNameMatches{re: re}
}

func (p topicNameMatches) test(r *Record) bool { return p.re.MatchString(r.Topic) }

// hasHeaderKey is HasHeaderKey: at least one header has the name.
type hasHeaderKey struct{ name string }

func newHasHeaderKey(o *options) predicate {
	name := o.nonEmpty("name")
	if o.failed {
		return nil
	}
	return hasHeaderKey{name: name}
}

func (p hasHeaderKey) test(r *Record) bool {
	for _, h := range r.Headers {
		if h.Key == p.name {
			return true
		}
	}
	return false
}

// recordIsTombstone is RecordIsTombstone: the value is null (whatever its
// schema, so also the router's null payload that is not a tombstone in
// Kafka under JsonConverter).
type recordIsTombstone struct{}

func (recordIsTombstone) test(r *Record) bool { return r.Value == nil }
