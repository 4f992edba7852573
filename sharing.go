package crashloop

import (
	"context"
	"time"

	"github.com/crashloopguard/crashloop/internal/seam"
)

// Sharing is a layer that shares a Supervisor's guard state with the other
// replicas of a service: *share.Layer, the only one. A Supervisor given one
// (WithSharing) asks it first at each decision; when it cannot decide, the
// Supervisor decides alone with its own guards and hands a park it makes
// over to be written back. Bind gives the layer the Supervisor's Host.
type Sharing interface {
	Bind(h Host) error
}

// layer is what a Supervisor asks of its Sharing (share.Layer has each
// method's doc). The Supervisor calls Judged, Proceeded, Alone, Member
// and Running with its lock held: they do no I/O and never block. It calls
// the others with no lock held.
type layer interface {
	Sharing
	Context(ctx context.Context) (context.Context, context.CancelFunc)
	Judge(ctx context.Context, j seam.Judgment) (verdict, bool, error)
	Judged(key string, v verdict, known *ParkedError, now time.Time)
	Announce(ctx context.Context, v verdict, evs []Event)
	Proceed(ctx context.Context, key string, now time.Time) (verdict, bool, error)
	Proceeded(key string, v verdict, now time.Time)
	Lookup(ctx context.Context, key string, now time.Time) error
	Resume(ctx context.Context, key string, now time.Time) error
	Forget(ctx context.Context, key string, now time.Time) error
	Fleet(ctx context.Context, now time.Time) (FleetStatus, bool, error)
	Alone(key string, pe *ParkedError, now time.Time)
	Member(key string, member bool)
	Running(delta int)
}

// Host is a Supervisor as its Sharing layer sees it: its lock (a layer's
// own locks come after it), clock and handler, and the steps that change
// its records ("locked": with the lock held; each event returned is the
// one that announces the step). It is for the layer alone.
type Host interface {
	Lock()
	Unlock()
	Clock() Clock
	Config() SupervisorConfig                                              // a copy
	Emit(evs ...Event)                                                     // unlocked: to the handler
	Park(key string) (pe *ParkedError, ok bool)                            // locked; ok: the key is known
	SetPark(key string, pe *ParkedError, now time.Time)                    // locked; nothing else changes
	Parked(key string, pe *ParkedError, now time.Time) Event               // locked: another replica's park
	Unpark(key string, now time.Time) (Event, bool)                        // locked: another replica's resume
	Parks(f func(key string, pe *ParkedError) *ParkedError)                // locked: f may replace each park
	Resume(key string, cleared *ParkedError, now time.Time) (Event, error) // locked: the layer resumed it
	Forget(key string)                                                     // locked: the layer forgot it
	Resumed(pe *ParkedError, now time.Time) Event                          // the event of a resume of pe
}

// WithSharing makes a Supervisor share its guard state through l, a
// *share.Layer. Only NewSupervisor takes it, and not with WithStore: a
// shared layer keeps the state of every replica. The default, also for a
// nil l, is no sharing.
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
	r := h.s.keys[key]
	probed := r != nil && r.probed
	pe, err := h.s.resumeLocked(key, cleared, now)
	if err != nil {
		return Event{}, err
	}
	if probed {
		return h.s.probeResumed(pe, now), nil
	}
	return h.s.cfg.Budget.resumedEvent(pe, now), nil
}

func (h host) Forget(key string) { h.s.forgetLocked(key) }

func (h host) Resumed(pe *ParkedError, now time.Time) Event {
	return h.s.cfg.Budget.resumedEvent(pe, now)
}

// unpark lifts the park of r, and everything its guards counted: a key
// whose probe runs is running, a parked one exited. It announces nothing
// (a replica's resume is announced by whoever resumed it; ResumeAt
// announces its own). s.mu must be held.
func (s *Supervisor) unpark(r *record, now time.Time) {
	r.resume()
	switch {
	case r.running && failing(r.state): // a probe's run
		s.setState(r, StateRunning, now)
	case failing(r.state):
		s.setState(r, StateExited, now)
	}
}
