package crashloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/crashloopguard/crashloop/internal/ctxdone"
)

// SupervisorConfig configures a Supervisor. Start from
// DefaultSupervisorConfig; the zero value is not valid (its budget window is
// 0). A nil optional guard is off. It marshals to and from JSON with the
// config keys named on each field and durations as strings (see
// UnmarshalJSON).
type SupervisorConfig struct {
	// Budget judges failed starts: runs that fail before they were healthy.
	// Always on. Config key "budget". Default DefaultBudgetConfig().
	Budget BudgetConfig
	// HealthyAfter is how long a run must last to count as a healthy start
	// (a run that calls Ready is healthy at once). A healthy run clears the
	// budget's window, and its failure is a reactive rescue judged by the
	// chain. 0 means only Ready makes a run healthy. Config key
	// "healthy_after". Default 10s; >= 0.
	HealthyAfter time.Duration
	// Backoff is the delay curve between restarts. Config key "backoff".
	// Default (nil): Linear(Budget.InitialBackoff, Budget.MaxBackoff). A
	// curve of this package whose longest waits would let respawns age out
	// of Budget.Window before the budget fills is rejected
	// ("budget.window"); a Backoff of your own is not checked for that.
	Backoff Backoff
	// Chain judges failures after a healthy run (the slow loop). Config key
	// "chain". Default on: 3 within 20m; nil turns it off.
	Chain *ChainConfig
	// Fleet is the fleet-wide breaker over every key. Config key "fleet".
	// Default on: 40 an hour, 0.5 failing, 120s cooldown; nil turns it off.
	Fleet *FleetConfig
	// Guard is a per-key fast breaker that sees every restart of the key,
	// whatever judged it. Like the budget it allows Guard.MaxRestarts
	// restarts in its window and parks the key, with reason
	// "restart_loop_guard", on the next one; so on failed starts alone a
	// guard of N never parks before a budget of N has spent its N respawns.
	// Config key "guard". Default nil (off); the usual setting is
	// DefaultGuardConfig() (3 in 60s).
	Guard *GuardConfig
	// HourlyCap allows this many restarts of a key in a rolling hour and
	// parks the key, with reason "hourly_restart_cap", on the next one.
	// Config key "hourly_cap". Default 0 (off); >= 0; a usual setting is 10.
	HourlyCap int
	// RestartOnCleanExit restarts fn when it returns nil. Config key
	// "restart_on_clean_exit". Default false: a nil return ends
	// supervision. When true, a clean exit after a healthy run is a planned
	// restart, and one before is a failed start.
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

func (c *SupervisorConfig) settings() []setting {
	return []setting{
		{name: "budget", value: nestedValue{c.Budget.settings()}},
		{name: "healthy_after", value: durationValue{&c.HealthyAfter}},
		{name: "backoff", value: backoffValue{c}},
		{name: "chain", value: optionalValue[ChainConfig]{&c.Chain, DefaultChainConfig, (*ChainConfig).settings}},
		{name: "fleet", value: optionalValue[FleetConfig]{&c.Fleet, DefaultFleetConfig, (*FleetConfig).settings}},
		{name: "guard", value: optionalValue[GuardConfig]{&c.Guard, DefaultGuardConfig, (*GuardConfig).settings}},
		{name: "hourly_cap", value: intValue{&c.HourlyCap}},
		{name: "restart_on_clean_exit", value: boolValue{&c.RestartOnCleanExit}},
	}
}

// validate checks the settings in the order the config lists them, then
// that the budget can park with the curve in force.
func (c SupervisorConfig) validate() error {
	if err := checkSettings(c.Budget.settings()); err != nil {
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
	for _, part := range []struct {
		name string
		ss   []setting
	}{{"chain", settingsOrNil(c.Chain, (*ChainConfig).settings)}, {"fleet", settingsOrNil(c.Fleet, (*FleetConfig).settings)},
		{"guard", settingsOrNil(c.Guard, (*GuardConfig).settings)}} {
		if err := checkSettings(part.ss); err != nil {
			return prefixed(part.name, err)
		}
	}
	if c.HourlyCap < 0 {
		return &ConfigError{Field: "hourly_cap", Value: c.HourlyCap, Rule: ">= 0 (0: off)"}
	}
	if sum, ok := worstSum(c.curveOf(), c.Budget.MaxRespawns); ok {
		return checkCanPark("budget.window", c.Budget.Window, c.Budget.MaxRespawns, sum)
	}
	return nil
}

func settingsOrNil[T any](p *T, table func(*T) []setting) []setting {
	if p == nil {
		return nil
	}
	return table(p)
}

// backoffValue is the "backoff" setting: a curve of this package in its
// JSON form, null for the default curve.
type backoffValue struct{ c *SupervisorConfig }

func (v backoffValue) get() any { return v.c.Backoff }
func (v backoffValue) encode() any {
	if v.c.Backoff == nil {
		return nil
	}
	cv, ok := v.c.Backoff.(curve)
	if !ok || cv.spec().Kind == "custom" { // a curve of the caller's, perhaps jittered
		return unmarshalable{fmt.Errorf("crashloop: backoff %T has no JSON form", v.c.Backoff)}
	}
	return cv.spec()
}
func (v backoffValue) decode(raw json.RawMessage, path string) error {
	b, err := decodeBackoff(raw, path, v.c.Budget.InitialBackoff, v.c.Budget.MaxBackoff)
	if err != nil {
		return err
	}
	v.c.Backoff = b
	return nil
}

// unmarshalable is a value whose JSON form is an error.
type unmarshalable struct{ err error }

func (u unmarshalable) MarshalJSON() ([]byte, error) { return nil, u.err }

// MarshalJSON writes the supervisor's configuration as a config file holds
// it: the config keys named on each field, in that order, durations as
// strings, null for a guard that is off and for the default curve. A
// Backoff that is not one of this package's curves has no JSON form:
// MarshalJSON returns an error for it.
func (c SupervisorConfig) MarshalJSON() ([]byte, error) {
	b, err := marshalSettings(c.settings())
	if err != nil {
		var je *json.MarshalerError
		if errors.As(err, &je) {
			return nil, je.Unwrap()
		}
	}
	return b, err
}

// UnmarshalJSON reads a supervisor configuration. Omitted keys keep their
// current values, so unmarshal into DefaultSupervisorConfig() to start from
// the defaults; null turns an optional guard off, an object turns it on
// (its omitted keys keep their current values, or take their defaults if the
// guard was off). "backoff" is {"kind": "linear" (default) or
// "exponential", "initial", "factor" (default 2), "max", "jitter": "none"
// (default), "full", "equal" or "decorrelated" (exponential only)}, whose
// omitted initial and max take the budget's; null means the default curve.
// Unknown keys and bad values are *ConfigError values naming the field path,
// e.g. "guard.window". The result is not validated: NewSupervisor does that.
func (c *SupervisorConfig) UnmarshalJSON(data []byte) error {
	return decodeSettings(data, "", c.settings())
}

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

// Supervisor runs functions under all four guards and restarts them when
// they fail, until they succeed, the context ends, or a guard gives up. Run
// supervises a function in a loop of its own; Decide is the same judgment
// for the restart loops of other tools; Wrap and Process adapt it to a
// func(ctx) error service and to a work queue.
//
// Per key it keeps one record (state, incarnation, restart counts, the
// guards' windows, the park), changed under one lock with the fleet breaker,
// so Status and Snapshot are consistent. Each decision is committed, then
// announced once, with no lock held. Every wait reads the injected Clock, and
// time never runs backwards for a Supervisor.
//
// A Supervisor is safe for concurrent use. The zero value is not usable:
// create one with NewSupervisor.
type Supervisor struct {
	cfg       SupervisorConfig
	o         options
	curve     Backoff
	rules     rules
	fleetName string

	mu      sync.Mutex
	tb      timebase
	keys    map[string]*record
	peak    int       // the most records keys held since it was made
	members int       // records that count as fleet members
	failing int       // members that are parked or need a human
	book    fleetBook // the fleet breaker, when cfg.Fleet is on
	shared  *shared   // the shared ledger (NewSharedSupervisor); nil: none

	persist persister // WithStore (persist.go)
}

// NewSupervisor returns a Supervisor, or a *ConfigError naming the first
// invalid setting by its path (e.g. "guard.window", "budget.window").
// Options: WithClock, WithEventHandler, WithName (the Key of the fleet
// breaker's events; default "fleet"), and WithStore, WithSaveInterval and
// WithSaveErrorHandler for state that survives a restart: it takes every
// Option.
func NewSupervisor(cfg SupervisorConfig, opts ...Option) (*Supervisor, error) {
	return newSupervisor(cfg, supervisorOptions, opts)
}

// newSupervisor is NewSupervisor with the options that c takes.
func newSupervisor(cfg SupervisorConfig, c constructor, opts []Option) (*Supervisor, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o, err := buildOptions(c, opts)
	if err != nil {
		return nil, err
	}
	cfg = cfg.clone() // the caller's pointers stay the caller's
	s := &Supervisor{cfg: cfg, o: o, curve: cfg.curveOf(), rules: rulesOf(cfg), keys: make(map[string]*record),
		fleetName: "fleet"}
	if s.o.name != "" {
		s.fleetName = s.o.name
	}
	s.tb = newTimebase(s.o.clock)
	if err := s.load(); err != nil { // WithStore (persist.go)
		return nil, err
	}
	return s, nil
}

// Config returns a copy of the configuration the Supervisor was created
// with; changing it changes nothing in the Supervisor.
func (s *Supervisor) Config() SupervisorConfig { return s.cfg.clone() }

// RunOption configures one Run, Wrap or Process; each of the three takes
// every RunOption. With none, each Run gets a fresh incarnation (see
// WithIncarnation) and a parked key is refused with its *ParkedError. A nil
// RunOption, the zero value, is ignored. A RunOption is immutable: one may
// be passed to any number of calls, from any goroutine.
type RunOption func(*runOptions)

type runOptions struct {
	incarnation string
	refusal     error
}

// WithIncarnation sets the incarnation of the Run: the identity of what
// lives under the key now. Without it every Run gets a fresh incarnation,
// "KEY#N" with N counting the Runs of the key, shared by all restarts
// inside that Run; the calls of one Wrap or Process keep the key's
// incarnation. A different incarnation on a reused key ends the old chain.
func WithIncarnation(id string) RunOption {
	return func(o *runOptions) { o.incarnation = id }
}

// WithRefusal makes Run, Wrap and Process return errors.Join(refusal, pe)
// instead of the *ParkedError pe when they give up on a key or refuse a
// parked one, so that both errors.Is(err, refusal) and errors.As(err,
// **ParkedError) hold. A suture service passes suture.ErrDoNotRestart, so
// that its supervisor stops restarting it. The default, also used when
// refusal is nil, is the *ParkedError alone.
func WithRefusal(refusal error) RunOption {
	return func(o *runOptions) { o.refusal = refusal }
}

func buildRunOptions(opts []RunOption) runOptions {
	var ro runOptions
	for _, o := range opts {
		if o != nil {
			o(&ro)
		}
	}
	return ro
}

// refuse returns the error for a key that is parked (pe).
func (ro runOptions) refuse(err error) error {
	var pe *ParkedError
	if ro.refusal != nil && errors.As(err, &pe) {
		return errors.Join(ro.refusal, err)
	}
	return err
}

// Run runs fn under key and restarts it when it fails, until it returns nil
// (unless RestartOnCleanExit), ctx ends, or a guard gives up. Each end of a
// run is judged as Decide judges it.
//
// Run returns nil after a clean exit and ctx.Err() once ctx ends. When a
// guard gives up it returns the *ParkedError (see WithRefusal), and it
// returns the same error at once for a parked key. A key that another Run
// supervises gets an error matching ErrAlreadyRunning. The exception: when an
// EventHandler resumes the key from the event that parked it, Run goes on
// with a full budget. docs/supervisor.md lists every return.
func (s *Supervisor) Run(ctx context.Context, key string, fn func(ctx context.Context) error, opts ...RunOption) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if fn == nil {
		return fmt.Errorf("crashloop: Run of %q: fn is nil", key)
	}
	ro := buildRunOptions(opts)
	if err := s.begin(ctx, key, ro.incarnation, true); err != nil {
		return ro.refuse(err)
	}
	defer s.end(key, false)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		d, err := s.runOnce(ctx, key, fn)
		if err != nil {
			return err
		}
		done, err := s.follow(ctx, key, d)
		if err != nil || done {
			return ro.refuse(err)
		}
	}
}

// follow carries out d in a loop that runs key itself: it sleeps a
// restart's backoff, and waits out a hold until the restart is released.
// It returns done after a clean exit, an error that ends the loop, or
// neither to start the next run.
func (s *Supervisor) follow(ctx context.Context, key string, d Decision) (done bool, err error) {
	for {
		switch d.Action {
		case ActionRestart:
			return false, sleep(ctx, s.o.clock, d.Wait)
		case ActionHold:
			if err := sleep(ctx, s.o.clock, d.Wait); err != nil {
				return false, err
			}
			d = s.ProceedAt(ctx, key, s.o.clock.Now())
		default:
			if s.resumedSince(key, d.Err) {
				return false, nil // a handler resumed the key: the Resume wins
			}
			return d.Err == nil, d.Err
		}
	}
}

// sleep waits d on c, or until ctx ends.
func sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-c.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// begin marks key as running; a fresh run (Run) gets a new incarnation
// unless one is given. A parked key is refused before anything changes: its
// incarnation and state stay as the operator last saw them. So is every key
// when ctx ends while begin asks the ledger, with ctx's error.
func (s *Supervisor) begin(ctx context.Context, key, incarnation string, fresh bool) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if pe, err := s.lookupShared(ctx, key, s.o.clock.Now()); err != nil {
		return err
	} else if pe != nil {
		return pe
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.keys[key]
	if r != nil && r.park != nil {
		return r.park
	}
	if r != nil && r.running {
		return fmt.Errorf("%w: %q", ErrAlreadyRunning, key)
	}
	r = s.record(key, s.o.clock.Now())
	r.running = true
	s.runs()
	switch {
	case incarnation != "":
		r.incarnation = incarnation
	case fresh || r.incarnation == "":
		r.newIncarnation(key)
	}
	return nil
}

// end marks key as no longer running. A key whose loop goes on outside
// (waiting, a Wrap between two calls or a Process item in its queue) keeps
// its backoff or hold; otherwise nothing runs it any more and it exits.
func (s *Supervisor) end(key string, waiting bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.keys[key]
	if r == nil {
		return
	}
	if r.running {
		r.running = false
		s.ran() // the rejoin (rejoin.go) ends with the last run
	}
	switch {
	case r.state == StateRunning, !waiting && (r.state == StateBackoff || r.state == StateHeld):
		r.held, r.release = 0, 0
		s.setState(r, StateExited, s.o.clock.Now())
	}
}

// resumedSince reports whether err parked key and the key has been resumed
// since.
func (s *Supervisor) resumedSince(key string, err error) bool {
	var pe *ParkedError
	if !errors.As(err, &pe) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.keys[key]
	return r != nil && r.park == nil
}

// Resume is shorthand for ResumeAt(ctx, key, clock.Now()).
func (s *Supervisor) Resume(ctx context.Context, key string) error {
	return s.ResumeAt(ctx, key, s.o.clock.Now())
}

// ResumeAt is the operator's recovery path for a parked or needs_human key.
// It clears the park and everything the key's guards counted, so the next
// run starts with a full budget and a fresh chain, and announces
// EventResumed. It returns an error matching ErrNotParked for a key that is
// not parked.
//
// With a shared Ledger it resumes the park this Supervisor knows. If the key
// was parked again or resumed since, it changes nothing and returns the
// ledger's *ChangedError. If ctx ends first, it returns ctx's error and the
// key stays parked here. ResumeAt is safe for concurrent use.
func (s *Supervisor) ResumeAt(ctx context.Context, key string, now time.Time) error {
	ctx = orBackground(ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	var cleared *ParkedError
	var resumed int64 // the resume's version, with a shared ledger
	if s.shared != nil {
		if use, err := s.useShared(ctx, now); err != nil {
			return err
		} else if !use {
			return s.unavailable("resume", key)
		}
		version, err := s.parkVersion(ctx, key, now)
		if err != nil {
			return err
		}
		pe, v, err := s.shared.l.Resume(ctx, key, version, now)
		var ce *ChangedError
		switch {
		case errors.As(err, &ce):
			// resumed, or parked again, since the park this Supervisor saw:
			// the resume names that park and changes nothing else
			s.learn(LedgerChange{Key: key, Version: ce.Version, Park: ce.Park})
			return err
		case err != nil && ctxdone.Err(ctx) != nil:
			return ctxdone.Err(ctx) // the caller's cancel, not an outage
		case err != nil:
			s.lost(err, now)
			return s.unavailable("resume", key)
		}
		cleared, resumed = pe, v
	}
	off := s.tb.off(now)
	s.mu.Lock()
	s.tb.at(off)
	r := s.keys[key]
	if r != nil && s.shared != nil {
		if r.ver > resumed {
			// parked again since the resume, as this Supervisor learnt
			// first: the reply never moves the mirror back
			s.mu.Unlock()
			s.claim(ctx, resumed, []Event{s.cfg.Budget.resumedEvent(cleared, now)})
			return nil
		}
		r.ver = resumed
	}
	if (r == nil || r.park == nil) && cleared == nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrNotParked, key)
	}
	pe := cleared
	if r != nil {
		if r.park != nil {
			pe = r.park // the park as this Supervisor knew it, with its own error values
		}
		r.resume()
		if r.state != StateRunning {
			s.setState(r, StateExited, now)
		}
	}
	if s.shared != nil {
		delete(s.shared.alone, key)
	}
	s.mu.Unlock()
	if s.shared != nil {
		// announced by whoever claims the resume first: this Supervisor at once
		s.claim(ctx, resumed, []Event{s.cfg.Budget.resumedEvent(pe, now)})
		return nil
	}
	// The store hears of the resume even if a handler panics.
	emit(s.o.handler, s.cfg.Budget.resumedEvent(pe, now))
	s.save(now, true)
	return nil
}

// Forget drops every trace of key: it leaves Status, Parked and the fleet's
// count of members, parked or not, without an event. Use it for a key whose
// work is gone for good (a finished work item). It returns an error
// matching ErrAlreadyRunning for a key that a Run, Wrap or Process is
// running, and one matching ErrInvalidKey for the empty key; forgetting an
// unknown key does nothing.
//
// ctx bounds the wait on a shared Ledger together with the ledger's own
// timeout. If ctx is already done, or ends while Forget waits on the
// ledger, Forget returns at once with ctx's error and keeps the key here; a
// caller's cancel is not a failure of the ledger. Forget is safe for
// concurrent use.
func (s *Supervisor) Forget(ctx context.Context, key string) error {
	ctx = orBackground(ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkKey(key); err != nil {
		return err
	}
	s.mu.Lock()
	r := s.keys[key]
	if r != nil && r.running {
		s.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrAlreadyRunning, key)
	}
	s.mu.Unlock()
	if s.shared != nil {
		now := s.o.clock.Now()
		if use, err := s.useShared(ctx, now); err != nil {
			return err
		} else if !use {
			return s.unavailable("forget", key)
		}
		forgot, err := s.forgetShared(ctx, key, now)
		if err != nil {
			return err
		}
		s.mu.Lock()
		if r := s.keys[key]; r != nil && r.ver > forgot {
			// parked again since the forget, as this Supervisor learnt
			// first: the reply never moves the mirror back
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	r = s.keys[key]
	if r == nil || r.running {
		s.mu.Unlock()
		return nil
	}
	if s.shared != nil {
		delete(s.shared.alone, key)
	}
	s.setState(r, "", time.Time{}) // no longer a member
	delete(s.keys, key)
	if s.peak >= shrinkLeast && len(s.keys) <= s.peak/4 {
		s.keys, s.peak = shrunk(s.keys), len(s.keys)
	}
	s.mu.Unlock()
	s.save(s.o.clock.Now(), true)
	return nil
}

// parkVersion returns the version of the park of key that a Resume names:
// the one this Supervisor mirrors, or else the one the shared ledger
// reports (an error matching ErrNotParked when there is none).
func (s *Supervisor) parkVersion(ctx context.Context, key string, now time.Time) (int64, error) {
	s.mu.Lock()
	r := s.keys[key]
	if r != nil && r.park != nil && s.shared.alone[key] == nil {
		v := r.park.Version
		s.mu.Unlock()
		return v, nil
	}
	s.mu.Unlock()
	ch, err := s.shared.l.Lookup(ctx, key)
	switch {
	case err != nil && ctxdone.Err(ctx) != nil:
		return 0, ctxdone.Err(ctx)
	case err != nil:
		s.lost(err, now)
		return 0, s.unavailable("resume", key)
	}
	s.learn(ch)
	if ch.Park == nil {
		return 0, fmt.Errorf("%w: %q", ErrNotParked, key)
	}
	return ch.Park.Version, nil
}

// forgetShared forgets key on the shared ledger, naming the version this
// Supervisor knows of it, and returns the forget's version. A key that
// changed since but is not parked is forgotten at its current version (it
// drops nothing a Forget would not); a park this Supervisor had not seen
// stays, and Forget returns a *ChangedError.
func (s *Supervisor) forgetShared(ctx context.Context, key string, now time.Time) (int64, error) {
	s.mu.Lock()
	var version int64
	if r := s.keys[key]; r != nil {
		version = r.ver
	}
	s.mu.Unlock()
	for try := 0; ; try++ {
		forgot, err := s.shared.l.Forget(ctx, key, version)
		var ce *ChangedError
		switch {
		case err == nil:
			return forgot, nil
		case errors.As(err, &ce):
			s.learn(LedgerChange{Key: ce.Key, Version: ce.Version, Park: ce.Park})
			if ce.Park != nil || try > 0 {
				return 0, err
			}
			version = ce.Version
		case ctxdone.Err(ctx) != nil:
			return 0, ctxdone.Err(ctx) // the caller's cancel, not an outage
		default:
			s.lost(err, now)
			return 0, s.unavailable("forget", key)
		}
	}
}

// Parked returns the parked and needs_human keys, sorted.
func (s *Supervisor) Parked() []string {
	var out []string
	s.mu.Lock()
	for key, r := range s.keys {
		if r.park != nil {
			out = append(out, key)
		}
	}
	s.mu.Unlock()
	slices.Sort(out)
	return out
}
