package crashloop

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/crashloopguard/crashloop/internal/seam"

	"github.com/crashloopguard/crashloop/internal/errtext"
)

// RunResult is how one run of a key ended, as Decide judges it. It is a
// plain value; its zero value is a clean exit of a run whose start is
// unknown.
type RunResult struct {
	// Err is what the run returned: nil, Restart(err), Permanent(err) or a
	// failure.
	Err error
	// Started is when the run started (zero: unknown); a run that lasted
	// HealthyAfter was a healthy start.
	Started     time.Time
	Ready       bool   // the run proved it was up and healthy (see Ready)
	Incarnation string // what ran under the key; "" keeps the current one
	// Reset clears the budget's window and the chain before the run is
	// judged (see ResetRestarts); it does not make the run healthy.
	Reset bool
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
// the loop that runs the key does next. It is a value the caller owns; its
// zero value (no Action) is never returned.
type Decision struct {
	Action Action
	Wait   time.Duration // the backoff; ActionHold: the wait before Proceed; ActionStop: until a park's probe (0: none)
	Err    error         // ActionStop: nil after a clean exit, else why (a *ParkedError)
}

// Decide is shorthand for DecideAt(ctx, key, r, clock.Now()).
func (s *Supervisor) Decide(ctx context.Context, key string, r RunResult) Decision {
	return s.DecideAt(ctx, key, r, s.o.clock.Now())
}

// DecideAt judges the end, at now, of one run of key, commits the decision,
// announces it, and returns what to do next. It is the judgment Run makes
// after each run, for the restart loops of other tools.
//
// A nil error ends supervision. An error before the run was healthy is a
// failed start, judged by the respawn budget; one after is a rescue, judged
// by the chain. Permanent(err) parks at once; Restart(err) restarts at once
// and spends no budget; an ExitRules rule may do either, or stop. Every
// restart also passes the per-key guard, the hourly cap and the fleet's
// holds. docs/supervisor.md has the whole table.
//
// A parked key stops with its *ParkedError and the wait until its probe. If ctx ends first (it bounds the
// wait on a shared layer), DecideAt returns ActionStop with ctx's error and
// commits nothing. DecideAt is safe for concurrent use.
func (s *Supervisor) DecideAt(ctx context.Context, key string, r RunResult, now time.Time) Decision {
	ctx = orBackground(ctx)
	if err := ctx.Err(); err != nil {
		return Decision{Action: ActionStop, Err: err}
	}
	if err := checkKey(key); err != nil {
		return Decision{Action: ActionStop, Err: err}
	}
	if s.share != nil {
		if d, ok := s.decideShared(ctx, key, r, now); ok {
			return d
		}
	}
	var evs events
	t := s.lockAt(now, &evs)
	rec := s.record(key, now)
	j, cause := s.judgment(rec, key, r, now)
	if s.probeEnded(rec, j.Healthy, now, &evs) {
		j, cause = s.judgment(rec, key, r, now) // the run of a key the probe resumed
	}
	released := s.rules.release(&s.book, &j, t, s.eachGuards)
	v := s.rules.judge(&rec.keyGuards, &s.book, &j, t, now)
	v.CauseReleased = released
	d := s.apply(rec, &j, cause, v, &evs)
	if v.NewPark && s.share != nil {
		s.share.Alone(key, rec.park, now) // to write back
	}
	s.mu.Unlock()
	emitAll(s.o.handler, evs.list())
	s.save(now, v.NewPark)
	return d
}

// errCleanExitEarly is the failure of a run that returned nil before it was
// healthy while RestartOnCleanExit is set: a clean-exit loop is a crash loop.
var errCleanExitEarly = errors.New("crashloop: exited cleanly before it was healthy")

// judgment turns how a run of key ended into the seam.Judgment the guards
// settle, with the error the decision carries. It changes nothing. s.mu
// must be held.
func (s *Supervisor) judgment(r *record, key string, res RunResult, now time.Time) (seam.Judgment, error) {
	inc := res.Incarnation
	if inc == "" && res.Reset {
		inc = incarnationOf(key, r.runs+1) // a new incarnation ends the chain
	}
	if inc == "" {
		inc = r.incarnation
	}
	if inc == "" {
		inc = incarnationOf(key, r.runs+1)
	}
	healthy := res.Ready || (s.cfg.HealthyAfter > 0 && !res.Started.IsZero() && now.Sub(res.Started) >= s.cfg.HealthyAfter)
	ending, cause := s.classify(res.Err, healthy)
	// a reset clears the respawn window as a healthy run does, without
	// making the failure a crash
	j := seam.Judgment{Key: key, Ending: ending, Healthy: healthy || res.Reset, Incarnation: inc, Now: now,
		Members: s.members - b2i(member(r.state)), Failing: s.failing - b2i(failing(r.state))}
	if cause != nil {
		j.Cause = errtext.Text(cause) // with how the program ended, when the failure tells
		if s.rules.cause != nil {
			j.Shared = errtext.CauseOf(cause) // how the program ended, and its last line on stderr, when the failure tells
		}
	}
	return j, cause
}

// classify tells how a run ended, with the error the judgment carries.
func (s *Supervisor) classify(err error, healthy bool) (seam.Ending, error) {
	_, perm := errors.AsType[*permanentError](err)
	_, planned := errors.AsType[*restartError](err)
	rule := exitRestart
	if !perm && !planned {
		rule = exitActionOf(s.cfg.ExitRules, err) // ExitRules apply to what neither marks
	}
	switch {
	case err == nil && !s.cfg.RestartOnCleanExit:
		return seam.EndingClean, nil
	case err == nil && healthy:
		return seam.EndingPlanned, nil
	case err == nil:
		return seam.EndingFailedStart, errCleanExitEarly
	case perm || rule == exitPark:
		return seam.EndingPermanent, err
	case planned || rule == exitPlanned:
		return seam.EndingPlanned, err
	case rule == exitStop: // supervision ends with the run's error
		return seam.EndingClean, err
	case healthy:
		return seam.EndingCrash, err
	}
	return seam.EndingFailedStart, err
}

// apply acts on the verdict v of judgment j for the record r: it commits
// what the record keeps of it (state, incarnation, last error, the curve's
// last wait, and a mirror of the guards' counts and park when a shared
// ledger decided), works out the wait on the restart curve, adds the events
// that announce the decision, and returns it. s.mu must be held.
func (s *Supervisor) apply(r *record, j *seam.Judgment, cause error, v verdict, evs *events) Decision {
	r.probing = nil // a probe's run ends with its judgment
	r.nextProbe = v.ProbeAt
	if j.Incarnation != r.incarnation {
		if j.Incarnation == incarnationOf(j.Key, r.runs+1) {
			r.runs++
		}
		r.incarnation = j.Incarnation
	}
	if cause != nil {
		r.lastErr = cause
	}
	r.restarts = v.Restarts
	s.fleetEvents(v, evs)
	switch {
	case v.NewPark:
		return s.parked(r, j, cause, v, evs)
	case v.Park != nil: // parked before: by another run, or another replica
		r.park = v.Park
		s.setState(r, stateOf(v.Park), v.Now)
		return Decision{Action: ActionStop, Err: v.Park, Wait: untilProbe(v)}
	case j.Ending == seam.EndingClean:
		s.setState(r, StateExited, v.Now)
		return Decision{Action: ActionStop, Err: cause} // nil, or the run's error an exitStop rule matched
	case v.Held && v.Cause != "":
		return s.heldForCause(r, j, cause, v, evs)
	}

	var wait time.Duration
	switch j.Ending {
	case seam.EndingFailedStart:
		if v.Attempt == 1 {
			r.prev = 0 // an empty window forgets the last wait
		}
		wait = s.curve.Delay(v.Attempt, r.prev)
		r.prev = wait
	case seam.EndingCrash:
		wait = s.curve.Delay(1, 0)
	}
	d := Decision{Action: ActionRestart, Wait: wait}
	r.local++ // the verdict counted a restart: this Supervisor schedules it
	if v.Held {
		d = Decision{Action: ActionHold, Wait: max(wait, v.Wait)}
		r.held = max(r.held, 1) // a mirror: the order is the ledger's
		s.setState(r, StateHeld, v.Now)
	} else {
		s.setState(r, StateBackoff, v.Now)
	}
	if s.o.handler != nil {
		ev := Event{Kind: EventRestartScheduled, Key: j.Key, Incarnation: j.Incarnation, Time: v.Now, Reason: restartReason(j),
			LastError: cause, Attempts: v.Restarts, Backoff: d.Wait, Held: v.Held}
		if j.Ending == seam.EndingFailedStart {
			ev = s.cfg.Budget.scheduled(j.Key, v.Now, cause, v.Attempt, d.Wait)
			ev.Held = v.Held
		}
		evs.add(ev)
	}
	if v.Tripped != nil {
		evs.add(s.cfg.Fleet.event(EventFleetTripped, s.fleetName, v.Now, v.Tripped))
	}
	return d
}

// restartReason is the Reason of the EventRestartScheduled of j.
func restartReason(j *seam.Judgment) string {
	switch {
	case j.Ending == seam.EndingCrash:
		return ReasonCrashed
	case j.Cause == "":
		return ReasonCleanExit // a clean exit after a healthy run, with RestartOnCleanExit
	}
	return ReasonPlanned
}

// parked commits the park the verdict v made, with this Supervisor's own
// error values, and adds the event of the guard that decided it, then the
// fleet trip it caused. s.mu must be held.
func (s *Supervisor) parked(r *record, j *seam.Judgment, cause error, v verdict, evs *events) Decision {
	pe := *v.Park
	pe.LastError = cause
	if pe.Reason == ReasonNeedsHuman {
		pe.LastError = &needsHumanError{key: j.Key, incarnation: j.Incarnation, chain: pe.Attempts, cause: cause}
	}
	r.park, r.lastErr = &pe, pe.LastError
	r.held = 0
	s.setState(r, stateOf(&pe), v.Now)
	evs.add(s.parkEvent(&pe, j.Incarnation, v.Now, cause))
	if v.Tripped != nil {
		evs.add(s.cfg.Fleet.event(EventFleetTripped, s.fleetName, v.Now, v.Tripped))
	}
	return Decision{Action: ActionStop, Err: &pe, Wait: untilProbe(v)}
}

// parkEvent is the event that announces pe, made at now by a run of
// incarnation that failed with cause.
func (s *Supervisor) parkEvent(pe *ParkedError, incarnation string, now time.Time, cause error) Event {
	switch {
	case pe.Reason == ReasonNeedsHuman && s.cfg.Chain != nil:
		return s.cfg.Chain.escalatedEvent(pe.Key, incarnation, now, pe.Attempts, cause)
	case pe.Reason == ReasonRestartLoopGuard && s.cfg.Guard != nil:
		return s.cfg.Guard.trippedEvent(pe.Key, ReasonRestartLoopGuard, now, pe.Attempts, cause)
	case pe.Reason == ReasonHourlyCap:
		return s.rules.hourly.trippedEvent(pe.Key, ReasonHourlyCap, now, pe.Attempts, cause)
	}
	return s.cfg.Budget.parkedEvent(pe)
}

// stateOf is the state of a key parked with pe.
func stateOf(pe *ParkedError) KeyState {
	if pe.Reason == ReasonNeedsHuman {
		return StateNeedsHuman
	}
	return StateParked
}

// lockAt locks the Supervisor and returns the time a call at now uses (see
// timebase), after re-arming the fleet breaker if its cooldown has ended
// then (adding the event to evs).
func (s *Supervisor) lockAt(now time.Time, evs *events) int64 {
	off := s.tb.Off(now)
	s.mu.Lock()
	t := s.tb.At(off)
	s.rearm(t, now, evs)
	return t
}

// rearm re-arms the fleet breaker if its cooldown has ended at t, adding
// EventFleetRearmed, and schedules the release of the restarts it held
// (see rules.rearm). s.mu must be held.
func (s *Supervisor) rearm(t int64, now time.Time, evs *events) {
	if ch := s.rules.rearm(&s.book, t, s.eachGuards); ch != nil {
		evs.add(s.cfg.Fleet.event(EventFleetRearmed, s.fleetName, now, ch))
	}
}

// eachGuards calls f with the guard state of every key. s.mu must be held.
func (s *Supervisor) eachGuards(f func(*keyGuards)) {
	for _, r := range s.keys {
		f(&r.keyGuards)
	}
}

// Proceed is shorthand for ProceedAt(ctx, key, clock.Now()).
func (s *Supervisor) Proceed(ctx context.Context, key string) Decision {
	return s.ProceedAt(ctx, key, s.o.clock.Now())
}

// ProceedAt asks, at now, whether the held restart of key may go: it
// returns ActionRestart (Wait 0) once its hold has ended and its turn in
// the release has come, ActionHold with the wait until then, or ActionStop
// with the *ParkedError of a parked key and the wait until its probe. For
// a parked key whose probe is due it claims the probe: ActionRestart, and
// the next run is the probe. For any other key it returns ActionRestart.
//
// If ctx ends first (it bounds the wait on a shared layer), ProceedAt
// returns ActionStop with ctx's error and commits nothing. ProceedAt is
// safe for concurrent use.
func (s *Supervisor) ProceedAt(ctx context.Context, key string, now time.Time) Decision {
	ctx = orBackground(ctx)
	if err := ctx.Err(); err != nil {
		return Decision{Action: ActionStop, Err: err}
	}
	if s.share != nil {
		if d, ok := s.proceedShared(ctx, key, now); ok {
			return d
		}
	}
	var evs events
	t := s.lockAt(now, &evs)
	if ch := s.rules.release(&s.book, nil, t, s.eachGuards); ch != nil {
		evs.add(s.causeEvent(EventFleetCauseReleased, now, ch))
	}
	d := Decision{Action: ActionRestart}
	if r := s.keys[key]; r != nil {
		d = s.proceeded(r, s.rules.proceed(&r.keyGuards, &s.book, key, t, now))
	}
	s.mu.Unlock()
	emitAll(s.o.handler, evs.list())
	return d
}

// proceeded acts on the verdict of a Proceed for r. s.mu must be held.
func (s *Supervisor) proceeded(r *record, v verdict) Decision {
	if v.Park != nil {
		r.nextProbe = v.ProbeAt
	}
	switch {
	case v.Probe && v.Park != nil && r.park != nil && r.park.Version == v.Park.Version:
		r.probing = r.park // the run that follows is a probe of this park
		return Decision{Action: ActionRestart}
	case r.park != nil:
		return Decision{Action: ActionStop, Err: r.park, Wait: untilProbe(v)} // the verdict's park, or a newer one the mirror knows
	case v.Park != nil:
		return Decision{Action: ActionStop, Err: v.Park, Wait: untilProbe(v)}
	case v.Held:
		return Decision{Action: ActionHold, Wait: v.Wait}
	}
	if r.state == StateHeld {
		r.held, r.cause = 0, ""
		s.setState(r, StateBackoff, v.Now)
	}
	return Decision{Action: ActionRestart}
}

// decideShared is DecideAt through the shared layer; it reports false when
// the layer cannot decide, for the caller to decide alone.
func (s *Supervisor) decideShared(ctx context.Context, key string, res RunResult, now time.Time) (Decision, bool) {
	s.mu.Lock()
	r := s.keys[key]
	if r == nil {
		r = &record{state: StateExited, since: now} // made only once the layer has decided
	}
	j, cause := s.judgment(r, key, res, now)
	probe := r.probing != nil && j.Healthy
	s.mu.Unlock()
	if probe { // a healthy probe: resume its key everywhere, then judge the run
		s.probeHealthy(ctx, key, now)
		s.mu.Lock()
		j, cause = s.judgment(s.record(key, now), key, res, now)
		s.mu.Unlock()
	}
	ctx, cancel := s.share.Context(ctx) // one deadline for the whole decision
	defer cancel()
	v, ok, err := s.share.Judge(ctx, j)
	if err != nil {
		return Decision{Action: ActionStop, Err: err}, true
	}
	if !ok {
		return Decision{}, false
	}
	var evs events
	s.mu.Lock()
	rec := s.record(key, now)
	known := rec.park
	d := s.apply(rec, &j, cause, v, &evs)
	s.share.Judged(key, v, known, now)
	s.mu.Unlock()
	s.share.Announce(ctx, v, evs.list())
	return d, true
}

// proceedShared is ProceedAt through the shared layer, as decideShared.
func (s *Supervisor) proceedShared(ctx context.Context, key string, now time.Time) (Decision, bool) {
	ctx, cancel := s.share.Context(ctx)
	defer cancel()
	v, ok, err := s.share.Proceed(ctx, key, now)
	if err != nil {
		return Decision{Action: ActionStop, Err: err}, true
	}
	if !ok {
		return Decision{}, false
	}
	var evs events
	s.mu.Lock()
	d := Decision{Action: ActionRestart}
	if r := s.keys[key]; r != nil {
		s.share.Proceeded(key, v, now)
		d = s.proceeded(r, v)
	}
	s.fleetEvents(v, &evs)
	s.mu.Unlock()
	emitAll(s.o.handler, evs.list())
	return d, true
}

// orBackground returns ctx, or context.Background() for a nil ctx: every
// method that takes a context reads nil as no bound, as Run does.
func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
