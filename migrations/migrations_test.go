package migrations

import (
	"fmt"
	"strings"
	"testing"
)

// Every embedded migration is applied in its number's order, without what
// its file keeps below the marker to undo it.
func TestUpMigrations(t *testing.T) {
	ups, err := upMigrations()
	if err != nil {
		t.Fatal(err)
	}
	latest, err := Latest()
	if err != nil {
		t.Fatal(err)
	}
	if int32(len(ups)) != latest || latest < 13 {
		t.Fatalf("%d migrations, Latest %d", len(ups), latest)
	}
	for i, m := range ups {
		if !strings.HasPrefix(m.name, fmt.Sprintf("%03d_", i+1)) {
			t.Errorf("migration %d is %s", i+1, m.name)
		}
		if strings.Contains(m.sql, "drop below") {
			t.Errorf("%s: the down part is applied too:\n%s", m.name, m.sql)
		}
	}
	if !strings.Contains(ups[12].sql, "CREATE TABLE IF NOT EXISTS pgoutbox_lease") {
		t.Errorf("013 does not create the lease table:\n%s", ups[12].sql)
	}
}
