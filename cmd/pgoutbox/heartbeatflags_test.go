package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/transform"
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

// A heartbeat or transaction topic a sink cannot publish to is refused
// at start, where Debezium Server's sink fails at the first record,
// unless a transform after the router may rename it.
func TestOwnTopics(t *testing.T) {
	rename := transform.Config{Props: map[string]string{"transforms": "outbox,r", "transforms.outbox.type": transform.RouterClass,
		"transforms.r.type": "org.apache.kafka.connect.transforms.RegexRouter", "transforms.r.regex": "(.*)", "transforms.r.replacement": "x$1"}}
	for _, tt := range []struct {
		name, sink, snsPrefix string
		cfg                   relay.Config
		wantErr               string
	}{
		{"rocketmq heartbeat", sinkRocketMQ, "", relay.Config{HeartbeatTopic: "__debezium-heartbeat.shop"}, "RocketMQ's topic names take no '.'"},
		{"rocketmq heartbeat without a dot", sinkRocketMQ, "", relay.Config{HeartbeatTopic: "__debezium-heartbeat_shop"}, ""},
		{"rocketmq transaction", sinkRocketMQ, "", relay.Config{TransactionTopic: "shop.transaction"}, "the transaction topic"},
		{"pubsub heartbeat", sinkPubSub, "", relay.Config{HeartbeatTopic: "__debezium-heartbeat.shop"}, "starts with a letter"},
		{"pubsub heartbeat renamed", sinkPubSub, "", relay.Config{HeartbeatTopic: "__debezium-heartbeat.shop", Transforms: rename}, ""},
		{"pubsub heartbeat of a letter", sinkPubSub, "", relay.Config{HeartbeatTopic: "heartbeats.shop"}, ""},
		{"sns by prefix", sinkSNS, "arn:aws:sns:us-east-1:123456789012:", relay.Config{HeartbeatTopic: "heartbeats.shop"}, "hyphens and underscores"},
		{"sns by prefix, a name it takes", sinkSNS, "arn:aws:sns:us-east-1:123456789012:", relay.Config{HeartbeatTopic: "heartbeats_shop"}, ""},
		{"sns to one topic", sinkSNS, "", relay.Config{HeartbeatTopic: "__debezium-heartbeat.shop"}, ""},
		{"nats", sinkNATS, "", relay.Config{HeartbeatTopic: "__debezium-heartbeat.shop"}, ""},
	} {
		err := ownTopics(tt.cfg, tt.sink, tt.snsPrefix)
		if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}
