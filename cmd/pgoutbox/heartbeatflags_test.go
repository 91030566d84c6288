package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/relay"
)

// --heartbeat-topic needs the WAL's heartbeats.
func TestHeartbeatRecordsFlags(t *testing.T) {
	for _, tt := range []struct {
		name      string
		mode      relay.Mode
		interval  time.Duration
		wantTopic string
		wantErr   string
	}{
		{name: "kafka", mode: relay.ModeAuto, interval: time.Second, wantTopic: "hb"},
		{name: "wal", mode: relay.ModeWAL, interval: time.Second, wantTopic: "hb"},
		{name: "poll", mode: relay.ModePoll, interval: time.Second, wantErr: "needs the WAL"},
		{name: "no heartbeat", mode: relay.ModeWAL, interval: -1, wantErr: "--heartbeat-interval is negative"},
	} {
		var cfg relay.Config
		cfg.HeartbeatTopic, cfg.Mode, cfg.Replication.HeartbeatInterval = "hb", tt.mode, tt.interval
		err := heartbeatRecords(&cfg, slog.New(slog.DiscardHandler))
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
	}
}
