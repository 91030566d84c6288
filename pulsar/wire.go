package pulsar

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"google.golang.org/protobuf/encoding/protowire"
)

// This file is the part of Pulsar's binary protocol (PulsarApi.proto,
// protocol version 19) a producer speaks: the commands it sends, written
// field by field, and the fields it reads of the broker's.

// The commands' types (BaseCommand.Type) and their fields in BaseCommand.
const (
	cmdConnect                   = 2
	cmdConnected                 = 3
	cmdProducer                  = 5
	cmdSend                      = 6
	cmdSendReceipt               = 7
	cmdSendError                 = 8
	cmdSuccess                   = 13
	cmdError                     = 14
	cmdCloseProducer             = 15
	cmdProducerSuccess           = 17
	cmdPing                      = 18
	cmdPong                      = 19
	cmdPartitionedMetadata       = 21
	cmdPartitionedMetadataAnswer = 22
	cmdLookup                    = 23
	cmdLookupAnswer              = 24
	cmdAuthChallenge             = 36
	cmdAuthResponse              = 37
)

// protocolVersion is the version pgoutbox speaks: 19, which the brokers
// of Pulsar 2.8 and later speak.
const protocolVersion = 19

// magicCRC32C starts a SEND's checksummed part (protocol version 6).
var magicCRC32C = []byte{0x0e, 0x01}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maxFrame is the largest frame the reader takes: Pulsar's default
// maxMessageSize (5 MiB) and room for the command.
const maxFrame = 5<<20 + 10<<10

// command is a BaseCommand as the reader decodes it: its type and, of
// the commands a producer receives, the fields it uses.
type command struct {
	typ int
	// requestID answers a request (PRODUCER, LOOKUP, PARTITIONED_METADATA).
	requestID uint64
	// producerID and sequenceID name a SEND's receipt or error, or a
	// producer the broker closed.
	producerID, sequenceID uint64
	// serverError and message are an error's (ServerError, its text).
	serverError int
	message     string
	hasError    bool
	// producerName is PRODUCER_SUCCESS's; producerReady false means the
	// broker answers again once the producer is ready.
	producerName  string
	producerReady bool
	schemaVersion []byte
	// maxMessageSize is CONNECTED's (0 when the broker gives none).
	maxMessageSize int
	// brokerURL, brokerURLTLS, lookupType, authoritative and
	// proxyThroughServiceURL are LOOKUP_RESPONSE's.
	brokerURL, brokerURLTLS string
	lookupType              int
	authoritative           bool
	proxyThroughServiceURL  bool
	// partitions and metadataFailed are PARTITIONED_METADATA_RESPONSE's.
	partitions     int
	metadataFailed bool
}

// The lookup answers (CommandLookupTopicResponse.LookupType).
const (
	lookupRedirect = 0
	lookupConnect  = 1
	lookupFailed   = 2
)

// serverErrors names Pulsar's ServerError codes that a producer meets.
var serverErrors = map[int]string{
	0: "UnknownError", 1: "MetadataError", 2: "PersistenceError", 3: "AuthenticationError", 4: "AuthorizationError",
	6: "ServiceNotReady", 7: "ProducerBlockedQuotaExceededError", 8: "ProducerBlockedQuotaExceededException",
	9: "ChecksumError", 10: "UnsupportedVersionError", 11: "TopicNotFound", 14: "TooManyRequests",
	15: "TopicTerminatedError", 16: "ProducerBusy", 17: "InvalidTopicName", 18: "IncompatibleSchema", 22: "NotAllowedError",
	25: "ProducerFenced",
}

// The ServerError codes pgoutbox tells apart.
const (
	errServiceNotReady = 6
	errTooManyRequests = 14
	errTopicNotFound   = 11
)

// ServerError is an error the broker answered: its code's name and text.
type ServerError struct {
	Code    int
	Message string
}

func (e *ServerError) Error() string {
	name, ok := serverErrors[e.Code]
	if !ok {
		name = fmt.Sprintf("ServerError %d", e.Code)
	}
	if e.Message == "" {
		return name
	}
	return name + ": " + e.Message
}

// Retriable tells an error a fresh lookup and producer may not meet.
func (e *ServerError) Retriable() bool {
	return e.Code == errServiceNotReady || e.Code == errTooManyRequests || e.Code == 2 || e.Code == 1
}

// frame writes a command without payload: total size, command size,
// the BaseCommand of type typ with body at field typ.
func frame(typ int, body []byte) []byte {
	cmd := baseCommand(typ, body)
	out := make([]byte, 8, 8+len(cmd))
	binary.BigEndian.PutUint32(out[0:], uint32(4+len(cmd)))
	binary.BigEndian.PutUint32(out[4:], uint32(len(cmd)))
	return append(out, cmd...)
}

// sendFrame writes a SEND of one message: the command, the magic and
// checksum, the metadata and the payload.
func sendFrame(producerID, sequenceID uint64, metadata, payload []byte) []byte {
	var send []byte
	send = protowire.AppendTag(send, 1, protowire.VarintType)
	send = protowire.AppendVarint(send, producerID)
	send = protowire.AppendTag(send, 2, protowire.VarintType)
	send = protowire.AppendVarint(send, sequenceID)
	cmd := baseCommand(cmdSend, send)
	checked := 4 + len(metadata) + len(payload)
	total := 4 + len(cmd) + len(magicCRC32C) + 4 + checked
	out := make([]byte, 0, 4+total)
	out = binary.BigEndian.AppendUint32(out, uint32(total))
	out = binary.BigEndian.AppendUint32(out, uint32(len(cmd)))
	out = append(out, cmd...)
	out = append(out, magicCRC32C...)
	sumAt := len(out)
	out = append(out, 0, 0, 0, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(len(metadata)))
	out = append(out, metadata...)
	out = append(out, payload...)
	binary.BigEndian.PutUint32(out[sumAt:], crc32.Checksum(out[sumAt+4:], castagnoli))
	return out
}

func baseCommand(typ int, body []byte) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(typ))
	b = protowire.AppendTag(b, protowire.Number(typ), protowire.BytesType)
	return protowire.AppendBytes(b, body)
}

// fields appends protobuf fields: a string, bytes, a varint or a bool,
// each at its number.
type fields []byte

func (f fields) str(n protowire.Number, s string) fields {
	f = protowire.AppendTag(f, n, protowire.BytesType)
	return protowire.AppendString(f, s)
}

func (f fields) bytes(n protowire.Number, b []byte) fields {
	f = protowire.AppendTag(f, n, protowire.BytesType)
	return protowire.AppendBytes(f, b)
}

func (f fields) varint(n protowire.Number, v uint64) fields {
	f = protowire.AppendTag(f, n, protowire.VarintType)
	return protowire.AppendVarint(f, v)
}

func (f fields) boolean(n protowire.Number, v bool) fields {
	return f.varint(n, protowire.EncodeBool(v))
}

// connectCmd is CONNECT: the client's version, the protocol's, the
// authentication, and for a proxy the broker it is to reach.
func connectCmd(authMethod string, authData []byte, proxyTo string) []byte {
	f := fields(nil).str(1, "pgoutbox").varint(4, protocolVersion)
	if authMethod != "" {
		f = f.bytes(3, authData).str(5, authMethod)
	}
	if proxyTo != "" {
		f = f.str(6, proxyTo)
	}
	// FeatureFlags: supports_auth_refresh, so that the broker asks for a
	// new token where it would close the connection.
	f = f.bytes(10, fields(nil).boolean(1, true))
	return frame(cmdConnect, f)
}

// authResponseCmd answers AUTH_CHALLENGE with the credentials again.
func authResponseCmd(authMethod string, authData []byte) []byte {
	data := fields(nil).str(1, authMethod).bytes(2, authData)
	return frame(cmdAuthResponse, fields(nil).str(1, "pgoutbox").bytes(2, data).varint(3, protocolVersion))
}

func pongCmd() []byte { return frame(cmdPong, nil) }

func partitionedMetadataCmd(topic string, requestID uint64) []byte {
	return frame(cmdPartitionedMetadata, fields(nil).str(1, topic).varint(2, requestID))
}

func lookupCmd(topic string, requestID uint64, authoritative bool) []byte {
	return frame(cmdLookup, fields(nil).str(1, topic).varint(2, requestID).boolean(3, authoritative))
}

// schemaString is the STRING schema Pulsar's clients give a producer of
// text.
var schemaString = fields(nil).str(1, "String").bytes(3, nil).varint(4, 1)

// producerCmd is PRODUCER: a producer of topic, named by the broker,
// with the STRING schema when text is set.
func producerCmd(topic string, producerID, requestID uint64, text bool) []byte {
	f := fields(nil).str(1, topic).varint(2, producerID).varint(3, requestID).boolean(9, false)
	if text {
		f = f.bytes(7, schemaString)
	}
	return frame(cmdProducer, f)
}

// closeProducerCmd closes a producer.
func closeProducerCmd(producerID, requestID uint64) []byte {
	return frame(15, fields(nil).varint(1, producerID).varint(2, requestID))
}

// batchOfOne is a message as Pulsar's Java client sends it with
// batching on (its default, and Debezium Server's): a batch of one, its
// MessageMetadata (the producer's name, the sequence id, the publish
// time, the key, one message, the version of the producer's schema when
// it has one) and its payload, the message's SingleMessageMetadata
// (properties in the order given, key, size, and whether the value is
// null) and value. Every client reads a batch; an unbatched message with
// an empty payload some (Go's) drop as corrupt.
func batchOfOne(producer string, sequenceID, publishMillis uint64, schemaVersion []byte, props [][2]string, key string, value []byte, nullValue bool) (metadata, payload []byte) {
	metadata = fields(nil).str(1, producer).varint(2, sequenceID).varint(3, publishMillis).str(6, key).varint(11, 1)
	if schemaVersion != nil {
		metadata = fields(metadata).bytes(16, schemaVersion)
	}
	single := fields(nil)
	for _, kv := range props {
		single = single.bytes(1, fields(nil).str(1, kv[0]).str(2, kv[1]))
	}
	single = single.str(2, key).varint(3, uint64(len(value)))
	if nullValue {
		single = single.boolean(9, true)
	}
	payload = make([]byte, 0, 4+len(single)+len(value))
	payload = binary.BigEndian.AppendUint32(payload, uint32(len(single)))
	payload = append(payload, single...)
	return metadata, append(payload, value...)
}

// errMalformed is a frame the reader cannot read.
var errMalformed = errors.New("pulsar: a malformed frame from the broker")

// parseCommand reads a BaseCommand.
func parseCommand(b []byte) (*command, error) {
	c := &command{producerReady: true}
	subs := map[protowire.Number][]byte{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, errMalformed
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, errMalformed
			}
			c.typ, b = int(v), b[n:]
			continue
		case typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, errMalformed
			}
			subs[num] = v
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil, errMalformed
		}
		b = b[n:]
	}
	return c, c.read(subs[protowire.Number(c.typ)])
}

// read reads the fields of c's command body.
func (c *command) read(b []byte) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		var v uint64
		var s []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			s, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		c.field(int(num), v, s)
	}
	return nil
}

// field takes one field of c's command body.
func (c *command) field(num int, v uint64, s []byte) {
	switch c.typ {
	case cmdConnected:
		if num == 3 {
			c.maxMessageSize = int(v)
		}
	case cmdSendReceipt:
		switch num {
		case 1:
			c.producerID = v
		case 2:
			c.sequenceID = v
		}
	case cmdSendError:
		switch num {
		case 1:
			c.producerID = v
		case 2:
			c.sequenceID = v
		case 3:
			c.serverError, c.hasError = int(v), true
		case 4:
			c.message = string(s)
		}
	case cmdSuccess:
		if num == 1 {
			c.requestID = v
		}
	case cmdError:
		switch num {
		case 1:
			c.requestID = v
		case 2:
			c.serverError, c.hasError = int(v), true
		case 3:
			c.message = string(s)
		}
	case cmdCloseProducer:
		if num == 1 {
			c.producerID = v
		}
	case cmdProducerSuccess:
		switch num {
		case 1:
			c.requestID = v
		case 2:
			c.producerName = string(s)
		case 4:
			c.schemaVersion = append([]byte{}, s...)
		case 6:
			c.producerReady = v != 0
		}
	case cmdLookupAnswer:
		switch num {
		case 1:
			c.brokerURL = string(s)
		case 2:
			c.brokerURLTLS = string(s)
		case 3:
			c.lookupType = int(v)
		case 4:
			c.requestID = v
		case 5:
			c.authoritative = v != 0
		case 6:
			c.serverError, c.hasError = int(v), true
		case 7:
			c.message = string(s)
		case 8:
			c.proxyThroughServiceURL = v != 0
		}
	case cmdPartitionedMetadataAnswer:
		switch num {
		case 1:
			c.partitions = int(v)
		case 2:
			c.requestID = v
		case 3:
			c.metadataFailed = v == 1
		case 4:
			c.serverError, c.hasError = int(v), true
		case 5:
			c.message = string(s)
		}
	}
}

// err is the command's error, nil for none.
func (c *command) err() error {
	if !c.hasError && c.typ != cmdError && !c.metadataFailed && !(c.typ == cmdLookupAnswer && c.lookupType == lookupFailed) {
		return nil
	}
	return &ServerError{Code: c.serverError, Message: c.message}
}
