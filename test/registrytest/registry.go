// Package registrytest runs Apicurio Registry 2.1.5.Final, built from
// Maven Central's artifacts by .ci/install-apicurio, for the tests and
// corpus cases about a schema registry: one process per Start, on a free
// loopback port, with in-memory storage, stopped when the test ends. It
// serves Apicurio's own API (/apis/registry/v2) and the Confluent-compatible
// one (/apis/ccompat/v6); Kafka Connect reaches it through Apicurio's
// converters, which the same script installs as a plugin directory
// (PluginDir).
package registrytest

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/freeport"
	"github.com/pgoutbox/pgoutbox/proc"
	"github.com/pgoutbox/pgoutbox/test/testbin"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

const (
	// DirEnv names the directory .ci/install-apicurio installed into
	// (make sets it from APICURIO_DIR). Unset, the module's
	// .cache/apicurio is used, installed there on first use.
	DirEnv = "PGOUTBOX_APICURIO_DIR"
	// JavaEnv names the java binary (default: java on PATH).
	JavaEnv = "PGOUTBOX_JAVA"
	// Version is the registry's release.
	Version = "2.1.5.Final"
	// ConverterVersion is the release of Apicurio's Kafka Connect
	// converters in PluginDir.
	ConverterVersion = "2.6.13.Final"
)

// Options configure a registry.
type Options struct {
	// Properties are Quarkus or registry settings, passed as -Dkey=value
	// (quarkus.http.port is the harness's).
	Properties map[string]string
	// TLS also serves both APIs over https with a certificate for
	// 127.0.0.1 that this CA signed (TLSURL).
	TLS *tlstest.CA
}

// Registry is a running Apicurio Registry.
type Registry struct {
	// URL is the server's base, http://127.0.0.1:PORT: Apicurio's API is
	// URL+"/apis/registry/v2", the Confluent-compatible one
	// URL+"/apis/ccompat/v6".
	URL string
	// TLSURL is the https base with Options.TLS, "" without.
	TLSURL string
	tlsDir string
	port   int
	java   string
	jar    string
	opts   Options
	p      *proc.Process
}

// readyTimeout bounds a start; seen: about 4 s on 2 idle cores.
const readyTimeout = 90 * time.Second

// Start starts a registry for the test, stopped when the test ends; its
// output is logged if the test failed.
func Start(t testing.TB, opts Options) *Registry {
	t.Helper()
	r, err := Launch(opts)
	if err != nil {
		t.Fatalf("registrytest: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() && r.p != nil {
			t.Logf("registrytest: the registry's output ends:\n%s", r.p.Output())
		}
		r.Close()
	})
	return r
}

// Launch starts a registry outside a test; Close stops it.
func Launch(opts Options) (*Registry, error) {
	java, dir, err := install()
	if err != nil {
		return nil, err
	}
	port, err := freeport.Port()
	if err != nil {
		return nil, err
	}
	r := &Registry{URL: "http://127.0.0.1:" + strconv.Itoa(port), port: port, java: java,
		jar: filepath.Join(dir, "registry", "apicurio-registry-runner.jar"), opts: opts}
	if opts.TLS != nil {
		if err := r.tls(); err != nil {
			return nil, err
		}
	}
	if err := r.start(); err != nil {
		return nil, err
	}
	return r, nil
}

// PluginDir is the Kafka Connect plugin.path entry holding Apicurio's
// converters, installed on first use.
func PluginDir() (string, error) {
	_, dir, err := install()
	return filepath.Join(dir, "plugins"), err
}

func (r *Registry) start() error {
	args := []string{"-Xms64m", "-Xmx384m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData",
		"-Dquarkus.http.port=" + strconv.Itoa(r.port), "-Dquarkus.http.host=127.0.0.1",
		// One request at a time: 2.1's in-memory storage checks, then
		// inserts, content and id sequences, and two clients registering
		// at once fail there (seen: a unique key violation on content,
		// H2's "Timeout trying to lock table" on sequences), which Kafka
		// Connect's task does not survive.
		"-Dquarkus.thread-pool.core-threads=1", "-Dquarkus.thread-pool.max-threads=1"}
	keys := make([]string, 0, len(r.opts.Properties))
	for k := range r.opts.Properties {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		args = append(args, "-D"+k+"="+r.opts.Properties[k])
	}
	args = append(args, "-jar", r.jar)
	p, err := proc.Start("apicurio-registry", r.java, args, nil, nil)
	if err != nil {
		return err
	}
	r.p = p
	err = r.waitReady()
	if err == nil {
		err = r.warmUp()
	}
	if err != nil {
		out := p.Output()
		p.Kill()
		return fmt.Errorf("Apicurio Registry did not start: %v\n%s", err, out)
	}
	return nil
}

// WarmUpGroup is the artifact group of the schema every registry starts
// with (global id 1).
const WarmUpGroup = "pgoutbox-harness"

// warmUp registers one schema, so that a test's first schema does not
// have global id 1 by chance.
func (r *Registry) warmUp() error {
	req, err := http.NewRequest(http.MethodPost, r.URL+"/apis/registry/v2/groups/"+WarmUpGroup+"/artifacts",
		strings.NewReader(`{"type":"record","name":"WarmUp","fields":[]}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Registry-ArtifactType", "AVRO")
	req.Header.Set("X-Registry-ArtifactId", "warm-up")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("registering the warm-up schema: %s: %s", resp.Status, body)
	}
	return nil
}

// waitReady waits until both APIs answer.
func (r *Registry) waitReady() error {
	return r.p.Await(readyTimeout, 100*time.Millisecond, proc.HTTPOK(r.URL+"/apis/registry/v2/system/info", r.URL+"/apis/ccompat/v6/subjects"))
}

// Stop kills the registry (its in-memory schemas are lost); Restart
// starts it again on the same port.
func (r *Registry) Stop() {
	if r.p != nil {
		r.p.Kill()
		r.p = nil
	}
}

// Restart starts a stopped registry on its port, empty.
func (r *Registry) Restart(t testing.TB) {
	t.Helper()
	if err := r.start(); err != nil {
		t.Fatalf("registrytest: %v", err)
	}
}

// Close stops the registry and removes its files.
func (r *Registry) Close() {
	r.Stop()
	if r.tlsDir != "" {
		os.RemoveAll(r.tlsDir)
	}
}

// install finds java and the installed registry, installing it with
// .ci/install-apicurio (Maven) into the module's .cache/apicurio on first
// use when DirEnv is unset.
func install() (java, dir string, err error) {
	in, err := testbin.Install("Apicurio Registry "+Version, "apicurio", "install-apicurio", JavaEnv, DirEnv, "apicurio")
	if err == nil {
		if _, serr := os.Stat(filepath.Join(in.Dir, "registry", "apicurio-registry-runner.jar")); serr != nil {
			err = serr
		}
	}
	return in.Java, in.Dir, err
}

// tls writes the server's certificate and key for Quarkus (PEM) and
// adds the https port to the properties.
func (r *Registry) tls() error {
	sslPort, err := freeport.Port()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "pgoutbox-registry-tls-")
	if err != nil {
		return err
	}
	key, err := x509.MarshalPKCS8PrivateKey(r.opts.TLS.Server.PrivateKey)
	if err != nil {
		return err
	}
	cert, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.opts.TLS.Server.Certificate[0]}), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		return err
	}
	props := map[string]string{"quarkus.http.ssl-port": strconv.Itoa(sslPort),
		"quarkus.http.ssl.certificate.file": cert, "quarkus.http.ssl.certificate.key-file": keyFile}
	for k, v := range r.opts.Properties {
		props[k] = v
	}
	r.opts.Properties = props
	r.TLSURL, r.tlsDir = "https://127.0.0.1:"+strconv.Itoa(sslPort), dir
	return nil
}
