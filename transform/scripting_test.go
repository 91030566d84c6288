package transform

import (
	"strings"
	"testing"
)

func scriptingChain(t *testing.T, props map[string]string) *Chain {
	t.Helper()
	ch, _, err := Parse(Config{Props: props})
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// Filter keeps a record whose condition is true and drops it when false;
// ContentBasedRouter sets the topic its expression names and keeps the
// topic for null; both pass tombstones (null.handling.mode=keep) and
// records outside topic.regex untouched.
func TestScriptingApply(t *testing.T) {
	cases := []struct {
		name      string
		props     map[string]string
		tombstone bool
		topic     string // the record's topic; the sample's when empty
		keep      bool
		wantTopic string
		err       string
	}{
		{name: "filter true", props: map[string]string{"type": ScriptingFilterClass, "condition": "value.op == 'u' && value.before.status != value.after.status"}, keep: true},
		{name: "filter false", props: map[string]string{"type": ScriptingFilterClass, "condition": "value.op == 'c'"}},
		{name: "filter on a header", props: map[string]string{"type": ScriptingFilterClass, "condition": "header.aggregatetype?.value in ['Order']"}, keep: true},
		{name: "filter keeps a tombstone", props: map[string]string{"type": ScriptingFilterClass, "condition": "value.op == 'c'"}, tombstone: true, keep: true},
		{name: "filter drops a tombstone", props: map[string]string{"type": ScriptingFilterClass, "condition": "value.op == 'c'", "null.handling.mode": " DROP "}, tombstone: true},
		{name: "filter evaluates a tombstone", props: map[string]string{"type": ScriptingFilterClass, "condition": "value == null", "null.handling.mode": "evaluate"}, tombstone: true, keep: true},
		{name: "filter fails on a tombstone", props: map[string]string{"type": ScriptingFilterClass, "condition": "value.op == 'c'", "null.handling.mode": "evaluate"}, tombstone: true, err: "Cannot get property 'op' on null object"},
		{name: "filter outside topic.regex", props: map[string]string{"type": ScriptingFilterClass, "condition": "false", "topic.regex": "other\\..*"}, keep: true},
		{name: "filter inside topic.regex", props: map[string]string{"type": ScriptingFilterClass, "condition": "false", "topic.regex": "srv\\..*"}},
		{name: "filter null result", props: map[string]string{"type": ScriptingFilterClass, "condition": "value.after.note"}, err: "returned null"},
		{name: "filter string result", props: map[string]string{"type": ScriptingFilterClass, "condition": "value.after.status"}, err: "Value 'paid' returned by the expression 'value.after.status' is not a Boolean"},
		{name: "filter missing field", props: map[string]string{"type": ScriptingFilterClass, "condition": "value.after.nope == 1"}, err: "nope is not a valid field name"},
		{name: "router", props: map[string]string{"type": ContentRouterClass, "topic.expression": "value.after.region == 'eu' ? 'orders.eu' : null"}, keep: true, wantTopic: "orders.eu"},
		{name: "router null", props: map[string]string{"type": ContentRouterClass, "topic.expression": "value.after.region == 'us' ? 'orders.us' : null"}, keep: true},
		{name: "router empty topic", props: map[string]string{"type": ContentRouterClass, "topic.expression": "''"}, keep: true, wantTopic: "-"},
		{name: "router keeps a tombstone", props: map[string]string{"type": ContentRouterClass, "topic.expression": "value.after.region"}, tombstone: true, keep: true},
		{name: "router field", props: map[string]string{"type": ContentRouterClass, "topic.expression": "value.source.table"}, keep: true, wantTopic: "orders"},
		{name: "router number", props: map[string]string{"type": ContentRouterClass, "topic.expression": "value.after.id"}, err: "Value '7' returned by the expression 'value.after.id' is not a String"},
	}
	for _, c := range cases {
		props := map[string]string{"transforms": "s", "transforms.s.language": "jsr223.groovy"}
		for k, v := range c.props {
			props["transforms.s."+k] = v
		}
		ch := scriptingChain(t, props)
		r := groovySample(c.tombstone)
		keep, err := ch.Apply(r)
		switch {
		case c.err != "":
			de, ok := err.(*DataError)
			if !ok || !strings.Contains(de.Reason, c.err) || de.Transform != "s" {
				t.Errorf("%s: err %v, want a DataError of s with %q", c.name, err, c.err)
			}
			continue
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		want := c.wantTopic
		switch want {
		case "":
			want = "srv.public.orders"
		case "-":
			want = ""
		}
		if keep != c.keep || r.Topic != want {
			t.Errorf("%s: keep %v topic %q, want %v %q", c.name, keep, r.Topic, c.keep, want)
		}
	}
}

// What Debezium's task refuses at start (configure, or an expression that
// fails at every record), and what is outside pgoutbox's subset, is
// refused naming the option.
func TestScriptingRefused(t *testing.T) {
	cases := []struct {
		props map[string]string
		want  string // in the refusal
	}{
		{map[string]string{"type": ScriptingFilterClass, "condition": "true"}, "transforms.s.language: missing"},
		{map[string]string{"type": ScriptingFilterClass, "language": " ", "condition": "true"}, "transforms.s.language: missing"},
		{map[string]string{"type": ScriptingFilterClass, "language": "jsr223.groovy"}, "transforms.s.condition: missing"},
		{map[string]string{"type": ContentRouterClass, "language": "jsr223.groovy", "condition": "'a'"}, "transforms.s.topic.expression: missing"},
		{map[string]string{"type": ScriptingFilterClass, "language": "groovy", "condition": "true"}, "transforms.s.language: \"groovy\": must begin with 'jsr223.' or 'wasm.'"},
		{map[string]string{"type": ScriptingFilterClass, "language": "jsr223.graal.js", "condition": "true"}, "transforms.s.language: \"jsr223.graal.js\" is not supported"},
		{map[string]string{"type": ScriptingFilterClass, "language": "wasm.chicory", "condition": "true"}, "transforms.s.language: \"wasm.chicory\" is not supported"},
		{map[string]string{"type": ScriptingFilterClass, "language": "jsr223.groovy", "condition": "true", "null.handling.mode": "skip"}, "transforms.s.null.handling.mode: \"skip\""},
		{map[string]string{"type": ScriptingFilterClass, "language": "jsr223.groovy", "condition": "true", "topic.regex": "("}, "transforms.s.topic.regex"},
		{map[string]string{"type": ScriptingFilterClass, "language": "jsr223.groovy", "condition": "value.op =="}, "transforms.s.condition: \"value.op ==\" at offset 11: the expression ends early"},
		{map[string]string{"type": ScriptingFilterClass, "language": "jsr223.groovy", "condition": "value.after.status.size() > 3"}, "method calls (size())"},
		{map[string]string{"type": ScriptingFilterClass, "language": "jsr223.groovy", "condition": "value.after.status =~ 'p'"}, "regular expressions (=~)"},
		{map[string]string{"type": ScriptingFilterClass, "language": "jsr223.groovy", "condition": "row.id == 1"}, "\"row\" is not one of the variables Debezium binds"},
		{map[string]string{"type": ScriptingFilterClass, "language": "jsr223.groovy", "condition": "valueSchema.name == 'x'"}, "valueSchema (a Connect Schema)"},
		{map[string]string{"type": ScriptingFilterClass, "language": "jsr223.groovy", "condition": "value.source.schema == 'public'"}, "Struct's own schema"},
		{map[string]string{"type": ScriptingFilterClass, "language": "jsr223.groovy", "condition": "topic.empty"}, "property \"empty\" of a string"},
		{map[string]string{"type": ContentRouterClass, "language": "jsr223.groovy", "topic.expression": "\"orders.${value.op}\""}, "GString interpolation"},
		{map[string]string{"type": ScriptingFilterClass, "language": "jsr223.groovy", "condition": "'yes'"}, "evaluates to java.lang.String: Debezium's Filter fails at every record"},
		{map[string]string{"type": ScriptingFilterClass, "language": "jsr223.groovy", "condition": "value.op == 'u' ? 'a' : 'b'"}, "never evaluates to a Boolean"},
		{map[string]string{"type": ContentRouterClass, "language": "jsr223.groovy", "topic.expression": "value.op == 'u'"}, "never evaluates to a String or null"},
		{map[string]string{"type": ScriptingFilterClass, "language": "jsr223.groovy", "condition": "1 < true"}, "throws Cannot compare java.lang.Integer"},
	}
	for _, c := range cases {
		props := map[string]string{"transforms": "s"}
		for k, v := range c.props {
			props["transforms.s."+k] = v
		}
		_, _, err := Parse(Config{Props: props})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want a refusal with %q", c.props, err, c.want)
		}
	}
}
