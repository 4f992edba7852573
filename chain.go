package crashloop

import (
	"fmt"
	"time"
)

// ChainConfig configures a ChainDetector. The zero value is not valid; start
// from DefaultChainConfig.
type ChainConfig struct {
	// MaxChain is the chain length at which the next rescue escalates to a
	// human. Default 3; >= 1.
	MaxChain int `json:"max_chain"`
	// ResetGap is the longest gap between two rescues (and between the last
	// rescue and now) that keeps a chain; a gap of exactly ResetGap keeps
	// it. Choose it longer than the healthy phase of the slow loop you want
	// to catch. Default 20m; > 0.
	ResetGap time.Duration `json:"reset_gap"`
}

// DefaultChainConfig returns the defaults: escalate after 3 consecutive
// reactive rescues, each within 20 minutes of the last.
func DefaultChainConfig() ChainConfig {
	return ChainConfig{MaxChain: 3, ResetGap: 20 * time.Minute}
}

func (c ChainConfig) validate() error {
	switch {
	case c.MaxChain < 1:
		return &ConfigError{Field: "max_chain", Value: c.MaxChain, Rule: ">= 1"}
	case c.ResetGap <= 0:
		return &ConfigError{Field: "reset_gap", Value: c.ResetGap, Rule: "> 0"}
	}
	return nil
}

// ChainDetector catches the slow crash loop that passes every health check:
// a thing that is rescued, looks healthy, and dies again minutes later. It
// counts, per key, the consecutive reactive rescues of the live incarnation,
// each within ResetGap of the one after it (and the newest within ResetGap of
// now). A planned (non-reactive) rescue, a longer gap (a real recovery) or a
// rescue of another incarnation ends the chain. When the chain reaches
// MaxChain, the next rescue is refused and the key is marked needs-human.
//
// Memory per key is constant: the chain is kept as a running count. A
// ChainDetector is safe for concurrent use. The zero value is not usable:
// create one with NewChainDetector. Keys whose chain has ended and that are
// not marked are reclaimed a few at a time by later calls (no goroutine).
// The time of a key never runs backwards: a reading earlier than one already
// used for a key of the same shard (a fixed part of the keys, under one
// lock) is read as that later one.
type ChainDetector struct {
	cfg  ChainConfig
	o    options
	tl   timeline
	keys keyed[chainEntry]
}

type chainEntry struct {
	inc       string // incarnation of the newest rescue
	last      int64  // time of the newest rescue
	count     int    // chain ending at the newest rescue (0: it was planned)
	escalated bool
}

// NewChainDetector returns a ChainDetector, or a *ConfigError naming the
// first invalid setting of cfg. DefaultChainConfig gives the defaults (3
// within 20m).
func NewChainDetector(cfg ChainConfig, opts ...Option) (*ChainDetector, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d := &ChainDetector{cfg: cfg, o: buildOptions(opts)}
	d.tl = newTimeline(d.o.clock)
	d.keys.init()
	return d, nil
}

// Config returns the configuration the detector was created with.
func (d *ChainDetector) Config() ChainConfig { return d.cfg }

// chain returns the chain of incarnation ending at t.
func (d *ChainDetector) chain(e *chainEntry, incarnation string, t int64) int {
	if e == nil || e.count == 0 || e.inc != incarnation || !within(t, e.last, d.cfg.ResetGap) {
		return 0
	}
	return e.count
}

// Rescue is shorthand for RescueAt(key, incarnation, reactive, clock.Now()).
func (d *ChainDetector) Rescue(key, incarnation string, reactive bool) (chain int, err error) {
	return d.RescueAt(key, incarnation, reactive, d.o.clock.Now())
}

// RescueAt asks to rescue (restart) key, whose live incarnation is
// incarnation, at now. reactive is true for a rescue forced by a crash and
// false for a planned one. If the chain ending now already has MaxChain
// rescues, RescueAt marks the key needs-human, publishes one
// EventChainEscalated, records nothing and returns the chain with an error
// matching ErrNeedsHuman; it keeps returning that error until Clear.
// Otherwise it records the rescue and returns the new chain length (0 for a
// planned rescue, which ends the chain).
func (d *ChainDetector) RescueAt(key, incarnation string, reactive bool, now time.Time) (int, error) {
	s, h, t := d.keys.lockAt(&d.tl, key, now)
	e := s.getOrAdd(h, key)
	if e.escalated {
		n := e.count
		s.mu.Unlock()
		return n, d.needsHuman(key, e.inc, n)
	}
	n := d.chain(e, incarnation, t)
	if n >= d.cfg.MaxChain {
		e.escalated = true
		s.mu.Unlock()
		err := d.needsHuman(key, incarnation, n)
		emit(d.o.handler, Event{Kind: EventChainEscalated, Key: key, Incarnation: incarnation, Time: now,
			Reason: chainReason(n), Attempts: n, Limit: d.cfg.MaxChain, Window: d.cfg.ResetGap})
		return n, err
	}
	if reactive {
		n++
	} else {
		n = 0
	}
	if e.inc != incarnation {
		e.inc = incarnation
	}
	e.last, e.count = t, n
	if s.due() {
		s.sweep(func(e *chainEntry) bool { return !e.escalated && d.chain(e, e.inc, t) == 0 })
	}
	s.mu.Unlock()
	return n, nil
}

func (d *ChainDetector) needsHuman(key, incarnation string, n int) error {
	return &needsHumanError{key: key, incarnation: incarnation, chain: n}
}

// needsHumanError matches ErrNeedsHuman and says which key and chain.
type needsHumanError struct {
	key, incarnation string
	chain            int
	cause            error // the crash that found the chain full, if known
}

func (e *needsHumanError) Error() string {
	msg := fmt.Sprintf("crashloop: %q needs a human: %s", e.key, chainReason(e.chain))
	if e.cause != nil {
		msg += ": " + e.cause.Error()
	}
	return msg
}

// chainReason is the reason of EventChainEscalated, in the words of the
// rescue daemon that first built this guard.
func chainReason(n int) string {
	return fmt.Sprintf("crash-loop: gave up after %d reactive rescues", n)
}

func (e *needsHumanError) Is(target error) bool { return target == ErrNeedsHuman }

func (e *needsHumanError) Unwrap() error { return e.cause }

// Chain is shorthand for ChainAt(key, incarnation, clock.Now()).
func (d *ChainDetector) Chain(key, incarnation string) int {
	return d.ChainAt(key, incarnation, d.o.clock.Now())
}

// ChainAt returns the length of the chain of incarnation under key that ends
// at now. It records nothing.
func (d *ChainDetector) ChainAt(key, incarnation string, now time.Time) int {
	s, h, t := d.keys.lockAt(&d.tl, key, now)
	n := d.chain(s.get(h, key), incarnation, t)
	s.mu.Unlock()
	return n
}

// IsNeedsHuman reports whether key is marked needs-human.
func (d *ChainDetector) IsNeedsHuman(key string) bool {
	s, h := d.keys.lock(key)
	e := s.get(h, key)
	m := e != nil && e.escalated
	s.mu.Unlock()
	return m
}

// NeedsHuman returns the keys marked needs-human, sorted.
func (d *ChainDetector) NeedsHuman() []string {
	return d.keys.collect(func(e *chainEntry) bool { return e.escalated })
}

// Clear is the operator's reset of key: it forgets the chain and the
// needs-human mark, without an event.
func (d *ChainDetector) Clear(key string) {
	s, h := d.keys.lock(key)
	s.tab.remove(h, key)
	s.mu.Unlock()
}
