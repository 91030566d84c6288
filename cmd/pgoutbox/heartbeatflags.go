package main

import (
	"errors"
	"log/slog"

	"github.com/pgoutbox/pgoutbox/relay"
)

// heartbeatRecords checks --heartbeat-topic against the mode: the records
// come from the heartbeats the WAL carries. Every sink takes them, as
// Debezium Server's sinks deliver them as any record.
func heartbeatRecords(cfg *relay.Config, log *slog.Logger) error {
	if cfg.HeartbeatTopic == "" {
		return nil
	}
	switch {
	case cfg.Replication.HeartbeatInterval < 0:
		return errors.New("--heartbeat-topic needs the heartbeat: --heartbeat-interval is negative")
	case cfg.Mode == relay.ModePoll:
		return errors.New("--heartbeat-topic (heartbeat.interval.ms above 0) needs the WAL, whose heartbeats give the records: run with --mode wal or auto")
	}
	log.Debug("heartbeat records", "heartbeat_topic", cfg.HeartbeatTopic)
	return nil
}
