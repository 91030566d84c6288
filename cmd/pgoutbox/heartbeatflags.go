package main

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/pgoutbox/pgoutbox/relay"
)

// heartbeatRecords checks --heartbeat-topic against the sink and the mode:
// the records come from the heartbeats the WAL carries. Debezium refuses
// its heartbeat on no sink: on a sink other than Kafka pgoutbox keeps its
// heartbeat, which writes nothing, and says so.
func heartbeatRecords(cfg *relay.Config, sink string, log *slog.Logger) error {
	if cfg.HeartbeatTopic == "" {
		return nil
	}
	switch {
	case sink != sinkKafka:
		log.Warn(fmt.Sprintf("heartbeat records (--heartbeat-topic, heartbeat.interval.ms above 0) are written to Kafka only: with --sink %s the heartbeats write nothing", sink))
		cfg.HeartbeatTopic = ""
	case cfg.Replication.HeartbeatInterval < 0:
		return errors.New("--heartbeat-topic needs the heartbeat: --heartbeat-interval is negative")
	case cfg.Mode == relay.ModePoll:
		return errors.New("--heartbeat-topic (heartbeat.interval.ms above 0) needs the WAL, whose heartbeats give the records: run with --mode wal or auto")
	}
	log.Debug("heartbeat records", "heartbeat_topic", cfg.HeartbeatTopic)
	return nil
}
