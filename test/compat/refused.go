package compat

import (
	"context"
	"strings"
)

// bothRefuse ends a case whose configuration Kafka Connect refused, as
// the case expects: each pgoutbox must refuse it at start too, and create
// no slot.
func (r *run) bothRefuse(ctx context.Context) error {
	// A standalone worker may keep the refused configuration, failed.
	r.undo = append(r.undo, func() { _ = r.env.Connect.Delete(context.Background(), r.id) })
	refuses := r.expect(func(d Deliberate) string { return d.PgoutboxRefuses })
	if refuses == "" {
		r.problem("Kafka Connect refused the configuration; the case does not say what pgoutbox does (pgoutbox-refuses)")
	}
	for _, form := range []string{"connect", "server"} {
		if (form == "connect" && r.c.Connect == nil) || (form == "server" && r.c.Server == "") {
			continue
		}
		if err := r.startPgoutbox(form); err != nil {
			return err
		}
	}
	for _, p := range r.pgo {
		select {
		case <-p.done:
		case <-ctx.Done():
			r.problem("pgoutbox (%s) did not refuse its configuration: it still runs", p.form)
			continue
		}
		if refuses != "" && !strings.Contains(p.out.String(), refuses) {
			r.problem("pgoutbox (%s): its output lacks %q:\n%s", p.form, refuses, p.out)
		}
		var n int
		if err := r.conn.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", p.slot).Scan(&n); err != nil {
			return err
		}
		if n != 0 {
			r.problem("pgoutbox (%s) refused its configuration but created its slot %s", p.form, p.slot)
		}
	}
	if r.c.Records != 0 {
		r.problem("Kafka Connect refused the configuration: no records, the case says %d", r.c.Records)
	}
	return nil
}
