package transform

import (
	"fmt"
	"regexp"
	"strings"
)

// The classes of Debezium's scripting transforms (debezium-scripting).
const (
	ScriptingFilterClass = "io.debezium.transforms.Filter"
	ContentRouterClass   = "io.debezium.transforms.ContentBasedRouter"
)

// scripting is Debezium's Filter (a record stays when its condition is
// true) or ContentBasedRouter (a record goes to the topic its expression
// names, or stays on its topic for null), under language=jsr223.groovy
// with the expression in pgoutbox's Groovy subset (groovy.go).
type scripting struct {
	router  bool
	src     string
	expr    *groovyNode
	topicRe *regexp.Regexp // nil: every topic
	nulls   string         // null.handling.mode: keep, drop or evaluate
}

func newScriptingFilter(o *options) transformation { return newScripting(o, false) }

func newContentRouter(o *options) transformation { return newScripting(o, true) }

func newScripting(o *options, router bool) transformation {
	exprName := "condition"
	if router {
		exprName = "topic.expression"
	}
	t := &scripting{router: router}
	// Debezium validates every option before it reads any (Field.isRequired:
	// a blank value is missing too).
	// Debezium reads these as they are written, untrimmed.
	regexSrc, _ := o.raw("topic.regex")
	language, _ := o.raw("language")
	if javaTrim(language) == "" {
		o.refuse("language", "missing or blank (Debezium requires it, e.g. jsr223.groovy)")
	}
	src, _ := o.raw(exprName)
	if javaTrim(src) == "" {
		o.refuse(exprName, "missing or blank (Debezium requires it)")
	}
	t.src = src
	nulls, _ := o.str("null.handling.mode", false, "keep")
	t.nulls = strings.ToLower(nulls)
	if t.nulls != "keep" && t.nulls != "drop" && t.nulls != "evaluate" {
		o.refuse("null.handling.mode", fmt.Sprintf("%q: want keep, drop or evaluate", nulls))
	}
	if regexSrc != "" {
		t.topicRe = o.regex("topic.regex", regexSrc)
	}
	if o.failed {
		return nil
	}
	switch {
	case !strings.HasPrefix(language, "jsr223.") && !strings.HasPrefix(language, "wasm."):
		o.refuse("language", fmt.Sprintf("%q: must begin with 'jsr223.' or 'wasm.' (Debezium refuses it)", language))
		return nil
	case language != "jsr223.groovy" && language != "jsr223.Groovy": // the names Groovy's engine registers
		o.refuse("language", fmt.Sprintf("%q is not supported: pgoutbox evaluates jsr223.groovy expressions (a subset of Groovy) only", language))
		return nil
	}
	expr, err := parseGroovy(javaTrim(src))
	if err != nil {
		o.refuse(exprName, fmt.Sprintf("%q %v", src, err))
		return nil
	}
	t.expr = expr
	if why := t.alwaysFails(); why != "" {
		o.refuse(exprName, fmt.Sprintf("%q %s: Debezium's %s fails at every record", src, why, t.class()))
		return nil
	}
	return t
}

func (t *scripting) class() string {
	if t.router {
		return "ContentBasedRouter"
	}
	return "Filter"
}

// alwaysFails tells why the expression fails on every record, "" when
// it may not: a result of the wrong type whatever the record (Filter
// wants a Boolean, ContentBasedRouter a String or null), or an error of
// an expression without variables.
func (t *scripting) alwaysFails() string {
	if t.expr.constant() {
		v, err := t.expr.eval(groovyEnv{})
		if err != nil {
			return "throws " + strings.TrimPrefix(err.Error(), "transform: ")
		}
		if _, _, err := t.result(v); err != nil {
			return "evaluates to " + v.javaClass()
		}
		return ""
	}
	ty := resultTypes(t.expr)
	want := tyBool | tyAny
	if t.router {
		want = tyStr | tyNull | tyAny
	}
	if ty&want == 0 {
		return "never evaluates to a " + map[bool]string{false: "Boolean", true: "String or null"}[t.router]
	}
	return ""
}

// result reads the expression's value: for Filter, ok tells whether the
// record stays; for ContentBasedRouter, ok tells a new topic (a null
// keeps the record's).
func (t *scripting) result(v gval) (topic string, ok bool, err error) {
	if t.router {
		switch v.k {
		case gNullK:
			return "", false, nil
		case gStrK:
			return v.s, true, nil
		}
		return "", false, dataErrorf("Value '%s' returned by the expression '%s' is not a String (Debezium's ContentBasedRouter fails)", v, t.src)
	}
	switch v.k {
	case gBoolK:
		return "", v.b, nil
	case gNullK:
		// Filter unboxes the result: null throws NullPointerException.
		return "", false, dataErrorf("the expression '%s' returned null, which Debezium's Filter cannot take as a Boolean (NullPointerException)", t.src)
	}
	return "", false, dataErrorf("Value '%s' returned by the expression '%s' is not a Boolean (Debezium's Filter fails)", v, t.src)
}

func (t *scripting) apply(r *Record) (bool, error) {
	if t.topicRe != nil && !t.topicRe.MatchString(r.Topic) {
		return true, nil
	}
	if r.Value == nil {
		switch t.nulls {
		case "keep":
			return true, nil
		case "drop":
			return false, nil
		}
	}
	v, err := t.expr.eval(groovyEnv{r: r})
	if err != nil {
		if de, ok := err.(*DataError); ok {
			de.Reason = fmt.Sprintf("Error while evaluating expression '%s': %s", t.src, de.Reason)
		}
		return false, err
	}
	topic, ok, err := t.result(v)
	switch {
	case err != nil:
		return false, err
	case t.router:
		if ok {
			r.Topic = topic
		}
		return true, nil
	}
	return ok, nil
}
