package transform

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

// routed is a configuration with the outbox router first, and more.
func routed(more map[string]string) map[string]string {
	c := map[string]string{"transforms": "outbox", "transforms.outbox.type": RouterClass,
		"transforms.outbox.route.by.field": "kind"}
	maps.Copy(c, more)
	return c
}

const kt = "org.apache.kafka.connect.transforms."

// Parse reads the keys as Kafka Connect 4.3 does: what Connect refuses
// when the connector is created, or what fails its task at every record,
// is refused with the key named; options Connect ignores are listed; the
// router's own options are not Parse's.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		props   map[string]string
		stages  int
		refused []string // keys named in the error, "" for none
		ignored []string
	}{
		{"the router alone", routed(nil), 0, nil, nil},
		{"a RegexRouter", routed(map[string]string{"transforms": "outbox, r", "transforms.r.type": kt + "RegexRouter",
			"transforms.r.regex": "(.*)", "transforms.r.replacement": "x-$1"}), 1, nil, nil},
		{"an alias", routed(map[string]string{"transforms": "outbox,r", "transforms.r.type": "RegexRouter",
			"transforms.r.regex": "(.*)", "transforms.r.replacement": "$1"}), 1, nil, nil},
		{"Filter has no alias", routed(map[string]string{"transforms": "outbox,f", "transforms.f.type": "Filter"}), 0,
			[]string{"transforms.f.type"}, nil},
		{"missing options", routed(map[string]string{"transforms": "outbox,r", "transforms.r.type": kt + "RegexRouter"}), 0,
			[]string{"transforms.r.regex", "transforms.r.replacement"}, nil},
		{"lookaround", routed(map[string]string{"transforms": "outbox,r", "transforms.r.type": kt + "RegexRouter",
			"transforms.r.regex": "(?=a)a", "transforms.r.replacement": "b"}), 0, []string{"transforms.r.regex"}, nil},
		{"a group the regex lacks", routed(map[string]string{"transforms": "outbox,r", "transforms.r.type": kt + "RegexRouter",
			"transforms.r.regex": "(a)", "transforms.r.replacement": "$2"}), 0, []string{"transforms.r.replacement"}, nil},
		{"another transform", routed(map[string]string{"transforms": "outbox,x", "transforms.x.type": "com.example.transforms.Custom"}), 0,
			[]string{"transforms.x.type"}, nil},
		{"the key's struct once ValueToKey made one", routed(map[string]string{"transforms": "outbox,v,m,e,r",
			"transforms.v.type": kt + "ValueToKey", "transforms.v.fields": "a,b",
			"transforms.m.type": kt + "MaskField$Key", "transforms.m.fields": "b",
			"transforms.e.type": kt + "ExtractField$Key", "transforms.e.field": "a",
			"transforms.r.type": kt + "ReplaceField$Key", "transforms.r.exclude": "x"}), 4, nil, nil},
		{"SetSchemaMetadata$Key once HoistField$Key made a struct", routed(map[string]string{"transforms": "outbox,h,m",
			"transforms.h.type": kt + "HoistField$Key", "transforms.h.field": "id",
			"transforms.m.type": kt + "SetSchemaMetadata$Key", "transforms.m.schema.name": "com.example.Key"}), 2, nil, nil},
		{"Cast wrong", routed(map[string]string{"transforms": "outbox,a,b,c,d",
			"transforms.a.type": kt + "Cast$Value", "transforms.a.spec": "",
			"transforms.b.type": kt + "Cast$Value", "transforms.b.spec": "a:bytes",
			"transforms.c.type": kt + "Cast$Value", "transforms.c.spec": "string,a:int8",
			"transforms.d.type": kt + "Cast$Value", "transforms.d.spec": "a:b:c"}), 0,
			[]string{"transforms.a.spec", "transforms.b.spec", "transforms.c.spec", "transforms.d.spec"}, nil},
		{"TimestampConverter wrong", routed(map[string]string{"transforms": "outbox,a,b,c,d",
			"transforms.a.type": kt + "TimestampConverter$Value", "transforms.a.target.type": "string",
			"transforms.b.type": kt + "TimestampConverter$Value", "transforms.b.target.type": "date",
			"transforms.c.type": kt + "TimestampConverter$Value", "transforms.c.target.type": "unix", "transforms.c.unix.precision": "days",
			"transforms.d.type": kt + "TimestampConverter$Value", "transforms.d.target.type": "string", "transforms.d.format": "yyyy-ww"}), 0,
			[]string{"transforms.a.format", "transforms.b.target.type", "transforms.c.unix.precision", "transforms.d.format"}, nil},
		{"Flatten$Key of the router's key", routed(map[string]string{"transforms": "outbox,x", "transforms.x.type": kt + "Flatten$Key"}), 0,
			[]string{"transforms.x.type"}, nil},
		{"the key's struct of change events", map[string]string{"transforms": "e,i",
			"transforms.e.type": kt + "ExtractField$Key", "transforms.e.field": "id",
			"transforms.i.type": kt + "HoistField$Key", "transforms.i.field": "pk"}, 2, nil, nil},
		{"field transforms wrong", routed(map[string]string{"transforms": "outbox,a,b,c,d,e,f",
			"transforms.a.type": kt + "ExtractField$Value",
			"transforms.b.type": kt + "ExtractField$Value", "transforms.b.field": "a.`b.c`", "transforms.b.field.syntax.version": "v2",
			"transforms.c.type": kt + "ExtractField$Value", "transforms.c.field": "a", "transforms.c.field.syntax.version": "V3",
			"transforms.d.type": kt + "MaskField$Value", "transforms.d.fields": "a", "transforms.d.replacement": " ",
			"transforms.e.type": kt + "ValueToKey", "transforms.e.fields": "",
			"transforms.f.type": kt + "HoistField$Value"}), 0,
			[]string{"transforms.a.field", "transforms.b.field", "transforms.c.field.syntax.version", "transforms.d.replacement",
				"transforms.e.fields", "transforms.f.field"}, nil},
		{"a transform before the router", map[string]string{"transforms": "h,outbox", "transforms.outbox.type": RouterClass,
			"transforms.h.type": kt + "DropHeaders", "transforms.h.headers": "id"}, 0, []string{"transforms.h.type"}, nil},
		{"HeaderFrom$Value before the router, moving", map[string]string{"transforms": "h,outbox", "transforms.outbox.type": RouterClass,
			"transforms.h.type": kt + "HeaderFrom$Value", "transforms.h.fields": "op", "transforms.h.headers": "op", "transforms.h.operation": "move"}, 0,
			[]string{"transforms.h.operation"}, nil},
		{"no router: on the change events", map[string]string{"transforms": "h", "transforms.h.type": kt + "DropHeaders", "transforms.h.headers": "id"}, 1,
			nil, nil},
		{"two routers", routed(map[string]string{"transforms": "outbox,o2", "transforms.o2.type": RouterClass}), 0,
			[]string{"transforms.o2.type"}, nil},
		{"a duplicate alias", routed(map[string]string{"transforms": "outbox,h,h", "transforms.h.type": kt + "DropHeaders",
			"transforms.h.headers": "id"}), 0, []string{"transforms"}, nil},
		{"an undefined alias", routed(map[string]string{"transforms": "outbox,h"}), 0, []string{"transforms.h.type"}, nil},
		{"unknown options, and Kafka 2's names", routed(map[string]string{"transforms": "outbox,k", "transforms.k.type": kt + "ReplaceField$Value",
			"transforms.k.blacklist": "a", "transforms.k.whitelist": "b", "transforms.k.version": "4.3.1"}), 1, nil,
			[]string{"transforms.k.blacklist", "transforms.k.whitelist"}},
		{"DropHeaders empty, duplicated, an empty item", routed(map[string]string{"transforms": "outbox,a,b,c",
			"transforms.a.type": kt + "DropHeaders", "transforms.a.headers": " ",
			"transforms.b.type": kt + "DropHeaders", "transforms.b.headers": "x, x",
			"transforms.c.type": kt + "DropHeaders", "transforms.c.headers": "x,,y"}), 0,
			[]string{"transforms.a.headers", "transforms.b.headers", "transforms.c.headers"}, nil},
		{"HeaderFrom of unequal lists and a bad operation", routed(map[string]string{"transforms": "outbox,a,b",
			"transforms.a.type": kt + "HeaderFrom$Value", "transforms.a.fields": "x,y", "transforms.a.headers": "x", "transforms.a.operation": "copy",
			"transforms.b.type": kt + "HeaderFrom$Value", "transforms.b.fields": "x", "transforms.b.headers": "x", "transforms.b.operation": "swap"}), 0,
			[]string{"transforms.a.headers", "transforms.b.operation"}, nil},
		{"the key's struct", routed(map[string]string{"transforms": "outbox,a,b,c,d",
			"transforms.a.type": kt + "HeaderFrom$Key", "transforms.a.fields": "x", "transforms.a.headers": "x", "transforms.a.operation": "copy",
			"transforms.b.type": kt + "InsertField$Key", "transforms.b.topic.field": "t",
			"transforms.c.type": kt + "ReplaceField$Key", "transforms.c.exclude": "x",
			"transforms.d.type": kt + "SetSchemaMetadata$Key", "transforms.d.schema.name": "n"}), 0,
			[]string{"transforms.a.type", "transforms.b.type", "transforms.c.type", "transforms.d.type"}, nil},
		{"InsertField without a field, a static value or with an offset", routed(map[string]string{"transforms": "outbox,a,b,c",
			"transforms.a.type": kt + "InsertField$Value",
			"transforms.b.type": kt + "InsertField$Value", "transforms.b.static.field": "s",
			"transforms.c.type": kt + "InsertField$Value", "transforms.c.offset.field": "o"}), 0,
			[]string{"transforms.a.type", "transforms.b.static.value", "transforms.c.offset.field"}, nil},
		{"ReplaceField's renames", routed(map[string]string{"transforms": "outbox,a,b",
			"transforms.a.type": kt + "ReplaceField$Value", "transforms.a.renames": "a:b,:c",
			"transforms.b.type": kt + "ReplaceField$Value", "transforms.b.renames": "a:b:c"}), 1,
			[]string{"transforms.b.renames"}, nil},
		{"SetSchemaMetadata without either, a version not a number", routed(map[string]string{"transforms": "outbox,a,b",
			"transforms.a.type": kt + "SetSchemaMetadata$Value",
			"transforms.b.type": kt + "SetSchemaMetadata$Value", "transforms.b.schema.version": "v1"}), 0,
			[]string{"transforms.a.type", "transforms.b.schema.version"}, nil},
		{"TimestampRouter's pattern", routed(map[string]string{"transforms": "outbox,a,b",
			"transforms.a.type": kt + "TimestampRouter", "transforms.a.timestamp.format": "yyyyMMdd'",
			"transforms.b.type": kt + "TimestampRouter", "transforms.b.timestamp.format": "yyyy-ww"}), 0,
			[]string{"transforms.a.timestamp.format", "transforms.b.timestamp.format"}, nil},
		{"InsertHeader literals pgoutbox does not write", routed(map[string]string{"transforms": "outbox,a,b",
			"transforms.a.type": kt + "InsertHeader", "transforms.a.header": "h", "transforms.a.value.literal": "[1,2]",
			"transforms.b.type": kt + "InsertHeader", "transforms.b.header": "h", "transforms.b.value.literal": "2024-01-02"}), 0,
			[]string{"transforms.a.value.literal", "transforms.b.value.literal"}, nil},
		{"predicates", routed(map[string]string{"transforms": "outbox,f,g",
			"transforms.f.type": kt + "Filter", "transforms.f.predicate": "p",
			"transforms.g.type": kt + "Filter", "transforms.g.predicate": "q", "transforms.g.negate": "TRUE",
			"predicates": "p,q,unused", "predicates.p.type": kt + "predicates.TopicNameMatches", "predicates.p.pattern": "a.*",
			"predicates.q.type": "HasHeaderKey", "predicates.q.name": "h", "predicates.unused.type": "RecordIsTombstone"}), 2, nil, nil},
		{"predicates wrong", routed(map[string]string{"transforms": "outbox,f,g,h",
			"transforms.f.type": kt + "Filter", "transforms.f.predicate": "nope",
			"transforms.g.type": kt + "Filter", "transforms.g.negate": "true",
			"transforms.h.type": kt + "Filter", "transforms.h.predicate": "p", "transforms.h.negate": "yes",
			"predicates": "p,q,r", "predicates.p.type": "TopicNameMatches", "predicates.p.pattern": "",
			"predicates.q.type": "HasHeaderKey", "predicates.r.type": "RecordIsTombstone2"}), 0,
			[]string{"transforms.f.predicate", "transforms.g.negate", "transforms.h.negate", "predicates.p.pattern", "predicates.q.name", "predicates.r.type"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, ignored, err := Parse(Config{Props: tc.props})
			if len(tc.refused) > 0 {
				var ce *ConfigError
				if !errors.As(err, &ce) {
					t.Fatalf("err %v, want a *ConfigError", err)
				}
				for _, k := range tc.refused {
					if !strings.Contains(err.Error(), k+":") {
						t.Errorf("%s not named in %v", k, err)
					}
				}
				if len(ce.Problems) != len(tc.refused) {
					t.Errorf("%d problems, want %d: %v", len(ce.Problems), len(tc.refused), ce.Problems)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ch.Len() != tc.stages {
				t.Errorf("%d stages, want %d", ch.Len(), tc.stages)
			}
			if !slices.Equal(ignored, tc.ignored) {
				t.Errorf("ignored %v, want %v", ignored, tc.ignored)
			}
		})
	}
}

// Debezium Server's keys carry debezium., and the errors name them so.
func TestParseServerNames(t *testing.T) {
	_, ignored, err := Parse(Config{Props: map[string]string{
		"debezium.transforms": "outbox,r", "debezium.transforms.outbox.type": RouterClass,
		"debezium.transforms.r.type": kt + "RegexRouter", "debezium.transforms.r.regex": "(",
		"debezium.transforms.r.replacement": "x", "debezium.transforms.r.other": "y",
	}})
	if err == nil || !strings.Contains(err.Error(), "debezium.transforms.r.regex:") {
		t.Errorf("err %v, want debezium.transforms.r.regex named", err)
	}
	if !slices.Equal(ignored, []string{"debezium.transforms.r.other"}) {
		t.Errorf("ignored %v", ignored)
	}
}

// negate without a predicate: Kafka Connect refuses it; Debezium Server's
// engine reads it only with a predicate (the Debezium Operator writes
// negate=false for every transform), so it is left unused there.
func TestNegateWithoutPredicate(t *testing.T) {
	_, _, err := Parse(Config{Props: map[string]string{
		"transforms": "outbox,r", "transforms.outbox.type": RouterClass,
		"transforms.r.type": kt + "RegexRouter", "transforms.r.regex": "(.*)", "transforms.r.replacement": "x$1",
		"transforms.r.negate": "false",
	}})
	if err == nil || !strings.Contains(err.Error(), "transforms.r.negate: given without transforms.r.predicate") {
		t.Errorf("Kafka Connect form: %v, want negate refused", err)
	}
	ch, ignored, err := Parse(Config{Props: map[string]string{
		"debezium.transforms": "t0,t1", "debezium.transforms.t0.type": RouterClass, "debezium.transforms.t0.negate": "false",
		"debezium.transforms.t1.type": kt + "RegexRouter", "debezium.transforms.t1.regex": "(.*)", "debezium.transforms.t1.replacement": "x$1",
		"debezium.transforms.t1.negate": "false",
	}})
	if err != nil || ch.Len() != 1 {
		t.Fatalf("Debezium Server form: chain %v, %v", ch, err)
	}
	if !slices.Equal(ignored, []string{"debezium.transforms.t1.negate"}) {
		t.Errorf("ignored %v", ignored)
	}
}

func TestNoChain(t *testing.T) {
	ch, err := New(Config{Props: routed(nil)})
	if err != nil || ch.Len() != 0 || ch != nil {
		t.Errorf("chain %v, err %v: want none", ch, err)
	}
	if ch, err := New(Config{}); ch != nil || err != nil {
		t.Errorf("empty config: chain %v, err %v", ch, err)
	}
}
