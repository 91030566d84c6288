package schema

import (
	"strconv"
	"time"
)

// Debezium's transaction metadata (provide.transaction.metadata=true): a
// BEGIN and an END record per transaction on the transaction topic, and a
// transaction block in each change event. Debezium's PostgreSQL connector
// names a transaction <xid>:<lsn>, the lsn being the WAL position it read
// last when it wrote the record (PostgresTransactionMonitor): a change
// event's own position, for BEGIN the position of the transaction's BEGIN
// message (the first change the publication carries, since PostgreSQL 15
// sends no BEGIN before it), for END the commit's end.

// TxBlock is a change event's transaction block (event.block); the zero
// value is none, written as null.
type TxBlock struct {
	ID string
	// TotalOrder is the event's place among the transaction's events,
	// CollectionOrder among its table's, both from 1.
	TotalOrder, CollectionOrder int64
}

// TxID is Debezium's PostgreSQL name of transaction xid read at lsn.
func TxID(xid uint32, lsn uint64) string {
	return strconv.FormatUint(uint64(xid), 10) + ":" + strconv.FormatUint(lsn, 10)
}

// TxCount is one table's count of events in a transaction; Collection is
// the table as Debezium names a data collection (schema.table).
type TxCount struct {
	Collection string
	Events     int64
}

// TxBoundary is a record of the transaction topic: a transaction's BEGIN,
// or its END with its counts.
type TxBoundary struct {
	End bool
	ID  string
	// Time is the transaction's commit time (ts_ms, in milliseconds).
	Time time.Time
	// Events and Collections are END's: the transaction's events, and
	// each table's in the order Debezium writes them (OrderTxCounts).
	Events      int64
	Collections []TxCount
}

const (
	txKeySchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"}],` +
		`"optional":false,"name":"io.debezium.connector.common.TransactionMetadataKey","version":1}`
	txValueSchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"status"},` +
		`{"type":"string","optional":false,"field":"id"},{"type":"int64","optional":true,"field":"event_count"},` +
		`{"type":"array","items":{"type":"struct","fields":[{"type":"string","optional":false,"field":"data_collection"},` +
		`{"type":"int64","optional":false,"field":"event_count"}],"optional":true,"name":"event.collection","version":1},` +
		`"optional":true,"field":"data_collections"},{"type":"int64","optional":false,"field":"ts_ms"}],` +
		`"optional":false,"name":"io.debezium.connector.common.TransactionMetadataValue","version":1}`
)

// Message is the record as JsonConverter writes it with schemas, key and
// value (TransactionMetadataKey, TransactionMetadataValue), no headers and
// no timestamp: the form package transform reads, which converts it as
// the configuration's converters write it.
func (b TxBoundary) Message() Message {
	key := append([]byte(`{"schema":`+txKeySchema+`,"payload":{"id":`), nil...)
	key = appendJavaString(key, b.ID)
	key = append(key, "}}"...)

	v := make([]byte, 0, len(txValueSchema)+128+48*len(b.Collections))
	v = append(v, `{"schema":`+txValueSchema+`,"payload":{"status":`...)
	if b.End {
		v = append(v, `"END","id":`...)
	} else {
		v = append(v, `"BEGIN","id":`...)
	}
	v = appendJavaString(v, b.ID)
	if !b.End {
		v = append(v, `,"event_count":null,"data_collections":null`...)
	} else {
		v = append(v, `,"event_count":`...)
		v = strconv.AppendInt(v, b.Events, 10)
		v = append(v, `,"data_collections":[`...)
		for i, c := range b.Collections {
			if i > 0 {
				v = append(v, ',')
			}
			v = append(v, `{"data_collection":`...)
			v = appendJavaString(v, c.Collection)
			v = append(v, `,"event_count":`...)
			v = strconv.AppendInt(v, c.Events, 10)
			v = append(v, '}')
		}
		v = append(v, ']')
	}
	v = append(v, `,"ts_ms":`...)
	v = strconv.AppendInt(v, b.Time.UnixMilli(), 10)
	v = append(v, "}}"...)
	return Message{Key: key, Value: v}
}

// appendTxBlock appends a change event's transaction block, null for
// none.
func appendTxBlock(buf []byte, t TxBlock) []byte {
	if t.ID == "" {
		return append(buf, "null"...)
	}
	buf = append(buf, `{"id":`...)
	buf = appendJavaString(buf, t.ID)
	buf = append(buf, `,"total_order":`...)
	buf = strconv.AppendInt(buf, t.TotalOrder, 10)
	buf = append(buf, `,"data_collection_order":`...)
	buf = strconv.AppendInt(buf, t.CollectionOrder, 10)
	return append(buf, '}')
}

// OrderTxCounts puts counts, in the order their tables first had an event,
// in the order Debezium's END lists them: it keeps them in a Java HashMap
// (TransactionContext), which iterates by bucket, the entries of a bucket
// in insertion order. capacity is the map's table size, which only grows
// (clearing the map between transactions keeps it): 16, doubled each time
// it holds more than three quarters of that. It returns the capacity after
// counts. A bucket of eight entries or more, which Java would make a tree
// of, is out of reach of a transaction's tables in practice.
func OrderTxCounts(counts []TxCount, capacity int) ([]TxCount, int) {
	if capacity < 16 {
		capacity = 16
	}
	for len(counts) > capacity*3/4 {
		capacity *= 2
	}
	out := make([]TxCount, 0, len(counts))
	buckets := make([]int, len(counts))
	for i, c := range counts {
		buckets[i] = javaBucket(c.Collection, capacity)
	}
	for b := 0; b < capacity && len(out) < len(counts); b++ {
		for i, c := range counts {
			if buckets[i] == b {
				out = append(out, c)
			}
		}
	}
	return out, capacity
}

// javaBucket is the bucket of a String key in a Java HashMap of capacity
// buckets: String.hashCode over UTF-16 code units, spread by HashMap.hash.
func javaBucket(s string, capacity int) int {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	u := uint32(h)
	u ^= u >> 16
	return int(u & uint32(capacity-1))
}
