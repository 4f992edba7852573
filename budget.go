package crashloop

import (
	"fmt"
	"math"
	"math/big"
	"time"
)

// ReasonBudgetExhausted is the park reason of a session whose respawn budget
// ran out.
const ReasonBudgetExhausted = "respawn_budget_exhausted"

// BudgetConfig configures a RespawnBudget. The zero value is not valid (its
// Window is 0); start from DefaultBudgetConfig.
type BudgetConfig struct {
	// MaxRespawns is how many respawns the rolling window may hold; the
	// failure after that parks the session. Default 3; >= 0 (0: the first
	// failure parks).
	MaxRespawns int `json:"max_respawns"`
	// Window is the length of the rolling window. A respawn exactly Window
	// old still counts. Default 60s; > 0, and at least the sum of the first
	// MaxRespawns backoffs (else respawns age out before the budget fills
	// and a crash loop never parks).
	Window time.Duration `json:"window"`
	// InitialBackoff is the first backoff; the Nth respawn in the window
	// waits N*InitialBackoff. Default 500ms; >= 0.
	InitialBackoff time.Duration `json:"initial_backoff"`
	// MaxBackoff caps the backoff. Default 5s; >= InitialBackoff.
	MaxBackoff time.Duration `json:"max_backoff"`
}

// DefaultBudgetConfig returns the defaults: 3 respawns in a rolling 60s
// window, backoff 500ms, 1s, 1.5s ... capped at 5s.
func DefaultBudgetConfig() BudgetConfig {
	return BudgetConfig{MaxRespawns: 3, Window: 60 * time.Second, InitialBackoff: 500 * time.Millisecond, MaxBackoff: 5 * time.Second}
}

func (c BudgetConfig) validate() error {
	if err := c.validateFields(); err != nil {
		return err
	}
	return checkCanPark("window", c.Window, c.MaxRespawns, linearSum(c.InitialBackoff, c.MaxBackoff, c.MaxRespawns))
}

// validateFields checks each setting on its own, without the whole-budget
// rule that it must be able to park.
func (c BudgetConfig) validateFields() error {
	switch {
	case c.MaxRespawns < 0:
		return &ConfigError{Field: "max_respawns", Value: c.MaxRespawns, Rule: ">= 0"}
	case c.Window <= 0:
		return &ConfigError{Field: "window", Value: c.Window, Rule: "> 0"}
	case c.InitialBackoff < 0:
		return &ConfigError{Field: "initial_backoff", Value: c.InitialBackoff, Rule: ">= 0"}
	case c.MaxBackoff < c.InitialBackoff:
		return &ConfigError{Field: "max_backoff", Value: c.MaxBackoff, Rule: fmt.Sprintf(">= initial_backoff (%v)", c.InitialBackoff)}
	}
	return nil
}

// backoff returns min(InitialBackoff*attempt, MaxBackoff) for attempt >= 1,
// without overflow for any input.
func (c BudgetConfig) backoff(attempt int) time.Duration {
	if c.InitialBackoff <= 0 || attempt <= 0 {
		return 0
	}
	if int64(attempt) > int64(c.MaxBackoff/c.InitialBackoff) {
		return c.MaxBackoff
	}
	return c.InitialBackoff * time.Duration(attempt)
}

// steps returns the last attempt whose backoff is below the cap,
// MaxBackoff/InitialBackoff (math.MaxInt64 when InitialBackoff is 0), so
// that a budget divides once, at construction, and not on every failure.
func (c BudgetConfig) steps() int64 {
	if c.InitialBackoff <= 0 {
		return math.MaxInt64
	}
	return int64(c.MaxBackoff / c.InitialBackoff)
}

// checkCanPark rejects a budget that a crash loop can never exhaust: when the
// first n backoffs add up to more than window (sum), the first respawn has
// aged out before the window fills (the systemd trap of RestartSec=10s with
// StartLimitIntervalSec=10s).
func checkCanPark(field string, window time.Duration, n int, sum *big.Int) error {
	if sum.Cmp(big.NewInt(int64(window))) > 0 {
		return &ConfigError{Field: field, Value: window,
			Rule: fmt.Sprintf(">= the sum of the first %d backoffs (%v), or a crash loop never parks", n, durationOf(sum))}
	}
	return nil
}

// linearSum returns the exact sum of min(initial*i, max) for i = 1..n.
func linearSum(initial, max time.Duration, n int) *big.Int {
	if initial <= 0 || n <= 0 {
		return new(big.Int)
	}
	k := int64(max / initial) // steps below the cap
	if k > int64(n) {
		k = int64(n)
	}
	// initial*k*(k+1)/2 + max*(n-k)
	sum := big.NewInt(k)
	sum.Mul(sum, new(big.Int).Add(sum, big.NewInt(1))) // k+1 in big: k may be MaxInt64
	sum.Rsh(sum, 1)
	sum.Mul(sum, big.NewInt(int64(initial)))
	rest := big.NewInt(int64(n) - k)
	rest.Mul(rest, big.NewInt(int64(max)))
	return sum.Add(sum, rest)
}

func durationOf(b *big.Int) any {
	if b.IsInt64() {
		return time.Duration(b.Int64())
	}
	return b.String() + "ns"
}

// RespawnBudget bounds the respawns of each session (key) in a rolling window
// with a linear backoff, and parks a session that exhausts it until an
// operator resumes it.
//
// The first spawn of a session is free; each failure asks for a respawn. A
// session that stays up until its respawns age out of the window regains its
// full budget. Keys are independent. A RespawnBudget is safe for concurrent
// use; calls on different keys rarely contend. The zero value is not usable:
// create one with NewRespawnBudget. Idle keys (not parked, no respawn in the
// window) are reclaimed a few at a time by later calls (no goroutine).
// The time of a key never runs backwards: a reading earlier than one already
// used for a key of the same shard (a fixed part of the keys, under one
// lock) is read as that later one.
type RespawnBudget struct {
	cfg   BudgetConfig
	o     options
	tl    timeline
	keys  keyed[budgetEntry]
	curve Backoff // nil: the linear curve of cfg (a Supervisor may set another)
	steps int64   // cfg.steps()
}

type budgetEntry struct {
	win  window
	park *ParkedError  // non-nil while parked
	prev time.Duration // the last backoff, for curves that depend on it
}

// NewRespawnBudget returns a RespawnBudget, or a *ConfigError naming the
// first invalid setting of cfg. DefaultBudgetConfig gives the defaults (3
// respawns in 60s, backoff 500ms to 5s).
func NewRespawnBudget(cfg BudgetConfig, opts ...Option) (*RespawnBudget, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &RespawnBudget{cfg: cfg, o: buildOptions(opts), steps: cfg.steps()}
	b.tl = newTimeline(b.o.clock)
	b.keys.init()
	return b, nil
}

// Config returns the configuration the budget was created with.
func (b *RespawnBudget) Config() BudgetConfig { return b.cfg }

// Spawn is the gate before any spawn of key, the first one included. It never
// consumes budget. It returns the *ParkedError of a parked session, nil
// otherwise.
func (b *RespawnBudget) Spawn(key string) error {
	s, h := b.keys.lock(key)
	e := s.get(h, key)
	var err error
	if e != nil && e.park != nil {
		err = e.park
	}
	s.mu.Unlock()
	return err
}

// Failed is shorthand for FailedAt(key, cause, clock.Now()).
func (b *RespawnBudget) Failed(key string, cause error) (time.Duration, error) {
	return b.FailedAt(key, cause, b.o.clock.Now())
}

// FailedAt records that a run of key failed with cause at now and asks for a
// respawn. When the window still has room it records the respawn, publishes
// EventRespawnScheduled and returns the backoff to wait before it:
// min(InitialBackoff*attempt, MaxBackoff), where attempt is the number of
// respawns now in the window. When the window already holds MaxRespawns
// respawns it parks the session, publishes one EventStartupExhausted and
// returns a *ParkedError. A parked session returns its *ParkedError (with the
// cause that parked it) and records nothing.
func (b *RespawnBudget) FailedAt(key string, cause error, now time.Time) (time.Duration, error) {
	s, h, t := b.keys.lockAt(&b.tl, key, now)
	e := s.getOrAdd(h, key)
	if e.park != nil {
		pe := e.park
		s.mu.Unlock()
		return 0, pe
	}
	e.win.prune(t, b.cfg.Window)
	if e.win.len() == 0 {
		e.prev = 0 // a fresh start for curves that depend on the last wait
	}
	if e.win.len() >= b.cfg.MaxRespawns {
		pe := b.park(e, key, ReasonBudgetExhausted, cause, now)
		s.mu.Unlock()
		emit(b.o.handler, b.parkEvent(pe))
		return 0, pe
	}
	e.win.push(t, b.cfg.MaxRespawns)
	attempt := e.win.len()
	var d time.Duration
	if b.curve == nil {
		d = b.linear(attempt)
	} else {
		d = b.curve.Delay(attempt, e.prev)
		e.prev = d
	}
	if s.due() {
		s.sweep(func(e *budgetEntry) bool { return b.idle(e, t) })
	}
	s.mu.Unlock()
	if b.o.handler != nil { // skip building the event when nobody listens
		emit(b.o.handler, Event{Kind: EventRespawnScheduled, Key: key, Time: now, LastError: cause,
			Attempts: attempt, Limit: b.cfg.MaxRespawns, Window: b.cfg.Window, Backoff: d})
	}
	return d, nil
}

// linear is cfg.backoff(attempt) for attempt >= 1, with the division done
// at construction (see steps).
func (b *RespawnBudget) linear(attempt int) time.Duration {
	if int64(attempt) > b.steps {
		return b.cfg.MaxBackoff
	}
	return b.cfg.InitialBackoff * time.Duration(attempt)
}

// idle reports whether e holds nothing worth keeping at t.
func (b *RespawnBudget) idle(e *budgetEntry, t int64) bool {
	if e.park != nil {
		return false
	}
	e.win.prune(t, b.cfg.Window)
	return e.win.len() == 0
}

// Respawns is shorthand for RespawnsAt(key, clock.Now()).
func (b *RespawnBudget) Respawns(key string) int { return b.RespawnsAt(key, b.o.clock.Now()) }

// RespawnsAt returns the number of respawns of key inside the window at now.
// It records nothing.
func (b *RespawnBudget) RespawnsAt(key string, now time.Time) int {
	n, _ := b.view(key, now)
	return n
}

// view returns the respawns of key in the window at now and its park, if
// any, under one lock (what a Supervisor's Status shows of a key).
func (b *RespawnBudget) view(key string, now time.Time) (int, *ParkedError) {
	s, h, t := b.keys.lockAt(&b.tl, key, now)
	n, pe := 0, (*ParkedError)(nil)
	if e := s.get(h, key); e != nil {
		e.win.prune(t, b.cfg.Window)
		n, pe = e.win.len(), e.park
	}
	s.mu.Unlock()
	return n, pe
}

// IsParked reports whether key is parked.
func (b *RespawnBudget) IsParked(key string) bool {
	s, h := b.keys.lock(key)
	e := s.get(h, key)
	p := e != nil && e.park != nil
	s.mu.Unlock()
	return p
}

// Parked returns the parked keys, sorted.
func (b *RespawnBudget) Parked() []string {
	return b.keys.collect(func(e *budgetEntry) bool { return e.park != nil })
}

// Resume is shorthand for ResumeAt(key, clock.Now()).
func (b *RespawnBudget) Resume(key string) error { return b.ResumeAt(key, b.o.clock.Now()) }

// ResumeAt is the operator's recovery path: it clears the parked state and
// the respawn window of key (a full budget) and publishes EventResumed with
// Time now. It returns an error matching ErrNotParked if key is not parked.
func (b *RespawnBudget) ResumeAt(key string, now time.Time) error {
	s, h := b.keys.lock(key)
	e := s.get(h, key)
	if e == nil || e.park == nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrNotParked, key)
	}
	pe := e.park
	e.park, e.prev = nil, 0
	e.win.clear()
	s.mu.Unlock()
	emit(b.o.handler, Event{Kind: EventResumed, Key: key, Time: now, Reason: pe.Reason, LastError: pe.LastError,
		Limit: b.cfg.MaxRespawns, Window: b.cfg.Window})
	return nil
}

// Forget drops all state of key, parked or not, without an event. Use it when
// the thing behind key is gone for good.
func (b *RespawnBudget) Forget(key string) {
	s, h := b.keys.lock(key)
	s.tab.remove(h, key)
	s.mu.Unlock()
}

// parkAt parks key for a reason decided outside the budget (a Supervisor's
// permanent error, tripped guard or escalated chain). It publishes
// EventStartupExhausted only when announce is set, so that each outcome is
// announced once, by whatever decided it. A key that is already parked keeps
// its first ParkedError, which parkAt returns.
func (b *RespawnBudget) parkAt(key, reason string, cause error, announce bool, now time.Time) *ParkedError {
	s, h, t := b.keys.lockAt(&b.tl, key, now)
	e := s.getOrAdd(h, key)
	if e.park != nil {
		pe := e.park
		s.mu.Unlock()
		return pe
	}
	e.win.prune(t, b.cfg.Window)
	pe := b.park(e, key, reason, cause, now)
	s.mu.Unlock()
	if announce {
		emit(b.o.handler, b.parkEvent(pe))
	}
	return pe
}

// park marks the entry of key parked; its window must be pruned. The shard
// must be locked.
func (b *RespawnBudget) park(e *budgetEntry, key, reason string, cause error, now time.Time) *ParkedError {
	e.park = &ParkedError{Key: key, Reason: reason, LastError: cause, Attempts: e.win.len(), Since: now}
	return e.park
}

// parkEvent is the EventStartupExhausted announcing pe.
func (b *RespawnBudget) parkEvent(pe *ParkedError) Event {
	return Event{Kind: EventStartupExhausted, Key: pe.Key, Time: pe.Since, Reason: pe.Reason,
		LastError: pe.LastError, Attempts: pe.Attempts, Limit: b.cfg.MaxRespawns, Window: b.cfg.Window}
}

// settle clears the respawn window of a key that is not parked: a run that
// became healthy was a good start, so the next failure starts afresh.
func (b *RespawnBudget) settle(key string) {
	s, h := b.keys.lock(key)
	if e := s.get(h, key); e != nil && e.park == nil {
		e.win.clear()
		e.prev = 0
	}
	s.mu.Unlock()
}
