// Package suptest is the vocabulary of the tests of a Supervisor, shared by
// the tests of package crashloop and of package share: one start time, one
// mock clock, one event recorder timed from its start, and a Supervisor on
// a shared ledger. Only tests import it.
package suptest

import (
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/eventrec"
	"github.com/crashloopguard/crashloop/share"
)

// T0 is the wall time the tests that use explicit times start from: a
// fixed UTC instant, so that events and JSON snapshots carry exact,
// readable times. (Tests inside a synctest bubble start from the bubble's
// 2000-01-01T00:00:00Z.)
var T0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// MockAt returns a mock clock set to at.
func MockAt(at time.Time) *clock.Mock {
	c := clock.NewMock()
	c.Set(at)
	return c
}

// Event is an event as Recorder.Events gives it: At is its time as an
// offset from the recorder's start, and Event.Time is zeroed.
type Event struct {
	At time.Duration
	crashloop.Event
}

// Recorder is the event recorder of the tests (internal/eventrec), with
// the events timed from Start, when it was made (inside a synctest bubble,
// the bubble's time). It is safe for concurrent use.
type Recorder struct {
	eventrec.Recorder[crashloop.Event]
	Start time.Time
}

// NewRecorder returns a Recorder started now.
func NewRecorder() *Recorder { return &Recorder{Start: time.Now()} }

// Events returns the events recorded so far, each timed from Start.
func (r *Recorder) Events() []Event {
	evs := r.All()
	out := make([]Event, 0, len(evs))
	for _, ev := range evs {
		at := ev.Time.Sub(r.Start)
		ev.Time = time.Time{}
		out = append(out, Event{At: at, Event: ev})
	}
	return out
}

// Of returns how many events of kind were recorded.
func (r *Recorder) Of(kind crashloop.EventKind) int {
	return r.Count(func(ev crashloop.Event) bool { return ev.Kind == kind })
}

// EventsOf returns the events of kind that r recorded.
func EventsOf(r *Recorder, kind crashloop.EventKind) []Event {
	var out []Event
	for _, ev := range r.Events() {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// Millis is n milliseconds.
func Millis(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// RestartEv is the EventRestartScheduled of a Supervisor.
func RestartEv(at time.Duration, key, inc, reason string, cause error, total int, backoff time.Duration) Event {
	return Event{At: at, Event: crashloop.Event{Kind: crashloop.EventRestartScheduled, Key: key, Incarnation: inc,
		Reason: reason, LastError: cause, Attempts: total, Backoff: backoff}}
}

// layers maps each Supervisor made by NewShared to its Layer.
var layers sync.Map

// NewShared returns a Supervisor that shares its state through l, as a
// program does with crashloop.WithSharing(share.New(l)); a nil l makes a
// Supervisor that shares nothing.
func NewShared(cfg crashloop.SupervisorConfig, l share.Ledger, opts ...crashloop.Option) (*crashloop.Supervisor, error) {
	if l == nil {
		return crashloop.NewSupervisor(cfg, opts...)
	}
	layer := share.New(l)
	s, err := crashloop.NewSupervisor(cfg, append(opts, crashloop.WithSharing(layer))...)
	if err == nil {
		layers.Store(s, layer)
	}
	return s, err
}

// LayerOf returns the Layer of a Supervisor made by NewShared (nil for one
// made otherwise).
func LayerOf(s *crashloop.Supervisor) *share.Layer {
	l, _ := layers.Load(s)
	y, _ := l.(*share.Layer)
	return y
}
