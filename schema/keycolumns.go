package schema

import (
	"bytes"
	"fmt"
	"slices"
)

// This file is what the change event's key does with the columns that
// column.exclude.list, column.include.list and the column mappers touch.
// Debezium builds the key without the mappers (TableSchemaBuilder gives
// its converters none) and without the column filter: the key holds a
// masked, hashed or truncated column's value as it is, and an excluded
// column's value too, except in snapshot reads, whose SELECT lists only
// the included columns (RelationalSnapshotChangeEventSource): the key then
// converts the missing value, a null, which a NOT NULL column's converter
// turns into its schema's default or its type's fallback (0, "").

// keyColumns is the change event's key columns for a table whose id
// column is id: KeyColumns, else id unless NullKey; nil for no key.
func (c *DebeziumConfig) keyColumns(id string) []string {
	if len(c.KeyColumns) > 0 {
		return c.KeyColumns
	}
	if c.NullKey {
		return nil
	}
	return []string{id}
}

// keyType is a key column's type: without its mapper, whose schema
// parameters the key's schema does not carry.
func keyType(col Column) pgType { return pgType{oid: col.TypeOID, mod: col.TypMod} }

// keyFallback is the value, as the stream's text, that Debezium's
// converter of a NOT NULL column of type t gives a null without a default
// (JdbcValueConverters' fallbacks); ok is false for the types pgoutbox has
// not checked it for.
func keyFallback(t pgType) (text []byte, ok bool) {
	switch t.oid {
	case oidNumeric: // zero at the column's scale, as the server writes one
		if _, scale, ok := t.numericScale(); ok && scale > 0 {
			return append([]byte("0."), bytes.Repeat([]byte("0"), scale)...), true
		}
		return []byte("0"), true
	case oidInt2, oidInt4, oidInt8, oidFloat4, oidFloat8:
		return []byte("0"), true
	case oidText, oidVarchar, oidBpchar, oidUUID, oidJSON, oidJSONB:
		return []byte{}, true
	case oidBool:
		return []byte("f"), true
	case oidBytea:
		return []byte(`\x`), true
	case oidDate: // the epoch, as each time is
		return []byte("1970-01-01"), true
	case oidTimestamp:
		return []byte("1970-01-01 00:00:00"), true
	case oidTimestamptz:
		return []byte("1970-01-01 00:00:00+00"), true
	case oidTime:
		return []byte("00:00:00"), true
	}
	return nil, false
}

// snapshotReadsAll tells whether a snapshot's SELECT reads every column:
// when the filter leaves out all of them, Debezium selects them all.
func snapshotReadsAll(cols []Column) bool {
	return !slices.ContainsFunc(cols, func(c Column) bool { return !c.Mapper.Exclude })
}

// keyValue is the value key column j of r takes in the change event's
// key: the row's, unmapped (MapValues leaves key columns as they are), or
// for a column the filter leaves out, in a snapshot read, what Debezium's
// converter gives the null its SELECT left there.
func (c *DebeziumConfig) keyValue(r *Record, j int) []byte {
	col := r.Columns[j]
	if !col.Mapper.Exclude || r.Origin.Snapshot == 0 || snapshotReadsAll(r.Columns) {
		return r.Values[j]
	}
	if def := c.defaultValue(col.Name, keyType(col)); def != nil {
		return def
	}
	if c.optional(col.Name) {
		return nil
	}
	text, _ := keyFallback(keyType(col)) // Check refuses the others
	return text
}

// rowValue is column i's value of values (the record's, or its Before)
// in the change event's after or before: a key column's, which MapValues
// left as it is, mapped here.
//
// A NOT NULL column's null, which only a before holds (the old row of an
// update or a delete under the default replica identity carries the key
// alone), is what Debezium's converter gives it: the column's default
// (FillDefaults put it there already), else the type's fallback, which
// fallback says.
func (c *DebeziumConfig) rowValue(r *Record, values [][]byte, i int, keyCols []string) (v []byte, fallback bool) {
	v = values[i]
	col := r.Columns[i]
	if col.Mapper.changesValues() && slices.Contains(keyCols, col.Name) {
		v, _ = col.Mapper.mapValue(col, v)
	}
	if v == nil && !c.optional(col.Name) {
		if text, ok := keyFallback(keyType(col)); ok {
			return text, true
		}
	}
	return v, false
}

// changesValues tells whether the mapper changes a column's values.
func (m ColumnMapper) changesValues() bool { return m.Truncate > 0 || m.Mask > 0 || m.Hash != "" }

// mapValue is the mapper's value for a value of col: masked, NULL
// included, hashed, NULL kept, or cut; changed is false where it stays.
func (m ColumnMapper) mapValue(col Column, v []byte) (out []byte, changed bool) {
	switch {
	case !m.changesValues() || !stringColumn(col.TypeOID):
		return v, false
	case m.Mask > 0:
		return masked(m.Mask), true
	case m.Hash != "":
		if v == nil {
			return nil, false
		}
		return m.hashString(v, charLength(pgType{oid: col.TypeOID, mod: col.TypMod})), true
	case v != nil:
		if cut, ok := truncateUTF16(v, int(m.Truncate)); ok {
			return cut, true
		}
	}
	return v, false
}

func masked(n int32) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = '*'
	}
	return b
}

// checkKeyColumns names what pgoutbox cannot do with the change event's
// key columns under the column filter and mappers.
func (c *DebeziumConfig) checkKeyColumns(cols []Column, keyCols []string, bad func(col, why string)) {
	last := -1 // the last column a snapshot's SELECT reads
	for i, col := range cols {
		if !col.Mapper.Exclude {
			last = i
		}
	}
	for _, name := range keyCols {
		j := columnIndex(cols, name)
		if j < 0 {
			continue
		}
		col := cols[j]
		m := col.Mapper
		if (m.Hash != "" || m.Truncate > 0) && c.optional(name) && c.defaultValue(name, keyType(col)) != nil {
			// MapValues leaves the key column as it is, and FillDefaults
			// gives a NULL its default before after is mapped; Debezium
			// maps the NULL and writes the default unmapped.
			bad(name, "hashing or truncating a nullable key column with a default is not implemented")
		}
		if !m.Exclude || last < 0 {
			continue
		}
		if c.optional(name) && c.defaultValue(name, keyType(col)) != nil {
			// Debezium's streamed events lose the default of a column
			// left out (appendKeyField), and FillDefaults cannot tell a
			// NULL from its default.
			bad(name, "leaving out a nullable key column with a default is not implemented")
			continue
		}
		if j > last {
			bad(name, "leaving out a key column that follows every included column: Debezium's snapshot reads a row shorter than the key's column "+
				"and its task fails (Data row is smaller than a column index); include a later column or leave the key column in")
			continue
		}
		if _, ok := keyFallback(keyType(col)); !ok && !c.optional(name) && c.defaultValue(name, keyType(col)) == nil {
			bad(name, fmt.Sprintf("leaving out a key column of type OID %d is not implemented (Debezium's snapshot reads put its type's placeholder in the key; pgoutbox knows those of numbers, booleans, strings, uuid, json, bytea, dates, times and timestamps)", col.TypeOID))
		}
	}
}

// appendKeyField appends key column j's field to the key's schema: of its
// type without the mapper. A column the filter leaves out is optional
// and without a default in streamed events: Debezium rebuilds the table's
// schema from pgoutput's relation message there, reading NOT NULL and
// defaults from the catalog for the included columns only
// (PgOutputMessageDecoder), while its snapshot reads have the catalog's.
func (c *DebeziumConfig) appendKeyField(dst []byte, r *Record, j int) []byte {
	col := r.Columns[j]
	t := keyType(col)
	ct, ok := connectTypeOf(t, c.vm)
	if !ok {
		return dst
	}
	optional, def := c.optional(col.Name), c.defaultJSON(col.Name, t)
	if col.Mapper.Exclude && r.Origin.Snapshot == 0 {
		optional, def = true, nil
	}
	return appendConnectField(dst, ct, optional, def, col.Name)
}

// KeyChanged tells whether an update moved its row to another key: a key
// column of the row's table (its change events') differs between old, the
// row before (nil when the server sent none: the key unchanged), and new.
// Debezium writes such an update as a delete of the old key and a create
// of the new one.
func (e *Encoder) KeyChanged(b *Binding, old, new [][]byte) bool {
	if e.format != Debezium || b == nil || old == nil {
		return false
	}
	for _, name := range e.dbzFor(b.schemaName, b.table).keyColumns(b.name[fID]) {
		j := columnIndex(b.cols, name)
		if j >= 0 && j < len(old) && j < len(new) && !bytes.Equal(old[j], new[j]) {
			return true
		}
	}
	return false
}

// SameRow tells whether an update changed none of the columns its change
// event carries: old and new (the rows before and after, MapValues'd) are
// equal in every column of a type Debezium maps that the column filters
// keep. Debezium's skip.messages.without.change skips such an update.
func (e *Encoder) SameRow(b *Binding, old, new [][]byte) bool {
	if b == nil || len(old) != len(b.cols) || len(new) != len(b.cols) {
		return false
	}
	c := e.dbzFor(b.schemaName, b.table)
	for i, col := range b.cols {
		if _, ok := connectTypeOf(col.typ(), c.vm); !ok || col.Mapper.Exclude {
			continue
		}
		if (old[i] == nil) != (new[i] == nil) || !bytes.Equal(old[i], new[i]) {
			return false
		}
	}
	return true
}
