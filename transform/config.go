package transform

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// This file reads the transforms and predicates of a connector
// configuration as Kafka Connect 4 reads them (ConnectorConfig,
// ConfigDef): the transforms list, each alias's type and options, its
// predicate and negate, and the predicates list.

// RouterClass is the Outbox Event Router, after which the chain runs.
const RouterClass = "io.debezium.transforms.outbox.EventRouter"

// Config is the transforms.* and predicates.* keys of a connector
// configuration, as the user wrote them: Kafka Connect's names, or
// Debezium Server's (debezium.transforms.*, debezium.predicates.*).
type Config struct {
	Props map[string]string
}

// Validate reports whether the chain can run; the error names every key
// it cannot honour.
func (c Config) Validate() error {
	_, _, err := Parse(c)
	return err
}

// ConfigError lists the keys of a configuration pgoutbox cannot honour,
// each with why.
type ConfigError struct{ Problems []string }

func (e *ConfigError) Error() string { return strings.Join(e.Problems, "; ") }

// Permanent: the configuration must change.
func (e *ConfigError) Permanent() bool { return true }

// New returns the chain c configures; nil when it has no transform after
// the router.
func New(c Config) (*Chain, error) {
	ch, _, err := Parse(c)
	return ch, err
}

// Parse reads c: the chain of the transforms listed after the Outbox
// Event Router, the keys pgoutbox does not use (which Kafka Connect does
// not use either, such as a transform's unknown option), and an error
// naming each key it cannot honour. The router's own options are not
// read here.
func Parse(c Config) (*Chain, []string, error) {
	prefix := ""
	for k := range c.Props {
		if strings.HasPrefix(k, "debezium.") {
			prefix = "debezium."
			break
		}
	}
	p := &parser{props: map[string]string{}, prefix: prefix}
	for k, v := range c.Props {
		p.props[strings.TrimPrefix(k, prefix)] = v
	}
	ch := p.chain()
	sort.Strings(p.ignored)
	if len(p.problems) > 0 {
		sort.Strings(p.problems)
		return nil, p.ignored, &ConfigError{Problems: p.problems}
	}
	return ch, p.ignored, nil
}

// parser collects what it finds wrong and what it leaves unused.
type parser struct {
	props    map[string]string
	prefix   string
	used     map[string]bool
	ignored  []string
	problems []string
}

// name is a key as the user wrote it.
func (p *parser) name(key string) string { return p.prefix + key }

func (p *parser) refuse(key, why string) { p.problems = append(p.problems, p.name(key)+": "+why) }

// list reads a LIST the way ConfigDef does: trimmed, split at commas with
// the white space around them, empty for an empty value.
func list(v string) []string {
	v = javaTrim(v)
	if v == "" {
		return nil
	}
	return commaSpace.Split(v, -1)
}

var commaSpace = regexp.MustCompile(`[ \t\n\x0B\f\r]*,[ \t\n\x0B\f\r]*`)

// javaTrim is Java's String.trim: every character up to U+0020 off
// both ends.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

func (p *parser) chain() *Chain {
	p.used = map[string]bool{}
	aliases := list(p.props["transforms"])
	if dup := duplicate(aliases); dup != "" {
		p.refuse("transforms", fmt.Sprintf("alias %q is listed twice (Kafka Connect refuses duplicate aliases)", dup))
		return nil
	}
	router := -1
	for i, a := range aliases {
		if javaTrim(p.props["transforms."+a+".type"]) == RouterClass {
			router = i
			break
		}
	}
	preds := p.predicates()
	ch := &Chain{afterRouter: router >= 0}
	for i, alias := range aliases {
		prefix := "transforms." + alias + "."
		switch {
		case i == router:
			p.markPrefix(prefix) // the router's options are read elsewhere
			continue
		case alias == "":
			p.refuse("transforms", "an empty alias (Kafka Connect has no transform by that name)")
			continue
		case javaTrim(p.props[prefix+"type"]) == DecodeMessageClass:
			if i > router {
				p.markPrefix(prefix)
				p.refuse(prefix+"type", decodeRefusal(router >= 0))
			} else if ch.decode != nil {
				p.markPrefix(prefix)
				p.refuse(prefix+"type", "listed twice before the Outbox Event Router")
			} else {
				ch.decode = p.decodeBeforeRouter(alias)
			}
			continue
		case i < router:
			if st, ok := p.beforeRouter(alias, preds); ok {
				ch.before = append(ch.before, st)
			}
			continue
		}
		if st, ok := p.stage(alias, preds); ok {
			ch.stages = append(ch.stages, st)
		}
	}
	p.structKeys(ch)
	for k := range p.props {
		if !p.used[k] && k != "transforms" && k != "predicates" {
			p.ignored = append(p.ignored, p.name(k))
		}
	}
	if len(ch.stages) == 0 && len(ch.before) == 0 && ch.decode == nil {
		return nil
	}
	return ch
}

// keyStructUser is a transform that needs the key to be a struct when
// onKey says it works on the key.
type keyStructUser interface{ onKey() bool }

// structKeyMaker is a transform that makes the key a struct when
// makesStructKey says so.
type structKeyMaker interface{ makesStructKey() bool }

// structKeys refuses a transform of the key's struct where the key is
// the Outbox Event Router's aggregate id, a string, still: Kafka
// Connect's task fails at its first record. A change event's key is its
// primary key's struct; once a transform changed the key (made a struct
// of it, or took a field out of one), what it is depends on the data.
func (p *parser) structKeys(ch *Chain) {
	stringKey := ch.afterRouter
	for _, st := range ch.stages {
		if u, ok := st.t.(keyStructUser); ok && u.onKey() && stringKey {
			p.refuse("transforms."+st.alias+".type", structKeyRefusal)
		}
		if m, ok := st.t.(structKeyMaker); ok && m.makesStructKey() {
			stringKey = false
		}
		if e, ok := st.t.(*extractField); ok && e.key {
			stringKey = false
		}
	}
}

// headerFromValue is the one transform pgoutbox runs before the router.
const headerFromValue = "org.apache.kafka.connect.transforms.HeaderFrom$Value"

// beforeRouter reads a transform before the Outbox Event Router, which
// sees the connector's change event: HeaderFrom$Value copying its fields
// (source, op, transaction, ...) into headers, which the router keeps,
// as Debezium's CloudEventsConverter documents for its metadata.
func (p *parser) beforeRouter(alias string, preds map[string]predicate) (stage, bool) {
	prefix := "transforms." + alias + "."
	if typ := javaTrim(p.props[prefix+"type"]); typ != headerFromValue {
		p.markPrefix(prefix)
		p.refuse(prefix+"type", fmt.Sprintf("%q before the Outbox Event Router: pgoutbox runs %s (operation copy) there, and Kafka Connect's transforms after the router", typ, headerFromValue))
		return stage{}, false
	}
	st, ok := p.stage(alias, preds)
	if ok && st.t.(*headerFrom).move {
		p.refuse(prefix+"operation", "move before the Outbox Event Router is not implemented: use copy, which leaves the change event whole for the router")
		return stage{}, false
	}
	return st, ok
}

// markPrefix marks every key under prefix as read.
func (p *parser) markPrefix(prefix string) {
	for k := range p.props {
		if strings.HasPrefix(k, prefix) {
			p.used[k] = true
		}
	}
}

func duplicate(aliases []string) string {
	seen := map[string]bool{}
	for _, a := range aliases {
		if seen[a] {
			return a
		}
		seen[a] = true
	}
	return ""
}

// predicates reads every predicate listed: Kafka Connect checks them all,
// used or not.
func (p *parser) predicates() map[string]predicate {
	out := map[string]predicate{}
	aliases := list(p.props["predicates"])
	if dup := duplicate(aliases); dup != "" {
		p.refuse("predicates", fmt.Sprintf("alias %q is listed twice (Kafka Connect refuses duplicate aliases)", dup))
		return out
	}
	for _, alias := range aliases {
		prefix := "predicates." + alias + "."
		o := p.options(prefix)
		typ, ok := o.str("type", true, "")
		if !ok {
			continue
		}
		newPred, known := predicateTypes[className(typ)]
		if !known {
			p.refuse(prefix+"type", fmt.Sprintf("predicate %q is not supported (pgoutbox runs %s)", typ, strings.Join(sortedNames(predicateTypes), ", ")))
			continue
		}
		o.str("version", false, "") // a plugin version: pgoutbox has one
		if pr := newPred(o); pr != nil && !o.failed {
			out[alias] = pr
		}
	}
	return out
}

// stage reads one transform after the router, with its predicate.
func (p *parser) stage(alias string, preds map[string]predicate) (stage, bool) {
	prefix := "transforms." + alias + "."
	o := p.options(prefix)
	typ, ok := o.str("type", true, "")
	if !ok {
		return stage{}, false
	}
	newT, known := transformTypes[className(typ)]
	if !known {
		p.markPrefix(prefix)
		why := fmt.Sprintf("transform %q is not supported after the Outbox Event Router (pgoutbox runs %s)", typ, strings.Join(sortedNames(transformTypes), ", "))
		if typ == RouterClass {
			why = "more than one Outbox Event Router"
		}
		p.refuse(prefix+"type", why)
		return stage{}, false
	}
	st := stage{alias: alias}
	if name, set := o.str("predicate", false, ""); set {
		pr, ok := preds[name]
		if !ok && !p.listedPredicate(name) {
			p.refuse(prefix+"predicate", fmt.Sprintf("%q is not a predicate listed in %s", name, p.name("predicates")))
		}
		st.pred = pr
		st.negate = o.boolean("negate", false)
	} else if _, set := p.props[prefix+"negate"]; set && p.prefix == "" {
		// Debezium Server's engine reads negate only with a predicate, and
		// the Debezium Operator writes it for every transform: there it is
		// left unused (named among the ignored keys).
		p.refuse(prefix+"negate", "given without "+p.name(prefix+"predicate")+" (Kafka Connect refuses it)")
	}
	o.str("version", false, "") // a plugin version: pgoutbox has one
	st.t = newT(o)
	return st, !o.failed && st.t != nil
}

// listedPredicate tells whether alias is in the predicates list; one
// that is but did not parse was refused already.
func (p *parser) listedPredicate(alias string) bool {
	for _, a := range list(p.props["predicates"]) {
		if a == alias {
			return true
		}
	}
	return false
}

// className resolves the aliases Kafka Connect gives plugins whose simple
// name is unique among Kafka's and Debezium's (PluginUtils.computeAliases):
// RegexRouter for org.apache.kafka.connect.transforms.RegexRouter. Filter
// is not one: Debezium's scripting module has a Filter too, and the
// nested Key and Value classes share their simple names.
func className(typ string) string {
	switch typ {
	case "RegexRouter", "TimestampRouter", "InsertHeader", "DropHeaders":
		return "org.apache.kafka.connect.transforms." + typ
	case "TopicNameMatches", "HasHeaderKey", "RecordIsTombstone":
		return "org.apache.kafka.connect.transforms.predicates." + typ
	}
	return typ
}

func sortedNames[T any](m map[string]T) []string {
	var out []string
	for k := range m {
		if strings.Contains(k, ".") {
			out = append(out, k[strings.LastIndexByte(k, '.')+1:])
		}
	}
	sort.Strings(out)
	return out
}

// options reads one alias's options (prefix "transforms.<alias>.").
type options struct {
	p      *parser
	prefix string
	alias  string
	failed bool
}

func (p *parser) options(prefix string) *options {
	alias := strings.TrimSuffix(prefix[strings.IndexByte(prefix, '.')+1:], ".")
	return &options{p: p, prefix: prefix, alias: alias}
}

func (o *options) refuse(name, why string) {
	o.failed = true
	o.p.refuse(o.prefix+name, why)
}

// raw returns an option's value, marking it read.
func (o *options) raw(name string) (string, bool) {
	k := o.prefix + name
	v, ok := o.p.props[k]
	if ok {
		o.p.used[k] = true
	}
	return v, ok
}

// str reads a STRING (trimmed); required refuses it missing.
func (o *options) str(name string, required bool, def string) (string, bool) {
	v, ok := o.raw(name)
	if !ok {
		if required {
			o.refuse(name, "missing (Kafka Connect requires it)")
		}
		return def, false
	}
	return javaTrim(v), true
}

// nonEmpty reads a required STRING that must not be empty.
func (o *options) nonEmpty(name string) string {
	v, ok := o.str(name, true, "")
	if ok && v == "" {
		o.refuse(name, "empty (Kafka Connect requires a non-empty string)")
	}
	return v
}

// list reads a LIST; nonEmpty refuses an empty one, unique one with
// duplicate or empty items.
func (o *options) list(name string, required, nonEmpty, unique bool) []string {
	v, ok := o.raw(name)
	if !ok {
		if required {
			o.refuse(name, "missing (Kafka Connect requires it)")
		}
		return nil
	}
	l := list(v)
	switch {
	case nonEmpty && len(l) == 0:
		o.refuse(name, "empty (Kafka Connect requires a non-empty list)")
	case unique && duplicate(l) != "":
		o.refuse(name, fmt.Sprintf("%q is listed twice (Kafka Connect refuses duplicates)", duplicate(l)))
	case unique && slices.Contains(l, ""):
		o.refuse(name, "an empty item (Kafka Connect refuses it)")
	}
	return l
}

// boolean reads a BOOLEAN: true or false in any case.
func (o *options) boolean(name string, def bool) bool {
	v, ok := o.raw(name)
	if !ok {
		return def
	}
	switch strings.ToLower(javaTrim(v)) {
	case "true":
		return true
	case "false":
		return false
	}
	o.refuse(name, fmt.Sprintf("%q: want true or false", v))
	return def
}

// int32 reads an INT, nil when unset.
func (o *options) int32(name string) *int32 {
	v, ok := o.raw(name)
	if !ok {
		return nil
	}
	n, err := strconv.ParseInt(javaTrim(v), 10, 32)
	if err != nil {
		o.refuse(name, fmt.Sprintf("%q is not a 32-bit integer", v))
		return nil
	}
	n32 := int32(n)
	return &n32
}

// regex compiles a Java regular expression matched in full; RE2 has no
// lookaround or backreferences.
func (o *options) regex(name, src string) *regexp.Regexp {
	re, err := regexp.Compile(`^(?:` + src + `)$`)
	if err != nil {
		o.refuse(name, fmt.Sprintf("%q: %v (pgoutbox's regular expressions are RE2: no lookaround or backreferences)", src, err))
		return nil
	}
	return re
}
