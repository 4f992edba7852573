package crashloop

import (
	"errors"
	"slices"
	"strconv"
	"time"
)

// RunResult is how one run of a key ended, as Decide judges it.
type RunResult struct {
	// Err is what the run returned: nil for a clean exit; Restart(err) for
	// a planned restart; Permanent(err) for a failure restarting cannot fix;
	// anything else is a failure.
	Err error
	// Started is when the run started. A run that lasted HealthyAfter was a
	// healthy start. The zero time means unknown: only Ready makes such a
	// run healthy.
	Started time.Time
	// Ready reports that the run proved it was up and healthy (see Ready).
	Ready bool
	// Incarnation is what ran under the key; "" keeps the key's current
	// incarnation (the first one is "KEY#1").
	Incarnation string
}

// Action is what the loop that runs a key does next. Its zero value is not
// an action a Decision carries; String returns "restart", "hold" or "stop".
type Action int

// The actions of a Decision.
const (
	// ActionRestart: start the next run after Decision.Wait.
	ActionRestart Action = iota + 1
	// ActionHold: the fleet breaker holds the restart. Wait Decision.Wait,
	// then ask again with Proceed (Run does).
	ActionHold
	// ActionStop: supervision of the key ends. Decision.Err is nil after a
	// clean exit, else why it stopped (a *ParkedError for a key that a
	// guard gave up on or that is parked).
	ActionStop
)

// String returns the action's name.
func (a Action) String() string {
	switch a {
	case ActionRestart:
		return "restart"
	case ActionHold:
		return "hold"
	case ActionStop:
		return "stop"
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// Decision is what a Supervisor decided after a run of a key ended: what
// the loop that runs the key does next. It is a value the caller owns.
type Decision struct {
	Action Action
	Wait   time.Duration // ActionRestart: the backoff; ActionHold: how long to wait before Proceed
	Err    error         // ActionStop: nil after a clean exit, else why (a *ParkedError)
}

// Decide is shorthand for DecideAt(key, r, clock.Now()).
func (s *Supervisor) Decide(key string, r RunResult) Decision {
	return s.DecideAt(key, r, s.o.clock.Now())
}

// DecideAt judges the end, at now, of one run of key, and returns what to
// do next. It is the whole judgment Run makes after each run, for the
// restart loops of other tools; it commits the decision and announces it
// before it returns.
//
// A run that returned nil ends supervision (ActionStop, nil Err), unless
// RestartOnCleanExit: then it is a planned restart ("clean_exit") after a
// healthy run and a failed start before one. A failure before the run was
// healthy is a failed start: the budget grants a respawn with its backoff
// (EventRespawnScheduled) or parks the key ("respawn_budget_exhausted",
// EventStartupExhausted). A failure after a healthy run is a reactive
// rescue: the chain lets it restart after the curve's first step ("crashed",
// EventRestartScheduled) or escalates ("needs_human", EventChainEscalated;
// the *ParkedError's LastError matches ErrNeedsHuman). Restart(err) is a
// planned restart ("planned"): at once, no budget spent, and the chain ends.
// Permanent(err) parks at once ("permanent_error", EventStartupExhausted).
// Every restart, whatever judged it, also passes the per-key guard and the
// hourly cap when they are on (each parks on the restart after its limit,
// EventGuardTripped), and counts towards the key's total restarts. A park
// tells the fleet breaker the failing fraction; a restart counts towards its
// hourly rate, and while it is tripped the restart is held (ActionHold,
// announced with Held set) without being counted, until the breaker re-arms
// and releases it (see Proceed). A parked key stops at once with its
// *ParkedError, and an empty key with an error matching ErrInvalidKey.
func (s *Supervisor) DecideAt(key string, r RunResult, now time.Time) Decision {
	if err := checkKey(key); err != nil {
		return Decision{Action: ActionStop, Err: err}
	}
	off := s.tb.off(now)
	var evs events
	s.mu.Lock()
	t := s.tb.at(off)
	s.rearm(t, now, &evs)
	rec := s.record(key, now)
	d, parked := s.judge(rec, key, r, t, now, &evs)
	s.mu.Unlock()
	emitAll(s.o.handler, evs.list())
	s.save(now, parked)
	return d
}

// events holds the few events of one decision until the lock is released.
type events struct {
	evs [3]Event
	n   int
}

func (e *events) add(ev Event) {
	if ev.Kind != 0 {
		e.evs[e.n] = ev
		e.n++
	}
}

func (e *events) list() []Event { return e.evs[:e.n] }

// The kinds of run end a judgment tells apart.
type ending int

const (
	endClean       ending = iota // nil, supervision ends
	endPermanent                 // Permanent(err): park at once
	endFailedStart               // a failure before the run was healthy: the budget
	endCrash                     // a failure after a healthy run: the chain
	endPlanned                   // Restart(err), or a clean exit after a healthy run with RestartOnCleanExit
)

// Restart reasons of EventRestartScheduled.
const (
	restartCrashed   = "crashed"
	restartPlanned   = "planned"
	restartCleanExit = "clean_exit"
)

// errCleanExitEarly is the failure of a run that returned nil before it was
// healthy while RestartOnCleanExit is set: a clean-exit loop is a crash loop.
var errCleanExitEarly = errors.New("crashloop: exited cleanly before it was healthy")

// classify tells what kind of end err is, with the reason of a restart
// that no budget judges and the error the judgment carries.
func (s *Supervisor) classify(err error, healthy bool) (ending, string, error) {
	var perm *permanentError
	var planned *restartError
	switch {
	case err == nil && !s.cfg.RestartOnCleanExit:
		return endClean, "", nil
	case err == nil && healthy:
		return endPlanned, restartCleanExit, nil
	case err == nil:
		return endFailedStart, "", errCleanExitEarly
	case errors.As(err, &perm):
		return endPermanent, "", err
	case errors.As(err, &planned):
		return endPlanned, restartPlanned, err
	case healthy:
		return endCrash, restartCrashed, err
	}
	return endFailedStart, "", err
}

// judge decides the end of a run of key at t and commits the decision to
// its record and the fleet breaker, adding the events that announce it. It
// reports whether the key parked. s.mu must be held.
func (s *Supervisor) judge(r *record, key string, res RunResult, t int64, now time.Time, evs *events) (Decision, bool) {
	if r.park != nil {
		return Decision{Action: ActionStop, Err: r.park}, false
	}
	if res.Incarnation != "" {
		r.incarnation = res.Incarnation
	} else if r.incarnation == "" {
		r.newIncarnation(key)
	}
	healthy := res.Ready || (s.cfg.HealthyAfter > 0 && !res.Started.IsZero() && now.Sub(res.Started) >= s.cfg.HealthyAfter)
	if healthy {
		r.settle()
	}
	end, reason, cause := s.classify(res.Err, healthy)
	if cause != nil {
		r.lastErr = cause
	}
	if end == endClean {
		r.guard.clear() // a clean run clears the fast guard
		s.setState(r, StateExited, now)
		return Decision{Action: ActionStop}, false
	}

	// Judge before recording anything: a park records no restart.
	switch end {
	case endPermanent:
		return s.park(r, key, ReasonPermanent, cause, s.cfg.Budget.count(&r.respawns, t), t, now, evs), true
	case endFailedStart:
		if n := s.cfg.Budget.count(&r.respawns, t); n >= s.cfg.Budget.MaxRespawns {
			return s.park(r, key, ReasonBudgetExhausted, cause, n, t, now, evs), true
		}
	case endCrash:
		if c := s.cfg.Chain; c != nil {
			if n := c.length(&r.chain, r.incarnation, t); n >= c.MaxChain {
				nh := &needsHumanError{key: key, incarnation: r.incarnation, chain: n, cause: cause}
				return s.park(r, key, ReasonNeedsHuman, nh, n, t, now, evs), true
			}
		}
	}
	if g := s.cfg.Guard; g != nil {
		if n := g.count(&r.guard, t); n >= g.MaxRestarts {
			return s.park(r, key, ReasonRestartLoopGuard, cause, n, t, now, evs), true
		}
	}
	if s.cfg.HourlyCap > 0 {
		if n := s.hourly.count(&r.hourly, t); n >= s.cfg.HourlyCap {
			return s.park(r, key, ReasonHourlyCap, cause, n, t, now, evs), true
		}
	}

	// Record the restart.
	var wait time.Duration
	attempt := 0
	switch end {
	case endFailedStart:
		attempt, _ = s.cfg.Budget.respawn(&r.respawns, t)
		wait = s.curve.Delay(attempt, r.prev)
		r.prev = wait
	case endCrash:
		if c := s.cfg.Chain; c != nil {
			c.rescue(&r.chain, r.incarnation, true, t)
		}
		wait = s.curve.Delay(1, 0)
	case endPlanned:
		if c := s.cfg.Chain; c != nil {
			c.rescue(&r.chain, r.incarnation, false, t) // ends the chain
		}
	}
	if g := s.cfg.Guard; g != nil {
		r.guard.push(t, g.MaxRestarts)
	}
	if s.cfg.HourlyCap > 0 {
		r.hourly.push(t, s.cfg.HourlyCap)
	}
	r.restarts++

	d := Decision{Action: ActionRestart, Wait: wait}
	var trip Event
	if s.fleet != nil {
		tripped, trippedNow := s.cfg.Fleet.noteRestart(s.fleet, t)
		if trippedNow {
			trip = s.cfg.Fleet.event(EventFleetTripped, s.fleetName, now, s.fleet)
		}
		if tripped {
			s.holds++
			r.held, r.release = s.holds, 0
			d = Decision{Action: ActionHold, Wait: max(wait, s.untilRearm(t))}
		}
	}
	if d.Action == ActionHold {
		s.setState(r, StateHeld, now)
	} else {
		s.setState(r, StateBackoff, now)
	}
	if s.o.handler != nil {
		ev := Event{Kind: EventRestartScheduled, Key: key, Incarnation: r.incarnation, Time: now, Reason: reason,
			LastError: cause, Attempts: r.restarts, Backoff: d.Wait, Held: d.Action == ActionHold}
		if end == endFailedStart {
			ev = s.cfg.Budget.scheduled(key, now, cause, attempt, d.Wait)
			ev.Held = d.Action == ActionHold
		}
		evs.add(ev)
	}
	evs.add(trip)
	return d, false
}

// count drops the respawns older than Window from w at t and returns the
// respawns left.
func (c BudgetConfig) count(w *window, t int64) int {
	w.prune(t, c.Window)
	return w.len()
}

// settle clears the respawn window of a record that is not parked: a run
// that became healthy was a good start, so the next failure starts afresh.
func (r *record) settle() {
	if r.park == nil {
		r.respawns.clear()
		r.prev = 0
	}
}

// park parks the key of r for reason, adds the event that announces it
// (that of the guard that decided) and tells the fleet breaker the failing
// fraction, which may trip it (announced after the park). s.mu must be
// held.
func (s *Supervisor) park(r *record, key, reason string, cause error, n int, t int64, now time.Time, evs *events) Decision {
	pe := &ParkedError{Key: key, Reason: reason, LastError: cause, Attempts: n, Since: now}
	r.park, r.held, r.lastErr = pe, 0, cause
	st := StateParked
	if reason == ReasonNeedsHuman {
		st = StateNeedsHuman
	}
	s.setState(r, st, now)
	switch reason {
	case ReasonNeedsHuman: // the event names the crash; the park's error says it needs a human
		evs.add(s.cfg.Chain.escalatedEvent(key, r.incarnation, now, n, errors.Unwrap(cause)))
	case ReasonRestartLoopGuard:
		evs.add(s.cfg.Guard.trippedEvent(key, now, n, cause))
	case ReasonHourlyCap:
		evs.add(s.hourly.trippedEvent(key, now, n, cause))
	default:
		evs.add(s.cfg.Budget.parkedEvent(pe))
	}
	if s.fleet != nil {
		if _, trippedNow := s.cfg.Fleet.noteState(s.fleet, s.failing, s.members, t); trippedNow {
			evs.add(s.cfg.Fleet.event(EventFleetTripped, s.fleetName, now, s.fleet))
		}
	}
	return Decision{Action: ActionStop, Err: pe}
}

// untilRearm returns how long after t the tripped fleet breaker re-arms (at
// least 1ns, so that a hold always waits). s.mu must be held.
func (s *Supervisor) untilRearm(t int64) time.Duration {
	left := s.cfg.Fleet.Cooldown - time.Duration(age(t, s.fleet.since))
	return max(left, time.Nanosecond)
}

// rearm re-arms the fleet breaker if its cooldown has ended at t, adding
// EventFleetRearmed, and schedules the release of the restarts it held:
// they leave in the order they were held, spread evenly over one cooldown
// from the re-arm, so that they do not all start at the same instant. They
// are not counted in the breaker's hour (they were counted, or refused,
// when they were held), so the release itself can never trip the breaker
// again; a released key that fails again is a new restart and counts. s.mu
// must be held.
func (s *Supervisor) rearm(t int64, now time.Time, evs *events) {
	if s.fleet == nil || !s.cfg.Fleet.rearm(s.fleet, t) {
		return
	}
	evs.add(s.cfg.Fleet.event(EventFleetRearmed, s.fleetName, now, s.fleet))
	var held []*record
	for _, r := range s.keys {
		if r.held != 0 {
			held = append(held, r)
		}
	}
	if len(held) == 0 {
		return
	}
	slices.SortFunc(held, func(a, b *record) int { return compareUint(a.held, b.held) })
	gap := s.cfg.Fleet.Cooldown / time.Duration(len(held))
	for i, r := range held {
		r.release = t + int64(time.Duration(i)*gap)
	}
}

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Proceed is shorthand for ProceedAt(key, clock.Now()).
func (s *Supervisor) Proceed(key string) Decision { return s.ProceedAt(key, s.o.clock.Now()) }

// ProceedAt asks, at now, whether the held restart of key may go: it
// returns ActionRestart (Wait 0) once the fleet breaker has re-armed and
// the restart's turn in the release has come, ActionHold with the wait
// until then, or ActionStop with the *ParkedError of a key that was parked
// meanwhile. For a key that is not held it returns ActionRestart at once.
func (s *Supervisor) ProceedAt(key string, now time.Time) Decision {
	off := s.tb.off(now)
	var evs events
	s.mu.Lock()
	t := s.tb.at(off)
	s.rearm(t, now, &evs)
	d := s.proceed(key, t, now)
	s.mu.Unlock()
	emitAll(s.o.handler, evs.list())
	return d
}

func (s *Supervisor) proceed(key string, t int64, now time.Time) Decision {
	r := s.keys[key]
	switch {
	case r == nil:
		return Decision{Action: ActionRestart}
	case r.park != nil:
		return Decision{Action: ActionStop, Err: r.park}
	case r.held == 0:
		return Decision{Action: ActionRestart}
	case s.fleet != nil && s.fleet.tripped:
		return Decision{Action: ActionHold, Wait: s.untilRearm(t)}
	case r.release > t:
		return Decision{Action: ActionHold, Wait: time.Duration(r.release - t)}
	}
	r.held, r.release = 0, 0
	s.setState(r, StateBackoff, now)
	return Decision{Action: ActionRestart}
}
