package inflight

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// sent is a test message: its confirm, given by closing done once err is
// set.
type sent struct {
	id   int
	at   time.Time
	done chan struct{}
	err  error
}

// Confirms run promises in send order whatever order the confirms come
// in; a message without a confirm in time fails, Failed is told once,
// and every message after a failure fails too.
func TestConfirms(t *testing.T) {
	errLate, errAfter, errClosed := errors.New("late"), errors.New("after"), errors.New("closed")
	var mu sync.Mutex
	var order []int
	var outcomes []error
	failures := 0
	c := NewConfirms(ConfirmConfig[*sent]{
		Max: 10, Timeout: 200 * time.Millisecond,
		Sent:    func(m *sent) time.Time { return m.at },
		Done:    func(m *sent) <-chan struct{} { return m.done },
		Outcome: func(m *sent) error { return m.err },
		Late:    func(*sent, time.Duration) error { return errLate },
		Closed:  errClosed, After: errAfter,
		Promise: func(m *sent, err error) {
			mu.Lock()
			defer mu.Unlock()
			order, outcomes = append(order, m.id), append(outcomes, err)
		},
		Failed: func(error) { failures++ },
	})
	defer c.Close()
	ctx := context.Background()
	msgs := make([]*sent, 4)
	for i := range msgs {
		msgs[i] = &sent{id: i, at: time.Now(), done: make(chan struct{})}
		if err := c.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		c.Push(msgs[i])
	}
	close(msgs[1].done) // the second's confirm first: it waits for the first's
	time.Sleep(20 * time.Millisecond)
	close(msgs[0].done)
	close(msgs[3].done) // the third never comes: it is late, the fourth after it
	if err := c.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, []int{0, 1, 2, 3}) {
		t.Errorf("promises in the order %v, want 0 1 2 3", order)
	}
	if want := []error{nil, nil, errLate, errAfter}; !slices.Equal(outcomes, want) || failures != 1 {
		t.Errorf("outcomes %v, %d failures; want %v, 1", outcomes, failures, want)
	}
}
