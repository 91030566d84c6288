package compat

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pgoutbox/pgoutbox/schema"
)

// The option table of docs/debezium.md is written from the corpus: per
// option, the cases that set it (or cover it at its default), the values
// they set, and whether Debezium's records and pgoutbox's were equal or
// differ as a listed deliberate difference. TestCorpus proves each case;
// TestOptionTable keeps the table in step with the cases.

// Markers around the generated part of docs/debezium.md.
const (
	TableBegin = "<!-- corpus option table: written by go test ./test/compat -run TestOptionTable -update; do not edit -->"
	TableEnd   = "<!-- end of the corpus option table -->"
)

// option is one row: an option and what the corpus did with it.
type option struct {
	name   string
	values map[string]bool
	cases  map[string]bool
	differ map[string]Deliberate // by case
}

// section is where an option's row goes.
func section(name string) int {
	switch {
	case name == "predicates", strings.HasPrefix(name, "predicates.<name>"), name == "transforms.<name>.predicate", name == "transforms.<name>.negate",
		name != "" && name[0] >= 'A' && name[0] <= 'Z':
		return 4 // Kafka Connect's transforms and predicates
	case strings.HasPrefix(name, "debezium."):
		return 3 // Debezium Server's own
	case strings.HasPrefix(name, "key.converter"), strings.HasPrefix(name, "value.converter"), strings.HasPrefix(name, "header.converter"):
		return 1
	case strings.HasPrefix(name, "table.field"), strings.HasPrefix(name, "route."), strings.HasPrefix(name, "table.op."),
		strings.HasPrefix(name, "table.expand."), strings.HasPrefix(name, "table.json."), strings.HasPrefix(name, "tracing."):
		return 0 // the router's
	}
	return 2 // the connector's
}

var sectionTitles = []string{
	"The outbox router's options (`transforms.<name>.…` of `io.debezium.transforms.outbox.EventRouter`)",
	"Converters",
	"Connector and worker options",
	"Debezium Server's own options",
	"Kafka Connect's transforms and predicates after the router (an option of `transforms.<name>.` by the transform's class, of `predicates.<name>.` by the predicate's)",
}

// caseOptions are the options a case sets, as a user writes them, with
// their values: the Connect form's keys, the router's without its
// transforms.<name>. prefix, and Debezium Server's debezium.source.* and
// debezium.transforms.<name>.* as the same options, its debezium.format.*
// and debezium.sink.* as they are. The other transforms' and the
// predicates' options are named by their class (RegexRouter.regex), their
// type, predicate and negate by the alias's place
// (transforms.<name>.predicate, with the predicate's class).
func caseOptions(c Case) map[string][]string {
	out := map[string][]string{}
	put := func(k, v string) {
		if !slices.Contains(out[k], v) {
			out[k] = append(out[k], v)
		}
	}
	add := func(conf map[string]string, prefix string) {
		class := func(kind, alias string) string {
			v := conf[prefix+kind+"."+alias+".type"]
			return v[strings.LastIndexByte(v, '.')+1:]
		}
		for k, v := range conf {
			rest, ok := strings.CutPrefix(k, prefix)
			if !ok {
				put(k, v)
				continue
			}
			kind, aliasOpt, _ := strings.Cut(rest, ".")
			alias, opt, _ := strings.Cut(aliasOpt, ".")
			switch {
			case kind != "transforms" && kind != "predicates" || aliasOpt == "":
				put(k, v)
			case kind == "transforms" && conf[prefix+"transforms."+alias+".type"] == "io.debezium.transforms.outbox.EventRouter":
				if opt == "type" {
					put("transforms.<name>.type", v)
				} else {
					put(opt, v)
				}
			case opt == "type":
				put(kind+".<name>.type", v)
			case kind == "transforms" && opt == "predicate":
				put("transforms.<name>.predicate", class("predicates", v))
			case kind == "transforms" && opt == "negate":
				put("transforms.<name>.negate", v)
			default:
				put(class(kind, alias)+"."+opt, v)
			}
		}
	}
	if c.Connect != nil {
		add(c.Connect, "")
	}
	if c.Server != "" {
		props, _ := schema.ParseProperties([]byte(c.Server)) // checked by Validate
		conf := map[string]string{}
		for k, v := range props {
			if rest, ok := strings.CutPrefix(k, "debezium.source."); ok {
				conf[rest] = v
			} else {
				conf[k] = v
			}
		}
		add(conf, "debezium.")
	}
	return out
}

// OptionTable writes the generated part of docs/debezium.md for the
// cases, which ran against the named Debezium.
func OptionTable(cases []Case, debezium string) string {
	opts := map[string]*option{}
	get := func(name string) *option {
		o := opts[name]
		if o == nil {
			o = &option{name: name, values: map[string]bool{}, cases: map[string]bool{}, differ: map[string]Deliberate{}}
			opts[name] = o
		}
		return o
	}
	for _, c := range cases {
		for k, vs := range caseOptions(c) {
			o := get(k)
			o.cases[c.Name] = true
			for _, v := range vs {
				o.values[shortValue(k, v)] = true
			}
		}
		for _, k := range c.Covers {
			o := get(k)
			o.cases[c.Name] = true
			o.values["(default)"] = true
		}
		for _, d := range c.Differences {
			o := get(d.Option)
			o.cases[c.Name] = true
			o.differ[c.Name] = d
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", TableBegin)
	fmt.Fprintf(&b, "%d cases (`test/compat/testdata/cases`), each run through %s and through pgoutbox, "+
		"with the case's Kafka Connect configuration and/or its Debezium Server properties "+
		"(`make compat`). \"Tested equal\": every record of every case that sets the option "+
		"(or covers it at its default) was equal, topic, partition, key, value, headers, timestamp and order, "+
		"under the case's named normalisations. Otherwise the case's deliberate difference is listed below the tables.\n",
		len(cases), debezium)
	names := slices.Sorted(maps.Keys(opts))
	var diffs []string
	for s, title := range sectionTitles {
		var rows []string
		for _, n := range names {
			o := opts[n]
			if section(n) != s {
				continue
			}
			rows = append(rows, fmt.Sprintf("| `%s` | %s | %s | %s |", n, valuesCell(o), casesCell(o), resultCell(o)))
			for _, c := range slices.Sorted(maps.Keys(o.differ)) {
				diffs = append(diffs, differenceLine(n, c, o.differ[c]))
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s:\n\n| option | values tested | cases | result |\n|---|---|---|---|\n%s\n", title, strings.Join(rows, "\n"))
	}
	if len(diffs) > 0 {
		fmt.Fprintf(&b, "\nDeliberate differences, and where both stop, by option and case:\n\n%s\n", strings.Join(diffs, "\n"))
	}
	fmt.Fprintf(&b, "\n%s", TableEnd)
	return b.String()
}

// shortValue is a value as the table shows it: a class by its simple
// name, a long value cut.
func shortValue(key, v string) string {
	switch {
	case v == "io.debezium.converters.ByteArrayConverter":
		v = "Debezium's ByteArrayConverter" // Kafka has one of that name too
	case strings.HasPrefix(v, "io.debezium.") || strings.HasPrefix(v, "org.apache.kafka."):
		v = v[strings.LastIndexByte(v, '.')+1:]
	}
	if strings.HasSuffix(key, "password") {
		return "…"
	}
	if r := []rune(v); len(r) > 40 {
		v = string(r[:39]) + "…"
	}
	return v
}

func valuesCell(o *option) string {
	vals := slices.Sorted(maps.Keys(o.values))
	more := ""
	if len(vals) > 5 {
		vals, more = vals[:5], fmt.Sprintf(" and %d more", len(vals)-5)
	}
	for i, v := range vals {
		if v == "(default)" {
			continue
		}
		if v == "" {
			v = "(empty)"
		}
		vals[i] = "`" + strings.ReplaceAll(v, "|", `\|`) + "`"
	}
	return strings.Join(vals, ", ") + more
}

func casesCell(o *option) string {
	cs := slices.Sorted(maps.Keys(o.cases))
	if len(cs) > 6 {
		return fmt.Sprintf("%d cases", len(cs))
	}
	return strings.Join(cs, ", ")
}

// bothStop tells an entry that lists no difference: Debezium's task
// fails and pgoutbox stops at the same row, each after publishing the same
// records.
func (d Deliberate) bothStop() bool {
	return d.DebeziumFails != "" && d.PgoutboxStops != "" && d.PgoutboxRefuses == "" && d.DeadLetters == 0 && len(d.Records) == 0
}

// bothRefuse tells an entry where Kafka Connect and pgoutbox both refuse
// the configuration, and nothing else differs.
func (d Deliberate) bothRefuse() bool {
	return d.DebeziumRefuses != "" && d.PgoutboxRefuses != "" && d.DebeziumFails == "" && d.PgoutboxStops == "" && d.DeadLetters == 0 && len(d.Records) == 0
}

func resultCell(o *option) string {
	var differ, stop []string
	for _, c := range slices.Sorted(maps.Keys(o.differ)) {
		if o.differ[c].bothStop() || o.differ[c].bothRefuse() {
			stop = append(stop, c)
		} else {
			differ = append(differ, c)
		}
	}
	out := "tested equal"
	if len(differ) > 0 {
		out = fmt.Sprintf("tested equal in %d of %d cases; deliberate difference in %s (below)", len(o.cases)-len(differ), len(o.cases), strings.Join(differ, ", "))
		if len(differ) == len(o.cases) {
			out = "deliberate difference (below)"
		}
	}
	if len(stop) > 0 {
		out += fmt.Sprintf("; both stop in %s (below)", strings.Join(stop, ", "))
	}
	return out
}

func differenceLine(option, c string, d Deliberate) string {
	var what []string
	if d.DebeziumFails != "" {
		what = append(what, "Debezium's task fails")
	}
	if d.DebeziumRefuses != "" {
		what = append(what, "Kafka Connect refuses the configuration")
	}
	if d.PgoutboxRefuses != "" {
		what = append(what, "pgoutbox refuses the configuration at start")
	}
	if d.PgoutboxStops != "" {
		what = append(what, "pgoutbox stops")
	}
	if d.bothStop() {
		what = []string{"both stop, after the same records"}
	}
	if d.bothRefuse() {
		what = []string{"both refuse the configuration"}
	}
	switch {
	case d.DeadLetters == 1:
		what = append(what, "pgoutbox dead-letters a row")
	case d.DeadLetters > 1:
		what = append(what, fmt.Sprintf("pgoutbox dead-letters %d rows", d.DeadLetters))
	}
	if len(d.Records) > 0 {
		what = append(what, "records differ")
	}
	if len(what) == 0 {
		what = []string{"set aside by the case's normalisations"}
	}
	reason := strings.Join(strings.Fields(d.Reason), " ")
	return fmt.Sprintf("- `%s` (%s): %s. %s", option, c, strings.Join(what, ", "), reason)
}
