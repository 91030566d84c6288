package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/transform"
)

// messageFlags read logical decoding messages as outbox rows.
type messageFlags struct{ include, exclude string }

const messageUsage = "read the logical decoding messages of these prefixes (pg_logical_emit_message(true, 'outbox', '<json>')) as outbox rows, besides the table's: " +
	"comma-separated regular expressions, each matching a whole prefix, case-insensitively (Debezium message.prefix.include.list). " +
	"The content must be a JSON object whose top-level fields are the row's columns: id, aggregatetype, aggregateid, type and payload, " +
	"or the columns the mapping flags name (strings, numbers, booleans; payload any JSON value). " +
	"A message that is not a JSON object, or lacks a mapped field, is poison: dead-lettered as a malformed row is (--on-poison dlq), or under --on-poison halt the relay stops there. " +
	"Transactional messages are published in commit order with their transaction's rows; non-transactional ones (pg_logical_emit_message(false, ...)) each on its own, when the WAL has them. " +
	"The WAL only: --mode poll is refused, auto streams the WAL alone. " +
	"With a Debezium format, the configuration's transforms must hold DecodeLogicalDecodingMessageContent before the Outbox Event Router"

func (m *messageFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&m.include, "message-prefix", "", messageUsage)
	fs.StringVar(&m.exclude, "message-prefix-exclude", "", "read the logical decoding messages of every prefix but these (Debezium message.prefix.exclude.list); see --message-prefix")
}

// apply sets the messages the stream reads, from the flags and the
// configuration's DecodeLogicalDecodingMessageContent.
func (m *messageFlags) apply(cfg *relay.Config, format schema.Format, log *slog.Logger) error {
	if m.include != "" && m.exclude != "" {
		return errors.New("--message-prefix and --message-prefix-exclude together: give one (Debezium refuses message.prefix.include.list with message.prefix.exclude.list)")
	}
	msgs, err := replication.ParseMessages(m.include, m.exclude)
	if err != nil {
		return fmt.Errorf("--message-prefix: %w", err)
	}
	chain, _ := transform.New(cfg.Transforms)
	decode := chain.MessageDecode()
	debezium := format == schema.Debezium || format == schema.DebeziumOutbox
	switch {
	case decode != nil && format != schema.DebeziumOutbox:
		return fmt.Errorf("%s: it runs before the Outbox Event Router, with --format debezium-outbox", transform.DecodeMessageClass)
	case decode != nil && msgs == nil:
		// Debezium reads every prefix without a list.
		msgs = &replication.Messages{}
	case decode == nil && msgs != nil && debezium:
		return fmt.Errorf("--message-prefix with --format %s: Debezium publishes the message records themselves unless %s before the Outbox Event Router turns them into outbox rows, and pgoutbox publishes messages as outbox rows only", format, transform.DecodeMessageClass)
	}
	if msgs == nil {
		return nil
	}
	cfg.Replication.Messages = msgs
	if decode != nil {
		cfg.Encoder.Debezium.MessageNullBytes = decode.NullFields
	}
	switch cfg.Mode {
	case relay.ModePoll:
		return errors.New("--mode poll: logical decoding messages are in the WAL only, not in a table polling could read; run with --mode wal or auto")
	case relay.ModeAuto:
		log.Info("logical decoding messages: streaming the WAL only (--mode wal), as messages are not in a table polling could read")
		cfg.Mode = relay.ModeWAL
	}
	return nil
}
