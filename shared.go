package crashloop

import (
	"context"
	"fmt"
	"time"

	"github.com/crashloopguard/crashloop/internal/errtext"
)

// sharedRetry is how long a Supervisor whose ledger failed decides alone
// before it asks the ledger again.
const sharedRetry = time.Second

// shared is the state of a Supervisor's use of a shared Ledger; the
// Supervisor's lock guards it.
type shared struct {
	l       Ledger
	down    bool      // the last call failed: decide alone
	retryAt time.Time // when to ask the ledger again
	lastErr error
	alone   map[string]*ParkedError // parks decided alone, to write back
}

// NewSharedSupervisor returns a Supervisor whose guards keep their state in
// the ledger l: the respawn windows, chains, per-key guards, restart counts
// and parks of its keys, and its fleet breaker. Supervisors sharing one
// ledger (the replicas of a service) then share one budget, one chain and
// one fleet breaker per key: a key parked by one is refused by every other,
// a trip holds the restarts of all, and Resume on any of them applies to
// all. Each decision is one step of the ledger; this Supervisor keeps its
// own record of each key (state, incarnation, last error) and a mirror of
// what the ledger decided, so Status, Parked and Snapshot answer without
// asking it (Status asks it for the fleet breaker only).
//
// When the ledger fails (it cannot be reached, or it is slow: a ledger
// bounds each call), the Supervisor announces EventStoreUnavailable once
// and decides alone with its own guards, as NewSupervisor's would, so it
// keeps guarding and restarting within its own limits; it asks the ledger
// again at most once a second. When the ledger answers again, it writes
// back the parks it decided alone and announces EventStoreRecovered. A
// Resume or Forget while the ledger fails returns an error matching
// ErrStoreUnavailable and changes nothing. A nil l is NewSupervisor. A
// shared Supervisor takes WithClock, WithEventHandler and WithName; it
// takes no WithStore, WithSaveInterval or WithSaveErrorHandler, as the
// ledger keeps its state: given one of those with a non-nil l, it returns
// a *ConfigError naming the option.
func NewSharedSupervisor(cfg SupervisorConfig, l Ledger, opts ...Option) (*Supervisor, error) {
	if l == nil {
		return NewSupervisor(cfg, opts...)
	}
	s, err := newSupervisor(cfg, sharedOptions, opts)
	if err != nil {
		return nil, err
	}
	s.shared = &shared{l: l, alone: map[string]*ParkedError{}}
	if err := l.Open(s.cfg.clone(), s.learn); err != nil {
		return nil, err
	}
	return s, nil
}

// useShared reports whether the Supervisor asks its ledger at now: it has
// one and the last call did not fail, or it failed long enough ago to ask
// again. When the ledger answers again after a failure, the parks decided
// alone are written back first.
func (s *Supervisor) useShared(now time.Time) bool {
	if s.shared == nil {
		return false
	}
	s.mu.Lock()
	sh := s.shared
	if !sh.down {
		s.mu.Unlock()
		return true
	}
	if now.Before(sh.retryAt) {
		s.mu.Unlock()
		return false
	}
	sh.retryAt = now.Add(sharedRetry) // one caller asks; the others go on alone
	s.mu.Unlock()
	return s.writeBack(context.Background(), now) == nil
}

// Flush writes back to the shared ledger the parks this Supervisor decided
// alone while the ledger failed, now, rather than at its next decision:
// for a program about to exit, so that the other replicas refuse the keys
// it parked. It returns nil when there is nothing to write back, or when
// the ledger took it (announcing EventStoreRecovered if the ledger had
// failed); an error matching ErrStoreUnavailable when the ledger still
// fails (call it again, within the time the program allows). Without a
// shared ledger it does nothing. ctx bounds the call together with the
// ledger's own timeout.
func (s *Supervisor) Flush(ctx context.Context) error {
	if s.shared == nil {
		return nil
	}
	return s.writeBack(ctx, s.o.clock.Now())
}

// writeBack writes the parks decided alone to the ledger; when the ledger
// takes them, the Supervisor uses it again, announcing its recovery if it
// had failed.
func (s *Supervisor) writeBack(ctx context.Context, now time.Time) error {
	s.mu.Lock()
	sh := s.shared
	parks := make([]*ParkedError, 0, len(sh.alone))
	for _, pe := range sh.alone {
		parks = append(parks, pe)
	}
	down := sh.down
	s.mu.Unlock()
	if len(parks) == 0 && !down {
		return nil
	}
	n, err := sh.l.Restore(ctx, parks)
	if err != nil {
		s.lost(err, now)
		s.mu.Lock()
		err = sh.lastErr
		s.mu.Unlock()
		return fmt.Errorf("%w: writing back %s decided alone: %v", ErrStoreUnavailable, errtext.Plural(len(parks), "park"), err)
	}
	s.mu.Lock()
	recovered := sh.down
	sh.down, sh.lastErr = false, nil
	for _, pe := range parks {
		if sh.alone[pe.Key] == pe {
			delete(sh.alone, pe.Key)
		}
	}
	s.mu.Unlock()
	if recovered {
		emit(s.o.handler, Event{Kind: EventStoreRecovered, Key: "store", Time: now, Attempts: n})
	}
	return nil
}

// lost records a failed call of the ledger at now, and announces the first
// of a run of failures.
func (s *Supervisor) lost(err error, now time.Time) {
	s.mu.Lock()
	sh := s.shared
	first := !sh.down
	sh.down, sh.retryAt, sh.lastErr = true, now.Add(sharedRetry), err
	s.mu.Unlock()
	if first {
		emit(s.o.handler, Event{Kind: EventStoreUnavailable, Key: "store", Time: now, LastError: err})
	}
}

// unavailable is the error of an operation that must not be done alone.
func (s *Supervisor) unavailable(op, key string) error {
	s.mu.Lock()
	err := s.shared.lastErr
	s.mu.Unlock()
	return fmt.Errorf("%w: %s %q: %v", ErrStoreUnavailable, op, key, err)
}

// decideShared is DecideAt through the ledger; it reports false when the
// ledger failed, for the caller to decide alone.
func (s *Supervisor) decideShared(key string, res RunResult, now time.Time) (Decision, bool) {
	s.mu.Lock()
	j, cause := s.judgment(s.record(key, now), key, res, now)
	s.mu.Unlock()
	v, err := s.shared.l.Judge(context.Background(), j)
	if err != nil {
		s.lost(err, now)
		return Decision{}, false
	}
	var evs events
	s.mu.Lock()
	d := s.apply(s.record(key, now), &j, cause, v, &evs)
	s.mu.Unlock()
	emitAll(s.o.handler, evs.list())
	return d, true
}

// proceedShared is ProceedAt through the ledger.
func (s *Supervisor) proceedShared(key string, now time.Time) (Decision, bool) {
	v, err := s.shared.l.Proceed(context.Background(), key, now)
	if err != nil {
		s.lost(err, now)
		return Decision{}, false
	}
	var evs events
	s.mu.Lock()
	d := Decision{Action: ActionRestart}
	if r := s.keys[key]; r != nil {
		r.mirror(v.Park)
		d = s.proceeded(r, v)
	}
	if v.Rearmed != nil {
		evs.add(s.cfg.Fleet.event(EventFleetRearmed, s.fleetName, v.Now, v.Rearmed))
	}
	s.mu.Unlock()
	emitAll(s.o.handler, evs.list())
	return d, true
}

// lookupShared returns the park the ledger knows of key, mirrored into its
// record, for Run's gate; nil when it is not parked or the ledger failed.
func (s *Supervisor) lookupShared(key string, now time.Time) *ParkedError {
	if !s.useShared(now) {
		return nil
	}
	pe, err := s.shared.l.Lookup(context.Background(), key)
	if err != nil {
		s.lost(err, now)
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if pe != nil {
		r := s.record(key, now)
		if r.park == nil {
			r.park = pe
			s.setState(r, stateOf(pe), now)
		}
		return r.park
	}
	if r := s.keys[key]; r != nil && r.park != nil && s.shared.alone[key] == nil {
		s.unpark(r, now) // resumed by another Supervisor, whose notice was lost
	}
	return nil
}

// unpark lifts the park of r that another Supervisor resumed (the one that
// resumed it announced it). s.mu must be held.
func (s *Supervisor) unpark(r *record, now time.Time) {
	r.resume()
	if failing(r.state) {
		s.setState(r, StateExited, now)
	}
}

// mirror takes the park the ledger reports for a key (nil: none), keeping
// the one this Supervisor made itself, which carries its own error values.
func (r *record) mirror(pe *ParkedError) {
	if pe == nil || r.park == nil {
		r.park = pe
	}
}

// learn takes a change another Supervisor made, as the ledger tells of it:
// the park or resume of a key this Supervisor knows.
func (s *Supervisor) learn(ch LedgerChange) {
	now := s.o.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.keys[ch.Key]
	if r == nil {
		return
	}
	switch {
	case ch.Park != nil && r.park == nil:
		r.park = ch.Park
		if !r.running {
			s.setState(r, stateOf(ch.Park), now)
		}
	case ch.Park == nil && r.park != nil:
		s.unpark(r, now)
	}
}
