package crashloop

import (
	"context"
	"time"
)

// Sharing is a layer that shares a Supervisor's guard state with the other
// replicas of a service; package share has one. A Supervisor given one
// (WithSharing) asks it first at each decision. When the layer cannot
// decide, the Supervisor decides alone with its own guards and hands a
// park it makes over to the layer, to be written back.
//
// The Supervisor calls the methods whose doc says "locked" with its lock
// held: they do no I/O and never block. The others it calls with no lock
// held. A layer that takes a lock of its own takes it after the
// Supervisor's, never before. A Sharing is used by one Supervisor.
type Sharing interface {
	// Bind gives the layer its Supervisor, before any other call.
	Bind(h Host) error
	// Judge decides j on the shared state and commits it. It reports
	// false when the layer cannot decide: the Supervisor decides alone.
	// An error is the caller's ctx's: nothing was committed.
	Judge(ctx context.Context, j Judgment) (Verdict, bool, error)
	// Judged takes, locked, the verdict v of key that the Supervisor
	// applied; known was the key's park before.
	Judged(key string, v Verdict, known *ParkedError, now time.Time)
	// Announce emits evs, the events of a verdict: those of a park made
	// once by whichever replica claims it.
	Announce(ctx context.Context, v Verdict, evs []Event)
	// Proceed asks whether the held restart of key may go, as Judge.
	Proceed(ctx context.Context, key string, now time.Time) (Verdict, bool, error)
	// Proceeded takes, locked, the verdict of a Proceed of a known key.
	Proceeded(key string, v Verdict, now time.Time)
	// Lookup takes the shared state of key into the Supervisor, before a
	// run. An error is the caller's ctx's.
	Lookup(ctx context.Context, key string, now time.Time) error
	// Resume resumes the park of key everywhere (see Host.Resume).
	Resume(ctx context.Context, key string, now time.Time) error
	// Forget forgets key everywhere (see Host.Forget).
	Forget(ctx context.Context, key string, now time.Time) error
	// Fleet returns the shared fleet breaker's status; false: unknown.
	Fleet(ctx context.Context, now time.Time) (FleetStatus, bool, error)
	// Alone keeps, locked, a park the Supervisor decided alone.
	Alone(key string, pe *ParkedError, now time.Time)
	// Member tells, locked, whether key counts as a fleet member.
	Member(key string, member bool)
	// Running counts, locked, a key that starts (+1) or stops (-1) running.
	Running(delta int)
}

// Host is a Supervisor as its Sharing layer sees it. Lock and Unlock are
// the Supervisor's lock; the methods marked "locked" need it held. Host
// is not for other callers.
type Host interface {
	Lock()
	Unlock()
	// Clock is the Supervisor's clock.
	Clock() Clock
	// Config is a copy of the Supervisor's configuration.
	Config() SupervisorConfig
	// Emit delivers evs to the Supervisor's handler. Call it unlocked.
	Emit(evs ...Event)
	// Park returns, locked, the park of key; ok is false for a key the
	// Supervisor does not know.
	Park(key string) (pe *ParkedError, ok bool)
	// SetPark sets, locked, the park of key, creating a record for a
	// park of a key it does not know; nothing else changes.
	SetPark(key string, pe *ParkedError, now time.Time)
	// Parked takes, locked, a park that another replica made, and returns
	// the event that announces it.
	Parked(key string, pe *ParkedError, now time.Time) Event
	// Unpark takes, locked, a resume that another replica made, and returns
	// the event that announces it (none when the key was not parked).
	Unpark(key string, now time.Time) (Event, bool)
	// Parks calls f, locked, with each park, which f may replace.
	Parks(f func(key string, pe *ParkedError) *ParkedError)
	// Resume resumes key, locked, after the layer resumed cleared, and
	// returns the event that announces it.
	Resume(key string, cleared *ParkedError, now time.Time) (Event, error)
	// Forget drops key, locked, after the layer forgot it.
	Forget(key string)
	// Resumed returns the event that announces the resume of pe.
	Resumed(pe *ParkedError, now time.Time) Event
}

// WithSharing makes a Supervisor share its guard state through l (package
// share). Only NewSupervisor takes it, and not with WithStore: a shared
// layer keeps the state of every replica.
func WithSharing(l Sharing) Option {
	return func(o *options) { o.given |= optSharing; o.sharing = l }
}

// host is the Host of a Supervisor.
type host struct{ s *Supervisor }

func (h host) Lock()                    { h.s.mu.Lock() }
func (h host) Unlock()                  { h.s.mu.Unlock() }
func (h host) Clock() Clock             { return h.s.o.clock }
func (h host) Config() SupervisorConfig { return h.s.cfg.clone() }
func (h host) Emit(evs ...Event)        { emitAll(h.s.o.handler, evs) }

func (h host) Park(key string) (*ParkedError, bool) {
	r := h.s.keys[key]
	if r == nil {
		return nil, false
	}
	return r.park, true
}

func (h host) SetPark(key string, pe *ParkedError, now time.Time) {
	r := h.s.keys[key]
	if r == nil && pe == nil {
		return
	}
	if r == nil {
		r = h.s.record(key, now)
	}
	r.park = pe
}

func (h host) Parked(key string, pe *ParkedError, now time.Time) Event {
	s := h.s
	r := s.record(key, now)
	r.park = pe
	if !r.running {
		s.setState(r, stateOf(pe), now)
	}
	return s.parkEvent(pe, r.incarnation, now, pe.LastError)
}

func (h host) Unpark(key string, now time.Time) (Event, bool) {
	s := h.s
	r := s.keys[key]
	if r == nil || r.park == nil {
		return Event{}, false
	}
	ev := s.cfg.Budget.resumedEvent(r.park, now)
	s.unpark(r, now)
	return ev, true
}

func (h host) Parks(f func(string, *ParkedError) *ParkedError) {
	for key, r := range h.s.keys {
		if r.park != nil {
			r.park = f(key, r.park)
		}
	}
}

func (h host) Resume(key string, cleared *ParkedError, now time.Time) (Event, error) {
	pe, err := h.s.resumeLocked(key, cleared, now)
	if err != nil {
		return Event{}, err
	}
	return h.s.cfg.Budget.resumedEvent(pe, now), nil
}

func (h host) Forget(key string) { h.s.forgetLocked(key) }

func (h host) Resumed(pe *ParkedError, now time.Time) Event {
	return h.s.cfg.Budget.resumedEvent(pe, now)
}

// unpark lifts the park of r that another Supervisor resumed (the one that
// resumed it announced it). s.mu must be held.
func (s *Supervisor) unpark(r *record, now time.Time) {
	r.resume()
	if failing(r.state) {
		s.setState(r, StateExited, now)
	}
}
