package compat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/test/connecttest"
	"github.com/pgoutbox/pgoutbox/transform"
)

// Env is what every case runs against: one PostgreSQL server (a database
// per case), one Kafka, one Kafka Connect worker, and the pgoutbox binary.
type Env struct {
	// AdminURL connects to the server as a superuser; each case's
	// database is made from it.
	AdminURL string
	Brokers  []string
	Connect  *connecttest.Worker
	Bin      string
	// RegistryAPI is Apicurio Registry's API (…/apis/registry/v2) for
	// the cases that use a schema registry; "" when none runs.
	RegistryAPI string
	// Registries are the APIs of the registries started for cases with
	// settings of their own, by RegistryKey.
	Registries map[string]string
	// Dir holds each case's configuration files, in a directory per case.
	Dir string
}

// The harness's fixed names. A case's topic prefix (Debezium's
// topic.prefix) is its identifier, the same on both sides (it is part of
// schema names and headers) and unique in the worker, whose connectors'
// metrics are named by it.
const (
	// fencePrefix is the prefix of the logical decoding message written
	// after a case's rows: Debezium's committed offset passes it once
	// every record before it is acknowledged (message.prefix.include.list
	// names it alone), and pgoutbox confirms its position once everything
	// before it is acknowledged.
	fencePrefix = "compat-fence"
	// caseTimeout bounds one case, from its database to its comparison.
	caseTimeout = 60 * time.Second
)

// Side is one system's stream of a case.
type Side struct {
	// Name is "debezium", or "pgoutbox" with the form it read
	// ("pgoutbox (connect)", "pgoutbox (server)").
	Name    string
	Prefix  string
	Records []Record
	// Output is what the process printed (pgoutbox), or the worker's log
	// lines about the connector (Debezium).
	Output string
	// Failed is Debezium's task trace or pgoutbox's exit, when it stopped.
	Failed string
	// DeadLetters counts pgoutbox's dead-letter records.
	DeadLetters int
	// Topics describe the topics it created, for a case that names topic
	// configs (compareTopics).
	Topics []string
}

// Result is a case's outcome: Debezium's stream, each pgoutbox stream, and
// what differs.
type Result struct {
	Case     Case
	Debezium Side
	Pgoutbox []Side
	// Problems are what makes the case fail: differences no deliberate
	// difference explains, expectations not met, errors.
	Problems []string
	Took     time.Duration
}

// Equal tells whether the case passed.
func (r Result) Equal() bool { return len(r.Problems) == 0 }

// run is one case's run: its names and processes.
type run struct {
	env    *Env
	c      Case
	id     string // lower-case letters, digits and underscores
	dbURL  string
	dbName string
	conn   *pgx.Conn
	pgo    []*pgoProc
	result *Result
	undo   []func()
	// fenceXIDs are the fences' transactions, as the WAL names them (the
	// low 32 bits): with transaction metadata, Debezium writes a BEGIN and
	// an END for each (txmeta.go).
	fenceXIDs []string
}

type pgoProc struct {
	form, slot, prefix string
	cmd                *exec.Cmd
	out                *syncBuffer
	done               chan struct{}
	err                error
}

// Run runs one case: its own database, Debezium's connector and a
// pgoutbox per form, the rows, and the comparison. It may run beside other
// cases; it stops what it started before it returns.
func (e *Env) Run(c Case) Result {
	start := time.Now()
	timeout := caseTimeout
	if c.Restart != nil {
		timeout *= 2 // both sides start twice
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r := &run{env: e, c: c, id: identifier(c.Name), result: &Result{Case: c}}
	err := r.run(ctx)
	if err != nil {
		r.result.Problems = append(r.result.Problems, err.Error())
	}
	r.stop()
	for i := len(r.undo) - 1; i >= 0; i-- {
		r.undo[i]()
	}
	r.result.Took = time.Since(start)
	return *r.result
}

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

func identifier(name string) string {
	return "c_" + nonIdent.ReplaceAllString(strings.ToLower(name), "_")
}

func (r *run) run(ctx context.Context) error {
	if err := r.database(ctx); err != nil {
		return err
	}
	// Debezium.
	dbz := r.debeziumConfig()
	r.result.Debezium = Side{Name: "debezium", Prefix: "dbz." + r.c.Name + "."}
	if err := r.env.Connect.Create(ctx, r.id, dbz); err != nil {
		if want := r.expect(func(d Deliberate) string { return d.DebeziumRefuses }); want != "" && strings.Contains(strings.ReplaceAll(err.Error(), `\"`, `"`), want) { // the answer is JSON
			return r.bothRefuse(ctx) // refused.go
		}
		return fmt.Errorf("creating Debezium's connector: %w", err)
	}
	r.undo = append(r.undo, func() { _ = r.env.Connect.Delete(context.Background(), r.id) })
	// pgoutbox, once per form.
	if r.c.Connect != nil {
		if err := r.startPgoutbox("connect"); err != nil {
			return err
		}
	}
	if r.c.Server != "" {
		if err := r.startPgoutbox("server"); err != nil {
			return err
		}
	}
	refuses := r.expect(func(d Deliberate) string { return d.PgoutboxRefuses })
	if !r.c.streams() {
		if r.c.Restart != nil {
			if err := r.snapshotRestart(ctx); err != nil {
				return err
			}
		}
		return r.snapshotOnly(ctx)
	}
	if err := r.awaitStreaming(ctx, refuses != ""); err != nil {
		return err
	}
	if refuses != "" {
		for _, p := range r.pgo {
			if !strings.Contains(p.out.String(), refuses) {
				r.problem("%s: its output lacks %q", p.form, refuses)
			}
			var n int
			if err := r.conn.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", p.slot).Scan(&n); err != nil {
				return err
			}
			if n != 0 {
				r.problem("pgoutbox (%s) refused its configuration but created its slot %s", p.form, p.slot)
			}
		}
	}
	rows := r.c.Rows
	if r.c.Restart != nil {
		if err := r.published(ctx, rows[:*r.c.Restart], refuses == ""); err != nil {
			return err
		}
		if err := r.restart(ctx); err != nil {
			return err
		}
		rows = rows[*r.c.Restart:]
	}
	if err := r.published(ctx, rows, refuses == ""); err != nil {
		return err
	}
	return r.compare(ctx)
}

// published writes rows, each its own transaction, then the fence, and
// waits until Debezium and, unless they refused, each pgoutbox published
// them.
func (r *run) published(ctx context.Context, rows []string, pgoutbox bool) error {
	for i, q := range rows {
		if _, err := r.conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("row %d: %w", i+1, err)
		}
	}
	var fence, fenceXID string
	if err := r.conn.QueryRow(ctx, "SELECT pg_logical_emit_message(true, $1, $2)::text, (txid_current() % 4294967296)::text", fencePrefix, r.fenceContent()).Scan(&fence, &fenceXID); err != nil {
		return fmt.Errorf("writing the fence: %w", err)
	}
	r.fenceXIDs = append(r.fenceXIDs, fenceXID)
	if err := r.awaitDebezium(ctx, fence); err != nil {
		return err
	}
	if pgoutbox {
		return r.awaitPgoutbox(ctx, fence)
	}
	return nil
}

// restart stops both sides and starts them again, slots and offsets kept:
// Debezium's task through Kafka Connect's REST API, each pgoutbox by
// SIGTERM and the same command; then waits until each slot streams to a
// new reader.
func (r *run) restart(ctx context.Context) error {
	was := map[string]int{}
	slots := []string{r.id + "_dbz"}
	for _, p := range r.pgo {
		slots = append(slots, p.slot)
	}
	for _, s := range slots {
		var pid int
		if err := r.conn.QueryRow(ctx, "SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = $1", s).Scan(&pid); err != nil {
			return fmt.Errorf("slot %s: %w", s, err)
		}
		was[s] = pid
	}
	for _, p := range r.pgo {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-ctx.Done():
			return fmt.Errorf("pgoutbox (%s) did not stop", p.form)
		}
		if p.err != nil {
			return fmt.Errorf("pgoutbox (%s) stopped with %v\n%s", p.form, p.err, p.out)
		}
		if err := p.relaunch(); err != nil {
			return err
		}
	}
	if err := r.restartDebezium(ctx); err != nil {
		return err
	}
	for _, s := range slots {
		for {
			var pid int
			if err := r.conn.QueryRow(ctx, "SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = $1", s).Scan(&pid); err != nil {
				return fmt.Errorf("slot %s: %w", s, err)
			}
			if pid != was[s] {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("slot %s still held by its reader from before the restart", s)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return r.awaitStreaming(ctx, false)
}

// relaunch starts a stopped pgoutbox again with the same command.
func (p *pgoProc) relaunch() error {
	fmt.Fprintf(p.out, "\n--- restarted by the harness ---\n")
	cmd := exec.Command(p.cmd.Path, p.cmd.Args[1:]...)
	cmd.Stdout, cmd.Stderr, cmd.SysProcAttr = p.out, p.out, p.cmd.SysProcAttr
	if err := cmd.Start(); err != nil {
		return err
	}
	p.cmd, p.done, p.err = cmd, make(chan struct{}), nil
	go func(p *pgoProc, done chan struct{}) {
		p.err = cmd.Wait()
		close(done)
	}(p, p.done)
	return nil
}

// restartDebezium restarts Debezium's connector and task through Kafka
// Connect's REST API.
func (r *run) restartDebezium(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.env.Connect.URL+"/connectors/"+r.id+"/restart?includeTasks=true", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("restarting Debezium's connector: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode > 299 {
		return fmt.Errorf("restarting Debezium's connector: %s", resp.Status)
	}
	return nil
}

// snapshotRestart is the first start of a case whose snapshot.mode streams
// nothing and that restarts: once each pgoutbox exited after its snapshot
// and Debezium wrote as many records as the first, it writes the rows,
// which neither side streams, and starts both sides again, whose new
// snapshots publish them.
func (r *run) snapshotRestart(ctx context.Context) error {
	if err := r.awaitExits(ctx, "after its first snapshot"); err != nil {
		return err
	}
	if len(r.result.Pgoutbox) == 0 {
		return errors.New("no pgoutbox to count the first snapshot's records by")
	}
	first, err := readPrefix(ctx, r.env.Brokers, r.result.Pgoutbox[0].Prefix, "")
	if err != nil {
		return err
	}
	for {
		if s, err := r.env.Connect.Status(ctx, r.id); err == nil && s.Failed() != "" {
			return fmt.Errorf("Debezium's task failed:\n%s", causes(s.Failed()))
		}
		recs, err := readPrefix(ctx, r.env.Brokers, r.result.Debezium.Prefix, "")
		if err != nil {
			return err
		}
		if len(recs) >= len(first) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("Debezium's first snapshot wrote %d records, pgoutbox's %d", len(recs), len(first))
		case <-time.After(200 * time.Millisecond):
		}
	}
	for i, q := range r.c.Rows {
		if _, err := r.conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("row %d: %w", i+1, err)
		}
	}
	for _, p := range r.pgo {
		if err := p.relaunch(); err != nil {
			return err
		}
	}
	return r.restartDebezium(ctx)
}

// awaitExits waits until each pgoutbox exited, which a case whose
// snapshot.mode streams nothing does once its snapshot is published; when
// says when it should have.
func (r *run) awaitExits(ctx context.Context, when string) error {
	for _, p := range r.pgo {
		select {
		case <-p.done:
			if p.err != nil {
				return fmt.Errorf("pgoutbox (%s) exited with %v\n%s", p.form, p.err, p.out)
			}
		case <-ctx.Done():
			return fmt.Errorf("pgoutbox (%s) did not exit %s", p.form, when)
		}
	}
	return nil
}

// snapshotOnly runs a case whose snapshot.mode streams nothing: it waits
// until Debezium wrote the case's records and each pgoutbox exited once it
// published them, then compares.
func (r *run) snapshotOnly(ctx context.Context) error {
	if err := r.awaitExits(ctx, fmt.Sprintf("after its snapshot within %v", caseTimeout)); err != nil {
		return err
	}
	for {
		if s, err := r.env.Connect.Status(ctx, r.id); err == nil && s.Failed() != "" {
			return fmt.Errorf("Debezium's task failed:\n%s", causes(s.Failed()))
		}
		recs, err := readPrefix(ctx, r.env.Brokers, r.result.Debezium.Prefix, "")
		if err != nil {
			return err
		}
		if len(recs) >= r.c.Records {
			return r.compare(ctx)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("Debezium wrote %d records of %d within %v", len(recs), r.c.Records, caseTimeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// database creates the case's database and table, and its publications
// when the case makes them.
func (r *run) database(ctx context.Context) error {
	r.dbName = r.id
	admin, err := pgx.Connect(ctx, r.env.AdminURL)
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{r.dbName}.Sanitize()); err != nil {
		return fmt.Errorf("creating the case's database: %w", err)
	}
	u, err := url.Parse(r.env.AdminURL)
	if err != nil {
		return err
	}
	u.Path = "/" + r.dbName
	r.dbURL = u.String()
	if r.conn, err = pgx.Connect(ctx, r.dbURL); err != nil {
		return err
	}
	r.undo = append(r.undo, func() { r.conn.Close(context.Background()) }, func() { dropSlots(r.conn) })
	if _, err := r.conn.Exec(ctx, r.c.Table); err != nil {
		return fmt.Errorf("table: %w", err)
	}
	for i, q := range r.c.Existing {
		if _, err := r.conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("existing row %d: %w", i+1, err)
		}
	}
	if r.c.Publication != "" {
		for _, side := range r.sides() {
			if _, err := r.conn.Exec(ctx, "CREATE PUBLICATION "+r.id+"_"+side+" "+r.c.Publication); err != nil {
				return fmt.Errorf("publication: %w", err)
			}
		}
	}
	return nil
}

// dropSlots drops the replication slots of conn's database (a case's)
// once their readers are gone (Debezium's task and pgoutbox stopped before
// it runs): the cases of a corpus would otherwise hold two or three slots
// each to the end, more than a server has.
func dropSlots(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		// A slot whose reader is still leaving is dropped on a later turn.
		_, _ = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
WHERE database = current_database() AND NOT active`)
		var left int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE database = current_database()").Scan(&left); err == nil && left == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sides are the suffixes of the slots and publications: dbz for Debezium,
// pgo and pgs for pgoutbox reading the Connect and the Server form.
func (r *run) sides() []string {
	s := []string{"dbz"}
	if r.c.Connect != nil {
		s = append(s, "pgo")
	}
	if r.c.Server != "" {
		s = append(s, "pgs")
	}
	return s
}

// harness are the settings that tie a connector configuration to this
// run, in Kafka Connect's names.
func (r *run) harness(side string) map[string]string {
	u, _ := url.Parse(r.env.AdminURL)
	h := map[string]string{
		"database.hostname": u.Hostname(),
		"database.port":     u.Port(),
		"database.user":     u.User.Username(),
		"database.dbname":   r.dbName,
		"topic.prefix":      r.id,
		"slot.name":         r.id + "_" + side,
		"publication.name":  r.id + "_" + side,
	}
	if mode, ok := r.c.harnessSnapshot(); ok {
		h["snapshot.mode"] = mode
	}
	for _, part := range registryParts(r.c.DebeziumConfig()) {
		h[registryPrefix(r.c.DebeziumConfig(), part)+"apicurio.registry.url"] = r.registryAPI()
	}
	return h
}

// debeziumConfig is the case's configuration with the harness's settings,
// the fence, and a RegexRouter at the end that puts Debezium's topics
// under its prefix.
//
// The fence is a logical decoding message (message.prefix.include.list
// names its prefix alone), which Debezium publishes as a record to
// <topic.prefix>.message; Connect commits its offset once every record
// before it is acknowledged. The case's transforms let it pass unchanged;
// then, for that topic alone, transforms make its key and value the
// message's content (bytes), which every converter writes: a record the
// chain dropped would never have its offset committed.
func (r *run) debeziumConfig() map[string]string {
	conf := r.c.DebeziumConfig()
	maps.Copy(conf, r.harness("dbz"))
	const fence, prefix = "compatfence", "compatprefix"
	// A case that reads messages of its own keeps them (its fence is an
	// outbox event then: fenceContent).
	if list := strings.TrimSpace(conf["message.prefix.include.list"]); list != "" {
		conf["message.prefix.include.list"] = list + "," + fencePrefix
	} else {
		conf["message.prefix.include.list"] = fencePrefix
	}
	var chain []string
	if list := strings.TrimSpace(conf["transforms"]); list != "" {
		chain = append(chain, list)
	}
	steps := [][3]string{
		{"ExtractField$Value", "field", "message"},
		{"ValueToKey", "fields", "content"},
		{"ExtractField$Key", "field", "content"},
		{"ExtractField$Value", "field", "content"},
	}
	// A registry converter that names subjects after records writes
	// records only: its part stays a struct.
	if recordStrategy(conf, "key") {
		steps = slices.DeleteFunc(steps, func(s [3]string) bool { return s[0] == "ExtractField$Key" })
	}
	// Kafka's number converters write a number of their type alone: the
	// fence's key is its time, cast to that type.
	if typ, ok := numberKey[conf["key.converter"]]; ok {
		steps = [][3]string{
			{"ValueToKey", "fields", "ts_ms"},
			{"ExtractField$Key", "field", "ts_ms"},
			{"Cast$Key", "spec", typ},
			{"ExtractField$Value", "field", "message"},
			{"ExtractField$Value", "field", "content"},
		}
	}
	// Debezium's CloudEventsConverter writes a record it cannot make an
	// event of as a null, and fails on a schema without a name: its
	// value stays the message's struct.
	if recordStrategy(conf, "value") || conf["value.converter"] == "io.debezium.converters.CloudEventsConverter" {
		steps = steps[:len(steps)-1]
	}
	// With its metadata from headers, the converter makes an event of
	// any record with source and op headers, and fails on one without
	// an id: the fence's (a HeaderFrom before the router copies them)
	// are dropped, and it writes the fence as a null.
	if strings.HasPrefix(strings.TrimSpace(conf["value.converter.metadata.source"]), "header") {
		steps = append(steps, [3]string{"DropHeaders", "headers", "source,op"})
	}
	for i, t := range steps {
		name := fmt.Sprintf("%s%d", fence, i)
		chain = append(chain, name)
		conf["transforms."+name+".type"] = "org.apache.kafka.connect.transforms." + t[0]
		conf["transforms."+name+"."+t[1]] = t[2]
		conf["transforms."+name+".predicate"] = fence
	}
	conf["transforms"] = strings.Join(append(chain, prefix), ",")
	preds := []string{fence}
	if list := strings.TrimSpace(conf["predicates"]); list != "" {
		preds = append(preds, list)
	}
	conf["predicates"] = strings.Join(preds, ",")
	conf["predicates."+fence+".type"] = "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"
	conf["predicates."+fence+".pattern"] = regexp.QuoteMeta(r.fenceTopic())
	conf["transforms."+prefix+".type"] = "org.apache.kafka.connect.transforms.RegexRouter"
	conf["transforms."+prefix+".regex"] = "(.*)"
	conf["transforms."+prefix+".replacement"] = "dbz." + r.c.Name + ".$1"
	return conf
}

// numberKey is the Connect type of each of Kafka's number converters.
var numberKey = map[string]string{
	"org.apache.kafka.connect.converters.LongConverter":    "int64",
	"org.apache.kafka.connect.converters.IntegerConverter": "int32",
	"org.apache.kafka.connect.converters.ShortConverter":   "int16",
	"org.apache.kafka.connect.converters.FloatConverter":   "float32",
	"org.apache.kafka.connect.converters.DoubleConverter":  "float64",
	"org.apache.kafka.connect.converters.BooleanConverter": "boolean",
}

// fenceAggregate is the aggregate type of the fence of a case that decodes
// messages into outbox events.
const fenceAggregate = "compatfence"

// decodesMessages tells a case whose Debezium configuration decodes
// logical decoding messages into outbox events
// (DecodeLogicalDecodingMessageContent), the fence's message included.
func (r *run) decodesMessages() bool {
	conf := r.c.DebeziumConfig()
	for _, a := range strings.Split(conf["transforms"], ",") {
		if strings.TrimSpace(conf["transforms."+strings.TrimSpace(a)+".type"]) == transform.DecodeMessageClass {
			return true
		}
	}
	return false
}

// fenceContent is the fence message's content: the case's name, or, where
// DecodeLogicalDecodingMessageContent and the router make an event of
// every message, an event of its own aggregate type, left out of the
// comparison (fenceEvent).
func (r *run) fenceContent() string {
	if !r.decodesMessages() {
		return r.c.Name
	}
	return fmt.Sprintf(`{"id": "compat-fence", "aggregatetype": %q, "aggregateid": %q, "type": "fence", "payload": %q}`, fenceAggregate, r.c.Name, r.c.Name)
}

// fenceEvent tells the fence's outbox event among Debezium's records.
func fenceEvent(rec Record) bool { return strings.Contains(rec.Topic, fenceAggregate) }

// fenceTopic is where Debezium publishes the fence's message.
func (r *run) fenceTopic() string { return r.id + ".message" }

// router is the name of the configuration's outbox router transform, ""
// when it has none.
func router(conf map[string]string) string {
	for _, name := range strings.Split(conf["transforms"], ",") {
		name = strings.TrimSpace(name)
		if conf["transforms."+name+".type"] == "io.debezium.transforms.outbox.EventRouter" {
			return name
		}
	}
	return ""
}

// startPgoutbox writes the case's configuration in form ("connect" or
// "server") with the harness's settings, and runs pgoutbox with it.
func (r *run) startPgoutbox(form string) error {
	side, short := "pgo", "connect"
	if form == "server" {
		side, short = "pgs", "server"
	}
	prefix := side + "." + r.c.Name + "."
	h := r.harness(side)
	dir := filepath.Join(r.env.Dir, r.c.Name, side)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var path string
	var args []string
	var conf map[string]string // Connect names, for the topic
	// With transforms after the router (or predicates), the prefix comes
	// last, by the RegexRouter Debezium's side has: the case's transforms
	// see the topics Debezium's see.
	chained := hasChain(r.c.DebeziumConfig())
	if form == "connect" {
		conf = maps.Clone(r.c.Connect)
		maps.Copy(conf, h)
		if chained {
			maps.Copy(conf, prefixRouter(conf["transforms"], prefix))
		} else if rt := router(conf); rt != "" {
			k := "transforms." + rt + ".route.topic.replacement"
			conf[k] = prefix + cmp(conf[k], "outbox.event.${routedByValue}")
		}
		data, err := json.MarshalIndent(map[string]any{"name": r.id, "config": conf}, "", "  ")
		if err != nil {
			return err
		}
		path = filepath.Join(dir, "connector.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
		// Kafka Connect's brokers are the worker's: a user gives them.
		args = append(args, "--kafka-brokers", strings.Join(r.env.Brokers, ","))
	} else {
		props, _ := schema.ParseProperties([]byte(r.c.Server))
		conf, _ = ConnectForm(props)
		maps.Copy(conf, h)
		text := strings.TrimRight(r.c.Server, "\n") + "\n"
		for _, k := range slices.Sorted(maps.Keys(h)) {
			if part, opt, ok := strings.Cut(k, ".converter."); ok {
				// A converter's option, the registry's URL: Debezium
				// Server's debezium.format.<part>.*.
				text += "debezium.format." + part + "." + opt + "=" + h[k] + "\n"
				continue
			}
			text += "debezium.source." + k + "=" + h[k] + "\n"
		}
		text += "debezium.sink.kafka.producer.bootstrap.servers=" + strings.Join(r.env.Brokers, ",") + "\n"
		if chained {
			pr := prefixRouter(conf["transforms"], prefix)
			for _, k := range slices.Sorted(maps.Keys(pr)) {
				text += "debezium." + k + "=" + pr[k] + "\n"
			}
		} else if rt := router(conf); rt != "" {
			k := "transforms." + rt + ".route.topic.replacement"
			text += "debezium." + k + "=" + prefix + cmp(conf[k], "outbox.event.${routedByValue}") + "\n"
		}
		path = filepath.Join(dir, "application.properties")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			return err
		}
	}
	if topic, ok := transactionTopic(conf); ok && !chained {
		// The transaction topic is under the side's prefix too; with
		// transforms, the RegexRouter after them puts it there.
		args = append(args, "--transaction-topic", prefix+r.id+"."+topic)
	}
	if topic, ok := heartbeatTopic(conf, r.id); ok && !chained {
		// As the transaction topic.
		args = append(args, "--heartbeat-topic", prefix+topic)
	}
	if router(conf) == "" && !chained {
		// Change events: Debezium's topic is <topic.prefix>.<schema>.<table>.
		// With transforms, the prefix comes from the RegexRouter after them.
		args = append(args, "--topic", prefix+r.id+".{schema}.{table}")
	}
	p := &pgoProc{form: short, slot: h["slot.name"], prefix: prefix, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(r.env.Bin, append([]string{"run", "--config", path}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return err
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	r.pgo = append(r.pgo, p)
	r.result.Pgoutbox = append(r.result.Pgoutbox, Side{Name: "pgoutbox (" + short + ")", Prefix: prefix})
	return nil
}

// hasChain tells a configuration with transforms after its outbox router,
// or predicates.
func hasChain(conf map[string]string) bool {
	rt := router(conf)
	for _, name := range strings.Split(conf["transforms"], ",") {
		if name = strings.TrimSpace(name); name != "" && name != rt {
			return true
		}
	}
	return strings.TrimSpace(conf["predicates"]) != ""
}

// prefixRouter is the transforms list with a RegexRouter appended that
// puts every topic under prefix, and that router's options.
func prefixRouter(list, prefix string) map[string]string {
	const name = "compatprefix"
	return map[string]string{
		"transforms":                          strings.TrimSpace(list) + "," + name,
		"transforms." + name + ".type":        "org.apache.kafka.connect.transforms.RegexRouter",
		"transforms." + name + ".regex":       "(.*)",
		"transforms." + name + ".replacement": prefix + "$1",
	}
}

func cmp(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// stop stops the pgoutbox processes (SIGTERM, as a user stops it) and
// keeps what they printed.
func (r *run) stop() {
	for i, p := range r.pgo {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(30 * time.Second):
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		}
		r.result.Pgoutbox[i].Output = p.out.String()
	}
	r.result.Debezium.Output = r.env.Connect.LogOf(r.id)
}

func (r *run) problem(format string, args ...any) {
	r.result.Problems = append(r.result.Problems, fmt.Sprintf(format, args...))
}

// expect is the first non-empty text f gives of the case's deliberate
// differences.
func (r *run) expect(f func(Deliberate) string) string {
	for _, d := range r.c.Differences {
		if s := f(d); s != "" {
			return s
		}
	}
	return ""
}

// awaitStreaming waits until every side streams from its slot (Debezium
// and each pgoutbox), or, where the case expects it, until pgoutbox refused
// its configuration or Debezium's task failed at start.
func (r *run) awaitStreaming(ctx context.Context, pgoutboxRefuses bool) error {
	want := map[string]*pgoProc{r.id + "_dbz": nil}
	for _, p := range r.pgo {
		want[p.slot] = p
	}
	dbzFails := r.expect(func(d Deliberate) string { return d.DebeziumFails })
	for {
		for slot, p := range want {
			if p != nil {
				select {
				case <-p.done:
					if pgoutboxRefuses {
						delete(want, slot)
						continue
					}
					return fmt.Errorf("pgoutbox (%s) exited before streaming: %v\n%s", p.form, p.err, p.out)
				default:
				}
			} else if s, err := r.env.Connect.Status(ctx, r.id); err == nil && s.Failed() != "" {
				if dbzFails == "" {
					return fmt.Errorf("Debezium's task failed at start:\n%s", causes(s.Failed()))
				}
				delete(want, slot)
				continue
			}
			// A slot is active while it is being created too: streaming
			// means START_REPLICATION ran, after Debezium chose where
			// to start (the WAL position at its start, with no_data) and
			// read the existing rows (with initial).
			var active bool
			err := r.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots s
  JOIN pg_stat_replication r ON r.pid = s.active_pid WHERE s.slot_name = $1 AND r.state = 'streaming')`, slot).Scan(&active)
			if err == nil && active {
				delete(want, slot)
			}
		}
		if len(want) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			s, _ := r.env.Connect.Status(context.Background(), r.id)
			return fmt.Errorf("slots %v not active within %v; Debezium's task: %+v", slices.Sorted(maps.Keys(want)), caseTimeout, s)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// awaitDebezium waits until Debezium's committed offset reaches the
// fence (every record before it acknowledged), or for its task to fail
// where the case expects it to.
func (r *run) awaitDebezium(ctx context.Context, fence string) error {
	fails := r.expect(func(d Deliberate) string { return d.DebeziumFails })
	var want uint64
	if err := r.conn.QueryRow(ctx, "SELECT ($1::pg_lsn - '0/0')::bigint", fence).Scan(&want); err != nil {
		return err
	}
	for {
		s, err := r.env.Connect.Status(ctx, r.id)
		if err != nil {
			return err
		}
		offsets, err := r.env.Connect.Offsets(ctx, r.id)
		if err != nil {
			return err
		}
		reached := false
		for _, o := range offsets {
			if lsn, ok := o["lsn"].(float64); ok && uint64(lsn) >= want {
				reached = true
			}
		}
		trace := s.Failed()
		switch {
		case reached && fails != "":
			return fmt.Errorf("Debezium published every row, where the case expects its task to fail with %q", fails)
		case reached:
			return nil
		case trace != "" && fails == "":
			return fmt.Errorf("Debezium's task failed:\n%s", causes(trace))
		case trace != "":
			r.result.Debezium.Failed = trace
			if !strings.Contains(trace, fails) {
				r.problem("debezium: its task failed without %q:\n%s", fails, causes(trace))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("Debezium's offset did not reach the fence %s within %v; its task: %+v, offsets %v", fence, caseTimeout, s, offsets)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// awaitPgoutbox waits until each pgoutbox confirmed the fence's position,
// or stopped where the case expects it to.
func (r *run) awaitPgoutbox(ctx context.Context, fence string) error {
	stops := r.expect(func(d Deliberate) string { return d.PgoutboxStops })
	// A case that writes heartbeats waits for each side's first: on a
	// busy machine the fence may be confirmed before a heartbeat was read
	// back.
	hbTopic, heartbeats := heartbeatTopic(r.c.DebeziumConfig(), r.id)
	for i, p := range r.pgo {
		for {
			select {
			case <-p.done:
				out := p.out.String()
				if stops == "" {
					return fmt.Errorf("pgoutbox (%s) exited: %v\n%s", p.form, p.err, out)
				}
				r.result.Pgoutbox[i].Failed = fmt.Sprint(p.err)
				if !strings.Contains(out, stops) {
					r.problem("pgoutbox (%s): stopped (%v) without %q", p.form, p.err, stops)
				}
			default:
			}
			if r.result.Pgoutbox[i].Failed != "" {
				break
			}
			var done bool
			err := r.conn.QueryRow(ctx, "SELECT confirmed_flush_lsn > $1::pg_lsn FROM pg_replication_slots WHERE slot_name = $2", fence, p.slot).Scan(&done)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if done && heartbeats && stops == "" {
				done = hasRecords(ctx, r.env.Brokers, r.result.Pgoutbox[i].Prefix+hbTopic)
			}
			if done {
				if stops != "" {
					r.problem("pgoutbox (%s) published every row, where the case expects it to stop with %q", p.form, stops)
				}
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("pgoutbox (%s) did not confirm the fence %s within %v", p.form, fence, caseTimeout)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// compare reads every side's records and compares each pgoutbox stream
// with Debezium's.
func (r *run) compare(ctx context.Context) error {
	var err error
	d := &r.result.Debezium
	if d.Records, err = readPrefix(ctx, r.env.Brokers, d.Prefix, d.Prefix+r.fenceTopic()); err != nil {
		return err
	}
	d.Records = r.withoutFenceTransaction(d.Records, d.Prefix)
	if r.decodesMessages() {
		d.Records = slices.DeleteFunc(d.Records, fenceEvent)
	}
	conf := r.c.DebeziumConfig()
	// Heartbeats are compared by shape (heartbeat.go).
	hbTopic, heartbeats := heartbeatTopic(conf, r.id)
	var dbzBeats []Record
	if heartbeats {
		d.Records, dbzBeats = splitHeartbeats(d.Records, d.Prefix+hbTopic)
	}
	reg := registryClient{api: r.registryAPI()}
	var dbzSchemas map[string][]string
	if len(registryParts(conf)) > 0 {
		reg.resolveIDs(ctx, d.Records, conf)
		if dbzSchemas, err = reg.registered(ctx, d.Prefix); err != nil {
			return err
		}
		// The fence's own schemas (it passes the converter too).
		for s := range dbzSchemas {
			if _, name, _ := strings.Cut(s, "/"); strings.HasPrefix(name, r.fenceTopic()+"-") {
				delete(dbzSchemas, s)
			}
		}
	}
	if len(d.Records) != r.c.Records {
		r.problem("debezium wrote %d records, the case says %d", len(d.Records), r.c.Records)
	}
	var explained []string
	for _, dd := range r.c.Differences {
		explained = append(explained, dd.Records...)
	}
	deadLetters := 0
	for _, dd := range r.c.Differences {
		deadLetters += dd.DeadLetters
	}
	for i := range r.result.Pgoutbox {
		p := &r.result.Pgoutbox[i]
		if p.Records, err = readPrefix(ctx, r.env.Brokers, p.Prefix, ""); err != nil {
			return err
		}
		dlq, err := readPrefix(ctx, r.env.Brokers, r.pgo[i].slot+".dlq", "")
		if err != nil {
			return err
		}
		p.DeadLetters = len(dlq)
		if heartbeats {
			var beats []Record
			p.Records, beats = splitHeartbeats(p.Records, p.Prefix+hbTopic)
			for _, df := range compareHeartbeats(hbTopic, dbzBeats, beats, r.c.Normalize) {
				r.problem("%s differs: %s", p.Name, df)
			}
		}
		if want := r.expect(func(d Deliberate) string { return d.DeadLetterReason }); want != "" {
			for _, d := range dlq {
				var v struct {
					Reason string `json:"reason"`
				}
				if err := json.Unmarshal(d.Value, &v); err != nil || !strings.Contains(v.Reason, want) {
					r.problem("%s: a dead letter's reason lacks %q: %s", p.Name, want, d.Value)
				}
			}
		}
		if len(registryParts(conf)) > 0 {
			reg.resolveIDs(ctx, p.Records, conf)
			schemas, err := reg.registered(ctx, p.Prefix)
			if err != nil {
				return err
			}
			for _, df := range compareRegistered(dbzSchemas, schemas) {
				r.problem("%s: %s", p.Name, df)
			}
		}
		if err := r.compareTopics(ctx, p); err != nil {
			return err
		}
		if p.DeadLetters != deadLetters {
			r.problem("%s dead-lettered %d rows, the case says %d", p.Name, p.DeadLetters, deadLetters)
		}
		diffs, err := Compare(d.Records, p.Records, d.Prefix, p.Prefix, r.c.Normalize)
		if err != nil {
			return err
		}
		used := make([]bool, len(explained))
		for _, df := range diffs {
			ok := false
			for j, e := range explained {
				if strings.Contains(df.String(), e) {
					ok, used[j] = true, true
				}
			}
			if !ok {
				r.problem("%s differs: %s", p.Name, df)
			}
		}
		for j, e := range explained {
			if !used[j] {
				r.problem("%s: the deliberate difference %q does not show", p.Name, e)
			}
		}
	}
	return nil
}

// readPrefix reads every record of the topics whose names start with
// prefix (but exclude), from their start to their end.
// retriable tells a Kafka error that asking again can clear, alone or in
// one of kadm's shard errors.
func retriable(err error) bool {
	var shards *kadm.ShardErrors
	if errors.As(err, &shards) {
		for _, e := range shards.Errs {
			if !kerr.IsRetriable(e.Err) {
				return false
			}
		}
		return len(shards.Errs) > 0
	}
	return err != nil && kerr.IsRetriable(err)
}

// hasRecords tells whether topic holds a record.
func hasRecords(ctx context.Context, brokers []string, topic string) bool {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return false
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		return false
	}
	found := false
	ends.Each(func(o kadm.ListedOffset) { found = found || o.Offset > 0 })
	return found
}

func readPrefix(ctx context.Context, brokers []string, prefix, exclude string) ([]Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for name := range topics {
		if strings.HasPrefix(name, prefix) && name != exclude {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err == nil {
		err = ends.Error()
	}
	// A topic created on first use answers LEADER_NOT_AVAILABLE while its
	// leader is elected, which takes longer on a loaded machine.
	for retriable(err) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		if ends, err = adm.ListEndOffsets(ctx, names...); err == nil {
			err = ends.Error()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("listing the end offsets of %v: %w", names, err)
	}
	want := map[string]map[int32]kgo.Offset{}
	left := 0
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			if want[o.Topic] == nil {
				want[o.Topic] = map[int32]kgo.Offset{}
			}
			want[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
			left += int(o.Offset)
		}
	})
	if left == 0 {
		return nil, nil
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(want))
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	var out []Record
	for len(out) < left {
		fetches := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reading %s*: %d of %d records: %w", prefix, len(out), left, ctx.Err())
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			out = append(out, fromKafka(rec))
		})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

func fromKafka(rec *kgo.Record) Record {
	r := Record{Topic: rec.Topic, Partition: rec.Partition, Timestamp: rec.Timestamp.UnixMilli()}
	if rec.Key != nil {
		r.Key = append(Bytes{}, rec.Key...)
	}
	if rec.Value != nil {
		r.Value = append(Bytes{}, rec.Value...)
	}
	for _, h := range rec.Headers {
		var v Bytes
		if h.Value != nil {
			v = append(Bytes{}, h.Value...)
		}
		r.Headers = append(r.Headers, Header{Key: h.Key, Value: v})
	}
	return r
}

// causes is a Java stack trace's exceptions without their frames: the
// first line and each "Caused by".
func causes(trace string) string {
	var out []string
	for i, line := range strings.Split(trace, "\n") {
		if i == 0 || strings.HasPrefix(line, "Caused by:") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// syncBuffer collects a process's output for a reader at the same time.
type syncBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
