// Package eventrec is the event recorder of the tests of the library and of
// its nested modules. A Recorder is generic in the type of its events, so
// that it imports nothing of the library and the library's own (internal)
// tests can use it: a *Recorder[crashloop.Event] is a crashloop.EventHandler.
package eventrec

import "sync"

// Recorder keeps every event it is handed, in the order it was handed them.
// It is safe for concurrent use. Its zero value is an empty Recorder, ready
// to use; a Recorder must not be copied after first use.
type Recorder[E any] struct {
	mu  sync.Mutex
	evs []E
}

// HandleEvent records ev.
func (r *Recorder[E]) HandleEvent(ev E) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
}

// All returns a copy of the events recorded so far, oldest first (nil for
// none).
func (r *Recorder[E]) All() []E {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]E(nil), r.evs...)
}

// Take returns the events recorded so far, oldest first (nil for none), and
// forgets them.
func (r *Recorder[E]) Take() []E {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs := r.evs
	r.evs = nil
	return evs
}

// Filter returns the events recorded so far for which keep is true, oldest
// first (nil for none). keep runs with the Recorder locked: it must not
// call the Recorder.
func (r *Recorder[E]) Filter(keep func(E) bool) []E {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []E
	for _, ev := range r.evs {
		if keep(ev) {
			out = append(out, ev)
		}
	}
	return out
}

// Count returns how many of the events recorded so far keep is true for.
// keep runs with the Recorder locked: it must not call the Recorder.
func (r *Recorder[E]) Count(keep func(E) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ev := range r.evs {
		if keep(ev) {
			n++
		}
	}
	return n
}
