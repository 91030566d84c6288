package schema

import (
	"testing"
	"time"
)

// A ledger's outbox row with columns whose rendering Debezium's value
// options change: numeric, money, timestamp, date, time, bytea.
var benchLedgerTable = []Column{
	{Name: "id", TypeOID: oidUUID, TypMod: -1}, {Name: "aggregatetype", TypeOID: oidText, TypMod: -1}, {Name: "aggregateid", TypeOID: oidText, TypMod: -1}, {Name: "type", TypeOID: oidText, TypMod: -1},
	{Name: "payload", TypeOID: oidJSONB, TypMod: -1}, {Name: "amount", TypeOID: oidNumeric, TypMod: (12<<16 | 2) + 4}, {Name: "fee", TypeOID: oidMoney, TypMod: -1},
	{Name: "booked_at", TypeOID: oidTimestamp, TypMod: -1}, {Name: "value_date", TypeOID: oidDate, TypMod: -1}, {Name: "cutoff", TypeOID: oidTime, TypMod: -1}, {Name: "digest", TypeOID: oidBytea, TypMod: -1},
	{Name: "created_at", TypeOID: oidTimestamptz, TypMod: -1},
}

func benchLedgerRow() [][]byte {
	return [][]byte{[]byte("0b7e4c1e-6c3f-4a53-9f0e-2b8c2f1d9a10"), []byte("Ledger"), []byte("acct-918273"), []byte("EntryPosted"),
		[]byte(benchPayload), []byte("129.90"), []byte("$1.25"), []byte("2026-11-21 18:37:59.123456"), []byte("2026-11-21"),
		[]byte("17:00:00"), []byte(`\x9f86d081884c7d659a2feaa0c55ad015`), []byte("2026-11-21 18:37:59.123456+00")}
}

func benchDebezium(b *testing.B, f Format, cfg DebeziumConfig, add []AdditionalField) {
	bind := mustBind(b, Columns{Additional: add}, benchLedgerTable)
	rec, err := bind.Record(benchLedgerRow(), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	rec.Origin = Origin{Database: "ledger", Schema: "public", Table: "outbox", LSN: 24064704, LastCommitLSN: 24064592, TxID: 584}
	cfg.Now = func() time.Time { return time.Unix(1700000000, 0) }
	e, err := NewEncoder(EncoderConfig{Format: f, Debezium: cfg})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(benchPayload)))
	for b.Loop() {
		if _, err := e.Encode(&rec); err != nil {
			b.Fatal(err)
		}
	}
}

var benchPlacements = []AdditionalField{
	{Column: "type", Placement: PlaceHeader, Alias: "eventType"}, {Column: "amount", Placement: PlaceHeader},
	{Column: "booked_at", Placement: PlaceEnvelope}, {Column: "amount", Placement: PlaceEnvelope}, {Column: "fee", Placement: PlaceEnvelope},
	{Column: "value_date", Placement: PlaceEnvelope}, {Column: "cutoff", Placement: PlaceEnvelope}, {Column: "digest", Placement: PlaceEnvelope},
}

func BenchmarkEncodeDebeziumOutbox(b *testing.B) {
	b.Run("defaults", func(b *testing.B) { benchDebezium(b, DebeziumOutbox, DebeziumConfig{}, nil) })
	b.Run("placements", func(b *testing.B) {
		benchDebezium(b, DebeziumOutbox, DebeziumConfig{Header: ConvJSON}, benchPlacements)
	})
	b.Run("placements-schemas", func(b *testing.B) {
		benchDebezium(b, DebeziumOutbox, DebeziumConfig{Key: ConvJSONSchemas, Value: ConvJSONSchemas, Header: ConvJSONSchemas}, benchPlacements)
	})
	// A table's defaults, as teams' tables have them: each part's schema
	// carries its column's.
	b.Run("placements-schemas-column-defaults", func(b *testing.B) {
		benchDebezium(b, DebeziumOutbox, DebeziumConfig{Key: ConvJSONSchemas, Value: ConvJSONSchemas, Header: ConvJSONSchemas,
			Defaults: benchLedgerDefaults}, benchPlacements)
	})
}

// benchLedgerDefaults are the ledger table's column defaults.
var benchLedgerDefaults = map[string]string{"id": "gen_random_uuid()", "aggregateid": "'none'::text", "payload": "'{}'::jsonb",
	"amount": "0", "booked_at": "now()", "created_at": "now()"}

func BenchmarkEncodeDebeziumChange(b *testing.B) {
	b.Run("json", func(b *testing.B) { benchDebezium(b, Debezium, DebeziumConfig{}, nil) })
	b.Run("schemas-column-defaults", func(b *testing.B) {
		benchDebezium(b, Debezium, DebeziumConfig{Key: ConvJSONSchemas, Value: ConvJSONSchemas, Defaults: benchLedgerDefaults}, nil)
	})
}
