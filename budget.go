package crashloop

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/crashloopguard/crashloop/internal/rolling"
	"github.com/crashloopguard/crashloop/internal/satsum"
	"github.com/crashloopguard/crashloop/internal/settings"
)

// BudgetConfig configures a RespawnBudget, and the budget of a Supervisor
// (config key "budget"). The zero value is not valid (its Window is 0);
// start from DefaultBudgetConfig.
type BudgetConfig struct {
	// MaxRespawns respawns fit the window; the failure after them parks
	// the key ("max_respawns"). Default 3; >= 0.
	MaxRespawns int
	// Window is the rolling window; a respawn exactly Window old still
	// counts ("window"). Default 60s; at least the first MaxRespawns
	// backoffs together, else a crash loop would never park.
	Window time.Duration
	// InitialBackoff is the first backoff; the Nth respawn in the window
	// waits N times it ("initial_backoff"). Default 500ms; >= 0.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration // caps the backoff ("max_backoff"); default 5s; >= InitialBackoff
}

// DefaultBudgetConfig returns the defaults: 3 respawns in a rolling 60s
// window, backoff 500ms, 1s, 1.5s ... capped at 5s.
func DefaultBudgetConfig() BudgetConfig {
	return BudgetConfig{MaxRespawns: 3, Window: 60 * time.Second, InitialBackoff: 500 * time.Millisecond, MaxBackoff: 5 * time.Second}
}

func (c *BudgetConfig) settings() []settings.Setting {
	return []settings.Setting{
		settings.Int("max_respawns", &c.MaxRespawns, func() string { return settings.Must(c.MaxRespawns >= 0, ">= 0") }),
		settings.Duration("window", &c.Window, func() string { return settings.Must(c.Window > 0, "> 0") }),
		settings.Duration("initial_backoff", &c.InitialBackoff, func() string { return settings.Must(c.InitialBackoff >= 0, ">= 0") }),
		settings.Duration("max_backoff", &c.MaxBackoff, func() string {
			return settings.Must(c.MaxBackoff >= c.InitialBackoff, fmt.Sprintf(">= initial_backoff (%v)", c.InitialBackoff))
		}),
	}
}

// validate checks each setting, then that the budget can park with its own
// linear curve.
func (c BudgetConfig) validate() error {
	if err := checkSettings(c.settings()); err != nil {
		return err
	}
	return checkCanPark("window", c.Window, c.MaxRespawns, satsum.Linear(c.InitialBackoff, c.MaxBackoff, c.MaxRespawns))
}

// MarshalJSON writes the budget with its config keys, durations as strings.
func (c BudgetConfig) MarshalJSON() ([]byte, error) { return settings.Marshal(c.settings()) }

// UnmarshalJSON reads a budget; omitted keys keep their current values
// (unmarshal into DefaultBudgetConfig() for defaults). Unknown keys and bad
// values are *ConfigError values naming the key. The result is not
// validated: NewRespawnBudget does that.
func (c *BudgetConfig) UnmarshalJSON(data []byte) error {
	return decodeSettings(data, "", c.settings())
}

// respawn asks the window w of one key for a respawn at t: it drops the
// respawns older than Window and, when fewer than MaxRespawns are left,
// records one and returns its number in the window (attempt) with ok.
// Otherwise it records nothing and returns the respawns counted: the key
// parks.
func (c BudgetConfig) respawn(w *window, t int64) (attempt int, ok bool) {
	if n := c.count(w, t); n >= c.MaxRespawns {
		return n, false
	}
	w.Push(t, c.MaxRespawns)
	return w.Len(), true
}

// count drops the respawns older than Window from w at t and returns the
// respawns left.
func (c BudgetConfig) count(w *window, t int64) int {
	w.Prune(t, c.Window)
	return w.Len()
}

// scheduled is the EventRespawnScheduled of respawn attempt of key.
func (c BudgetConfig) scheduled(key string, now time.Time, cause error, attempt int, d time.Duration) Event {
	return Event{Kind: EventRespawnScheduled, Key: key, Time: now, LastError: cause,
		Attempts: attempt, Limit: c.MaxRespawns, Window: c.Window, Backoff: d}
}

// parkedEvent is the EventStartupExhausted announcing pe.
func (c BudgetConfig) parkedEvent(pe *ParkedError) Event {
	return Event{Kind: EventStartupExhausted, Key: pe.Key, Time: pe.Since, Reason: pe.Reason,
		LastError: pe.LastError, Attempts: pe.Attempts, Limit: c.MaxRespawns, Window: c.Window}
}

// resumedEvent is the EventResumed of the resume at now of pe's key.
func (c BudgetConfig) resumedEvent(pe *ParkedError, now time.Time) Event {
	return Event{Kind: EventResumed, Key: pe.Key, Time: now, Reason: pe.Reason, LastError: pe.LastError,
		Limit: c.MaxRespawns, Window: c.Window}
}

// RespawnBudget bounds the respawns of each key in a rolling window with a
// linear backoff, and parks a key that exhausts it until an operator
// resumes it.
//
// The first spawn of a key is free; each failure asks for a respawn. A key
// that stays up until its respawns age out of the window regains its full
// budget. Keys are independent. A RespawnBudget is safe for concurrent
// use. The zero value is not usable: create one with NewRespawnBudget. Idle
// keys (not parked, no respawn in the window) are reclaimed a few at a time
// by later calls (no goroutine). Time never runs backwards for a budget: a
// reading earlier than one it already used is read as that later one.
type RespawnBudget struct {
	cfg   BudgetConfig
	o     options
	curve linearCurve
	keys  keyed[budgetEntry]
}

type budgetEntry struct {
	win  window
	park *ParkedError // non-nil while parked
}

// NewRespawnBudget returns a RespawnBudget, or a *ConfigError naming the
// first invalid setting of cfg. DefaultBudgetConfig gives the defaults (3
// respawns in 60s, backoff 500ms to 5s). It takes WithClock and
// WithEventHandler; any other Option makes it return a *ConfigError naming
// the option.
func NewRespawnBudget(cfg BudgetConfig, opts ...Option) (*RespawnBudget, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o, err := buildOptions(budgetOptions, opts)
	if err != nil {
		return nil, err
	}
	b := &RespawnBudget{cfg: cfg, o: o, curve: newLinear(cfg.InitialBackoff, cfg.MaxBackoff)}
	b.keys.init(b.o.clock)
	return b, nil
}

// Config returns the configuration the budget was created with.
func (b *RespawnBudget) Config() BudgetConfig { return b.cfg }

// Spawn is the gate before any spawn of key, the first one included. It never
// consumes budget. It returns the *ParkedError of a parked key, an error
// matching ErrInvalidKey for the empty key, and nil otherwise.
func (b *RespawnBudget) Spawn(key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	b.keys.mu.Lock()
	defer b.keys.mu.Unlock()
	if e := b.keys.get(key); e != nil && e.park != nil {
		return e.park
	}
	return nil
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
// respawns it parks the key, publishes one EventStartupExhausted and
// returns a *ParkedError. A parked key returns its *ParkedError (with the
// cause that parked it) and records nothing. The empty key is refused with
// an error matching ErrInvalidKey.
func (b *RespawnBudget) FailedAt(key string, cause error, now time.Time) (time.Duration, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	t := b.keys.lockAt(now)
	e := b.keys.getOrAdd(key)
	if pe := e.park; pe != nil {
		b.keys.mu.Unlock()
		return 0, pe
	}
	attempt, ok := b.cfg.respawn(&e.win, t)
	if !ok {
		e.park = &ParkedError{Key: key, Reason: ReasonBudgetExhausted, LastError: cause, Attempts: attempt, Since: now}
		pe := e.park
		b.keys.mu.Unlock()
		emit(b.o.handler, b.cfg.parkedEvent(pe))
		return 0, pe
	}
	b.keys.reclaim(func(e *budgetEntry) bool { return b.idle(e, t) })
	b.keys.mu.Unlock()
	d := b.curve.Delay(attempt, 0)
	if b.o.handler != nil { // skip building the event when nobody listens
		emit(b.o.handler, b.cfg.scheduled(key, now, cause, attempt, d))
	}
	return d, nil
}

// idle reports whether e holds nothing worth keeping at t: it is not
// parked, and its newest respawn (so every respawn) is out of the window.
func (b *RespawnBudget) idle(e *budgetEntry, t int64) bool {
	return e.park == nil && (e.win.Len() == 0 || !rolling.Within(t, e.win.Newest(), b.cfg.Window))
}

// Respawns is shorthand for RespawnsAt(key, clock.Now()).
func (b *RespawnBudget) Respawns(key string) int { return b.RespawnsAt(key, b.o.clock.Now()) }

// RespawnsAt returns the number of respawns of key inside the window at now.
// It records nothing.
func (b *RespawnBudget) RespawnsAt(key string, now time.Time) int {
	t := b.keys.lockAt(now)
	defer b.keys.mu.Unlock()
	if e := b.keys.get(key); e != nil {
		return b.cfg.count(&e.win, t)
	}
	return 0
}

// IsParked reports whether key is parked.
func (b *RespawnBudget) IsParked(key string) bool {
	b.keys.mu.Lock()
	defer b.keys.mu.Unlock()
	e := b.keys.get(key)
	return e != nil && e.park != nil
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
	b.keys.mu.Lock()
	e := b.keys.get(key)
	if e == nil || e.park == nil {
		b.keys.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrNotParked, key)
	}
	pe := e.park
	e.park = nil
	e.win.Clear()
	b.keys.mu.Unlock()
	emit(b.o.handler, b.cfg.resumedEvent(pe, now))
	return nil
}

// Forget drops all state of key, parked or not, without an event. Use it when
// the thing behind key is gone for good.
func (b *RespawnBudget) Forget(key string) {
	b.keys.mu.Lock()
	b.keys.remove(key)
	b.keys.mu.Unlock()
}

// budgetDoc is the snapshot document of a RespawnBudget, and the budget part
// of a Supervisor's (see docs/snapshot.md).
type budgetDoc struct {
	Version int                     `json:"version"`
	Kind    string                  `json:"kind"`
	Latest  string                  `json:"latest,omitempty"`
	Keys    map[string]budgetKeyDoc `json:"keys"`
}

type budgetKeyDoc struct {
	Respawns    []string `json:"respawns,omitempty"`
	PrevBackoff string   `json:"prev_backoff,omitempty"` // a Supervisor's last wait on its curve
	Parked      *parkDoc `json:"parked,omitempty"`
}

// Snapshot returns the whole state of the budget (every key's respawn
// window and park) as a JSON document of kind "respawn_budget" (see
// SnapshotVersion for the format). It is taken at one instant, consistent
// across keys, and changes nothing. It fails only for a time that cannot be
// written and read back. It is safe for concurrent use.
func (b *RespawnBudget) Snapshot() ([]byte, error) {
	type entry struct {
		key  string
		win  window       // a copy
		park *ParkedError // immutable
	}
	return takeSnapshot(&b.keys.mu, &b.keys.tb, func() []entry {
		entries := make([]entry, 0, len(b.keys.order))
		b.keys.each(func(key string, e *budgetEntry) {
			entries = append(entries, entry{key, rolling.Copy(&e.win), e.park})
		})
		return entries
	}, func(w *writer, entries []entry) any {
		doc := &budgetDoc{Version: SnapshotVersion, Kind: kindBudget, Keys: make(map[string]budgetKeyDoc, len(entries))}
		for _, e := range entries {
			doc.Keys[e.key] = budgetKeyDoc{Respawns: w.times(&e.win), Parked: w.park(e.park)}
		}
		doc.Latest = w.latest()
		return doc
	})
}

// Restore is shorthand for RestoreAt(data, clock.Now()).
func (b *RespawnBudget) Restore(data []byte) error { return b.RestoreAt(data, b.o.clock.Now()) }

// RestoreAt replaces the whole state of the budget with the snapshot in
// data (a document of kind "respawn_budget", see SnapshotVersion), read at
// now: the windows age from the times they hold, so a restore a day later
// finds them empty. A document it cannot restore returns an error matching
// ErrBadSnapshot and leaves the budget unchanged. It publishes no event and
// is safe for concurrent use.
func (b *RespawnBudget) RestoreAt(data []byte, now time.Time) error {
	return restoreSnapshot(data, kindBudget, now, &b.keys.mu, &b.keys.tb, b.read, b.keys.install)
}

// read checks a budget document and returns its keys and latest time, read
// on tb.
func (b *RespawnBudget) read(doc *budgetDoc, tb *timebase, now time.Time) (map[string]budgetEntry, int64, error) {
	r, err := newReader(tb, now, doc.Latest, kindBudget)
	if err != nil {
		return nil, 0, err
	}
	m := make(map[string]budgetEntry, len(doc.Keys))
	for _, key := range slices.Sorted(maps.Keys(doc.Keys)) {
		kd, kp := doc.Keys[key], fmt.Sprintf("%s.keys[%q]", kindBudget, key)
		win, _, err := readBudgetKey(r, kd, b.cfg.MaxRespawns, kp)
		if err != nil {
			return nil, 0, err
		}
		park, err := r.park(key, kd.Parked, kp+".parked")
		if err != nil {
			return nil, 0, err
		}
		m[key] = budgetEntry{win: win, park: park}
	}
	return m, r.latestOff, nil
}

// readBudgetKey reads the respawn window and last backoff of one key.
func readBudgetKey(r *reader, kd budgetKeyDoc, limit int, kp string) (window, time.Duration, error) {
	win, err := r.window(kd.Respawns, limit, kp+".respawns")
	if err != nil {
		return window{}, 0, err
	}
	var prev time.Duration
	if kd.PrevBackoff != "" {
		if prev, err = time.ParseDuration(kd.PrevBackoff); err != nil {
			return window{}, 0, badSnapshot("%s.prev_backoff: %v", kp, err)
		}
	}
	return win, prev, nil
}
