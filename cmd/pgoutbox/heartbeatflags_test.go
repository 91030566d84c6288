package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/relay"
)

// --heartbeat-topic needs the WAL's heartbeats; on a sink other than
// Kafka it writes nothing, as before, with a warning.
func TestHeartbeatRecordsFlags(t *testing.T) {
	for _, tt := range []struct {
		name      string
		sink      string
		mode      relay.Mode
		interval  time.Duration
		wantTopic string
		wantErr   string
		wantLog   string
	}{
		{name: "kafka", sink: sinkKafka, mode: relay.ModeAuto, interval: time.Second, wantTopic: "hb"},
		{name: "wal", sink: sinkKafka, mode: relay.ModeWAL, interval: time.Second, wantTopic: "hb"},
		{name: "poll", sink: sinkKafka, mode: relay.ModePoll, interval: time.Second, wantErr: "needs the WAL"},
		{name: "no heartbeat", sink: sinkKafka, mode: relay.ModeWAL, interval: -1, wantErr: "--heartbeat-interval is negative"},
		{name: "nats", sink: sinkNATS, mode: relay.ModeWAL, interval: time.Second, wantLog: "written to Kafka only: with --sink nats-jetstream"},
	} {
		var cfg relay.Config
		cfg.HeartbeatTopic, cfg.Mode, cfg.Replication.HeartbeatInterval = "hb", tt.mode, tt.interval
		var out strings.Builder
		err := heartbeatRecords(&cfg, tt.sink, slog.New(slog.NewTextHandler(&out, nil)))
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: %v, want %q", tt.name, err, tt.wantErr)
			}
			continue
		case err != nil:
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if cfg.HeartbeatTopic != tt.wantTopic {
			t.Errorf("%s: heartbeat topic %q, want %q", tt.name, cfg.HeartbeatTopic, tt.wantTopic)
		}
		if tt.wantLog != "" && !strings.Contains(out.String(), tt.wantLog) {
			t.Errorf("%s: logged %q, want %q", tt.name, out.String(), tt.wantLog)
		}
	}
}
