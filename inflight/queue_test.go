package inflight

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// Items settle one at a time in the order pushed, whatever order their
// outcomes come in; at most max are in flight; Wait returns once none is;
// Close drops what was not settled and refuses more.
func TestQueue(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var settled, dropped []int
	outcomes := map[int]chan struct{}{}
	for i := range 4 {
		outcomes[i] = make(chan struct{})
	}
	q := New(2, func(i int, stop <-chan struct{}) {
		select {
		case <-outcomes[i]:
		case <-stop:
			return
		}
		mu.Lock()
		settled = append(settled, i)
		mu.Unlock()
	}, func(i int) {
		mu.Lock()
		dropped = append(dropped, i)
		mu.Unlock()
	})
	for i := range 2 {
		if err := q.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		q.Push(i)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := q.Acquire(short); !errors.Is(err, context.DeadlineExceeded) || q.Len() != 2 {
		t.Fatalf("a third item past the bound of 2: %v, %d in flight", err, q.Len())
	}
	close(outcomes[1]) // the second's outcome first: it waits for the first's
	time.Sleep(20 * time.Millisecond)
	close(outcomes[0])
	if err := q.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(settled, []int{0, 1}) || q.Len() != 0 {
		t.Fatalf("settled %v, %d in flight; want 0 1, none", settled, q.Len())
	}
	for i := 2; i < 4; i++ {
		if err := q.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		q.Push(i)
	}
	q.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(settled) != 2 || len(dropped)+len(settled) > 4 || q.Len() != 0 {
		t.Errorf("after Close: settled %v, dropped %v, %d in flight", settled, dropped, q.Len())
	}
	if err := q.Acquire(ctx); !errors.Is(err, ErrStopped) {
		t.Errorf("Acquire after Close: %v, want ErrStopped", err)
	}
}

// A batched queue's settle takes what waits, at most the batch, in push
// order; an item pushed alone is settled alone, without waiting for more.
func TestQueueBatched(t *testing.T) {
	ctx := context.Background()
	gate := make(chan struct{})
	var mu sync.Mutex
	var batches [][]int
	q := NewBatched(10, 3, func(items []int, stop <-chan struct{}) {
		if items[0] == 0 {
			<-gate // the first batch holds the goroutine while more are pushed
		}
		mu.Lock()
		batches = append(batches, slices.Clone(items))
		mu.Unlock()
	}, func(int) {})
	defer q.Close()
	push := func(i int) {
		if err := q.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		q.Push(i)
	}
	push(0)
	time.Sleep(20 * time.Millisecond) // 0 is taken alone
	for i := 1; i <= 5; i++ {
		push(i)
	}
	close(gate)
	if err := q.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := batches
	mu.Unlock()
	want := [][]int{{0}, {1, 2, 3}, {4, 5}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", got, want)
	}
	if q.Len() != 0 {
		t.Fatalf("%d in flight after Wait", q.Len())
	}
}
