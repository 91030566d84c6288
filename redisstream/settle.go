package redisstream

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// maxScan bounds the entries settle reads of one stream to find a batch
// whose reply was lost; past it, the batch counts as not written (the
// relay sends it again: duplicates, never a loss).
const maxScan = 100_000

// settle runs on a new connection before anything is written: it forgets
// the event ids of each stream whose last entry written the server no
// longer holds (a restart that lost data, a trim), and finds out whether
// the batch whose reply was lost (recall.unsure) was written: a batch is
// one MULTI/EXEC, in each stream after the last entry written before it,
// whole or not at all.
func (w *writer) settle() error {
	r := w.s.recall
	streams := make([]string, 0, len(r.streams))
	for s := range r.streams {
		streams = append(streams, s)
	}
	if err := w.verify(streams); err != nil {
		return err
	}
	b := r.unsure
	if b == nil {
		return nil
	}
	written := 0
	for _, s := range streamsOf(b) {
		var mine []int
		for i, p := range b.items {
			if p.e.stream == s {
				mine = append(mine, i)
			}
		}
		ids, err := w.find(s, b.before[s], b, mine)
		if err != nil {
			return err
		}
		for k, id := range ids {
			p := b.items[mine[k]]
			r.wrote(p.id, s, id)
			written++
		}
	}
	w.s.log.Info("redis: the connection was lost before the reply to a batch; found what of it was written",
		"entries", len(b.items), "written", written)
	r.unsure = nil
	return nil
}

// verify checks that the server holds the last entry written to each of
// streams, and forgets the event ids of those where it does not.
func (w *writer) verify(streams []string) error {
	r := w.s.recall
	var names []string
	var cmds []*redis.XMessageSliceCmd
	pipe := w.link.target().Pipeline()
	for _, s := range streams {
		if last := r.last(s); last != "" {
			names = append(names, s)
			cmds = append(cmds, pipe.XRange(w.ctx, s, last, last))
		}
	}
	if len(cmds) == 0 {
		return nil
	}
	_, _ = pipe.Exec(w.ctx)
	for i, c := range cmds {
		msgs, err := c.Result()
		switch {
		case err != nil && !isNotThere(err):
			// A server that cannot answer now (down, CLUSTERDOWN,
			// LOADING): asked again before the next batch.
			return fmt.Errorf("redis: checking stream %s: %w", names[i], err)
		case err != nil || len(msgs) == 0:
			w.s.log.Warn("redis: the last entry written to a stream is gone (the server lost data, or the stream was trimmed): what is sent again is written again",
				"stream", names[i])
			r.lost(names[i])
		}
	}
	return nil
}

// find reads stream after entry id before for the batch's entries mine,
// which one MULTI/EXEC wrote one after the other there if it wrote them:
// their entry ids, or none.
func (w *writer) find(stream, before string, b *batch, mine []int) ([]string, error) {
	var buf []redis.XMessage // the page, after the end of the one before
	for scanned := 0; scanned < maxScan; {
		msgs, err := w.link.target().XRangeN(w.ctx, stream, "("+before, "+", 1000).Result()
		if err != nil {
			if isNotThere(err) {
				return nil, nil // nothing of ours can be there, or be read
			}
			return nil, fmt.Errorf("redis: reading stream %s after a lost reply: %w", stream, err)
		}
		buf = append(buf, msgs...)
	search:
		for start := 0; start+len(mine) <= len(buf); start++ {
			for k, i := range mine {
				if !same(buf[start+k], b.items[i].e) {
					continue search
				}
			}
			ids := make([]string, len(mine))
			for k := range mine {
				ids[k] = buf[start+k].ID
			}
			return ids, nil
		}
		if len(msgs) < 1000 {
			return nil, nil
		}
		before = msgs[len(msgs)-1].ID
		scanned += len(msgs)
		// A run may begin at the end of this page.
		buf = buf[max(0, len(buf)-len(mine)+1):]
	}
	return nil, nil
}

// same tells whether a stream entry holds exactly e's fields.
func same(m redis.XMessage, e entry) bool {
	if len(m.Values) != len(e.fields)/2 {
		return false
	}
	for i := 0; i < len(e.fields); i += 2 {
		v, ok := m.Values[e.fields[i]]
		if s, isString := v.(string); !ok || !isString || s != e.fields[i+1] {
			return false
		}
	}
	return true
}

// streamsOf lists b's streams in order of first appearance.
func streamsOf(b *batch) []string {
	var out []string
	for _, p := range b.items {
		if !slices.Contains(out, p.e.stream) {
			out = append(out, p.e.stream)
		}
	}
	return out
}

// isNotThere tells the error replies that say a stream holds nothing of
// what was written to it (its key holds another type now), or that this
// user may not read it; other errors (a server down, CLUSTERDOWN,
// LOADING) are asked again.
func isNotThere(err error) bool {
	switch classify("", err).(type) {
	case *WrongTypeError, *AuthError:
		return isReplyErr(err)
	}
	return false
}

func isReplyErr(err error) bool {
	_, ok := err.(redis.Error)
	return ok
}

// compareIDs orders two stream entry ids, ms-seq.
func compareIDs(a, b string) int {
	am, as := splitID(a)
	bm, bs := splitID(b)
	switch {
	case am != bm:
		if am < bm {
			return -1
		}
		return 1
	case as < bs:
		return -1
	case as > bs:
		return 1
	}
	return 0
}

func splitID(id string) (uint64, uint64) {
	ms, seq, _ := strings.Cut(id, "-")
	m, _ := strconv.ParseUint(ms, 10, 64)
	s, _ := strconv.ParseUint(seq, 10, 64)
	return m, s
}
