package crashloop

import (
	"fmt"
	"sync"
	"time"
)

// GuardConfig holds the settings of a RestartLoopGuard, as a config file
// writes them (lifecycle.restart_loop_guard). The zero value is not valid;
// start from DefaultGuardConfig.
type GuardConfig struct {
	// MaxRestarts is the number of restarts inside Window that trips the
	// guard. Default 3; >= 1.
	MaxRestarts int `json:"max_restarts"`
	// Window is the trailing window. A restart exactly Window old still
	// counts. Default 60s; > 0.
	Window time.Duration `json:"window"`
}

// DefaultGuardConfig returns the defaults: trip on 3 restarts within 60s.
func DefaultGuardConfig() GuardConfig {
	return GuardConfig{MaxRestarts: 3, Window: 60 * time.Second}
}

func (c GuardConfig) validate() error {
	switch {
	case c.MaxRestarts < 1:
		return &ConfigError{Field: "max_restarts", Value: c.MaxRestarts, Rule: ">= 1"}
	case c.Window <= 0:
		return &ConfigError{Field: "window", Value: c.Window, Rule: "> 0"}
	}
	return nil
}

// RestartLoopGuard is a rolling-window breaker for a tight crash-on-resume
// storm on one channel: it trips when its window holds MaxRestarts restarts.
// Use one guard per channel; a guard shared by several channels lets one
// channel's crashes count against the others.
//
// Each call costs O(1) whatever MaxRestarts is, and memory is bounded by
// MaxRestarts. A RestartLoopGuard is safe for concurrent use. The zero value
// is not usable: create one with NewRestartLoopGuard.
type RestartLoopGuard struct {
	cfg  GuardConfig
	o    options
	tl   timeline
	mu   sync.Mutex
	mark mark // latest time seen; mu guards it
	win  window
}

// NewRestartLoopGuard returns a guard that trips on maxRestarts restarts
// within window (the defaults are 3 and 60s, see DefaultGuardConfig), or a
// *ConfigError naming the invalid setting.
func NewRestartLoopGuard(maxRestarts int, window time.Duration, opts ...Option) (*RestartLoopGuard, error) {
	cfg := GuardConfig{MaxRestarts: maxRestarts, Window: window}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := &RestartLoopGuard{cfg: cfg, o: buildOptions(opts)}
	g.tl, g.mark = newTimeline(g.o.clock), newMark()
	return g, nil
}

// Config returns the guard's settings.
func (g *RestartLoopGuard) Config() GuardConfig { return g.cfg }

// Record is shorthand for RecordAt(clock.Now()).
func (g *RestartLoopGuard) Record() bool { return g.RecordAt(g.o.clock.Now()) }

// RecordAt drops the restarts older than the window at now, records a
// restart at now, and reports whether the window holds MaxRestarts or more
// (tripped). It publishes EventGuardTripped when this restart takes the
// guard from not tripped to tripped: whether the guard was tripped just
// before is read from the window itself, so a TrippedAt in between, or
// none, makes no difference.
func (g *RestartLoopGuard) RecordAt(now time.Time) bool {
	off := g.tl.off(now)
	g.mu.Lock()
	t := g.mark.at(off)
	g.win.prune(t, g.cfg.Window)
	was := g.win.len() >= g.cfg.MaxRestarts // tripped just before this restart
	g.win.push(t, g.cfg.MaxRestarts)
	n := g.win.len()
	trip := n >= g.cfg.MaxRestarts
	announce := trip && !was
	g.mu.Unlock()
	if announce && g.o.handler != nil { // the reason is formatted: build the event only for a listener
		emit(g.o.handler, Event{Kind: EventGuardTripped, Key: g.o.name, Time: now, Reason: guardReason(g.cfg),
			Attempts: n, Limit: g.cfg.MaxRestarts, Window: g.cfg.Window})
	}
	return trip
}

func guardReason(c GuardConfig) string {
	return fmt.Sprintf("crash-loop breaker tripped (>= %d restarts in %s)", c.MaxRestarts, formatDuration(c.Window))
}

// Tripped is shorthand for TrippedAt(clock.Now()).
func (g *RestartLoopGuard) Tripped() bool { return g.TrippedAt(g.o.clock.Now()) }

// TrippedAt reports whether the window at now holds MaxRestarts restarts or
// more. It records nothing.
func (g *RestartLoopGuard) TrippedAt(now time.Time) bool {
	off := g.tl.off(now)
	g.mu.Lock()
	t := g.mark.at(off)
	g.win.prune(t, g.cfg.Window)
	trip := g.win.len() >= g.cfg.MaxRestarts
	g.mu.Unlock()
	return trip
}

// Restarts is shorthand for RestartsAt(clock.Now()).
func (g *RestartLoopGuard) Restarts() int { return g.RestartsAt(g.o.clock.Now()) }

// RestartsAt returns the number of restarts inside the window at now (at
// most MaxRestarts: older ones beyond that are not kept). It records nothing.
func (g *RestartLoopGuard) RestartsAt(now time.Time) int {
	off := g.tl.off(now)
	g.mu.Lock()
	t := g.mark.at(off)
	g.win.prune(t, g.cfg.Window)
	n := g.win.len()
	g.mu.Unlock()
	return n
}

// Reset clears the history, as after a clean run.
func (g *RestartLoopGuard) Reset() {
	g.mu.Lock()
	g.win.clear()
	g.mu.Unlock()
}
