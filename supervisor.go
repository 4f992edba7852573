package crashloop

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// Park reasons of a Supervisor, as ParkedError.Reason and KeyStatus.Reason.
const (
	// ReasonPermanent: fn returned an error marked with Permanent.
	ReasonPermanent = "permanent_error"
	// ReasonNeedsHuman: the chain of reactive rescues reached its limit.
	ReasonNeedsHuman = "needs_human"
	// ReasonRestartLoopGuard: the per-key fast guard tripped.
	ReasonRestartLoopGuard = "restart_loop_guard"
	// ReasonHourlyCap: the per-key hourly cap tripped.
	ReasonHourlyCap = "hourly_restart_cap"
)

// ErrAlreadyRunning is returned by Run for a key that another Run is
// already supervising.
var ErrAlreadyRunning = errors.New("crashloop: key is already running")

// SupervisorConfig configures a Supervisor. Start from
// DefaultSupervisorConfig; the zero value is not valid (its budget window is
// 0). A nil optional guard is off. It marshals to and from JSON with
// snake_case keys and durations as strings (see UnmarshalJSON).
type SupervisorConfig struct {
	// Budget judges failed starts: runs that fail before they were healthy.
	// Always on. Default DefaultBudgetConfig().
	Budget BudgetConfig
	// HealthyAfter is how long a run must last to count as a healthy start
	// (a run that calls Ready is healthy at once). A healthy run clears the
	// budget's window, and its failure is a reactive rescue judged by the
	// chain. 0 means only Ready makes a run healthy. Default 10s; >= 0.
	HealthyAfter time.Duration
	// Backoff is the delay curve between restarts. Default (nil):
	// Linear(Budget.InitialBackoff, Budget.MaxBackoff). A curve of this
	// package whose longest waits would let respawns age out of
	// Budget.Window before the budget fills is rejected ("budget.window");
	// a Backoff of your own is not checked for that.
	Backoff Backoff
	// Chain judges failures after a healthy run (the slow loop). Default
	// on: 3 within 20m; nil turns it off.
	Chain *ChainConfig
	// Fleet is the fleet-wide breaker over every key. Default on: 40 an
	// hour, 0.5 failing, 120s cooldown; nil turns it off.
	Fleet *FleetConfig
	// Guard is a per-key fast breaker (restart_loop_guard) that sees every
	// restart of the key and parks it when tripped. Default nil (off); the
	// usual setting is DefaultGuardConfig() (3 in 60s).
	Guard *GuardConfig
	// HourlyCap parks a key that restarts this many times in a rolling hour
	// (max_restarts_per_hour). Default 0 (off); >= 0; a usual setting is 10.
	HourlyCap int
	// RestartOnCleanExit restarts fn when it returns nil. Default false: a
	// nil return ends supervision. When true, a clean exit after a healthy
	// run is a planned restart, and one before is a failed start.
	RestartOnCleanExit bool
}

// DefaultSupervisorConfig returns the defaults: budget 3 respawns in 60s
// with backoff 500ms linear to 5s, HealthyAfter 10s, chain 3 within 20m,
// fleet 40 an hour / 0.5 / 120s, fast guard and hourly cap off, a clean
// exit ends supervision.
func DefaultSupervisorConfig() SupervisorConfig {
	chain, fleet := DefaultChainConfig(), DefaultFleetConfig()
	return SupervisorConfig{Budget: DefaultBudgetConfig(), HealthyAfter: 10 * time.Second, Chain: &chain, Fleet: &fleet}
}

// curveOf returns the effective restart curve.
func (c SupervisorConfig) curveOf() Backoff {
	if c.Backoff != nil {
		return c.Backoff
	}
	return Linear(c.Budget.InitialBackoff, c.Budget.MaxBackoff)
}

func (c SupervisorConfig) validate() error {
	if err := c.Budget.validateFields(); err != nil {
		return prefixed("budget", err)
	}
	if c.HealthyAfter < 0 {
		return &ConfigError{Field: "healthy_after", Value: c.HealthyAfter, Rule: ">= 0"}
	}
	if cv, ok := c.Backoff.(curve); ok {
		if err := cv.validate(); err != nil {
			return prefixed("backoff", err)
		}
	}
	if c.Chain != nil {
		if err := c.Chain.validate(); err != nil {
			return prefixed("chain", err)
		}
	}
	if c.Fleet != nil {
		if err := c.Fleet.validate(); err != nil {
			return prefixed("fleet", err)
		}
	}
	if c.Guard != nil {
		if err := c.Guard.validate(); err != nil {
			return prefixed("guard", err)
		}
	}
	if c.HourlyCap < 0 {
		return &ConfigError{Field: "hourly_cap", Value: c.HourlyCap, Rule: ">= 0 (0: off)"}
	}
	if sum := worstSum(c.curveOf(), c.Budget.MaxRespawns); sum != nil {
		return checkCanPark("budget.window", c.Budget.Window, c.Budget.MaxRespawns, sum)
	}
	return nil
}

// Supervisor runs functions under all four guards and restarts them when
// they fail, until they succeed, the context ends, or a guard gives up.
//
// Per key it composes a RespawnBudget (failed starts), a ChainDetector
// (failures after healthy runs), an optional RestartLoopGuard and hourly cap
// (every restart), and one FleetSupervisionPolicy over all keys. Each outcome
// is announced once, by the primitive that decided it, through the
// EventHandler of WithEventHandler. Every wait reads the injected clock, and
// no goroutine outlives Run, so code using a Supervisor can be tested with a
// *clock.Mock or inside a testing/synctest bubble.
//
// A Supervisor is safe for concurrent use; run each key from one goroutine
// at a time. The zero value is not usable: create one with NewSupervisor.
type Supervisor struct {
	cfg    SupervisorConfig
	o      options
	curve  Backoff
	budget *RespawnBudget
	chain  *ChainDetector          // nil: off
	fleet  *FleetSupervisionPolicy // nil: off

	mu   sync.Mutex
	keys map[string]*keyRun
	seq  uint64

	persist persister // WithStore (store.go)
}

// keyRun is the Supervisor's own state of one key; s.mu guards it.
type keyRun struct {
	running     bool
	state       KeyState
	incarnation string
	lastErr     error
	since       time.Time
	guard       *RestartLoopGuard // nil: off
	hourly      *RestartLoopGuard // nil: off
	deferring   int               // > 0: the key's events wait in pending (see relay)
	pending     []Event
}

// NewSupervisor returns a Supervisor, or a *ConfigError naming the first
// invalid setting by its path (e.g. "guard.window", "budget.window").
// Options: WithClock, WithEventHandler, WithName (the Key of the fleet
// breaker's events; default "fleet"), and WithStore, WithSaveInterval and
// WithSaveErrorHandler for state that survives a restart (see store.go).
func NewSupervisor(cfg SupervisorConfig, opts ...Option) (*Supervisor, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.clone() // the caller's pointers stay the caller's
	s := &Supervisor{cfg: cfg, o: buildOptions(opts), curve: cfg.curveOf(), keys: make(map[string]*keyRun)}
	inner := []Option{WithClock(s.o.clock), WithEventHandler(EventHandlerFunc(s.relay))}
	s.budget = &RespawnBudget{cfg: cfg.Budget, o: buildOptions(inner), curve: cfg.Backoff, steps: cfg.Budget.steps()}
	s.budget.tl = newTimeline(s.o.clock)
	s.budget.keys.init()
	if cfg.Chain != nil {
		s.chain, _ = NewChainDetector(*cfg.Chain, inner...)
	}
	if cfg.Fleet != nil {
		name := s.o.name
		if name == "" {
			name = "fleet"
		}
		s.fleet, _ = NewFleetSupervisionPolicy(*cfg.Fleet, WithClock(s.o.clock), WithEventHandler(s.o.handler), WithName(name))
	}
	if err := s.load(); err != nil { // WithStore (store.go)
		return nil, err
	}
	return s, nil
}

// Config returns a copy of the configuration the Supervisor was created
// with; changing it changes nothing in the Supervisor.
func (s *Supervisor) Config() SupervisorConfig { return s.cfg.clone() }

// clone returns c with its optional guards copied, so that no pointer is
// shared with the caller.
func (c SupervisorConfig) clone() SupervisorConfig {
	c.Chain, c.Fleet, c.Guard = clonePtr(c.Chain), clonePtr(c.Fleet), clonePtr(c.Guard)
	return c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// RunOption configures one Run. With none, a Run gets a fresh incarnation
// (see WithIncarnation). A nil RunOption is ignored.
type RunOption func(*runOptions)

type runOptions struct{ incarnation string }

// WithIncarnation sets the incarnation of the Run: the identity of what
// lives under the key now. Without it every Run gets a fresh incarnation,
// shared by all restarts inside that Run. A different incarnation on a
// reused key ends the old chain.
func WithIncarnation(id string) RunOption {
	return func(o *runOptions) { o.incarnation = id }
}

// Run runs fn under key and restarts it when it fails, until it returns nil
// (unless RestartOnCleanExit), the context ends, or a guard gives up.
//
// A failure before the run was healthy is a failed start: the budget waits
// its backoff or parks the key (reason "respawn_budget_exhausted"). A failure
// after a healthy run is a reactive rescue: the chain lets it restart after
// the curve's first step, or escalates (reason "needs_human", errors.Is
// ErrNeedsHuman). fn may return Restart(err) for a planned restart (at once,
// no budget, ends the chain) or Permanent(err) to park at once (reason
// "permanent_error"). A panic in fn is a failure carrying a *PanicError.
// While the fleet breaker is tripped, restarts wait without being counted.
//
// Run returns nil after a clean exit; ctx.Err() once ctx ends (at once in a
// backoff or a hold, as soon as fn returns in a run, so fn should honour its
// context); a *ParkedError (errors.Is ErrParked, carrying the reason and the
// last error) when a guard gave up, and the same error at once for a key
// that is parked; an error matching ErrAlreadyRunning for a key that another
// Run supervises; and an error for a nil fn.
func (s *Supervisor) Run(ctx context.Context, key string, fn func(ctx context.Context) error, opts ...RunOption) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if fn == nil {
		return fmt.Errorf("crashloop: Run of %q: fn is nil", key)
	}
	var ro runOptions
	for _, o := range opts {
		if o != nil {
			o(&ro)
		}
	}
	// A parked key is refused before anything changes: its incarnation and
	// state stay as the operator last saw them.
	if err := s.budget.Spawn(key); err != nil {
		return err
	}
	kr, err := s.begin(key, ro)
	if err != nil {
		return err
	}
	defer s.end(key)
	if err := s.budget.Spawn(key); err != nil { // parked by a Run that just ended
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		start := s.o.clock.Now()
		s.setState(key, StateRunning, nil, start)
		rs := &runState{s: s, key: key}
		err := runOnce(ctx, fn, rs)
		rs.done.Store(true)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		now := s.o.clock.Now()
		healthy := rs.ready.Load() || (s.cfg.HealthyAfter > 0 && now.Sub(start) >= s.cfg.HealthyAfter)
		if healthy {
			s.budget.settle(key)
		}
		s.deferEvents(key)
		delay, stop, err := s.decide(key, kr, err, healthy, now)
		if !stop && delay > 0 {
			s.setState(key, StateBackoff, nil, now)
		}
		s.flushEvents(key) // the outcome's events, now that the state shows it
		if stop {
			return err
		}
		if delay > 0 {
			if err := sleep(ctx, s.o.clock, delay); err != nil {
				return err
			}
		}
		if err := s.hold(ctx, key); err != nil {
			return err
		}
	}
}

// decide judges the end of one run and returns the wait before the next, or
// stop with the error Run returns.
func (s *Supervisor) decide(key string, kr *keyRun, err error, healthy bool, now time.Time) (time.Duration, bool, error) {
	if err == nil {
		if !s.cfg.RestartOnCleanExit {
			if kr.guard != nil {
				kr.guard.Reset() // a clean run clears the fast guard
			}
			s.setState(key, StateExited, nil, now)
			return 0, true, nil
		}
		if healthy {
			err = Restart(nil)
		} else {
			err = errCleanExitEarly
		}
	}
	s.setState(key, "", err, now)
	var perm *permanentError
	if errors.As(err, &perm) {
		return 0, true, s.park(key, ReasonPermanent, err, true, now)
	}
	// The per-key guards see every restart, planned ones included, and veto
	// it before the budget or the chain spends anything on it.
	if kr.guard != nil && kr.guard.RecordAt(now) {
		return 0, true, s.park(key, ReasonRestartLoopGuard, err, false, now)
	}
	if kr.hourly != nil && kr.hourly.RecordAt(now) {
		return 0, true, s.park(key, ReasonHourlyCap, err, false, now)
	}
	var planned *restartError
	switch {
	case errors.As(err, &planned):
		if s.chain != nil {
			s.chain.RescueAt(key, kr.incarnation, false, now) // ends the chain
		}
		return 0, false, nil
	case healthy:
		if s.chain != nil {
			if n, cerr := s.chain.RescueAt(key, kr.incarnation, true, now); cerr != nil {
				nh := &needsHumanError{key: key, incarnation: kr.incarnation, chain: n, cause: err}
				return 0, true, s.park(key, ReasonNeedsHuman, nh, false, now)
			}
		}
		return s.curve.Delay(1, 0), false, nil
	default:
		d, perr := s.budget.FailedAt(key, err, now)
		var pe *ParkedError
		if errors.As(perr, &pe) {
			s.parked(key, pe, now)
			return 0, true, pe
		}
		return d, false, nil
	}
}

// errCleanExitEarly is the failure of a run that returned nil before it was
// healthy while RestartOnCleanExit is set: a clean-exit loop is a crash loop.
var errCleanExitEarly = errors.New("crashloop: exited cleanly before it was healthy")

// park parks key in the budget (the one registry of parked keys) and
// returns the error Run returns.
func (s *Supervisor) park(key, reason string, cause error, announce bool, now time.Time) error {
	pe := s.budget.parkAt(key, reason, cause, announce, now)
	s.parked(key, pe, now)
	return pe
}

// parked records a park in the key's state and tells the fleet.
func (s *Supervisor) parked(key string, pe *ParkedError, now time.Time) {
	st := StateParked
	if pe.Reason == ReasonNeedsHuman {
		st = StateNeedsHuman
	}
	s.setState(key, st, pe.LastError, now)
	// The fleet and the store hear of the park even if a handler panics.
	defer func() {
		s.noteFleet(now)
		s.save(now, true) // WithStore (store.go): the park and the fleet state it caused
	}()
	s.emitPending(key) // the park, now that Status and Parked show it
}

// relay passes on an event of the budget, the chain or a per-key guard. While
// the Supervisor is still committing the outcome of the key (deferEvents), it
// holds the event until flushEvents or emitPending, so that a handler calling
// back (Status, Parked) sees the state the event announces.
func (s *Supervisor) relay(ev Event) {
	s.mu.Lock()
	if kr := s.keys[ev.Key]; kr != nil && kr.deferring > 0 {
		kr.pending = append(kr.pending, ev)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	emit(s.o.handler, ev)
}

// deferEvents starts holding the events of key; flushEvents ends it.
func (s *Supervisor) deferEvents(key string) {
	s.mu.Lock()
	if kr := s.keys[key]; kr != nil {
		kr.deferring++
	}
	s.mu.Unlock()
}

// flushEvents stops holding the events of key and delivers the held ones.
func (s *Supervisor) flushEvents(key string) {
	s.mu.Lock()
	if kr := s.keys[key]; kr != nil && kr.deferring > 0 {
		kr.deferring--
	}
	s.mu.Unlock()
	s.emitPending(key)
}

// emitPending delivers the held events of key, with no lock held.
func (s *Supervisor) emitPending(key string) {
	s.mu.Lock()
	var evs []Event
	if kr := s.keys[key]; kr != nil {
		evs, kr.pending = kr.pending, nil
	}
	s.mu.Unlock()
	for _, ev := range evs {
		emit(s.o.handler, ev)
	}
}

// noteFleet tells the fleet breaker how many keys are failing.
func (s *Supervisor) noteFleet(now time.Time) {
	if s.fleet == nil {
		return
	}
	s.mu.Lock()
	failing, total := 0, len(s.keys)
	for _, kr := range s.keys {
		if kr.state == StateParked || kr.state == StateNeedsHuman {
			failing++
		}
	}
	s.mu.Unlock()
	s.fleet.NoteFleetStateAt(failing, total, now)
}

// hold waits while the fleet breaker is tripped, then counts the restart.
func (s *Supervisor) hold(ctx context.Context, key string) error {
	if s.fleet == nil {
		return nil
	}
	counted := false
	for {
		now := s.o.clock.Now()
		if !s.fleet.TrippedAt(now) {
			if counted || !s.fleet.NoteRestartAt(now) {
				return nil
			}
			// This restart tripped the breaker: it waits like the others,
			// and after the re-arm it goes without being counted again, so
			// held restarts cannot trip the breaker anew on their own (with
			// RestartsPerHour 1 that would hold the key forever).
			counted = true
		}
		s.setState(key, StateHeld, nil, now)
		wait := s.fleet.Config().Cooldown
		if at := s.fleet.StatusAt(now).RearmAt; at != nil && at.After(now) {
			wait = at.Sub(now)
		}
		if err := sleep(ctx, s.o.clock, max(wait, time.Nanosecond)); err != nil {
			return err
		}
	}
}

// sleep waits d on c, or until ctx ends.
func sleep(ctx context.Context, c Clock, d time.Duration) error {
	select {
	case <-c.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// begin marks key as running and sets its incarnation.
func (s *Supervisor) begin(key string, ro runOptions) (*keyRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kr := s.keys[key]
	if kr == nil {
		kr = s.newKeyRun(key, StateExited, s.o.clock.Now())
		s.keys[key] = kr
	}
	if kr.running {
		return nil, fmt.Errorf("%w: %q", ErrAlreadyRunning, key)
	}
	kr.running = true
	s.seq++
	kr.incarnation = ro.incarnation
	if kr.incarnation == "" {
		kr.incarnation = fmt.Sprintf("%s#%d", key, s.seq)
	}
	return kr, nil
}

// newKeyRun returns the state of a key the Supervisor has not seen, with its
// per-key guards (their events go through relay). Run and Restore both
// make keys here, so a restored key is built like a new one.
func (s *Supervisor) newKeyRun(key string, st KeyState, since time.Time) *keyRun {
	kr := &keyRun{state: st, since: since}
	inner := []Option{WithClock(s.o.clock), WithEventHandler(EventHandlerFunc(s.relay)), WithName(key)}
	if g := s.cfg.Guard; g != nil {
		kr.guard, _ = NewRestartLoopGuard(g.MaxRestarts, g.Window, inner...)
	}
	if s.cfg.HourlyCap > 0 {
		kr.hourly, _ = NewRestartLoopGuard(s.cfg.HourlyCap, time.Hour, inner...)
	}
	return kr
}

// end marks key as no longer running.
func (s *Supervisor) end(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kr := s.keys[key]
	kr.running = false
	switch kr.state {
	case StateRunning, StateBackoff, StateHeld:
		kr.state, kr.since = StateExited, s.o.clock.Now()
	}
}

// setState records a state change of key; an empty st keeps the state, a
// nil err keeps the last error.
func (s *Supervisor) setState(key string, st KeyState, err error, now time.Time) {
	s.mu.Lock()
	if kr := s.keys[key]; kr != nil {
		if st != "" && st != kr.state {
			kr.state, kr.since = st, now
		}
		if err != nil {
			kr.lastErr = err
		}
	}
	s.mu.Unlock()
	s.save(now, false) // WithSaveInterval (store.go)
}

// Resume is shorthand for ResumeAt(key, clock.Now()).
func (s *Supervisor) Resume(key string) error { return s.ResumeAt(key, s.o.clock.Now()) }

// ResumeAt is the operator's recovery path for a parked or needs_human key:
// it clears the park, the chain and the per-key guards, so the next Run
// starts with a full budget and a fresh chain, and publishes EventResumed.
// It returns an error matching ErrNotParked if key is neither.
func (s *Supervisor) ResumeAt(key string, now time.Time) error {
	if !s.budget.IsParked(key) {
		return fmt.Errorf("%w: %q", ErrNotParked, key)
	}
	// Clear everything the next Run consults before the budget lets it
	// start: a Run that began between the unpark and the chain's Clear
	// would find the old escalation and park again, unannounced.
	if s.chain != nil {
		s.chain.Clear(key)
	}
	s.mu.Lock()
	if kr := s.keys[key]; kr != nil {
		if kr.guard != nil {
			kr.guard.Reset()
		}
		if kr.hourly != nil {
			kr.hourly.Reset()
		}
		if kr.state == StateParked || kr.state == StateNeedsHuman {
			kr.state, kr.since = StateExited, now
		}
	}
	s.mu.Unlock()
	s.deferEvents(key)
	if err := s.budget.ResumeAt(key, now); err != nil { // resumed meanwhile by another caller
		s.flushEvents(key)
		return err
	}
	// The fleet and the store hear of the resume even if a handler panics.
	defer func() {
		s.noteFleet(now)
		s.save(now, true) // WithStore (store.go)
	}()
	s.flushEvents(key)
	return nil
}

// Parked returns the parked and needs_human keys, sorted.
func (s *Supervisor) Parked() []string { return s.budget.Parked() }

// runState is what fn's context carries: the readiness signal.
type runState struct {
	s     *Supervisor
	key   string
	ready atomicBool
	done  atomicBool // the run has ended: a late Ready changes nothing
}

type runStateKey struct{}

// Ready tells the Supervisor running fn that this run is up and healthy
// (like sd_notify READY=1): the budget's window is cleared at once, and a
// later failure is a reactive rescue rather than a failed start. Call it
// with the context fn received; with any other context, or after that run
// has ended (a goroutine fn left behind), it does nothing.
func Ready(ctx context.Context) {
	if ctx == nil {
		return
	}
	if rs, ok := ctx.Value(runStateKey{}).(*runState); ok && !rs.done.Load() && rs.ready.CompareAndSwap(false, true) {
		rs.s.budget.settle(rs.key)
	}
}

// runOnce calls fn, turning a panic into a *PanicError.
func runOnce(ctx context.Context, fn func(context.Context) error, rs *runState) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return fn(context.WithValue(ctx, runStateKey{}, rs))
}
