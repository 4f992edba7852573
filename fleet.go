package crashloop

import (
	"math"
	"sync"
	"time"

	"github.com/crashloopguard/crashloop/internal/rolling"
	"github.com/crashloopguard/crashloop/internal/settings"
)

// FleetConfig configures a FleetSupervisionPolicy, and the fleet breaker of
// a Supervisor (config key "fleet"). The zero value is not valid; start
// from DefaultFleetConfig.
type FleetConfig struct {
	// RestartsPerHour restarts across the fleet in a rolling hour trip the
	// breaker ("restarts_per_hour"). Default 40; >= 1.
	RestartsPerHour int
	// FailingFraction trips it when failing/total reaches it
	// ("failing_fraction"). Default 0.5; 0 < x <= 1.
	FailingFraction float64
	// MinFailing is the fewest failing members that trip it on the
	// fraction: one bad key is the per-key guards' job ("min_failing").
	// Default 2; >= 1.
	MinFailing int
	// Cooldown is how long it holds restarts once tripped; it re-arms at
	// trip time + Cooldown ("cooldown"). Default 120s; >= 0.
	Cooldown time.Duration
	// SharedCause holds the restarts of keys failing with one cause, in a
	// Supervisor ("shared_cause"). Default nil: off.
	SharedCause *SharedCauseConfig
}

// DefaultFleetConfig returns the defaults: trip on 40 restarts in an hour or
// on half the fleet failing (at least 2 members), hold for 120s.
func DefaultFleetConfig() FleetConfig {
	return FleetConfig{RestartsPerHour: 40, FailingFraction: 0.5, MinFailing: 2, Cooldown: 120 * time.Second}
}

func (c *FleetConfig) settings() []settings.Setting {
	f := c.FailingFraction
	return []settings.Setting{
		settings.Int("restarts_per_hour", &c.RestartsPerHour, func() string { return settings.Must(c.RestartsPerHour >= 1, ">= 1") }),
		settings.Float("failing_fraction", &c.FailingFraction, func() string {
			return settings.Must(!math.IsNaN(f) && f > 0 && f <= 1, "> 0 and <= 1")
		}),
		settings.Int("min_failing", &c.MinFailing, func() string { return settings.Must(c.MinFailing >= 1, ">= 1") }),
		settings.Duration("cooldown", &c.Cooldown, func() string { return settings.Must(c.Cooldown >= 0, ">= 0") }),
		settings.Optional("shared_cause", &c.SharedCause, defaultSharedCause, (*SharedCauseConfig).settings),
	}
}

func (c FleetConfig) validate() error { return checkSettings(c.settings()) }

// MarshalJSON writes the fleet settings with their config keys, durations
// as strings.
func (c FleetConfig) MarshalJSON() ([]byte, error) { return settings.Marshal(c.settings()) }

// UnmarshalJSON reads fleet settings; omitted keys keep their values.
func (c *FleetConfig) UnmarshalJSON(data []byte) error { return decodeSettings(data, "", c.settings()) }

// fleetHour is the fleet's rolling window.
const fleetHour = time.Hour

// fleetState is the state of a fleet breaker: the restarts of the rolling
// hour, the trip, and the fleet state last noted.
type fleetState struct {
	hour           window
	tripped        bool
	since          int64  // offset of the trip, or of the latest extension
	reason         string // why it tripped
	failing, total int    // as last noted
}

// rearm re-arms a tripped breaker whose cooldown has ended at t, clearing
// the hour so that pre-trip restarts cannot trip it again at once, and
// reports whether it did.
func (c FleetConfig) rearm(f *fleetState, t int64) bool {
	if !f.tripped || rolling.Age(t, f.since) < uint64(c.Cooldown) {
		return false
	}
	f.tripped = false
	f.hour.Clear()
	return true
}

// noteRestart records a restart at t into the rolling hour and reports
// whether the breaker is tripped, and whether this restart tripped it.
// While tripped it records nothing: held restarts must not renew the
// window. Call rearm first.
func (c FleetConfig) noteRestart(f *fleetState, t int64) (tripped, now bool) {
	if f.tripped {
		return true, false
	}
	f.hour.Prune(t, fleetHour)
	f.hour.Push(t, c.RestartsPerHour)
	if f.hour.Len() >= c.RestartsPerHour {
		f.trip(t, ReasonFleetRestartRate)
		return true, true
	}
	return false, false
}

// noteState notes that failing of total members are failing at t and
// reports whether the breaker is tripped, and whether this note tripped it.
// It trips, or while tripped extends the hold to Cooldown from t, when
// failing >= MinFailing and failing/total >= FailingFraction. Negative
// counts are read as 0 and failing is capped at total. Call rearm first.
func (c FleetConfig) noteState(f *fleetState, failing, total int, t int64) (tripped, now bool) {
	total = max(total, 0)
	failing = min(max(failing, 0), total)
	f.failing, f.total = failing, total
	if failing < c.MinFailing || float64(failing)/float64(total) < c.FailingFraction {
		return f.tripped, false
	}
	if f.tripped {
		f.since = t // extend the hold
		return true, false
	}
	f.hour.Prune(t, fleetHour)
	f.trip(t, ReasonFleetFailingFraction)
	return true, true
}

func (f *fleetState) trip(t int64, reason string) {
	f.tripped, f.since, f.reason = true, t, reason
}

// change is the fleetChange of the breaker as it stands.
func (f *fleetState) change() *fleetChange {
	return &fleetChange{Reason: f.reason, Restarts: f.hour.Len(), Failing: f.failing, Total: f.total}
}

// event is the fleet event of kind announcing ch for the breaker called
// name.
func (c FleetConfig) event(kind EventKind, name string, now time.Time, ch *fleetChange) Event {
	return Event{Kind: kind, Key: name, Time: now, Reason: ch.Reason, Attempts: ch.Restarts,
		Limit: c.RestartsPerHour, Window: c.Cooldown, Failing: ch.Failing, Total: ch.Total}
}

// FleetStatus is a snapshot of a fleet breaker for health endpoints, with
// the JSON keys named on its fields.
type FleetStatus struct {
	BreakerTripped       bool       `json:"breaker_tripped"`         // tripped and cooling down
	FleetRestartsPerHour int        `json:"fleet_restarts_per_hour"` // the configured limit, RestartsPerHour
	FailingKeys          int        `json:"failing_keys"`            // failing members, as last noted
	Keys                 int        `json:"keys"`                    // all members, as last noted
	RestartsInHour       int        `json:"restarts_in_hour"`        // restarts in the rolling hour
	RearmAt              *time.Time `json:"rearm_at,omitempty"`      // when it re-arms; nil unless tripped
	HeldCauses           []string   `json:"held_causes,omitempty"`   // the shared causes held, sorted; nil if none
}

// status returns the status of f at t (after rearm); tb turns the trip
// into a clock reading.
func (c FleetConfig) status(f *fleetState, t int64, tb *timebase) FleetStatus {
	f.hour.Prune(t, fleetHour)
	st := FleetStatus{BreakerTripped: f.tripped, FleetRestartsPerHour: c.RestartsPerHour,
		FailingKeys: f.failing, Keys: f.total, RestartsInHour: f.hour.Len()}
	if f.tripped {
		at := tb.Wall(f.since).Add(c.Cooldown)
		st.RearmAt = &at
	}
	return st
}

// FleetSupervisionPolicy is a fleet-wide breaker for systemic faults (a bad
// shared provider, an expired org-wide token) that restart every member at
// once. It trips on RestartsPerHour restarts in a rolling hour, or on a
// failing fraction of the fleet; while tripped, callers hold restarts; after
// Cooldown it re-arms with a clean hour.
//
// A FleetSupervisionPolicy is safe for concurrent use. The zero value is not
// usable: create one with NewFleetSupervisionPolicy. Time never runs
// backwards for a policy: a reading earlier than one it already used is read
// as that later one.
type FleetSupervisionPolicy struct {
	cfg FleetConfig
	o   options
	mu  sync.Mutex
	tb  timebase // mu guards its latest time
	f   fleetState
}

// NewFleetSupervisionPolicy returns a FleetSupervisionPolicy, or a
// *ConfigError naming the first invalid setting of cfg. DefaultFleetConfig
// gives the defaults (40 an hour, 0.5 failing with at least 2, 120s). It
// takes WithClock, WithEventHandler and WithName; any other Option makes it
// return a *ConfigError naming the option.
func NewFleetSupervisionPolicy(cfg FleetConfig, opts ...Option) (*FleetSupervisionPolicy, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o, err := buildOptions(fleetOptions, opts)
	if err != nil {
		return nil, err
	}
	p := &FleetSupervisionPolicy{cfg: cfg, o: o}
	p.tb = newTimebase(p.o.clock)
	return p, nil
}

// Config returns the configuration the policy was created with.
func (p *FleetSupervisionPolicy) Config() FleetConfig { return p.cfg }

// lockAt locks the policy, re-arms the breaker if its cooldown has ended at
// now, and returns the time the call uses, with the re-arm (nil if it did
// not re-arm; taken before the call changes anything else).
func (p *FleetSupervisionPolicy) lockAt(now time.Time) (int64, *fleetChange) {
	off := p.tb.Off(now)
	p.mu.Lock()
	t := p.tb.At(off)
	if p.cfg.rearm(&p.f, t) {
		return t, p.f.change()
	}
	return t, nil
}

// unlock releases the lock and publishes the re-arm and, if tripped, the
// trip of the call, in that order.
func (p *FleetSupervisionPolicy) unlock(now time.Time, rearmed *fleetChange, tripped bool) {
	var evs events
	if rearmed != nil {
		evs.add(p.cfg.event(EventFleetRearmed, p.o.name, now, rearmed))
	}
	if tripped {
		evs.add(p.cfg.event(EventFleetTripped, p.o.name, now, p.f.change()))
	}
	p.mu.Unlock()
	emitAll(p.o.handler, evs.list())
}

// NoteRestart is shorthand for NoteRestartAt(clock.Now()).
func (p *FleetSupervisionPolicy) NoteRestart() bool { return p.NoteRestartAt(p.o.clock.Now()) }

// NoteRestartAt records a restart of any member at now into the rolling hour
// and reports whether the breaker is tripped (tripped now, or still cooling
// down). It trips when the hour holds RestartsPerHour restarts, publishing
// EventFleetTripped (Reason ReasonFleetRestartRate). While
// tripped it records nothing: held restarts must not renew the window.
func (p *FleetSupervisionPolicy) NoteRestartAt(now time.Time) bool {
	t, rearmed := p.lockAt(now)
	tripped, trippedNow := p.cfg.noteRestart(&p.f, t)
	if !trippedNow && rearmed == nil { // the hot path: nothing to announce
		p.mu.Unlock()
		return tripped
	}
	p.unlock(now, rearmed, trippedNow)
	return tripped
}

// NoteFleetState is shorthand for NoteFleetStateAt(failing, total, clock.Now()).
func (p *FleetSupervisionPolicy) NoteFleetState(failing, total int) bool {
	return p.NoteFleetStateAt(failing, total, p.o.clock.Now())
}

// NoteFleetStateAt notes that failing of total members are failing (parked,
// needing a human, out of budget) at now, and reports whether the breaker is
// tripped. It trips (publishing EventFleetTripped with Reason
// ReasonFleetFailingFraction), or while tripped extends the hold to
// Cooldown from now, when failing >= MinFailing and failing/total >=
// FailingFraction. It records no restart. Negative counts are read as 0 and
// failing is capped at total.
func (p *FleetSupervisionPolicy) NoteFleetStateAt(failing, total int, now time.Time) bool {
	t, rearmed := p.lockAt(now)
	tripped, trippedNow := p.cfg.noteState(&p.f, failing, total, t)
	p.unlock(now, rearmed, trippedNow)
	return tripped
}

// Tripped is shorthand for TrippedAt(clock.Now()).
func (p *FleetSupervisionPolicy) Tripped() bool { return p.TrippedAt(p.o.clock.Now()) }

// TrippedAt reports whether the breaker is tripped at now. It records
// nothing, but a breaker whose cooldown has ended re-arms here (clearing the
// hour and publishing EventFleetRearmed), as it does in every other call.
func (p *FleetSupervisionPolicy) TrippedAt(now time.Time) bool {
	_, rearmed := p.lockAt(now)
	tripped := p.f.tripped
	p.unlock(now, rearmed, false)
	return tripped
}

// Status is shorthand for StatusAt(clock.Now()).
func (p *FleetSupervisionPolicy) Status() FleetStatus { return p.StatusAt(p.o.clock.Now()) }

// StatusAt returns a snapshot of the breaker at now, re-arming it first if
// its cooldown has ended.
func (p *FleetSupervisionPolicy) StatusAt(now time.Time) FleetStatus {
	t, rearmed := p.lockAt(now)
	st := p.cfg.status(&p.f, t, &p.tb)
	p.unlock(now, rearmed, false)
	return st
}

// Reset clears the hour, the noted fleet state and any trip, without an
// event.
func (p *FleetSupervisionPolicy) Reset() {
	p.mu.Lock()
	p.f = fleetState{hour: p.f.hour}
	p.f.hour.Clear()
	p.mu.Unlock()
}

// fleetDoc is the snapshot document of a FleetSupervisionPolicy, and the
// fleet part of a Supervisor's (see docs/snapshot.md).
type fleetDoc struct {
	Version  int      `json:"version"`
	Kind     string   `json:"kind"`
	Latest   string   `json:"latest,omitempty"`
	Restarts []string `json:"restarts"`
	Tripped  bool     `json:"tripped"`
	Since    string   `json:"since,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Failing  int      `json:"failing"`
	Total    int      `json:"total"`
}

// fleet writes a fleet state as a document.
func (w *writer) fleet(f *fleetState) *fleetDoc {
	doc := &fleetDoc{Version: SnapshotVersion, Kind: kindFleet, Restarts: w.times(&f.hour), Tripped: f.tripped,
		Failing: f.failing, Total: f.total}
	if f.tripped {
		doc.Since, doc.Reason = w.at(f.since), f.reason
	}
	doc.Latest = w.latest()
	return doc
}

// copyFleet returns a copy of f that shares no memory with it.
func copyFleet(f *fleetState) fleetState {
	c := *f
	c.hour = rolling.Copy(&f.hour)
	return c
}

// readFleet checks a fleet document against limit and returns its state
// and latest time, read on tb (nil: a document that is only checked).
func readFleet(doc *fleetDoc, tb *timebase, limit int, now time.Time, path string) (fleetState, int64, error) {
	var f fleetState
	if err := checkHeader(doc.Version, doc.Kind, kindFleet, path); err != nil {
		return f, 0, err
	}
	r, err := newReader(tb, now, doc.Latest, path)
	if err != nil {
		return f, 0, err
	}
	if f.hour, err = r.window(doc.Restarts, limit, path+".restarts"); err != nil {
		return f, 0, err
	}
	if err := count(doc.Failing, path+".failing"); err != nil {
		return f, 0, err
	}
	if err := count(doc.Total, path+".total"); err != nil {
		return f, 0, err
	}
	if doc.Failing > doc.Total {
		return f, 0, badSnapshot("%s.failing: %d failing members of %d", path, doc.Failing, doc.Total)
	}
	f.failing, f.total, f.tripped, f.reason = doc.Failing, doc.Total, doc.Tripped, doc.Reason
	if doc.Tripped || doc.Since != "" {
		since, err := r.event(doc.Since, path+".since")
		if err != nil {
			return f, 0, err
		}
		f.since = r.off(since)
		if doc.Tripped && f.reason == "" {
			return f, 0, badSnapshot("%s.reason: missing: a tripped breaker must say why", path)
		}
	}
	return f, r.latestOff, nil
}

// Snapshot returns the whole state of the breaker (the restarts in its
// rolling hour, the trip, its time and reason, the fleet state last noted)
// as a JSON document of kind "fleet_supervision_policy" (see
// SnapshotVersion for the format). It changes nothing (a breaker due to
// re-arm re-arms at the next call, after a restore as before) and fails
// only for a time that cannot be written and read back. It is safe for
// concurrent use.
func (p *FleetSupervisionPolicy) Snapshot() ([]byte, error) {
	return takeSnapshot(&p.mu, &p.tb, func() fleetState { return copyFleet(&p.f) },
		func(w *writer, f fleetState) any { return w.fleet(&f) })
}

// Restore is shorthand for RestoreAt(data, clock.Now()).
func (p *FleetSupervisionPolicy) Restore(data []byte) error {
	return p.RestoreAt(data, p.o.clock.Now())
}

// RestoreAt replaces the whole state of the breaker with the snapshot in
// data (a document of kind "fleet_supervision_policy", see
// SnapshotVersion), read at now: a trip whose cooldown has ended by now
// re-arms (with EventFleetRearmed) at the next call. A document it cannot
// restore returns an error matching ErrBadSnapshot and leaves the breaker
// unchanged. It publishes no event and is safe for concurrent use.
func (p *FleetSupervisionPolicy) RestoreAt(data []byte, now time.Time) error {
	return restoreSnapshot(data, kindFleet, now, &p.mu, &p.tb,
		func(doc *fleetDoc, tb *timebase, now time.Time) (fleetState, int64, error) {
			return readFleet(doc, tb, p.cfg.RestartsPerHour, now, kindFleet)
		},
		func(f fleetState) error { p.f = f; return nil })
}
