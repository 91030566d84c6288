package schema

import (
	"strconv"
	"strings"
)

// The parameters column.propagate.source.type and
// datatype.propagate.source.type add to a column's field schema, as
// Debezium's PropagateSourceMetadataToSchemaParameter writes them from the
// column it builds of pgoutput's relation message (ColumnMetaData): the
// type's name, upper-cased; its length and scale, as the JDBC driver gives
// a type's precision and scale for the column's modifier
// (TypeInfoCache.getPrecision, getScale); the column's name.

// unknownLength is the JDBC driver's length of a type without one (text,
// bytea, an unconstrained varchar): its unknownLength, Integer.MAX_VALUE.
const unknownLength = 2147483647

// sourceTypeNames are the built-in types' names, as pg_type has them.
var sourceTypeNames = map[uint32]string{
	oidBool: "bool", oidBytea: "bytea", oidChar: "char", oidName: "name", oidInt8: "int8", oidInt2: "int2", oidInt4: "int4",
	oidText: "text", oidOID: "oid", oidJSON: "json", oidFloat4: "float4", oidFloat8: "float8", oidMoney: "money",
	oidBpchar: "bpchar", oidVarchar: "varchar", oidDate: "date", oidTime: "time", oidTimestamp: "timestamp",
	oidTimestamptz: "timestamptz", oidIntvl: "interval", oidTimetz: "timetz", oidNumeric: "numeric", oidUUID: "uuid",
	oidJSONB: "jsonb",
}

// sourceTypeName is a column type's name; ok is false for a type that is
// not built in (an enum, a domain, an extension's), whose name the stream
// does not carry.
func sourceTypeName(oid uint32) (string, bool) {
	n, ok := sourceTypeNames[oid]
	return n, ok
}

// sourceLength is the JDBC driver's precision of type t (getPrecision).
func sourceLength(t pgType) int {
	switch t.oid {
	case oidInt2:
		return 5
	case oidInt4, oidOID:
		return 10
	case oidInt8:
		return 19
	case oidFloat4:
		return 8
	case oidFloat8:
		return 17
	case oidNumeric:
		if t.mod == -1 {
			return 131089 // numeric's most digits: 131072 before the point, 16383 after
		}
		return int((t.mod-4)>>16) & 0xffff
	case oidChar, oidBool:
		return 1
	case oidBpchar, oidVarchar:
		if t.mod == -1 {
			return unknownLength
		}
		return int(t.mod - 4)
	case oidDate:
		return 13
	case oidTime, oidTimetz, oidTimestamp, oidTimestamptz:
		// The characters of the text form: the time, its fraction and
		// point, and a date and a zone where the type has them.
		second := int(t.mod) + 1
		switch t.mod {
		case -1:
			second = 7
		case 0:
			second = 0
		case 1:
			second = 3
		}
		n := 8 + second
		if t.oid == oidTimestamp || t.oid == oidTimestamptz {
			n += 14
		}
		if t.oid == oidTimetz || t.oid == oidTimestamptz {
			n += 6
		}
		return n
	case oidIntvl:
		return 49
	}
	return unknownLength
}

// sourceScale is the JDBC driver's scale of type t (getScale).
func sourceScale(t pgType) int {
	switch t.oid {
	case oidFloat4:
		return 8
	case oidFloat8:
		return 17
	case oidNumeric:
		if t.mod == -1 {
			return 0
		}
		return int(t.mod-4) & 0xffff
	case oidTime, oidTimetz, oidTimestamp, oidTimestamptz:
		if t.mod == -1 {
			return 6
		}
		return int(t.mod)
	case oidIntvl:
		if t.mod == -1 {
			return 6
		}
		return int(t.mod) & 0xffff
	}
	return 0
}

// sourceParams is the parameters of column name of type t, as JSON
// object members; "" for a type sourceTypeName does not know.
func sourceParams(t pgType, name string) string {
	typ, ok := sourceTypeName(t.oid)
	if !ok {
		return ""
	}
	var b []byte
	b = append(b, `"__debezium.source.column.type":"`...)
	b = append(b, strings.ToUpper(typ)...)
	b = append(b, `","__debezium.source.column.length":"`...)
	b = strconv.AppendInt(b, int64(sourceLength(t)), 10)
	b = append(b, `","__debezium.source.column.scale":"`...)
	b = strconv.AppendInt(b, int64(sourceScale(t)), 10)
	b = append(b, `","__debezium.source.column.name":`...)
	b = appendJavaString(b, name)
	return string(b)
}
