package main

import (
	"maps"
	"slices"
	"testing"
)

// --database-initial-statements splits as Debezium's JdbcConnection splits
// database.initial.statements.
func TestSplitStatements(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" ;  ; ", nil},
		{"SET search_path = app", []string{"SET search_path = app"}},
		{"SET a = 1; SET b = 2;", []string{"SET a = 1", "SET b = 2"}},
		{"DO $$BEGIN PERFORM 1;; END$$; SET c = 3", []string{"DO $$BEGIN PERFORM 1; END$$", "SET c = 3"}},
		{"a;;", []string{"a;"}},
		{"a;;;b", []string{"a;", "b"}},
		{";;", []string{";"}},
	} {
		var got []string
		if err := (statementsFlag{&got}).Set(tt.in); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%q: %q, want %q", tt.in, got, tt.want)
		}
		var again []string
		if err := (statementsFlag{&again}).Set((statementsFlag{&got}).String()); err != nil || !slices.Equal(again, got) {
			t.Errorf("%q: String %q reads back as %q", tt.in, (statementsFlag{&got}).String(), again)
		}
	}
}

// --template-param NAME=value, repeated, or several lines in one value.
func TestTemplateParams(t *testing.T) {
	var got map[string]string
	f := paramsFlag{&got}
	for _, v := range []string{"A=1", "B=x=y\nC=", "A=2"} {
		if err := f.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if want := map[string]string{"A": "2", "B": "x=y", "C": ""}; !maps.Equal(got, want) {
		t.Errorf("params %v, want %v", got, want)
	}
	for _, bad := range []string{"novalue", "=x"} {
		if err := f.Set(bad); err == nil {
			t.Errorf("%q taken", bad)
		}
	}
}
