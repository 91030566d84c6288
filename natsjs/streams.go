package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// stream is the stream that takes a subject, and the largest message it
// and the server accept.
type stream struct {
	name string
	max  int
}

// streams caches which stream takes each subject, asked once per subject
// (and again after the server said none did).
type streams struct {
	js    jetstream.JetStream
	nc    *nats.Conn
	limit int // Config.MaxMessageBytes; 0: none of its own

	mu    sync.Mutex
	known map[string]stream
}

func newStreams(js jetstream.JetStream, nc *nats.Conn, limit int) *streams {
	return &streams{js: js, nc: nc, limit: limit, known: map[string]stream{}}
}

func (s *streams) lookup(ctx context.Context, subject string) (stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.known[subject]; ok {
		return st, nil
	}
	name, err := s.js.StreamNameBySubject(ctx, subject)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return stream{}, &NoStreamError{Subject: subject}
	}
	if err != nil {
		return stream{}, fmt.Errorf("nats: which stream takes %s: %w", subject, err)
	}
	info, err := s.js.Stream(ctx, name)
	if err != nil {
		return stream{}, fmt.Errorf("nats: stream %s: %w", name, err)
	}
	st := stream{name: name, max: int(s.nc.MaxPayload())}
	if m := int(info.CachedInfo().Config.MaxMsgSize); m > 0 && m < st.max {
		st.max = m
	}
	if s.limit > 0 && s.limit < st.max {
		st.max = s.limit
	}
	s.known[subject] = st
	return st, nil
}

// covered tells whether one of the subject filters takes subject:
// tokens separated by dots, * one token, > the rest.
func covered(filters []string, subject string) bool {
	for _, f := range filters {
		if matches(strings.Split(f, "."), strings.Split(subject, ".")) {
			return true
		}
	}
	return false
}

func matches(filter, subject []string) bool {
	for i, t := range filter {
		switch {
		case t == ">":
			return len(subject) > i
		case i >= len(subject):
			return false
		case t != "*" && t != subject[i]:
			return false
		}
	}
	return len(filter) == len(subject)
}
