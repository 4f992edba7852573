package crashloop

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// FleetConfig configures a FleetSupervisionPolicy. The zero value is not
// valid; start from DefaultFleetConfig.
type FleetConfig struct {
	// RestartsPerHour is the number of restarts across the fleet inside a
	// rolling hour that trips the breaker. Default 40; >= 1.
	RestartsPerHour int `json:"restarts_per_hour"`
	// FailingFraction trips the breaker when failing/total reaches it.
	// Default 0.5; 0 < x <= 1 (NaN rejected).
	FailingFraction float64 `json:"failing_fraction"`
	// MinFailing is the fewest failing members that may trip the breaker on
	// the fraction: one bad channel is the per-channel guards' job, so a
	// 1-channel fleet never false-trips. Default 2; >= 1 (1 opts into
	// single-member trips).
	MinFailing int `json:"min_failing"`
	// Cooldown is how long the breaker holds restarts once tripped; at trip
	// time + Cooldown it re-arms. Default 120s; >= 0.
	Cooldown time.Duration `json:"cooldown"`
}

// DefaultFleetConfig returns the defaults: trip on 40 restarts in an hour or
// on half the fleet failing (at least 2 members), hold for 120s.
func DefaultFleetConfig() FleetConfig {
	return FleetConfig{RestartsPerHour: 40, FailingFraction: 0.5, MinFailing: 2, Cooldown: 120 * time.Second}
}

func (c FleetConfig) validate() error {
	switch {
	case c.RestartsPerHour < 1:
		return &ConfigError{Field: "restarts_per_hour", Value: c.RestartsPerHour, Rule: ">= 1"}
	case math.IsNaN(c.FailingFraction) || c.FailingFraction <= 0 || c.FailingFraction > 1:
		return &ConfigError{Field: "failing_fraction", Value: c.FailingFraction, Rule: "> 0 and <= 1"}
	case c.MinFailing < 1:
		return &ConfigError{Field: "min_failing", Value: c.MinFailing, Rule: ">= 1"}
	case c.Cooldown < 0:
		return &ConfigError{Field: "cooldown", Value: c.Cooldown, Rule: ">= 0"}
	}
	return nil
}

// fleetHour is the fleet's rolling window.
const fleetHour = time.Hour

// FleetStatus is a snapshot of a FleetSupervisionPolicy for health endpoints.
// Its JSON keys are breaker_tripped, fleet_restarts_per_hour (the configured
// limit), failing_channels and total_channels (as last noted), plus
// restarts_in_hour and, while tripped, rearm_at.
type FleetStatus struct {
	BreakerTripped       bool       `json:"breaker_tripped"`         // tripped and cooling down
	FleetRestartsPerHour int        `json:"fleet_restarts_per_hour"` // the configured limit, RestartsPerHour
	FailingChannels      int        `json:"failing_channels"`        // failing members, as last noted
	TotalChannels        int        `json:"total_channels"`          // all members, as last noted
	RestartsInHour       int        `json:"restarts_in_hour"`        // restarts in the rolling hour
	RearmAt              *time.Time `json:"rearm_at,omitempty"`      // when it re-arms; nil unless tripped
}

// FleetSupervisionPolicy is a fleet-wide breaker for systemic faults (a bad
// shared provider, an expired org-wide token) that restart every member at
// once. It trips on RestartsPerHour restarts in a rolling hour, or on a
// failing fraction of the fleet; while tripped, callers hold restarts; after
// Cooldown it re-arms with a clean hour.
//
// A FleetSupervisionPolicy is safe for concurrent use. The zero value is not
// usable: create one with NewFleetSupervisionPolicy.
type FleetSupervisionPolicy struct {
	cfg     FleetConfig
	o       options
	tl      timeline
	mu      sync.Mutex
	mark    mark // latest time seen; mu guards it
	hour    window
	tripped bool
	since   int64     // offset of the trip, or of the latest extension
	sinceAt time.Time // the same as a time, for Status
	failing int       // as last noted
	total   int
}

// NewFleetSupervisionPolicy returns a FleetSupervisionPolicy, or a
// *ConfigError naming the first invalid setting of cfg. DefaultFleetConfig
// gives the defaults (40 an hour, 0.5 failing with at least 2, 120s).
func NewFleetSupervisionPolicy(cfg FleetConfig, opts ...Option) (*FleetSupervisionPolicy, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &FleetSupervisionPolicy{cfg: cfg, o: buildOptions(opts)}
	p.tl, p.mark = newTimeline(p.o.clock), newMark()
	return p, nil
}

// Config returns the configuration the policy was created with.
func (p *FleetSupervisionPolicy) Config() FleetConfig { return p.cfg }

// rearm re-arms a tripped breaker whose cooldown has ended at t, clearing the
// hour, and returns the EventFleetRearmed to publish once p.mu is released
// (a zero Event if it did not re-arm). p.mu must be held.
func (p *FleetSupervisionPolicy) rearm(t int64, now time.Time) Event {
	if !p.tripped || age(t, p.since) < uint64(p.cfg.Cooldown) {
		return Event{}
	}
	p.tripped = false
	p.hour.clear()
	return p.event(EventFleetRearmed, now, 0)
}

func (p *FleetSupervisionPolicy) event(kind EventKind, now time.Time, restarts int) Event {
	return Event{Kind: kind, Key: p.o.name, Time: now, Reason: fleetReason(p.failing, p.total),
		Attempts: restarts, Limit: p.cfg.RestartsPerHour, Window: p.cfg.Cooldown, Failing: p.failing, Total: p.total}
}

// fleetReason is the trip reason: "channel crash-loop: N/M channels failing",
// or "channel crash-loop" when no fleet state was noted.
func fleetReason(failing, total int) string {
	if total == 0 {
		return "channel crash-loop"
	}
	return fmt.Sprintf("channel crash-loop: %d/%d channels failing", failing, total)
}

// NoteRestart is shorthand for NoteRestartAt(clock.Now()).
func (p *FleetSupervisionPolicy) NoteRestart() bool { return p.NoteRestartAt(p.o.clock.Now()) }

// NoteRestartAt records a restart of any member at now into the rolling hour
// and reports whether the breaker is tripped (tripped now, or still cooling
// down). It trips when the hour holds RestartsPerHour restarts, publishing
// EventFleetTripped. While tripped it records nothing: held restarts must not
// renew the window.
func (p *FleetSupervisionPolicy) NoteRestartAt(now time.Time) bool {
	off := p.tl.off(now)
	p.mu.Lock()
	t := p.mark.at(off)
	if !p.tripped { // the hot path: armed, and this restart does not trip it
		p.hour.prune(t, fleetHour)
		if p.hour.len()+1 < p.cfg.RestartsPerHour {
			p.hour.push(t, p.cfg.RestartsPerHour)
			p.mu.Unlock()
			return false
		}
	}
	rearmEv := p.rearm(t, now)
	var tripEv Event
	tripped := p.tripped
	if !tripped {
		p.hour.prune(t, fleetHour)
		p.hour.push(t, p.cfg.RestartsPerHour)
		if n := p.hour.len(); n >= p.cfg.RestartsPerHour {
			p.trip(t)
			tripped = true
			tripEv = p.event(EventFleetTripped, now, n)
		}
	}
	p.mu.Unlock()
	emit(p.o.handler, rearmEv)
	emit(p.o.handler, tripEv)
	return tripped
}

func (p *FleetSupervisionPolicy) trip(t int64) {
	// sinceAt is the trip as the policy reads it (never before a time it
	// has seen), so Status's rearm_at is when the re-arm really happens,
	// also after the clock was set back.
	p.tripped, p.since, p.sinceAt = true, t, p.tl.base.Add(time.Duration(t))
}

// NoteFleetState is shorthand for NoteFleetStateAt(failing, total, clock.Now()).
func (p *FleetSupervisionPolicy) NoteFleetState(failing, total int) bool {
	return p.NoteFleetStateAt(failing, total, p.o.clock.Now())
}

// NoteFleetStateAt notes that failing of total members are failing (parked,
// needing a human, out of budget) at now, and reports whether the breaker is
// tripped. It trips (publishing EventFleetTripped), or while tripped extends
// the hold to Cooldown from now, when failing >= MinFailing and
// failing/total >= FailingFraction. It records no restart. Negative counts
// are read as 0 and failing is capped at total.
func (p *FleetSupervisionPolicy) NoteFleetStateAt(failing, total int, now time.Time) bool {
	total = max(total, 0)
	failing = min(max(failing, 0), total)
	off := p.tl.off(now)
	p.mu.Lock()
	t := p.mark.at(off)
	rearmEv := p.rearm(t, now)
	var tripEv Event
	p.failing, p.total = failing, total
	if failing >= p.cfg.MinFailing && float64(failing)/float64(total) >= p.cfg.FailingFraction {
		if !p.tripped {
			p.hour.prune(t, fleetHour)
			tripEv = p.event(EventFleetTripped, now, p.hour.len())
		}
		p.trip(t)
	}
	tripped := p.tripped
	p.mu.Unlock()
	emit(p.o.handler, rearmEv)
	emit(p.o.handler, tripEv)
	return tripped
}

// Tripped is shorthand for TrippedAt(clock.Now()).
func (p *FleetSupervisionPolicy) Tripped() bool { return p.TrippedAt(p.o.clock.Now()) }

// TrippedAt reports whether the breaker is tripped at now. It records
// nothing, but a breaker whose cooldown has ended re-arms here (clearing the
// hour and publishing EventFleetRearmed), as it does in every other call.
func (p *FleetSupervisionPolicy) TrippedAt(now time.Time) bool {
	off := p.tl.off(now)
	p.mu.Lock()
	t := p.mark.at(off)
	ev := p.rearm(t, now)
	tripped := p.tripped
	p.mu.Unlock()
	emit(p.o.handler, ev)
	return tripped
}

// Status is shorthand for StatusAt(clock.Now()).
func (p *FleetSupervisionPolicy) Status() FleetStatus { return p.StatusAt(p.o.clock.Now()) }

// StatusAt returns a snapshot of the breaker at now, re-arming it first if
// its cooldown has ended.
func (p *FleetSupervisionPolicy) StatusAt(now time.Time) FleetStatus {
	off := p.tl.off(now)
	p.mu.Lock()
	t := p.mark.at(off)
	ev := p.rearm(t, now)
	p.hour.prune(t, fleetHour)
	st := FleetStatus{BreakerTripped: p.tripped, FleetRestartsPerHour: p.cfg.RestartsPerHour,
		FailingChannels: p.failing, TotalChannels: p.total, RestartsInHour: p.hour.len()}
	if p.tripped {
		at := p.sinceAt.Add(p.cfg.Cooldown)
		st.RearmAt = &at
	}
	p.mu.Unlock()
	emit(p.o.handler, ev)
	return st
}

// Reset clears the hour, the noted fleet state and any trip, without an
// event.
func (p *FleetSupervisionPolicy) Reset() {
	p.mu.Lock()
	p.hour.clear()
	p.tripped, p.failing, p.total = false, 0, 0
	p.mu.Unlock()
}
