package test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/connecttest"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

// tlsDB is a PostgreSQL with TLS whose user logs in over TLS with a
// client certificate only (pg_hba's cert method), and the files a
// Debezium configuration names: the CA, another CA, the client
// certificate and its key in each form pgjdbc reads.
type tlsDB struct {
	e                                 *testenv.Env
	host, port, user, db              string
	rightCA, wrongCA, cert            string
	keyPEM, keyPK8, keyEncPK8, keyP12 string
	keyPBES2                          string
}

// tlsKeyPassword encrypts the PKCS-8 and PKCS-12 keys.
const tlsKeyPassword = "Key-Pass-4"

func newTLSDB(t *testing.T) *tlsDB {
	t.Helper()
	if _, err := osexec.LookPath("openssl"); err != nil {
		t.Skip("needs openssl for an encrypted PKCS-8 key")
	}
	ca := tlstest.New(t)
	settings := serverTLS(t, ca)
	// The server asks for client certificates signed by ssl_ca_file's CA.
	settings["ssl_ca_file"] = ca.WritePEM(t, filepath.Dir(settings["ssl_cert_file"]))
	if err := os.Chmod(settings["ssl_ca_file"], 0o644); err != nil {
		t.Fatal(err)
	}
	e := testenv.NewBare(t, `CREATE TABLE public.orders_outbox (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL, aggregateid text NOT NULL, type text, payload jsonb)`,
		pgcluster.Options{Settings: settings})
	if e.PG.External() {
		t.Skip("needs the throwaway cluster's TLS settings")
	}
	d := &tlsDB{e: e}
	d.host, d.port, d.user, d.db = testenv.DebeziumDB(t, e)
	// The test's own connection, without TLS, keeps its rule.
	hba := filepath.Join(e.PG.Dir, "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	rules := "hostssl all " + d.user + " 127.0.0.1/32 cert\nhostssl replication " + d.user + " 127.0.0.1/32 cert\n"
	if err := os.WriteFile(hba, append([]byte(rules), old...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Conn.Exec(context.Background(), "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	d.rightCA = ca.WritePEM(t, dir)
	d.wrongCA = tlstest.New(t).WritePEM(t, t.TempDir())
	d.cert, d.keyPEM = ca.ClientFiles(t, dir, d.user, time.Now().Add(time.Hour))
	keyPEM, err := os.ReadFile(d.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(keyPEM)
	d.keyPK8 = filepath.Join(dir, "client.pk8")
	if err := os.WriteFile(d.keyPK8, block.Bytes, 0o600); err != nil {
		t.Fatal(err)
	}
	openssl := func(args ...string) {
		if out, err := osexec.Command("openssl", args...).CombinedOutput(); err != nil {
			t.Fatalf("openssl: %v\n%s", err, out)
		}
	}
	// An encryption Java has a cipher for, and openssl's default, PBES2,
	// which pgjdbc cannot read.
	d.keyEncPK8 = filepath.Join(dir, "client-enc.pk8")
	openssl("pkcs8", "-topk8", "-in", d.keyPEM, "-outform", "DER", "-out", d.keyEncPK8, "-v1", "PBE-SHA1-3DES", "-passout", "pass:"+tlsKeyPassword)
	d.keyPBES2 = filepath.Join(dir, "client-pbes2.pk8")
	openssl("pkcs8", "-topk8", "-in", d.keyPEM, "-outform", "DER", "-out", d.keyPBES2, "-passout", "pass:"+tlsKeyPassword)
	// pgjdbc reads the entry named user, as its documentation writes it.
	d.keyP12 = filepath.Join(dir, "client.p12")
	openssl("pkcs12", "-export", "-in", d.cert, "-inkey", d.keyPEM, "-out", d.keyP12, "-name", "user", "-passout", "pass:"+tlsKeyPassword)
	return d
}

// config is a team's connector configuration: verify-full against root,
// the outbox router, and more (the client certificate's options).
func (d *tlsDB) config(slot, root string, more map[string]string) map[string]string {
	c := map[string]string{
		"connector.class":   "io.debezium.connector.postgresql.PostgresConnector",
		"database.hostname": d.host, "database.port": d.port, "database.user": d.user, "database.dbname": d.db,
		"database.sslmode": "verify-full", "database.sslrootcert": root,
		"topic.prefix": slot, "plugin.name": "pgoutput", "slot.name": slot, "publication.name": slot, "snapshot.mode": "no_data",
		"table.include.list": "public.orders_outbox", "tasks.max": "1",
		"transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
	}
	maps.Copy(c, more)
	return c
}

// keys are the client certificate's options for each form of its key.
func (d *tlsDB) keys() []struct {
	name string
	opts map[string]string
} {
	return []struct {
		name string
		opts map[string]string
	}{
		{"PEM key", map[string]string{"database.sslcert": d.cert, "database.sslkey": d.keyPEM, "database.pemKeyAlgorithm": "EC"}},
		{"PKCS-8 DER key", map[string]string{"database.sslcert": d.cert, "database.sslkey": d.keyPK8}},
		{"encrypted PKCS-8 DER key", map[string]string{"database.sslcert": d.cert, "database.sslkey": d.keyEncPK8, "database.sslpassword": tlsKeyPassword}},
		{"encrypted PKCS-12", map[string]string{"database.sslkey": d.keyP12, "database.sslpassword": tlsKeyPassword}},
	}
}

// insert writes an outbox row of aggregate type agg, routed to
// outbox.event.<agg>.
func (d *tlsDB) insert(t *testing.T, agg string) {
	t.Helper()
	if _, err := d.e.Conn.Exec(context.Background(), `INSERT INTO public.orders_outbox (aggregatetype, aggregateid, type, payload) VALUES ($1, 'order-1', 'created', '{"n": 1}')`, agg); err != nil {
		t.Fatal(err)
	}
}

func writeConnector(t *testing.T, conf map[string]string) string {
	t.Helper()
	js, err := json.Marshal(map[string]any{"name": "orders-outbox", "config": conf})
	if err != nil {
		t.Fatal(err)
	}
	return testenv.WriteFile(t, "connector.json", string(js))
}

// A Debezium configuration of a team on a managed PostgreSQL that checks
// the server against its own CA (database.sslmode=verify-full,
// database.sslrootcert) and logs in with a client certificate, its key in
// each form pgjdbc reads: run --config streams with each, over TLS with
// the certificate on the replication connection and the others alike;
// with another CA, a wrong password or a missing file, it stops at start
// naming the option, and no output shows the password.
func TestDebeziumDatabaseTLS(t *testing.T) {
	d := newTLSDB(t)
	secrets := []string{tlsKeyPassword, "Wrong-Pass-7"}
	for i, k := range d.keys() {
		t.Run(k.name, func(t *testing.T) {
			slot := fmt.Sprintf("tls_%d", i)
			path := writeConnector(t, d.config(slot, d.rightCA, k.opts))
			p := testenv.StartBinary(t, "run", "--config", path, "--kafka-brokers", strings.Join(d.e.Brokers, ","), "--log-format", "json")
			d.e.AwaitSlotActive(t, slot)
			d.insert(t, slot)
			recs := kafkatest.Consume(t, d.e.Brokers, []string{"outbox.event." + slot}, 1, 30*time.Second)
			if len(recs) != 1 || !strings.Contains(string(recs[0].Key), "order-1") {
				t.Errorf("%d records, want one keyed by order-1", len(recs))
			}
			var walsenders, clients, plain int
			if err := d.e.Conn.QueryRow(context.Background(), `SELECT
  count(*) FILTER (WHERE a.backend_type = 'walsender' AND s.ssl AND s.client_dn IS NOT NULL),
  count(*) FILTER (WHERE a.backend_type = 'client backend' AND s.ssl AND s.client_dn IS NOT NULL),
  count(*) FILTER (WHERE NOT (s.ssl AND s.client_dn IS NOT NULL))
FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
WHERE a.pid <> pg_backend_pid() AND a.usename = $1 AND a.backend_type IN ('client backend', 'walsender')`, d.user).Scan(&walsenders, &clients, &plain); err != nil {
				t.Fatal(err)
			}
			if walsenders == 0 || clients == 0 || plain > 0 {
				t.Errorf("connections with the client certificate: %d replication, %d others; %d without", walsenders, clients, plain)
			}
			if err := p.Signal(t, syscall.SIGTERM); err != nil {
				t.Errorf("run: %v", err)
			}
			testenv.ExpectOutput(t, 0, -1, p.Out.String(), nil, secrets)
		})
	}
	p12 := map[string]string{"database.sslkey": d.keyP12, "database.sslpassword": tlsKeyPassword}
	for _, tt := range []struct {
		name, root string
		more       map[string]string
		wants      []string
	}{
		{"another CA", d.wrongCA, p12, []string{"the database server's TLS certificate is not trusted", "sslrootcert"}},
		{"a wrong password for PKCS-12", d.rightCA, map[string]string{"database.sslkey": d.keyP12, "database.sslpassword": "Wrong-Pass-7"},
			[]string{"sslpassword (database.sslpassword) does not decrypt sslkey (database.sslkey)"}},
		{"a wrong password for PKCS-8", d.rightCA, map[string]string{"database.sslcert": d.cert, "database.sslkey": d.keyEncPK8, "database.sslpassword": "Wrong-Pass-7"},
			[]string{"sslpassword (database.sslpassword) does not decrypt sslkey (database.sslkey)"}},
		{"a missing CA file", filepath.Join(filepath.Dir(d.cert), "none.pem"), p12, []string{"sslrootcert (database.sslrootcert): open "}},
		{"a PKCS-8 key encrypted with PBES2", d.rightCA, map[string]string{"database.sslcert": d.cert, "database.sslkey": d.keyPBES2, "database.sslpassword": tlsKeyPassword},
			[]string{"sslkey (database.sslkey) " + d.keyPBES2 + ": encrypted with PBES2"}},
		{"an EC PEM key read as RSA", d.rightCA, map[string]string{"database.sslcert": d.cert, "database.sslkey": d.keyPEM},
			[]string{"database.sslkey: " + d.keyPEM + ": an EC key, which pgjdbc reads as RSA (database.pemKeyAlgorithm)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConnector(t, d.config("tls_refused", tt.root, tt.more))
			code, out := testenv.RunOnce(t, 20*time.Second, nil, "run", "--config", path, "--kafka-brokers", strings.Join(d.e.Brokers, ","), "--log-format", "json")
			testenv.ExpectOutput(t, code, 1, out, tt.wants, secrets)
		})
	}
}

// The same configurations in Debezium 3.6.1 (Kafka Connect, pgjdbc
// 42.7.11): what pgoutbox takes, Debezium streams with, and what pgoutbox
// refuses, Debezium's connector fails on.
func TestDebeziumDatabaseTLSInDebezium(t *testing.T) {
	d := newTLSDB(t)
	connect := connecttest.Start(t, connecttest.Options{Brokers: d.e.Brokers})
	ctx := testenv.TimeoutContext(t, 3*time.Minute)
	for i, k := range d.keys() {
		t.Run(k.name, func(t *testing.T) {
			slot := fmt.Sprintf("dbz_tls_%d", i)
			if err := connect.Create(ctx, slot, d.config(slot, d.rightCA, k.opts)); err != nil {
				t.Fatal(err)
			}
			defer connect.Delete(ctx, slot)
			d.e.AwaitSlotActive(t, slot)
			d.insert(t, slot)
			recs := kafkatest.Consume(t, d.e.Brokers, []string{"outbox.event." + slot}, 1, 60*time.Second)
			if len(recs) != 1 || !strings.Contains(string(recs[0].Key), "order-1") {
				t.Errorf("%d records, want one keyed by order-1; the worker's log:\n%s", len(recs), connect.LogOf(slot))
			}
		})
	}
	for i, tt := range []struct {
		name, root, want string
		more             map[string]string
	}{
		{"another CA", d.wrongCA, "PKIX path", map[string]string{"database.sslkey": d.keyP12, "database.sslpassword": tlsKeyPassword}},
		{"a wrong password for PKCS-12", d.rightCA, "PSQLException", map[string]string{"database.sslkey": d.keyP12, "database.sslpassword": "Wrong-Pass-7"}},
		{"a wrong password for PKCS-8", d.rightCA, "PSQLException", map[string]string{"database.sslcert": d.cert, "database.sslkey": d.keyEncPK8, "database.sslpassword": "Wrong-Pass-7"}},
		{"a missing CA file", filepath.Join(filepath.Dir(d.cert), "none.pem"), "Could not open SSL root certificate file", nil},
		{"a PKCS-8 key encrypted with PBES2", d.rightCA, "Cannot find any provider supporting PBES2",
			map[string]string{"database.sslcert": d.cert, "database.sslkey": d.keyPBES2, "database.sslpassword": tlsKeyPassword}},
		{"an EC PEM key read as RSA", d.rightCA, "Invalid RSA private key", map[string]string{"database.sslcert": d.cert, "database.sslkey": d.keyPEM}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("dbz_refused_%d", i) // a slot's name: lower case
			trace := failure(t, ctx, connect, name, d.config(name, tt.root, tt.more))
			if !strings.Contains(trace, tt.want) {
				t.Errorf("Debezium failed otherwise:\n%s", trace)
			}
			t.Logf("Debezium: %s", cause(trace))
		})
	}
}

// failure is why Debezium refuses conf: the connector's validation, which
// connects (Kafka Connect then answers 500, the cause in its log), or its
// task's failure.
func failure(t *testing.T, ctx context.Context, w *connecttest.Worker, name string, conf map[string]string) string {
	t.Helper()
	before := len(w.Log())
	if err := w.Create(ctx, name, conf); err != nil {
		return err.Error() + "\n" + w.Log()[before:]
	}
	defer w.Delete(ctx, name)
	for ctx.Err() == nil {
		if s, err := w.Status(ctx, name); err == nil && s.Failed() != "" {
			return s.Failed()
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s did not fail; the worker's log:\n%s", name, w.LogOf(name))
	return ""
}

// cause is the lines of a failure that say why: pgjdbc's exception and
// what caused it.
func cause(trace string) string {
	var out []string
	for _, l := range strings.Split(trace, "\n") {
		if strings.Contains(l, "PSQLException") || strings.HasPrefix(l, "Caused by") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, " | ")
}
