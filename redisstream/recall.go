package redisstream

// recall is what the publisher remembers across connections of the
// entries it wrote: the event ids of the last Window of them, with their
// streams, and per stream the id of its last entry that it wrote. The
// relay sends again, after a failure, what it had not confirmed; an event
// recalled here is in its stream already and is not written twice. Only
// the writer goroutine touches it.
type recall struct {
	max  int
	ids  map[string]string // event id -> stream
	ring []string          // event ids, oldest first from next
	next int
	// streams: per stream, its last entry written and how many of the
	// ids are its.
	streams map[string]*streamMark
	// unsure is the batch whose reply was lost: written whole or not at
	// all, which the next connection finds out (settle).
	unsure *batch
}

type streamMark struct {
	lastID string
	ids    int
}

func newRecall(max int) *recall {
	if max < 0 {
		max = 0
	}
	return &recall{max: max, ids: map[string]string{}, streams: map[string]*streamMark{}}
}

// has tells whether the event id's entry was written.
func (r *recall) has(id string) bool {
	if id == "" {
		return false
	}
	_, ok := r.ids[id]
	return ok
}

// wrote remembers an entry written to stream with entry id entryID, of
// the event id (none: "").
func (r *recall) wrote(id, stream, entryID string) {
	m := r.streams[stream]
	if m == nil {
		if id == "" || r.max == 0 {
			return
		}
		m = &streamMark{}
		r.streams[stream] = m
	}
	m.lastID = entryID
	if id == "" || r.max == 0 {
		return
	}
	if _, ok := r.ids[id]; ok {
		return
	}
	if len(r.ring) < r.max {
		r.ring = append(r.ring, id)
	} else {
		old := r.ring[r.next]
		r.forget(old)
		r.ring[r.next] = id
		r.next = (r.next + 1) % r.max
	}
	r.ids[id] = stream
	m.ids++
}

// forget drops one event id.
func (r *recall) forget(id string) {
	s, ok := r.ids[id]
	if !ok {
		return
	}
	delete(r.ids, id)
	if m := r.streams[s]; m != nil {
		if m.ids--; m.ids <= 0 {
			delete(r.streams, s)
		}
	}
}

// lost forgets every event id of stream: the server no longer holds the
// last entry written to it (it restarted without its data, or its stream
// was trimmed), so what the relay sends again is written again.
func (r *recall) lost(stream string) {
	for id, s := range r.ids {
		if s == stream {
			delete(r.ids, id)
		}
	}
	delete(r.streams, stream)
	// The ring keeps the ids; forget skips what is gone.
}

// last is the id of the last entry written to stream, "" when none is
// remembered.
func (r *recall) last(stream string) string {
	if m := r.streams[stream]; m != nil {
		return m.lastID
	}
	return ""
}
