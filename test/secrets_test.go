package test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

// Bad credentials and unreachable servers give a clear error naming what
// is wrong, and no secret reaches any line pgoutbox prints; SASL/SCRAM and
// TLS to Kafka work when configured rightly.
func TestCredentialsAndSecrets(t *testing.T) {
	e := testenv.NewKafka(t)
	if e.PG.External() {
		t.Skip("needs the throwaway cluster's pg_hba.conf")
	}
	ctx := context.Background()
	// A role that must give its password, over scram-sha-256.
	hba := filepath.Join(e.PG.Dir, "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hba, append([]byte("host all pw_user 127.0.0.1/32 scram-sha-256\n"), old...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Conn.Exec(ctx, `CREATE ROLE pw_user LOGIN REPLICATION PASSWORD 'Right-Db-Pass-42';
GRANT SELECT, UPDATE ON outbox TO pw_user; GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox_state TO pw_user;
GRANT SELECT, INSERT, UPDATE ON pgoutbox_dead_letter TO pw_user; GRANT SELECT, INSERT, UPDATE ON pgoutbox_lease TO pw_user;
SELECT pg_reload_conf();
`+testenv.GrantHeartbeatSQL("pw_user")); err != nil {
		t.Fatal(err)
	}
	e.Setup(e.Config()) // the publication and slot, made by the owner
	// Apache Kafka's SASL_SSL listener: SCRAM over TLS.
	secure := kafkatest.SharedLocal(t)
	other := tlstest.New(t)
	caFile := secure.CA.WritePEM(t, t.TempDir())
	otherCA := other.WritePEM(t, t.TempDir())
	wrongDB := strings.Replace(e.URL, "postgres://postgres@", "postgres://pw_user:Wrong-Db-Pass-13@", 1)
	rightDB := strings.Replace(e.URL, "postgres://postgres@", "postgres://pw_user:Right-Db-Pass-42@", 1)
	rightKafka := "PGOUTBOX_KAFKA_PASSWORD=" + kafkatest.Password
	secrets := []string{"Wrong-Db-Pass-13", "Right-Db-Pass-42", "Wrong-Kafka-Pass-9", kafkatest.Password}
	kafkaTLS := []string{"--kafka-brokers", strings.Join(secure.SASLSSL, ","), "--kafka-sasl-mechanism", "SCRAM-SHA-256", "--kafka-username", kafkatest.User, "--kafka-tls-ca", caFile}

	tests := []struct {
		name  string
		env   []string
		args  []string
		code  int // -1: still running when stopped, which ends with 0
		wants []string
	}{
		{"wrong database password", nil,
			[]string{"run", "--database-url", wrongDB, "--kafka-brokers", strings.Join(e.Brokers, ",")},
			1, []string{"password authentication failed", "pw_user"}},
		{"unreachable broker", nil,
			[]string{"run", "--database-url", rightDB, "--kafka-brokers", "127.0.0.1:1", "--log-level", "debug"},
			-1, []string{"kafka is not reachable yet", "127.0.0.1:1", "connection refused"}},
		{"wrong SASL password", []string{"PGOUTBOX_KAFKA_PASSWORD=Wrong-Kafka-Pass-9"},
			append([]string{"run", "--database-url", rightDB}, kafkaTLS...),
			1, []string{"SASL"}},
		{"untrusted broker certificate", []string{rightKafka},
			[]string{"run", "--database-url", rightDB, "--kafka-brokers", strings.Join(secure.SASLSSL, ","), "--kafka-sasl-mechanism", "SCRAM-SHA-256",
				"--kafka-username", kafkatest.User, "--kafka-tls-ca", otherCA},
			1, []string{"TLS certificate is not trusted"}},
		{"SASL and TLS configured rightly", []string{rightKafka},
			append([]string{"run", "--database-url", rightDB, "--log-level", "debug"}, kafkaTLS...),
			-1, []string{`"msg":"streaming"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := 20 * time.Second
			if tt.code == -1 {
				d = 6 * time.Second
			}
			code, out := testenv.RunOnce(t, d, tt.env, append(tt.args, "--log-format", "json")...)
			testenv.ExpectOutput(t, code, tt.code, out, tt.wants, secrets)
		})
	}
	// And with everything right, an event flows through SASL and TLS: its
	// commit is confirmed, which needs the secure broker's ack.
	bin := testenv.Bin(t)
	cmd := exec.Command(bin, append([]string{"run", "--database-url", rightDB, "--status-interval", "100ms", "--log-format", "json"}, kafkaTLS...)...)
	cmd.Env = append(os.Environ(), rightKafka)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	probe := testenv.NewCommitProbe(e)
	e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"secure":true}`))
	commit := probe.Commits()[0]
	testenv.Eventually(t, 20*time.Second, "the event confirmed through SASL and TLS", func() bool {
		return e.Slot("pgoutbox").ConfirmedLSN >= commit
	})
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, out.String())
	}
	for _, s := range secrets {
		if strings.Contains(out.String(), s) {
			t.Errorf("output shows the secret %q", s)
		}
	}
}
