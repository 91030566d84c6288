package router

import (
	"errors"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/schema"
)

// referenceRender is a naive renderer: textual replacement of the three
// placeholders, an independent oracle for the parser and renderer.
func referenceRender(template string, r *schema.Record) string {
	if template == "" {
		template = DefaultTopic
	}
	return strings.NewReplacer(
		"{aggregatetype}", r.AggregateType,
		"{aggregateid}", r.AggregateID,
		"{type}", r.Type,
	).Replace(template)
}

func usesEmptyField(template string, r *schema.Record) bool {
	if template == "" {
		template = DefaultTopic
	}
	return strings.Contains(template, "{aggregatetype}") && r.AggregateType == "" ||
		strings.Contains(template, "{aggregateid}") && r.AggregateID == "" ||
		strings.Contains(template, "{type}") && r.Type == ""
}

func legalTopic(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 249 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// FuzzTopic parses random templates and renders random records. Nothing may
// panic; an accepted template renders exactly what textual replacement gives
// whenever that is a legal topic, and a *schema.RowError otherwise.
func FuzzTopic(f *testing.F) {
	for _, s := range [][4]string{
		{"", "Order", "42", "OrderCreated"},
		{"outbox.event.{aggregatetype}", "Order Line", "42", "x"},
		{"{aggregatetype}.{type}", "A", "1", "created.v2"},
		{"t-{aggregatetype}-{aggregateid}-{type}", "A", "b", "C"},
		{"{aggregatetype}", ".", "1", "t"},
		{"{aggregatetype}{type}", ".", "1", "."},
		{"constant", "A", "1", "t"},
		{"bad{", "A", "1", "t"},
		{"bad}", "A", "1", "t"},
		{"{unknown}", "A", "1", "t"},
		{"{{type}}", "A", "1", "t"},
		{"x{aggregateid}", "A", strings.Repeat("9", 249), "t"},
		{"..", "A", "1", "t"},
		{"{type}", "A", "1", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, template, aggType, aggID, typ string) {
		r, err := New(Config{Topic: template})
		if verr := (Config{Topic: template}).Validate(); (verr == nil) != (err == nil) {
			t.Fatalf("Validate and New disagree on %q: %v vs %v", template, verr, err)
		}
		if err != nil {
			return
		}
		rec := &schema.Record{AggregateType: aggType, AggregateID: aggID, Type: typ}
		want := referenceRender(template, rec)
		for range 2 { // again, possibly from the cache
			got, err := r.Topic(rec)
			if err != nil {
				var re *schema.RowError
				if !errors.As(err, &re) {
					t.Fatalf("Topic error %v is not a *schema.RowError", err)
				}
				if re.Column != "aggregatetype" && re.Column != "aggregateid" && re.Column != "type" {
					t.Fatalf("RowError column %q", re.Column)
				}
				if legalTopic(want) && !usesEmptyField(template, rec) {
					// Only an empty field is refused even when the rest
					// makes a legal topic.
					t.Fatalf("Topic(%q) refused legal topic %q: %v", template, want, err)
				}
				continue
			}
			if got != want {
				t.Fatalf("Topic(%q) = %q, reference %q", template, got, want)
			}
			if !legalTopic(got) {
				t.Fatalf("Topic(%q) = %q: not a legal Kafka topic", template, got)
			}
		}
	})
}
