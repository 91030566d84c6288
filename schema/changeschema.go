package schema

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// This file writes the schemas of the change event under JsonConverter with
// schemas (json-schemas): the key's struct of primary key columns and the
// envelope of before, after, source and transaction, as Debezium 3.6.1's
// PostgreSQL connector builds them, column defaults included.

// changeSchemas caches a table's key and envelope schemas: they depend only
// on its columns (a Binding), its names and the configuration, and are the
// larger part of every message.
type changeSchemas struct {
	mu sync.Mutex
	m  map[changeSchemaKey]*changeSchema
}

type changeSchemaKey struct {
	bind          *Binding
	schema, table string
	snapshot      bool // keyFieldOf differs between reads and streamed events
}

type changeSchema struct {
	key, value string // the schemas as JSON
	err        error
}

// forRecord returns the schemas of r's table, building them once per
// binding. A schema change makes a new binding, so an entry is never
// stale; old ones are dropped when the cache grows.
func (s *changeSchemas) forRecord(c *DebeziumConfig, r *Record, keyCols []string) *changeSchema {
	k := changeSchemaKey{r.bind, r.Origin.Schema, r.Origin.Table, r.Origin.Snapshot != 0}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cs := s.m[k]; cs != nil {
		return cs
	}
	if s.m == nil || len(s.m) >= 64 {
		s.m = map[changeSchemaKey]*changeSchema{}
	}
	cs := buildChangeSchema(c, r, keyCols)
	s.m[k] = cs
	return cs
}

// sourceSchema is the PostgreSQL connector's source block
// (io.debezium.connector.postgresql.Source).
const sourceSchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"version"},` +
	`{"type":"string","optional":false,"field":"connector"},{"type":"string","optional":false,"field":"name"},` +
	`{"type":"int64","optional":false,"field":"ts_ms"},` +
	`{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"},"default":"false","field":"snapshot"},` +
	`{"type":"string","optional":false,"field":"db"},{"type":"string","optional":true,"field":"sequence"},` +
	`{"type":"int64","optional":true,"field":"ts_us"},{"type":"int64","optional":true,"field":"ts_ns"},` +
	`{"type":"string","optional":false,"field":"schema"},{"type":"string","optional":false,"field":"table"},` +
	`{"type":"int64","optional":true,"field":"txId"},{"type":"int64","optional":true,"field":"lsn"},` +
	`{"type":"int64","optional":true,"field":"xmin"},{"type":"string","optional":true,"field":"origin"},` +
	`{"type":"int64","optional":true,"field":"origin_lsn"}],` +
	`"optional":false,"name":"io.debezium.connector.postgresql.Source","version":1,"field":"source"}`

// envelopeTail is what follows after in the envelope's fields: source,
// transaction (event.block), op and the three timestamps.
const envelopeTail = sourceSchema + `,{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"},` +
	`{"type":"int64","optional":false,"field":"total_order"},{"type":"int64","optional":false,"field":"data_collection_order"}],` +
	`"optional":true,"name":"event.block","version":1,"field":"transaction"},` +
	`{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"},` +
	`{"type":"int64","optional":true,"field":"ts_us"},{"type":"int64","optional":true,"field":"ts_ns"}]`

func buildChangeSchema(c *DebeziumConfig, r *Record, keyCols []string) *changeSchema {
	base := c.TopicPrefix + "." + r.Origin.Schema + "." + r.Origin.Table
	field := func(dst []byte, i int, t pgType) ([]byte, bool) {
		col := r.Columns[i]
		ct, ok := connectTypeOf(t, c.vm)
		if !ok {
			return dst, false
		}
		return appendConnectField(dst, ct, c.optional(col.Name), c.defaultJSON(col.Name, t), col.Name), true
	}

	key := []byte(`{"type":"struct","fields":[`)
	for i, name := range keyCols {
		j := columnIndex(r.Columns, name)
		if j < 0 {
			return &changeSchema{err: fmt.Errorf("schema: key column %q is not in the table", name)}
		}
		if i > 0 {
			key = append(key, ',')
		}
		key = c.appendKeyField(key, r, j)
	}
	key = append(key, `],"optional":false,"name":`...)
	key = appendJavaString(key, base+".Key")
	key = append(key, '}')

	row := []byte(`{"type":"struct","fields":[`)
	n := len(row)
	for i := range r.Columns {
		if r.Columns[i].Mapper.Exclude {
			continue // column.exclude.list: in the key only
		}
		mark := len(row)
		if len(row) > n {
			row = append(row, ',')
		}
		var ok bool
		if row, ok = field(row, i, r.Columns[i].typ()); !ok {
			row = row[:mark] // a type Debezium leaves out
		}
	}
	row = append(row, `],"optional":true,"name":`...)
	row = appendJavaString(row, base+".Value")

	v := make([]byte, 0, 2*len(row)+len(envelopeTail)+128)
	v = append(v, `{"type":"struct","fields":[`...)
	v = append(v, row...)
	v = append(v, `,"field":"before"},`...)
	v = append(v, row...)
	v = append(v, `,"field":"after"},`...)
	v = append(v, envelopeTail...)
	v = append(v, `,"optional":false,"name":`...)
	v = appendJavaString(v, base+".Envelope")
	v = append(v, `,"version":2}`...)
	return &changeSchema{key: string(key), value: string(v)}
}

// defaultJSON is column's default in its schema, as JSON; nil for none.
// It is worked out once per column and type (defaultCache).
func (c *DebeziumConfig) defaultJSON(column string, t pgType) []byte {
	if len(c.Defaults) == 0 {
		return nil
	}
	if _, ok := c.Defaults[column]; !ok {
		return nil
	}
	k := defaultKey{column, t}
	if c.defaultCache != nil {
		if v, ok := c.defaultCache.Load(k); ok {
			return v.([]byte)
		}
	}
	var def []byte
	if text := c.defaultValue(column, t); text != nil {
		if d, reason := appendConnectValue(nil, t, c.vm, text); reason == "" {
			def = d
		}
	}
	if c.defaultCache != nil {
		c.defaultCache.Store(k, def)
	}
	return def
}

// defaultKey names a column's default: its name and type.
type defaultKey struct {
	column string
	t      pgType
}

// defaultValue is column's default as Debezium reads it, as the text the
// stream would carry; nil for none.
func (c *DebeziumConfig) defaultValue(column string, t pgType) []byte {
	expr, ok := c.Defaults[column]
	if !ok {
		return nil
	}
	text, ok := defaultText(t, c.vm, expr)
	if !ok {
		return nil
	}
	return []byte(text)
}

// FillDefaults returns a row's values for the Debezium formats with each
// NULL of a column that has a default replaced by that default, as
// Debezium's records give it: JsonConverter writes a change event's null
// field as its default (replace.null.with.default), and the Outbox Event
// Router reads the id, key, payload and placed columns with Struct.get,
// which returns a field's default for a null. The router's other reads
// (getString, getInt32, getInt64: the route.by.field, timestamp, schema
// version and partition columns, and the trace context) take the null,
// so those columns keep it. values is returned as it is when nothing
// changes, and is never written to.
func (e *Encoder) FillDefaults(b *Binding, values [][]byte) [][]byte {
	if (e.format != Debezium && e.format != DebeziumOutbox) || b == nil || len(values) != len(b.cols) {
		return values
	}
	c := e.dbzFor(b.schemaName, b.table)
	if len(c.Defaults) == 0 {
		return values
	}
	var out [][]byte
	for i, v := range values {
		if v != nil || (e.format == DebeziumOutbox && b.readRaw(i)) {
			continue
		}
		def := c.defaultValue(b.cols[i].Name, b.cols[i].typ())
		if def == nil {
			continue
		}
		if out == nil {
			out = append([][]byte(nil), values...)
		}
		out[i] = def
	}
	if out == nil {
		return values
	}
	return out
}

// appendConnectField is appendConnectSchema with the field's default
// value (its JSON; nil for none) where JsonConverter writes it, before
// the field's name.
func appendConnectField(dst []byte, ct connectType, optional bool, def []byte, field string) []byte {
	dst = appendConnectSchema(dst, ct, optional, "")
	if def == nil && field == "" {
		return dst
	}
	dst = dst[:len(dst)-1] // reopen the object
	if def != nil {
		dst = append(dst, `,"default":`...)
		dst = append(dst, def...)
	}
	if field != "" {
		dst = append(dst, `,"field":`...)
		dst = appendJavaString(dst, field)
	}
	return append(dst, '}')
}

// Debezium's reading of a column default (PostgresDefaultValueConverter):
// a default that a function computes (now(), gen_random_uuid(),
// nextval(...), CURRENT_TIMESTAMP) is a placeholder of the type, a literal
// is the text between its first two quotes, anything else is taken as it
// is.
var (
	functionDefault  = regexp.MustCompile(`^\(?[A-Za-z0-9_.]+\((?:.+(?:, ?.+)*)?\)`)
	currentDateTimes = map[string]bool{"current_timestamp": true, "current_time": true, "current_date": true,
		"localtime": true, "localtimestamp": true}
	javaInteger = regexp.MustCompile(`^[+-]?[0-9]+$`)
	javaDecimal = regexp.MustCompile(`^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)$`)
	uuidText    = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
)

// extractDefault is the value in a default expression (pg_get_expr of
// pg_attrdef, as the JDBC driver reports it), generated when a function
// computes it; ok is false for a NULL or a literal it cannot find.
func extractDefault(expr, generated string) (string, bool) {
	if functionDefault.MatchString(expr) || currentDateTimes[strings.ToLower(expr)] {
		return generated, true
	}
	i := strings.IndexByte(expr, '\'')
	if i < 0 {
		return expr, !strings.HasPrefix(expr, "NULL::")
	}
	j := strings.IndexByte(expr[i+1:], '\'')
	if j < 0 {
		return "", false
	}
	return expr[i+1 : i+1+j], true
}

// defaultText is column type t's default expr as Debezium puts it in the
// column's schema, as the text the stream would carry for that value; ok
// is false where Debezium gives the schema no default (a NULL, an
// expression it cannot read, a type it reads no default of, a struct).
func defaultText(t pgType, m valueModes, expr string) (string, bool) {
	switch t.oid {
	case oidBool, oidNumeric, oidFloat4, oidFloat8, oidInt2, oidInt4, oidInt8, oidUUID, oidDate, oidTime,
		oidTimestamp, oidTimestamptz, oidIntvl:
		expr = strings.TrimSpace(expr)
	}
	nullable := strings.HasPrefix(expr, "NULL::")
	switch t.oid {
	case oidBool:
		s, ok := extractDefault(expr, "false")
		if nullable || !ok {
			return "", false
		}
		if strings.EqualFold(s, "true") {
			return "t", true
		}
		return "f", true
	case oidText, oidVarchar, oidBpchar:
		return extractDefault(expr, "")
	case oidJSON, oidJSONB:
		return extractDefault(expr, "{}")
	case oidInt2, oidInt4, oidInt8:
		s, ok := extractDefault(expr, "0")
		if nullable || !ok || !javaInteger.MatchString(s) {
			return "", false
		}
		bits := map[uint32]int{oidInt2: 16, oidInt4: 32, oidInt8: 64}[t.oid]
		n, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return "", false
		}
		return strconv.FormatInt(n, 10), true
	case oidFloat4, oidFloat8:
		s, ok := extractDefault(expr, "0.0")
		if nullable || !ok {
			return "", false
		}
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			return "", false
		}
		return s, true
	case oidNumeric:
		s, ok := extractDefault(expr, "0.0")
		if nullable || !ok || !javaDecimal.MatchString(s) {
			return "", false
		}
		if m.decimal != decimalPrecise {
			return s, true
		}
		_, scale, ok := t.numericScale()
		if !ok {
			return "", false // a VariableScaleDecimal, a struct: no default
		}
		// Debezium raises the literal's scale to the column's.
		have := 0
		if i := strings.IndexByte(s, '.'); i >= 0 {
			have = len(s) - i - 1
		} else if scale > 0 {
			s += "."
		}
		if have < scale {
			s += strings.Repeat("0", scale-have)
		}
		return s, true
	case oidUUID:
		s, ok := extractDefault(expr, "00000000-0000-0000-0000-000000000000")
		if !ok || !uuidText.MatchString(s) {
			return "", false
		}
		return strings.ToLower(s), true
	case oidDate:
		return extractDefault(expr, "1970-01-01")
	case oidTime:
		s, ok := extractDefault(expr, "00:00:00")
		return s, ok
	case oidTimestamp:
		return extractDefault(expr, "1970-01-01 00:00:00")
	case oidTimestamptz:
		return extractDefault(expr, "1970-01-01 00:00:00+00")
	case oidIntvl:
		return extractDefault(expr, "00:00:00")
	}
	return "", false
}

// readRaw reports whether Debezium's Outbox Event Router reads column i
// without its default: the route.by.field, timestamp, schema version and
// trace context columns, and a partition placement.
func (b *Binding) readRaw(i int) bool {
	if i == b.idx[fAggregateType] || i == b.idx[fTime] || i == b.versionI || i == b.traceI {
		return true
	}
	for j, a := range b.add {
		if a.Placement == PlacePartition && b.addI[j] == i {
			return true
		}
	}
	return false
}
