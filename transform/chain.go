package transform

// Chain is the transforms that run after the Outbox Event Router, or on
// the connector's change events where there is no router, in their
// order, each behind its predicate (TransformationStage). It is immutable
// and safe for concurrent use.
type Chain struct {
	stages      []stage
	before      []stage     // on the change event, before the router
	schemas     schemaCache // the records' schemas, read once (Read)
	afterRouter bool

	decode *MessageDecode // DecodeLogicalDecodingMessageContent before the router
}

// Passthrough is a chain of no transform, for records that go through
// Kafka Connect's data for their converters alone: it keeps Read's
// schemas, which a nil chain reads anew for every record.
func Passthrough() *Chain { return &Chain{} }

// AfterRouter tells a chain that runs after the Outbox Event Router
// (format debezium-outbox) from one on the change events (format
// debezium).
func (c *Chain) AfterRouter() bool { return c != nil && c.afterRouter }

type stage struct {
	alias  string
	t      transformation
	pred   predicate // nil: every record
	negate bool
}

// transformation is one of Kafka Connect's transforms: it changes r in
// place, or drops it (keep false, as a transform that returns null).
type transformation interface {
	apply(r *Record) (keep bool, err error)
}

// predicate is one of Kafka Connect's predicates.
type predicate interface {
	test(r *Record) bool
}

// Apply runs the chain on r; a nil chain keeps it as it is. keep is false when a transform dropped the
// record, which then goes nowhere; err is a *DataError, the record's own
// problem, where Kafka Connect's task would fail.
func (c *Chain) Apply(r *Record) (keep bool, err error) {
	if c == nil {
		return true, nil
	}
	for _, s := range c.stages {
		if s.pred != nil && s.pred.test(r) == s.negate {
			continue
		}
		keep, err := s.t.apply(r)
		if err != nil {
			if de, ok := err.(*DataError); ok && de.Transform == "" {
				de.Transform = s.alias
			}
			return false, err
		}
		if !keep {
			return false, nil
		}
	}
	return true, nil
}

// Aliases are the chain's transforms by their aliases, in order.
func (c *Chain) Aliases() []string {
	if c == nil {
		return nil
	}
	out := make([]string, len(c.stages))
	for i, s := range c.stages {
		out[i] = s.alias
	}
	return out
}

// Len is how many transforms the chain has; none for a nil chain.
func (c *Chain) Len() int {
	if c == nil {
		return 0
	}
	return len(c.stages)
}

// The transforms and predicates by class name, each built from its
// options; a nil result (or options.failed) means refused.
var (
	transformTypes = map[string]func(*options) transformation{
		"org.apache.kafka.connect.transforms.RegexRouter":              newRegexRouter,
		"org.apache.kafka.connect.transforms.TimestampRouter":          newTimestampRouter,
		"org.apache.kafka.connect.transforms.InsertHeader":             newInsertHeader,
		"org.apache.kafka.connect.transforms.DropHeaders":              newDropHeaders,
		"org.apache.kafka.connect.transforms.HeaderFrom$Key":           func(o *options) transformation { return newHeaderFrom(o, true) },
		"org.apache.kafka.connect.transforms.HeaderFrom$Value":         func(o *options) transformation { return newHeaderFrom(o, false) },
		"org.apache.kafka.connect.transforms.InsertField$Key":          func(o *options) transformation { return newInsertField(o, true) },
		"org.apache.kafka.connect.transforms.InsertField$Value":        func(o *options) transformation { return newInsertField(o, false) },
		"org.apache.kafka.connect.transforms.ReplaceField$Key":         func(o *options) transformation { return newReplaceField(o, true) },
		"org.apache.kafka.connect.transforms.ReplaceField$Value":       func(o *options) transformation { return newReplaceField(o, false) },
		"org.apache.kafka.connect.transforms.SetSchemaMetadata$Key":    func(o *options) transformation { return newSetSchemaMetadata(o, true) },
		"org.apache.kafka.connect.transforms.SetSchemaMetadata$Value":  func(o *options) transformation { return newSetSchemaMetadata(o, false) },
		"org.apache.kafka.connect.transforms.Filter":                   func(*options) transformation { return filter{} },
		"org.apache.kafka.connect.transforms.ExtractField$Key":         func(o *options) transformation { return newExtractField(o, true) },
		"org.apache.kafka.connect.transforms.ExtractField$Value":       func(o *options) transformation { return newExtractField(o, false) },
		"org.apache.kafka.connect.transforms.HoistField$Key":           func(o *options) transformation { return newHoistField(o, true) },
		"org.apache.kafka.connect.transforms.HoistField$Value":         func(o *options) transformation { return newHoistField(o, false) },
		"org.apache.kafka.connect.transforms.MaskField$Key":            func(o *options) transformation { return newMaskField(o, true) },
		"org.apache.kafka.connect.transforms.MaskField$Value":          func(o *options) transformation { return newMaskField(o, false) },
		"org.apache.kafka.connect.transforms.ValueToKey":               newValueToKey,
		"org.apache.kafka.connect.transforms.Flatten$Key":              func(o *options) transformation { return newFlatten(o, true) },
		"org.apache.kafka.connect.transforms.Flatten$Value":            func(o *options) transformation { return newFlatten(o, false) },
		"org.apache.kafka.connect.transforms.Cast$Key":                 func(o *options) transformation { return newCast(o, true) },
		"org.apache.kafka.connect.transforms.Cast$Value":               func(o *options) transformation { return newCast(o, false) },
		"org.apache.kafka.connect.transforms.TimestampConverter$Key":   func(o *options) transformation { return newTimestampConverter(o, true) },
		"org.apache.kafka.connect.transforms.TimestampConverter$Value": func(o *options) transformation { return newTimestampConverter(o, false) },
		NewStateClass:         newNewState,
		TimezoneClass:         newTimezoneConverter,
		headerToValueClass:    newHeaderToValue,
		PartitionRoutingClass: newPartitionRouting,
		LogicalTableClass:     newLogicalTable,
		ScriptingFilterClass:  newScriptingFilter,
		ContentRouterClass:    newContentRouter,
		ChangedStateClass:     newChangedState,
	}
	predicateTypes = map[string]func(*options) predicate{
		"org.apache.kafka.connect.transforms.predicates.TopicNameMatches":  newTopicNameMatches,
		"org.apache.kafka.connect.transforms.predicates.HasHeaderKey":      newHasHeaderKey,
		"org.apache.kafka.connect.transforms.predicates.RecordIsTombstone": func(*options) predicate { return recordIsTombstone{} },
	}
)

// filter is Filter: it drops every record it is applied to.
type filter struct{}

func (filter) apply(*Record) (bool, error) { return false, nil }

// Flattens tells a chain with ExtractNewRecordState, after which a
// record is its row, no longer a change event.
func (c *Chain) Flattens() bool {
	if c == nil {
		return false
	}
	for _, s := range c.stages {
		if _, ok := s.t.(*newState); ok {
			return true
		}
	}
	return false
}

// BeforeRouter tells a chain with transforms before the Outbox Event
// Router, which run on the connector's change event (ApplyBefore).
func (c *Chain) BeforeRouter() bool { return c != nil && len(c.before) > 0 }

// ApplyBefore runs the transforms before the router on r, the change
// event of the router's record; they only add headers (HeaderFrom$Value,
// copy), which the router keeps. err is a *DataError.
func (c *Chain) ApplyBefore(r *Record) error {
	if c == nil {
		return nil
	}
	for _, s := range c.before {
		if s.pred != nil && s.pred.test(r) == s.negate {
			continue
		}
		if _, err := s.t.apply(r); err != nil {
			if de, ok := err.(*DataError); ok && de.Transform == "" {
				de.Transform = s.alias
			}
			return err
		}
	}
	return nil
}

// CopiesBeforeRouter tells whether a transform before the router copies
// each of the change event's fields into a header of its own name.
func (c *Chain) CopiesBeforeRouter(fields ...string) bool {
	if c == nil {
		return false
	}
	for _, f := range fields {
		found := false
		for _, s := range c.before {
			hf := s.t.(*headerFrom)
			for i, name := range hf.fields {
				found = found || name == f && hf.headers[i] == f
			}
		}
		if !found {
			return false
		}
	}
	return true
}
