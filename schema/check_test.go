package schema

import (
	"errors"
	"strings"
	"testing"
)

// Check refuses, before any row, what could not be relayed: each case
// names the column the error must name, "" when the mapping works.
func TestCheck(t *testing.T) {
	docTable := []Column{{Name: "id", TypeOID: oidUUID, TypMod: -1}, {Name: "aggregatetype", TypeOID: oidVarchar, TypMod: -1}, {Name: "aggregateid", TypeOID: oidVarchar, TypMod: -1}, {Name: "payload", TypeOID: oidJSONB, TypMod: -1}}
	byteaTable := []Column{{Name: "id", TypeOID: oidUUID, TypMod: -1}, {Name: "aggregatetype", TypeOID: oidText, TypMod: -1}, {Name: "aggregateid", TypeOID: oidBytea, TypMod: -1}, {Name: "type", TypeOID: oidText, TypMod: -1}, {Name: "payload", TypeOID: oidBytea, TypMod: -1}}
	intRoute := []Column{{Name: "id", TypeOID: oidUUID, TypMod: -1}, {Name: "aggregatetype", TypeOID: oidInt4, TypMod: -1}, {Name: "aggregateid", TypeOID: oidText, TypMod: -1}, {Name: "payload", TypeOID: oidJSONB, TypMod: -1}}
	numericCol := []Column{{Name: "id", TypeOID: oidUUID, TypMod: -1}, {Name: "aggregatetype", TypeOID: oidText, TypMod: -1}, {Name: "aggregateid", TypeOID: oidText, TypMod: -1}, {Name: "payload", TypeOID: oidJSONB, TypMod: -1}, {Name: "amount", TypeOID: oidNumeric, TypMod: -1}}
	outbox := EncoderConfig{Format: DebeziumOutbox}
	conv := func(key, value, header Converter) EncoderConfig {
		return EncoderConfig{Format: DebeziumOutbox, Debezium: DebeziumConfig{Key: key, Value: value, Header: header}}
	}
	for _, tc := range []struct {
		name string
		c    Columns
		cols []Column
		enc  EncoderConfig
		want string // a column the error names; "" for none
		err  error
	}{
		{"Debezium's documented table", Columns{PassThrough: true}, docTable, outbox, "", nil},
		{"CloudEvents needs a type", Columns{}, docTable, EncoderConfig{Format: CloudEvents, Source: "/x"}, "type", ErrMissingColumn},
		{"bytea payload as bytes", Columns{PassThrough: true}, byteaTable, conv(ConvByteArray, ConvByteArray, ""), "", nil},
		{"bytea payload, binary with a delegate", Columns{PassThrough: true}, byteaTable, conv("binary:string", ConvBinary, "binary:string"), "", nil},
		{"bytea payload as JSON", Columns{PassThrough: true}, byteaTable, conv(ConvJSON, ConvJSONSchemas, ""), "", nil},
		{"bytea payload under StringConverter", Columns{PassThrough: true}, byteaTable, conv(ConvByteArray, ConvString, ""), "payload", ErrColumnType},
		{"text key under ByteArrayConverter", Columns{PassThrough: true}, docTable, conv(ConvByteArray, ConvJSON, ""), "aggregateid", ErrColumnType},
		{"uuid header under binary without delegate", Columns{PassThrough: true}, docTable, conv(ConvString, ConvJSON, ConvBinary), "id", ErrColumnType},
		{"envelope under StringConverter", Columns{PassThrough: true, Additional: mustParseAdditional("aggregateid:envelope:a")}, docTable, conv(ConvString, ConvString, ""), "payload", ErrColumnType},
		{"expansion under ByteArrayConverter", Columns{PassThrough: true}, docTable, EncoderConfig{Format: DebeziumOutbox, Debezium: DebeziumConfig{Value: ConvByteArray, ExpandJSONPayload: true}}, "payload", ErrColumnType},
		{"bytea payload as CloudEvents data", Columns{}, byteaTable, EncoderConfig{Format: CloudEvents, Source: "/x"}, "payload", ErrColumnType},
		{"routed by an integer", Columns{PassThrough: true}, intRoute, outbox, "aggregatetype", ErrColumnType},
		{"numeric in an envelope", Columns{PassThrough: true, Additional: mustParseAdditional("amount:envelope")}, numericCol, outbox, "", nil},
		{"numeric in a change event", Columns{PassThrough: true}, numericCol, EncoderConfig{Format: Debezium}, "", nil},
		{"CloudEvents of an expanded payload", Columns{PassThrough: true}, docTable,
			EncoderConfig{Format: DebeziumOutbox, Debezium: DebeziumConfig{Value: ConvCloudEvents, Header: ConvJSONSchemas, ExpandJSONPayload: true}}, "", nil},
		{"CloudEvents of a payload's text", Columns{PassThrough: true}, docTable,
			EncoderConfig{Format: DebeziumOutbox, Debezium: DebeziumConfig{Value: ConvCloudEvents, Header: ConvJSONSchemas}}, "payload", ErrColumnType},
		{"several problems in one message", Columns{PassThrough: true}, byteaTable, conv(ConvString, ConvString, ConvByteArray), "aggregateid", ErrColumnType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Check(tc.cols, tc.enc)
			if tc.err == nil {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check: %v, want %v naming %s", err, tc.err, tc.want)
			}
		})
	}
}
