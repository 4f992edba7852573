package crashloop

// The helpers of the in-package tests: one start time, one mock clock, one
// event recorder.

import (
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/crashloopguard/crashloop/internal/eventrec"
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

// coreRecorder is the event recorder of the tests (internal/eventrec),
// with a count by kind. It is safe for concurrent use.
type coreRecorder struct{ eventrec.Recorder[Event] }

// count returns how many events of kind were received.
func (r *coreRecorder) count(kind EventKind) int {
	return r.Count(func(ev Event) bool { return ev.Kind == kind })
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
