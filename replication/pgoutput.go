package replication

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/schema"
)

// A bounds-checked reader of pgoutput protocol 1 messages. pglogrepl's
// decoders index past the end of truncated messages and panic; a relay
// must turn a malformed message into an error instead. This reader also
// copies an insert's values into one allocation rather than one per column.

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated %s", ErrProtocol, what)
	}
}

func (r *reader) byte1(what string) byte {
	if r.err != nil || len(r.b) < 1 {
		r.fail(what)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uint16(what string) uint16 {
	if r.err != nil || len(r.b) < 2 {
		r.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

func (r *reader) uint32(what string) uint32 {
	if r.err != nil || len(r.b) < 4 {
		r.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) uint64(what string) uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) lsn(what string) pglogrepl.LSN { return pglogrepl.LSN(r.uint64(what)) }

func (r *reader) time(what string) time.Time {
	us := int64(r.uint64(what))
	return pgEpoch.Add(time.Duration(us) * time.Microsecond)
}

// cstring reads a NUL-terminated string.
func (r *reader) cstring(what string) string {
	if r.err != nil {
		return ""
	}
	for i, c := range r.b {
		if c == 0 {
			s := string(r.b[:i])
			r.b = r.b[i+1:]
			return s
		}
	}
	r.fail(what)
	return ""
}

func (r *reader) bytes(n int, what string) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		r.fail(what)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// tuple reads TupleData. With keep, text values are copied into one buffer
// owned by the result; nil is NULL, and an empty value is an empty slice.
func (r *reader) tuple(keep bool) ([][]byte, error) {
	if !keep {
		return nil, r.skipTuple()
	}
	values, _, err := r.tupleOf(false)
	return values, err
}

// skipTuple reads past a tuple, checking its shape.
func (r *reader) skipTuple() error {
	n := int(r.uint16("tuple"))
	for i := 0; i < n && r.err == nil; i++ {
		switch kind := r.byte1("tuple column"); kind {
		case 'n', 'u':
		case 't', 'b':
			r.bytes(int(r.uint32("tuple value length")), "tuple value")
		default:
			if r.err == nil {
				return fmt.Errorf("%w: tuple column kind %q", ErrProtocol, kind)
			}
		}
	}
	return r.err
}

// tupleOf reads a tuple's values, nil for NULL. An unchanged TOAST value
// ('u', which only an update's new row may hold, with unchangedOK) is nil
// too, and marked in unchanged (nil when there is none).
func (r *reader) tupleOf(unchangedOK bool) (values [][]byte, unchanged []bool, err error) {
	n := int(r.uint16("tuple"))
	if r.err != nil {
		return nil, nil, r.err
	}
	// Two passes: size the buffer, then copy, so a row costs two allocations.
	start, total := r.b, 0
	for i := 0; i < n; i++ {
		switch kind := r.byte1("tuple column"); kind {
		case 'n', 'u':
		case 't', 'b':
			l := int(r.uint32("tuple value length"))
			r.bytes(l, "tuple value")
			total += l
		default:
			if r.err == nil {
				return nil, nil, fmt.Errorf("%w: tuple column kind %q", ErrProtocol, kind)
			}
		}
		if r.err != nil {
			return nil, nil, r.err
		}
	}
	values = make([][]byte, n)
	buf := make([]byte, 0, total)
	r2 := reader{b: start}
	for i := 0; i < n; i++ {
		switch r2.byte1("") {
		case 'u':
			if !unchangedOK {
				return nil, nil, fmt.Errorf("%w: unchanged TOAST value outside an update's new row", ErrProtocol)
			}
			if unchanged == nil {
				unchanged = make([]bool, n)
			}
			unchanged[i] = true
		case 't', 'b':
			l := int(r2.uint32(""))
			off := len(buf)
			buf = append(buf, r2.bytes(l, "")...)
			values[i] = buf[off:len(buf):len(buf)]
		}
	}
	return values, unchanged, nil
}

type (
	beginMsg struct {
		final  pglogrepl.LSN
		commit time.Time
		xid    uint32
	}
	commitMsg struct {
		end    pglogrepl.LSN
		commit time.Time
	}
	insertMsg struct {
		rel    uint32
		values [][]byte
	}
	// updateMsg and deleteMsg carry their tuples only when the stream
	// reads them (parseWith's tuples): old is the key ('K') or the whole
	// old row ('O') when the server sent it, new the update's row, whose
	// unchanged TOAST values unchanged marks.
	updateMsg struct {
		rel       uint32
		old, new  [][]byte
		oldFull   bool
		unchanged []bool
	}
	deleteMsg struct {
		rel     uint32
		old     [][]byte
		oldFull bool
	}
	truncateMsg []uint32 // the relations truncated
	message     struct {
		transactional bool
		lsn           pglogrepl.LSN
		prefix        string
		content       []byte // aliases the message's data
	}
	skipped struct{} // type, origin
)

// parse decodes one pgoutput message, without the tuples of updates and
// deletes.
func parse(data []byte) (any, error) { return parseWith(data, false) }

// parseWith decodes one pgoutput message; tuples reads the tuples of
// updates and deletes too.
func parseWith(data []byte, tuples bool) (any, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: empty message", ErrProtocol)
	}
	r := &reader{b: data[1:]}
	var m any
	switch data[0] {
	case 'B':
		m = beginMsg{final: r.lsn("begin"), commit: r.time("begin"), xid: r.uint32("begin")}
	case 'C':
		r.byte1("commit flags")
		r.lsn("commit")
		m = commitMsg{end: r.lsn("commit"), commit: r.time("commit")}
	case 'R':
		rel := &outbox.Relation{ID: r.uint32("relation"), Schema: r.cstring("relation namespace"), Name: r.cstring("relation name")}
		r.byte1("replica identity")
		n := int(r.uint16("relation columns"))
		if r.err == nil && n > len(r.b)/10 { // each column takes at least 10 bytes
			return nil, fmt.Errorf("%w: relation claims %d columns in %d bytes", ErrProtocol, n, len(r.b))
		}
		rel.Columns = make([]schema.Column, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			flags := r.byte1("column flags")
			c := schema.Column{Name: r.cstring("column name"), TypeOID: r.uint32("column type"), TypMod: int32(r.uint32("column modifier")), Key: flags&1 == 1}
			rel.Columns = append(rel.Columns, c)
		}
		m = rel
	case 'I':
		id := r.uint32("insert")
		if k := r.byte1("insert"); r.err == nil && k != 'N' {
			return nil, fmt.Errorf("%w: insert tuple kind %q", ErrProtocol, k)
		}
		values, err := r.tuple(true)
		if err != nil {
			return nil, err
		}
		m = insertMsg{rel: id, values: values}
	case 'U':
		u := updateMsg{rel: r.uint32("update")}
		if tuples {
			kind := r.byte1("update")
			if r.err == nil && (kind == 'K' || kind == 'O') {
				var err error
				if u.old, _, err = r.tupleOf(false); err != nil {
					return nil, err
				}
				u.oldFull = kind == 'O'
				kind = r.byte1("update")
			}
			if r.err == nil && kind != 'N' {
				return nil, fmt.Errorf("%w: update tuple kind %q", ErrProtocol, kind)
			}
			var err error
			if u.new, u.unchanged, err = r.tupleOf(true); err != nil {
				return nil, err
			}
		}
		m = u
	case 'D':
		d := deleteMsg{rel: r.uint32("delete")}
		if tuples {
			kind := r.byte1("delete")
			if r.err == nil && kind != 'K' && kind != 'O' {
				return nil, fmt.Errorf("%w: delete tuple kind %q", ErrProtocol, kind)
			}
			var err error
			if d.old, _, err = r.tupleOf(false); err != nil {
				return nil, err
			}
			d.oldFull = kind == 'O'
		}
		m = d
	case 'T':
		n := int(r.uint32("truncate"))
		r.byte1("truncate options")
		if r.err == nil && n > len(r.b)/4 {
			return nil, fmt.Errorf("%w: truncate claims %d relations in %d bytes", ErrProtocol, n, len(r.b))
		}
		ids := make(truncateMsg, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			ids = append(ids, r.uint32("truncate relation"))
		}
		m = ids
	case 'M':
		flags := r.byte1("message")
		lsn := r.lsn("message")
		prefix := r.cstring("message prefix")
		content := r.bytes(int(r.uint32("message content length")), "message content")
		m = message{transactional: flags&1 == 1, lsn: lsn, prefix: prefix, content: content}
	case 'Y', 'O':
		m = skipped{}
	default:
		return nil, fmt.Errorf("%w: unknown message type %q", ErrProtocol, data[0])
	}
	if r.err != nil {
		return nil, r.err
	}
	return m, nil
}
