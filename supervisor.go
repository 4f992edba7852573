package crashloop

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"time"
)

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
	share   layer     // WithSharing; nil: none

	persist persister // WithStore (persist.go)
}

// NewSupervisor returns a Supervisor, or a *ConfigError naming the first
// invalid setting by its path (e.g. "guard.window", "budget.window").
// Options: WithClock, WithEventHandler, WithName (the Key of the fleet
// breaker's events; default "fleet"), WithStore, WithSaveInterval and
// WithSaveErrorHandler for state that survives a restart, and WithSharing
// for state shared with other replicas: it takes every Option.
func NewSupervisor(cfg SupervisorConfig, opts ...Option) (*Supervisor, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o, err := buildOptions(supervisorOptions, opts)
	if err != nil {
		return nil, err
	}
	if o.sharing != nil && o.given&(optStore|optSaveInterval|optSaveErrorHandler) != 0 {
		return nil, &ConfigError{Field: optionNames[bits.TrailingZeros8(uint8(o.given&(optStore|optSaveInterval|optSaveErrorHandler)))],
			Value: "passed with WithSharing", Rule: "left out with WithSharing (a shared layer keeps the state of every replica, a store one process's)"}
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
	if o.sharing != nil {
		l, ok := o.sharing.(layer)
		if !ok {
			return nil, &ConfigError{Field: "WithSharing", Value: fmt.Sprintf("%T", o.sharing), Rule: "a *share.Layer"}
		}
		if err := l.Bind(host{s}); err != nil {
			return nil, err
		}
		s.share = l
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
// Run returns nil after a clean exit, fn's error when a "stop" exit rule
// matched it, and ctx.Err() once ctx ends. When a guard gives up it returns
// the *ParkedError (see WithRefusal), and it returns the same error at once
// for a parked key, unless the key's probe is due: then fn runs as the
// probe. A key that another Run supervises gets an error matching
// ErrAlreadyRunning. The exception: when an EventHandler resumes the key
// from the event that parked it, Run goes on with a full budget.
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
	if s.share != nil {
		if err := s.share.Lookup(ctx, key, s.o.clock.Now()); err != nil {
			return err
		}
	}
	s.claimProbe(ctx, key, s.o.clock.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.keys[key]
	if r != nil && r.park != nil && (r.probing == nil || r.running) {
		return r.park
	}
	if r != nil && r.running {
		return fmt.Errorf("%w: %q", ErrAlreadyRunning, key)
	}
	r = s.record(key, s.o.clock.Now())
	r.running = true
	if s.share != nil {
		s.share.Running(1)
	}
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
		if s.share != nil {
			s.share.Running(-1)
		}
	}
	switch {
	case r.state == StateRunning, !waiting && (r.state == StateBackoff || r.state == StateHeld):
		r.held, r.release, r.cause = 0, 0, ""
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
// With WithSharing the layer resumes the key everywhere first, and may
// refuse (package share tells when). ResumeAt is safe for concurrent use.
func (s *Supervisor) ResumeAt(ctx context.Context, key string, now time.Time) error {
	ctx = orBackground(ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.share != nil {
		return s.share.Resume(ctx, key, now)
	}
	off := s.tb.Off(now)
	s.mu.Lock()
	s.tb.At(off)
	pe, err := s.resumeLocked(key, nil, now)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	// The store hears of the resume even if a handler panics.
	emit(s.o.handler, s.cfg.Budget.resumedEvent(pe, now))
	s.save(now, true)
	return nil
}

// resumeLocked clears the park of key, or of cleared, the park a shared
// layer cleared, and returns the park as this Supervisor knew it. s.mu must
// be held.
func (s *Supervisor) resumeLocked(key string, cleared *ParkedError, now time.Time) (*ParkedError, error) {
	r := s.keys[key]
	if (r == nil || r.park == nil) && cleared == nil {
		return nil, fmt.Errorf("%w: %q", ErrNotParked, key)
	}
	pe := cleared
	if r != nil {
		if r.park != nil {
			pe = r.park // the park as this Supervisor knew it, with its own error values
		}
		s.unpark(r, now)
		if r.state != StateRunning {
			s.setState(r, StateExited, now)
		}
	}
	return pe, nil
}

// Forget drops every trace of key: it leaves Status, Parked and the fleet's
// count of members, parked or not, without an event. Use it for a key whose
// work is gone for good (a finished work item). It returns an error
// matching ErrAlreadyRunning for a key that a Run, Wrap or Process is
// running, and one matching ErrInvalidKey for the empty key; forgetting an
// unknown key does nothing. With WithSharing the layer forgets the key
// everywhere first. Forget is safe for concurrent use.
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
	if s.share != nil {
		return s.share.Forget(ctx, key, s.o.clock.Now())
	}
	s.mu.Lock()
	s.forgetLocked(key)
	s.mu.Unlock()
	s.save(s.o.clock.Now(), true)
	return nil
}

// forgetLocked drops key unless a Run, Wrap or Process runs it. s.mu must
// be held.
func (s *Supervisor) forgetLocked(key string) {
	r := s.keys[key]
	if r == nil || r.running {
		return
	}
	s.setState(r, "", time.Time{}) // no longer a member
	delete(s.keys, key)
	if s.peak >= shrinkLeast && len(s.keys) <= s.peak/4 {
		s.keys, s.peak = shrunk(s.keys), len(s.keys)
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
