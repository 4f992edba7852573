package crashloop

import (
	"sync"
	"time"

	"github.com/crashloopguard/crashloop/internal/rolling"
	"github.com/crashloopguard/crashloop/internal/settings"
)

// GuardConfig holds the settings of a RestartLoopGuard, and of a
// Supervisor's per-key fast guard (config key "guard"). The zero value is
// not valid; start from DefaultGuardConfig.
type GuardConfig struct {
	MaxRestarts int           // restarts in Window that trip it ("max_restarts"); default 3; >= 1
	Window      time.Duration // the trailing window, its edge included ("window"); default 60s; > 0
}

// DefaultGuardConfig returns the defaults: trip on 3 restarts within 60s.
func DefaultGuardConfig() GuardConfig {
	return GuardConfig{MaxRestarts: 3, Window: 60 * time.Second}
}

func (c *GuardConfig) settings() []settings.Setting {
	return []settings.Setting{
		settings.Int("max_restarts", &c.MaxRestarts, func() string { return settings.Must(c.MaxRestarts >= 1, ">= 1") }),
		settings.Duration("window", &c.Window, func() string { return settings.Must(c.Window > 0, "> 0") }),
	}
}

func (c GuardConfig) validate() error { return checkSettings(c.settings()) }

// MarshalJSON writes the guard settings with their config keys, durations
// as strings.
func (c GuardConfig) MarshalJSON() ([]byte, error) { return settings.Marshal(c.settings()) }

// UnmarshalJSON reads guard settings; omitted keys keep their values.
func (c *GuardConfig) UnmarshalJSON(data []byte) error { return decodeSettings(data, "", c.settings()) }

// count drops the restarts older than Window from w at t and returns the
// restarts left.
func (c GuardConfig) count(w *window, t int64) int {
	w.Prune(t, c.Window)
	return w.Len()
}

// trippedEvent is the EventGuardTripped of name after n restarts, with the
// code of the guard that tripped: ReasonRestartLoopGuard or, for a
// Supervisor's hourly cap, ReasonHourlyCap.
func (c GuardConfig) trippedEvent(name, reason string, now time.Time, n int, cause error) Event {
	return Event{Kind: EventGuardTripped, Key: name, Time: now, Reason: reason, LastError: cause,
		Attempts: n, Limit: c.MaxRestarts, Window: c.Window}
}

// RestartLoopGuard is a rolling-window breaker for a tight crash-on-resume
// storm of one key: it trips when its window holds MaxRestarts restarts.
// Use one guard per key; a guard shared by several keys lets one key's
// crashes count against the others.
//
// Each call costs O(1) whatever MaxRestarts is, and memory is bounded by
// MaxRestarts. A RestartLoopGuard is safe for concurrent use. The zero value
// is not usable: create one with NewRestartLoopGuard. Time never runs
// backwards for a guard: a reading earlier than one it already used is read
// as that later one.
type RestartLoopGuard struct {
	cfg GuardConfig
	o   options
	mu  sync.Mutex
	tb  timebase // mu guards its latest time
	win window
}

// NewRestartLoopGuard returns a guard that trips on maxRestarts restarts
// within window (the defaults are 3 and 60s, see DefaultGuardConfig), or a
// *ConfigError naming the invalid setting. It takes WithClock,
// WithEventHandler and WithName; any other Option makes it return a
// *ConfigError naming the option.
func NewRestartLoopGuard(maxRestarts int, window time.Duration, opts ...Option) (*RestartLoopGuard, error) {
	cfg := GuardConfig{MaxRestarts: maxRestarts, Window: window}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o, err := buildOptions(guardOptions, opts)
	if err != nil {
		return nil, err
	}
	g := &RestartLoopGuard{cfg: cfg, o: o}
	g.tb = newTimebase(g.o.clock)
	return g, nil
}

// Config returns the guard's settings.
func (g *RestartLoopGuard) Config() GuardConfig { return g.cfg }

// lockAt locks the guard and returns the time the call uses for now.
func (g *RestartLoopGuard) lockAt(now time.Time) int64 {
	off := g.tb.Off(now)
	g.mu.Lock()
	return g.tb.At(off)
}

// Record is shorthand for RecordAt(clock.Now()).
func (g *RestartLoopGuard) Record() bool { return g.RecordAt(g.o.clock.Now()) }

// RecordAt drops the restarts older than the window at now, records a
// restart at now, and reports whether the window holds MaxRestarts or more
// (tripped). It publishes EventGuardTripped when this restart takes the
// guard from not tripped to tripped: whether the guard was tripped just
// before is read from the window itself, so a TrippedAt in between, or
// none, makes no difference.
func (g *RestartLoopGuard) RecordAt(now time.Time) bool {
	t := g.lockAt(now)
	was := g.cfg.count(&g.win, t) >= g.cfg.MaxRestarts
	g.win.Push(t, g.cfg.MaxRestarts)
	n := g.win.Len()
	trip := n >= g.cfg.MaxRestarts
	g.mu.Unlock()
	if trip && !was && g.o.handler != nil { // build the event only for a listener
		emit(g.o.handler, g.cfg.trippedEvent(g.o.name, ReasonRestartLoopGuard, now, n, nil))
	}
	return trip
}

// Tripped is shorthand for TrippedAt(clock.Now()).
func (g *RestartLoopGuard) Tripped() bool { return g.TrippedAt(g.o.clock.Now()) }

// TrippedAt reports whether the window at now holds MaxRestarts restarts or
// more. It records nothing.
func (g *RestartLoopGuard) TrippedAt(now time.Time) bool {
	return g.RestartsAt(now) >= g.cfg.MaxRestarts
}

// Restarts is shorthand for RestartsAt(clock.Now()).
func (g *RestartLoopGuard) Restarts() int { return g.RestartsAt(g.o.clock.Now()) }

// RestartsAt returns the number of restarts inside the window at now (at
// most MaxRestarts: older ones beyond that are not kept). It records nothing.
func (g *RestartLoopGuard) RestartsAt(now time.Time) int {
	t := g.lockAt(now)
	defer g.mu.Unlock()
	return g.cfg.count(&g.win, t)
}

// Reset clears the history, as after a clean run.
func (g *RestartLoopGuard) Reset() {
	g.mu.Lock()
	g.win.Clear()
	g.mu.Unlock()
}

// guardDoc is the snapshot document of a RestartLoopGuard, and of the
// per-key guard and hourly cap of a Supervisor's key (see docs/snapshot.md).
// Its "tripped" is informative only: the guard derives it from the window.
type guardDoc struct {
	Version  int      `json:"version"`
	Kind     string   `json:"kind"`
	Latest   string   `json:"latest,omitempty"`
	Restarts []string `json:"restarts"`
	Tripped  bool     `json:"tripped"`
}

// guardDocOf writes a guard window of limit as a document.
func (w *writer) guard(win *window, limit int) *guardDoc {
	doc := &guardDoc{Version: SnapshotVersion, Kind: kindGuard, Restarts: w.times(win), Tripped: win.Len() >= limit}
	doc.Latest = w.latest()
	return doc
}

// readGuard checks a guard document against limit and returns its window
// and its latest time, read on tb (nil: a document that is only checked).
func readGuard(doc *guardDoc, tb *timebase, limit int, now time.Time, path string) (window, int64, error) {
	if err := checkHeader(doc.Version, doc.Kind, kindGuard, path); err != nil {
		return window{}, 0, err
	}
	r, err := newReader(tb, now, doc.Latest, path)
	if err != nil {
		return window{}, 0, err
	}
	win, err := r.window(doc.Restarts, limit, path+".restarts")
	return win, r.latestOff, err
}

// Snapshot returns the whole state of the guard (the restarts in its window,
// and for readers whether they trip it at the latest time seen) as a JSON
// document of kind "restart_loop_guard" (see SnapshotVersion for the
// format). It changes nothing and fails only for a time that cannot be
// written and read back. It is safe for concurrent use.
func (g *RestartLoopGuard) Snapshot() ([]byte, error) {
	return takeSnapshot(&g.mu, &g.tb, func() window { return rolling.Copy(&g.win) },
		func(w *writer, win window) any { return w.guard(&win, g.cfg.MaxRestarts) })
}

// Restore is shorthand for RestoreAt(data, clock.Now()).
func (g *RestartLoopGuard) Restore(data []byte) error { return g.RestoreAt(data, g.o.clock.Now()) }

// RestoreAt replaces the whole state of the guard with the snapshot in data
// (a document of kind "restart_loop_guard", see SnapshotVersion), read at
// now: restarts older than the window at now no longer count. A document it
// cannot restore returns an error matching ErrBadSnapshot and leaves the
// guard unchanged. It publishes no event and is safe for concurrent use.
func (g *RestartLoopGuard) RestoreAt(data []byte, now time.Time) error {
	return restoreSnapshot(data, kindGuard, now, &g.mu, &g.tb,
		func(doc *guardDoc, tb *timebase, now time.Time) (window, int64, error) {
			return readGuard(doc, tb, g.cfg.MaxRestarts, now, kindGuard)
		},
		func(win window) error { g.win = win; return nil })
}
