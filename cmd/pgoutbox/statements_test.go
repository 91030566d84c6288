package main

import (
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
