package debezium

import (
	"slices"
	"strings"
	"testing"
)

// Without the router, column.exclude.list and column.include.list become
// --column-exclude-list and --column-include-list; their 1.x names, which
// Debezium 3.6.1 does not read, are ignored.
func TestColumnFilterFlags(t *testing.T) {
	for _, tt := range []struct{ key, flag string }{
		{"column.exclude.list", "column-exclude-list"},
		{"column.include.list", "column-include-list"},
		{"column.blacklist", ""},
		{"column.whitelist", ""},
	} {
		tr, err := translateConnect(t, `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "`+tt.key+`": "public\\.customers\\.ssn"}`)
		if err != nil {
			t.Fatalf("%s: %v", tt.key, err)
		}
		if tt.flag == "" {
			_, ex := settingOf(tr, "column-exclude-list")
			_, in := settingOf(tr, "column-include-list")
			if ex || in || !slices.ContainsFunc(tr.Ignored, func(s string) bool { return strings.HasPrefix(s, tt.key+" ") }) {
				t.Errorf("%s: not ignored: %v", tt.key, tr)
			}
			continue
		}
		if got, _ := settingOf(tr, tt.flag); got != `public\.customers\.ssn` {
			t.Errorf("%s: --%s %q", tt.key, tt.flag, got)
		}
	}
}

// column.mask.hash.<algorithm>.with.salt.<salt> and its v2 form become
// hash: and hash-v2: mappings after the truncations and masks; an
// algorithm Java lacks, MD2 and a salt the flag cannot hold are refused
// naming the key.
func TestColumnHashOptions(t *testing.T) {
	tr, err := translateConnect(t, `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "column.mask.hash.v2.SHA-512.with.salt.pepper": "public\\.customers\\.phone",
  "column.mask.hash.SHA-256.with.salt.CzQMA0cB5K": "public\\.customers\\.email,public\\.customers\\.phone",
  "column.mask.with.5.chars": "public\\.customers\\.name"}`)
	if err != nil {
		t.Fatal(err)
	}
	want := `mask:5:public\.customers\.name;hash:SHA-256:CzQMA0cB5K:public\.customers\.email,public\.customers\.phone;hash-v2:SHA-512:pepper:public\.customers\.phone`
	if got, _ := settingOf(tr, "column-mappings"); got != want {
		t.Errorf("--column-mappings %q, want %q", got, want)
	}
	tr, err = translateConnect(t, `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "column.mask.hash.hashing.strategy": "V2"}`)
	if err != nil || !slices.ContainsFunc(tr.Ignored, func(s string) bool { return strings.HasPrefix(s, "column.mask.hash.hashing.strategy ") }) {
		t.Errorf("column.mask.hash.hashing.strategy: not ignored: %v %v", err, tr)
	}
	for _, key := range []string{"column.mask.hash.SHA-3-256.with.salt.x", "column.mask.hash.MD2.with.salt.x", "column.mask.hash.v2.with.salt.x",
		"column.mask.hash.SHA-256.with.salt.a:b"} {
		_, err := translateConnect(t, `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "`+key+`": "public\\.customers\\.email"}`)
		if err == nil || !strings.Contains(err.Error(), key+": ") {
			t.Errorf("%s: %v", key, err)
		}
	}
}
