// Package compose holds the Docker Compose file for users with Docker. No
// Docker engine runs where the tests run, so this test checks what can be
// checked without one: the file parses, and its parts refer to each other
// and to the repository correctly.
package compose

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

type composeFile struct {
	Services map[string]struct {
		Image     string            `yaml:"image"`
		Command   []string          `yaml:"command"`
		Env       map[string]string `yaml:"environment"`
		DependsOn map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Build *struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

func TestComposeFile(t *testing.T) {
	raw, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(false)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("docker-compose.yml is not valid YAML: %v", err)
	}
	for _, name := range []string{"postgres", "kafka", "migrate", "pgoutbox"} {
		if _, ok := f.Services[name]; !ok {
			t.Errorf("service %s is missing", name)
		}
	}
	if pg := f.Services["postgres"]; !slices.Contains(pg.Command, "wal_level=logical") {
		t.Errorf("postgres does not run with wal_level=logical: %v", pg.Command)
	}
	if k := f.Services["kafka"]; !strings.Contains(k.Env["KAFKA_PROCESS_ROLES"], "controller") {
		t.Error("kafka does not run in KRaft mode")
	}
	commands := map[string]bool{"migrate": true, "run": true}
	for name, s := range f.Services {
		for dep := range s.DependsOn {
			if _, ok := f.Services[dep]; !ok {
				t.Errorf("%s depends on %s, which is not a service", name, dep)
			}
		}
		if s.Build != nil {
			if _, err := os.Stat(filepath.Join(s.Build.Context, s.Build.Dockerfile)); err != nil {
				t.Errorf("%s builds from %s: %v", name, filepath.Join(s.Build.Context, s.Build.Dockerfile), err)
			}
			if len(s.Command) == 0 || !commands[s.Command[0]] {
				t.Errorf("%s runs %v, not a pgoutbox command", name, s.Command)
			}
			for k := range s.Env {
				if !strings.HasPrefix(k, "PGOUTBOX_") {
					t.Errorf("%s sets %s, which pgoutbox does not read", name, k)
				}
			}
		}
	}
}

// The compose file's Kafka is the release and the settings the tests run
// against (test/kafkatest), and so are the Makefile's and the pom's.
func TestComposeKafkaIsTheTestedOne(t *testing.T) {
	raw, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	k := f.Services["kafka"]
	if want := "apache/kafka:" + kafkatest.Version; k.Image != want {
		t.Errorf("kafka image %q, want %q", k.Image, want)
	}
	for key, value := range kafkatest.Settings {
		env := "KAFKA_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
		if got, ok := k.Env[env]; !ok || got != value {
			t.Errorf("%s=%q, want %q as in the tests", env, got, value)
		}
	}
	for file, want := range map[string]string{
		"../Makefile":          "KAFKA_VERSION ?= " + kafkatest.Version + "\n",
		"../.ci/kafka/pom.xml": "<kafka.version>" + kafkatest.Version + "</kafka.version>",
	} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), want) {
			t.Errorf("%s does not say %q", file, strings.TrimSpace(want))
		}
	}
}
