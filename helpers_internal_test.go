package crashloop

// The helpers of the in-package tests: one start time, one mock clock, one
// event recorder.

import (
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// coreT0 is the wall time every core test starts from: a fixed UTC instant,
// so that events and JSON snapshots carry exact, readable times.
var coreT0 = time.Date(2026, time.January, 2, 3, 4, 5, 0, time.UTC)

// coreMock returns a mock clock set to coreT0, or to at if given.
func coreMock(at ...time.Time) *clock.Mock {
	m := clock.NewMock()
	m.Set(coreT0)
	if len(at) > 0 {
		m.Set(at[0])
	}
	return m
}

// coreRecorder is an EventHandler that keeps every event it is given. It is
// safe for concurrent use.
type coreRecorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *coreRecorder) HandleEvent(ev Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

// all returns a copy of the events received so far.
func (r *coreRecorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// take returns the events received so far and forgets them.
func (r *coreRecorder) take() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs := r.events
	r.events = nil
	return evs
}

// count returns how many events of kind were received.
func (r *coreRecorder) count(kind EventKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ev := range r.events {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// coreNoDeadlock runs f on another goroutine and fails the test if it does
// not return promptly: a handler that calls back into the object that called
// it must not wait for a lock that object still holds. The timer is a
// watchdog only; no library code reads it.
func coreNoDeadlock(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("deadlock: call did not return (a handler waited for a lock held by its caller)")
	}
}
