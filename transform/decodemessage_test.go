package transform

import (
	"strings"
	"testing"
)

func TestMessageDecode(t *testing.T) {
	const decode = "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent"
	for _, tc := range []struct {
		name  string
		props map[string]string
		// nulls is fields.null.include; refused the text of the refusal
		// ("" when taken); none: the chain has no decode.
		nulls   bool
		refused string
		none    bool
	}{
		{name: "documented chain", props: map[string]string{
			"transforms": "decode,outbox", "transforms.decode.type": decode, "transforms.outbox.type": RouterClass}},
		{name: "null fields", nulls: true, props: map[string]string{
			"transforms": "decode,outbox", "transforms.decode.type": decode, "transforms.decode.fields.null.include": "TRUE",
			"transforms.outbox.type": RouterClass}},
		{name: "Debezium Server", props: map[string]string{
			"debezium.transforms": "d,r", "debezium.transforms.d.type": decode, "debezium.transforms.r.type": RouterClass}},
		{name: "with transforms after the router", props: map[string]string{
			"transforms": "decode,outbox,rename", "transforms.decode.type": decode, "transforms.outbox.type": RouterClass,
			"transforms.rename.type":  "org.apache.kafka.connect.transforms.RegexRouter",
			"transforms.rename.regex": "(.*)", "transforms.rename.replacement": "x.$1"}},
		{name: "not a boolean", refused: "transforms.decode.fields.null.include: \"yes\": want true or false", props: map[string]string{
			"transforms": "decode,outbox", "transforms.decode.type": decode, "transforms.decode.fields.null.include": "yes",
			"transforms.outbox.type": RouterClass}},
		{name: "after the router", refused: "transforms.decode.type: " + decode + " after the Outbox Event Router", props: map[string]string{
			"transforms": "outbox,decode", "transforms.decode.type": decode, "transforms.outbox.type": RouterClass}},
		{name: "without the router", refused: "without the Outbox Event Router after it", props: map[string]string{
			"transforms": "decode", "transforms.decode.type": decode}},
		{name: "twice", refused: "listed twice", props: map[string]string{
			"transforms": "a,b,outbox", "transforms.a.type": decode, "transforms.b.type": decode, "transforms.outbox.type": RouterClass}},
		{name: "predicate", refused: "transforms.decode.predicate: a predicate on", props: map[string]string{
			"transforms": "decode,outbox", "transforms.decode.type": decode, "transforms.decode.predicate": "p",
			"transforms.outbox.type": RouterClass,
			"predicates":             "p", "predicates.p.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches", "predicates.p.pattern": ".*"}},
		{name: "no decode", none: true, props: map[string]string{
			"transforms": "outbox,rename", "transforms.outbox.type": RouterClass,
			"transforms.rename.type":  "org.apache.kafka.connect.transforms.RegexRouter",
			"transforms.rename.regex": "(.*)", "transforms.rename.replacement": "x.$1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props := map[string]string{}
			for k, v := range tc.props {
				props[k] = v
			}
			ch, ignored, err := Parse(Config{Props: props})
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("err %v, want %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(ignored) > 0 {
				t.Errorf("ignored %v", ignored)
			}
			d := ch.MessageDecode()
			if tc.none {
				if d != nil {
					t.Fatalf("decode %+v", d)
				}
				return
			}
			if d == nil || d.NullFields != tc.nulls {
				t.Fatalf("decode %+v, want fields.null.include %v", d, tc.nulls)
			}
			if ch.BeforeRouter() || !ch.AfterRouter() {
				t.Errorf("BeforeRouter %v AfterRouter %v: the decode is no stage on the change event", ch.BeforeRouter(), ch.AfterRouter())
			}
		})
	}
	var none *Chain
	if none.MessageDecode() != nil {
		t.Error("a nil chain decodes messages")
	}
}
