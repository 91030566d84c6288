package schema

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
)

// ColumnMapper is what Debezium's column.truncate.to.N.chars,
// column.mask.with.N.chars and column.mask.hash.* do to a column
// (TruncateColumn, MaskStrings): a value of a string column cut to
// Truncate characters, or replaced by Mask asterisks, NULL included, or by
// its Hash digest (hash.go), NULL kept; the column's schema then has the
// parameter truncateLength (where a value can be longer) or masked,
// whatever its type. Exclude is column.exclude.list or
// column.include.list leaving the column out of the change event's
// before and after (its key keeps it).
type ColumnMapper struct {
	Truncate, Mask int32
	// Hash is the MessageDigest name, Salt the text hashed before the
	// value, HashV2 the v2 keys' strategy (the value's UTF-8 bytes).
	Hash, Salt string
	HashV2     bool
	// Propagate (column.propagate.source.type, datatype.propagate.source.type)
	// adds the column's source type, length, scale and name (Name) to its
	// schema's parameters, as Debezium's PropagateSourceMetadataToSchemaParameter.
	Propagate bool
	Name      string
	Exclude   bool
}

// ColumnFilter is column.include.list (Include) or column.exclude.list:
// schema.table.column patterns, matched whole in any case.
type ColumnFilter struct {
	Patterns Patterns
	Include  bool
}

// Excludes tells whether the filter leaves the column out.
func (f ColumnFilter) Excludes(schemaName, table, column string) bool {
	if len(f.Patterns) == 0 && !f.Include {
		return false
	}
	return f.Patterns.Match(schemaName+"."+table+"."+column) != f.Include
}

// ColumnMapping is one column.truncate.to, column.mask.with or
// column.mask.hash option: the columns whose fully qualified name
// (schema.table.column) one of its patterns matches whole, in any case.
type ColumnMapping struct {
	Patterns Patterns
	Mapper   ColumnMapper
	// ByType matches the patterns against schema.table.type, the type's
	// name as PostgreSQL has it (datatype.propagate.source.type).
	ByType bool
}

// ParseColumnMappings reads mappings written "truncate:N:PATTERN,…",
// "mask:N:PATTERN,…", "propagate:PATTERN,…", "propagate-type:PATTERN,…",
// "hash:ALGORITHM:SALT:PATTERN,…" or "hash-v2:ALGORITHM:SALT:PATTERN,…",
// several separated by ';', in the order they apply: the first that
// matches a column is its mapper, as Debezium's ColumnMappers takes the
// truncations, then the masks, then the columns and the types whose source
// type is propagated, then the hashes, then the v2 hashes.
func ParseColumnMappings(s string) ([]ColumnMapping, error) {
	var out []ColumnMapping
	for _, item := range strings.Split(s, ";") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		kind, rest, _ := strings.Cut(item, ":")
		if kind == "propagate" || kind == "propagate-type" {
			m := ColumnMapping{Mapper: ColumnMapper{Propagate: true}, ByType: kind == "propagate-type"}
			var err error
			if m.Patterns, err = ParsePatterns(rest); err != nil {
				return nil, fmt.Errorf("schema: column mapping %q: %w", item, err)
			}
			out = append(out, m)
			continue
		}
		if kind == "hash" || kind == "hash-v2" {
			alg, rest, ok1 := strings.Cut(rest, ":")
			salt, list, ok2 := strings.Cut(rest, ":")
			if !ok1 || !ok2 || alg == "" || salt == "" {
				return nil, fmt.Errorf("schema: column mapping %q: want hash:ALGORITHM:SALT:PATTERN,… or hash-v2:ALGORITHM:SALT:PATTERN,…", item)
			}
			if err := CheckHashAlgorithm(alg); err != nil {
				return nil, fmt.Errorf("schema: column mapping %q: %w", item, err)
			}
			m := ColumnMapping{Mapper: ColumnMapper{Hash: alg, Salt: salt, HashV2: kind == "hash-v2"}}
			var err error
			if m.Patterns, err = ParsePatterns(list); err != nil {
				return nil, fmt.Errorf("schema: column mapping %q: %w", item, err)
			}
			out = append(out, m)
			continue
		}
		num, list, ok := strings.Cut(rest, ":")
		n64, err := strconv.ParseInt(strings.TrimSpace(num), 10, 32)
		n := int32(n64)
		if !ok || err != nil || n < 0 || (kind != "truncate" && kind != "mask") {
			return nil, fmt.Errorf("schema: column mapping %q: want truncate:N:PATTERN,…, mask:N:PATTERN,…, propagate:PATTERN,…, propagate-type:PATTERN,…, hash:ALGORITHM:SALT:PATTERN,… or hash-v2:ALGORITHM:SALT:PATTERN,…", item)
		}
		m := ColumnMapping{}
		if n == 0 {
			// Debezium takes 0; a mapper of nothing is pgoutbox's zero.
			return nil, fmt.Errorf("schema: column mapping %q: zero characters is not implemented", item)
		}
		if kind == "truncate" {
			m.Mapper.Truncate = n
		} else {
			m.Mapper.Mask = n
		}
		if m.Patterns, err = ParsePatterns(list); err != nil {
			return nil, fmt.Errorf("schema: column mapping %q: %w", item, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// MapColumns returns the columns of table schema.table with the mappers
// of the encoder's column mappings set; cols itself when none matches (it
// is never written to).
func (e *Encoder) MapColumns(schemaName, table string, cols []Column) []Column {
	return e.dbz.MapColumns(schemaName, table, cols)
}

// MapColumns is Encoder.MapColumns for a configuration.
func (c *DebeziumConfig) MapColumns(schemaName, table string, cols []Column) []Column {
	if len(c.ColumnMappings) == 0 && len(c.ColumnFilter.Patterns) == 0 && !c.ColumnFilter.Include {
		return cols
	}
	var out []Column
	set := func(i int, m ColumnMapper) {
		if out == nil {
			out = append([]Column(nil), cols...)
		}
		out[i].Mapper = m
	}
	for i, col := range cols {
		name := schemaName + "." + table + "." + col.Name
		var m ColumnMapper
		for _, cm := range c.ColumnMappings {
			match := name
			if cm.ByType {
				typ, ok := sourceTypeName(col.TypeOID)
				if !ok {
					continue
				}
				match = schemaName + "." + table + "." + typ
			}
			if cm.Patterns.Match(match) {
				m = cm.Mapper
				if m.Propagate {
					m.Name = col.Name
				}
				break
			}
		}
		m.Exclude = c.ColumnFilter.Excludes(schemaName, table, col.Name)
		if m != (ColumnMapper{}) {
			set(i, m)
		}
	}
	if out == nil {
		return cols
	}
	return out
}

// stringColumn tells the types whose values Debezium's mappers change:
// those the JDBC driver reports as CHAR or VARCHAR.
func stringColumn(oid uint32) bool {
	switch oid {
	case oidText, oidVarchar, oidBpchar, oidName, oidChar:
		return true
	}
	return false
}

// charLength is a string column's declared length, -1 for none (text, an
// unconstrained varchar): Debezium's column.length().
func charLength(t pgType) int {
	if (t.oid == oidVarchar || t.oid == oidBpchar) && t.mod >= 4 {
		return int(t.mod - 4)
	}
	return -1
}

// addParams adds the mapper's schema parameter to params (a JSON object,
// "" for none).
func (m ColumnMapper) addParams(params string, t pgType) string {
	var kv string
	switch {
	case m.Propagate:
		kv = sourceParams(t, m.Name)
		if kv == "" {
			return params
		}
	case m.Mask > 0 || m.Hash != "":
		kv = `"masked":"true"`
	case m.Truncate > 0 && stringColumn(t.oid):
		// TruncateColumn.isTruncationPossible.
		if l := charLength(t); l >= 0 && l <= int(m.Truncate) {
			return params
		}
		kv = `"truncateLength":"` + strconv.Itoa(int(m.Truncate)) + `"`
	default:
		return params
	}
	if params == "" {
		return "{" + kv + "}"
	}
	return params[:len(params)-1] + "," + kv + "}"
}

// MapValues applies the columns' mappers to a row's text values: a string
// column's value masked, NULL included, hashed, NULL kept, or cut to its
// length in UTF-16 code units, as Java's String.substring cuts it. The
// change event's key columns stay as they are: Debezium's key holds them
// unmapped, and the encoder maps them in after. values is returned as it
// is when nothing changes, and is never written to.
func (e *Encoder) MapValues(b *Binding, values [][]byte) [][]byte {
	if len(e.dbz.ColumnMappings) == 0 || b == nil || len(values) != len(b.cols) {
		return values
	}
	var keyCols []string
	if e.format == Debezium {
		keyCols = e.dbzFor(b.schemaName, b.table).keyColumns(b.name[fID])
	}
	var out [][]byte
	for i, col := range b.cols {
		v, changed := col.Mapper.mapValue(col, values[i])
		if !changed || slices.Contains(keyCols, col.Name) {
			continue
		}
		if out == nil {
			out = append([][]byte(nil), values...)
		}
		out[i] = v
	}
	if out == nil {
		return values
	}
	return out
}

// truncateUTF16 cuts text to n UTF-16 code units; ok is false when it is
// not longer. Where the cut would split a character outside the BMP (a
// surrogate pair), it is cut before that character: Java keeps the lone
// high surrogate, which no UTF-8 text can hold (JsonConverter writes it
// as the escape \uD83D, StringConverter as '?').
func truncateUTF16(text []byte, n int) ([]byte, bool) {
	units := utf16.Encode([]rune(string(text)))
	if len(units) <= n {
		return nil, false
	}
	if utf16.IsSurrogate(rune(units[n-1])) && units[n-1] < 0xdc00 {
		n--
	}
	return []byte(string(utf16.Decode(units[:n]))), true
}
