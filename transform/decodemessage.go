package transform

import "fmt"

// DecodeMessageClass is Debezium's DecodeLogicalDecodingMessageContent:
// it turns the record of a logical decoding message (op "m") into a change
// event whose after is the message's content parsed as JSON (op "c", no
// key), which the Outbox Event Router after it routes as an outbox row.
// Any other record it leaves as it is.
//
// pgoutbox does its work where it reads the message: the message's JSON
// becomes a row (package replication), which the router routes as the
// table's rows, its payload the parsed document. So the transform is
// taken before the router only, and holds no stage of the chain.
const DecodeMessageClass = "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent"

// MessageDecode is the transform's configuration.
type MessageDecode struct {
	// NullFields is fields.null.include: a null field of the content is
	// kept in its struct (as optional bytes) rather than left out.
	NullFields bool
}

// MessageDecode is the chain's DecodeLogicalDecodingMessageContent before
// the router; nil when it has none.
func (c *Chain) MessageDecode() *MessageDecode {
	if c == nil {
		return nil
	}
	return c.decode
}

// decodeBeforeRouter reads the transform before the router: its one
// option, and no predicate, which would make it decode some messages and
// not others.
func (p *parser) decodeBeforeRouter(alias string) *MessageDecode {
	prefix := "transforms." + alias + "."
	o := p.options(prefix)
	o.str("type", true, "")
	o.str("version", false, "")
	d := &MessageDecode{NullFields: o.boolean("fields.null.include", false)}
	if _, set := p.props[prefix+"predicate"]; set {
		p.markPrefix(prefix)
		p.refuse(prefix+"predicate", "a predicate on "+DecodeMessageClass+" is not implemented: pgoutbox decodes every message of the prefixes it reads")
		return nil
	}
	if _, set := p.props[prefix+"negate"]; set {
		p.refuse(prefix+"negate", "given without "+p.name(prefix+"predicate")+" (Kafka Connect refuses it)")
		return nil
	}
	if o.failed {
		return nil
	}
	return d
}

// decodeRefusal is why the transform is refused elsewhere than before the
// router.
func decodeRefusal(router bool) string {
	if router {
		return fmt.Sprintf("%s after the Outbox Event Router is not implemented: list it before the router, as Debezium documents it", DecodeMessageClass)
	}
	return fmt.Sprintf("%s without the Outbox Event Router after it is not implemented: pgoutbox reads logical decoding messages as outbox rows, which the router routes", DecodeMessageClass)
}
