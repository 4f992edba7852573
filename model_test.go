package crashloop_test

// Reference models of the four guards, for the fuzz targets in fuzz_test.go.
//
// Each model is the naive algorithm of the README's rules written as plainly
// as possible: every event time is kept in a slice, and the slice is filtered
// again on every call. Nothing here is shared with the implementation; the
// fuzz targets drive a model and the real guard with the same operations and
// require the same decision at every step.
//
// Time, as every object of the package reads it: the object takes a base
// from its clock when it is created, and reads each later time as the
// duration since that base, as time.Time.Sub gives it (Sub saturates at the
// far ends of a time.Duration, about 292 years away). Time inside an object
// never runs backwards: the effective now is the latest reading the object
// has been given, for any key, so a reading earlier than that one is read as
// that one. A restored object keeps the latest reading of the snapshot. An
// event counts while now - t <= the window.

import (
	"math/big"
	"sort"
	"time"

	"github.com/crashloopguard/crashloop"
)

// modelClock is one object's reading of time: the latest offset from base
// that the object has been given.
type modelClock struct {
	base time.Time
	high int64
	seen bool
}

func newModelClock(base time.Time) modelClock { return modelClock{base: base} }

// at returns the effective now of a reading now and remembers it.
func (c *modelClock) at(now time.Time) int64 {
	t := int64(now.Sub(c.base))
	if !c.seen || t > c.high {
		c.high, c.seen = t, true
	}
	return c.high
}

// modelWithin reports whether an event at t still counts at now in a window
// of span: now - t <= span, computed exactly.
func modelWithin(now, t int64, span time.Duration) bool {
	age := new(big.Int).Sub(big.NewInt(now), big.NewInt(t))
	return age.Cmp(big.NewInt(int64(span))) <= 0
}

// modelKeep returns the times that still count at now.
func modelKeep(times []int64, now int64, span time.Duration) []int64 {
	var kept []int64
	for _, t := range times {
		if modelWithin(now, t, span) {
			kept = append(kept, t)
		}
	}
	return kept
}

// modelAppend appends t and keeps at most limit newest times.
func modelAppend(times []int64, t int64, limit int) []int64 {
	times = append(times, t)
	if len(times) > limit {
		times = times[len(times)-limit:]
	}
	return times
}

func modelSortedKeys(m map[string]bool) []string {
	var out []string
	for k, ok := range m {
		if ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// ---------------------------------------------------------------------------
// RespawnBudget

type modelBudget struct {
	cfg  crashloop.BudgetConfig
	clk  modelClock
	keys map[string]*modelBudgetKey
}

type modelBudgetKey struct {
	respawns []int64
	parked   *crashloop.ParkedError // nil unless parked
}

func newModelBudget(cfg crashloop.BudgetConfig, base time.Time) *modelBudget {
	return &modelBudget{cfg: cfg, clk: newModelClock(base), keys: map[string]*modelBudgetKey{}}
}

func (m *modelBudget) key(k string) *modelBudgetKey {
	if m.keys[k] == nil {
		m.keys[k] = &modelBudgetKey{}
	}
	return m.keys[k]
}

// modelBudgetValid is the documented budget rules: each field's own rule, then
// the whole-budget rule that the first MaxRespawns backoffs must not add up
// to more than Window.
func modelBudgetValid(cfg crashloop.BudgetConfig) bool {
	if cfg.MaxRespawns < 0 || cfg.Window <= 0 || cfg.InitialBackoff < 0 || cfg.MaxBackoff < cfg.InitialBackoff {
		return false
	}
	return modelLinearSum(cfg.InitialBackoff, cfg.MaxBackoff, cfg.MaxRespawns).Cmp(big.NewInt(int64(cfg.Window))) <= 0
}

// modelLinearSum is the sum of min(initial*i, max) for i = 1..n: the first k
// backoffs grow (initial, 2*initial ... k*initial, with k the largest whole
// number of initials in max, at most n) and the rest are max.
func modelLinearSum(initial, max time.Duration, n int) *big.Int {
	if initial == 0 || n <= 0 {
		return new(big.Int)
	}
	k := new(big.Int).Quo(big.NewInt(int64(max)), big.NewInt(int64(initial)))
	if k.Cmp(big.NewInt(int64(n))) > 0 {
		k.SetInt64(int64(n))
	}
	grow := new(big.Int).Mul(k, new(big.Int).Add(k, big.NewInt(1))) // k(k+1)
	grow.Quo(grow, big.NewInt(2)).Mul(grow, big.NewInt(int64(initial)))
	rest := new(big.Int).Sub(big.NewInt(int64(n)), k)
	rest.Mul(rest, big.NewInt(int64(max)))
	return grow.Add(grow, rest)
}

// modelLinear is min(initial*attempt, max), computed exactly.
func modelLinear(initial, max time.Duration, attempt int) time.Duration {
	d := new(big.Int).Mul(big.NewInt(int64(initial)), big.NewInt(int64(attempt)))
	if d.Cmp(big.NewInt(int64(max))) > 0 {
		return max
	}
	return time.Duration(d.Int64())
}

// FailedAt: a parked key returns its ParkedError; otherwise drop old
// respawns, park when MaxRespawns are left, else record one and back off.
func (m *modelBudget) FailedAt(key string, cause error, now time.Time) (time.Duration, *crashloop.ParkedError, []crashloop.Event) {
	t := m.clk.at(now)
	k := m.key(key)
	if k.parked != nil {
		return 0, k.parked, nil
	}
	k.respawns = modelKeep(k.respawns, t, m.cfg.Window)
	if len(k.respawns) >= m.cfg.MaxRespawns {
		k.parked = &crashloop.ParkedError{Key: key, Reason: "respawn_budget_exhausted", LastError: cause,
			Attempts: len(k.respawns), Since: now}
		return 0, k.parked, []crashloop.Event{{Kind: crashloop.EventStartupExhausted, Key: key, Time: now,
			Reason: "respawn_budget_exhausted", LastError: cause, Attempts: len(k.respawns),
			Limit: m.cfg.MaxRespawns, Window: m.cfg.Window}}
	}
	k.respawns = modelAppend(k.respawns, t, m.cfg.MaxRespawns)
	attempt := len(k.respawns)
	d := modelLinear(m.cfg.InitialBackoff, m.cfg.MaxBackoff, attempt)
	return d, nil, []crashloop.Event{{Kind: crashloop.EventRespawnScheduled, Key: key, Time: now, LastError: cause,
		Attempts: attempt, Limit: m.cfg.MaxRespawns, Window: m.cfg.Window, Backoff: d}}
}

// Spawn never reads the clock.
func (m *modelBudget) Spawn(key string) *crashloop.ParkedError {
	if k := m.keys[key]; k != nil {
		return k.parked
	}
	return nil
}

func (m *modelBudget) RespawnsAt(key string, now time.Time) int {
	t := m.clk.at(now)
	k := m.keys[key]
	if k == nil {
		return 0
	}
	k.respawns = modelKeep(k.respawns, t, m.cfg.Window)
	return len(k.respawns)
}

func (m *modelBudget) IsParked(key string) bool { return m.Spawn(key) != nil }

func (m *modelBudget) Parked() []string {
	parked := map[string]bool{}
	for k, st := range m.keys {
		parked[k] = st.parked != nil
	}
	return modelSortedKeys(parked)
}

// ResumeAt does not read the clock: now is only the time of its event.
func (m *modelBudget) ResumeAt(key string, now time.Time) (notParked bool, evs []crashloop.Event) {
	k := m.keys[key]
	if k == nil || k.parked == nil {
		return true, nil
	}
	pe := k.parked
	k.parked, k.respawns = nil, nil
	return false, []crashloop.Event{{Kind: crashloop.EventResumed, Key: key, Time: now, Reason: pe.Reason,
		LastError: pe.LastError, Limit: m.cfg.MaxRespawns, Window: m.cfg.Window}}
}

func (m *modelBudget) Forget(key string) { delete(m.keys, key) }

// ---------------------------------------------------------------------------
// ChainDetector

type modelChain struct {
	cfg  crashloop.ChainConfig
	clk  modelClock
	keys map[string]*modelChainKey
}

type modelChainKey struct {
	rescues   []modelRescue // every recorded rescue, oldest first
	escalated bool
	escChain  int // the chain that escalated
}

type modelRescue struct {
	incarnation string
	reactive    bool
	t           int64
}

func newModelChain(cfg crashloop.ChainConfig, base time.Time) *modelChain {
	return &modelChain{cfg: cfg, clk: newModelClock(base), keys: map[string]*modelChainKey{}}
}

// chain counts from now backwards over the recorded rescues: it stops at a
// rescue of another incarnation, at a planned rescue, and at the first gap
// longer than ResetGap (the first gap measured from now).
func (m *modelChain) chain(k *modelChainKey, incarnation string, now int64) int {
	if k == nil {
		return 0
	}
	n, later := 0, now
	for i := len(k.rescues) - 1; i >= 0; i-- {
		r := k.rescues[i]
		if r.incarnation != incarnation || !r.reactive || !modelWithin(later, r.t, m.cfg.ResetGap) {
			break
		}
		n++
		later = r.t
	}
	return n
}

// RescueAt: a key that needs a human keeps refusing; a chain that is
// already MaxChain long escalates (one event) and records nothing; anything
// else is recorded.
func (m *modelChain) RescueAt(key, incarnation string, reactive bool, now time.Time) (int, bool, []crashloop.Event) {
	t := m.clk.at(now)
	if m.keys[key] == nil {
		m.keys[key] = &modelChainKey{}
	}
	k := m.keys[key]
	if k.escalated {
		return k.escChain, true, nil
	}
	n := m.chain(k, incarnation, t)
	if n >= m.cfg.MaxChain {
		k.escalated, k.escChain = true, n
		return n, true, []crashloop.Event{{Kind: crashloop.EventChainEscalated, Key: key, Incarnation: incarnation,
			Time: now, Reason: "needs_human",
			Attempts: n, Limit: m.cfg.MaxChain, Window: m.cfg.ResetGap}}
	}
	k.rescues = append(k.rescues, modelRescue{incarnation: incarnation, reactive: reactive, t: t})
	if !reactive {
		return 0, false, nil
	}
	return n + 1, false, nil
}

func (m *modelChain) ChainAt(key, incarnation string, now time.Time) int {
	t := m.clk.at(now)
	return m.chain(m.keys[key], incarnation, t)
}

func (m *modelChain) IsNeedsHuman(key string) bool {
	k := m.keys[key]
	return k != nil && k.escalated
}

func (m *modelChain) NeedsHuman() []string {
	marked := map[string]bool{}
	for key, k := range m.keys {
		marked[key] = k.escalated
	}
	return modelSortedKeys(marked)
}

// Clear forgets the key; a key that needed a human is announced resumed.
func (m *modelChain) Clear(key string, now time.Time) []crashloop.Event {
	k := m.keys[key]
	delete(m.keys, key)
	if k == nil || !k.escalated {
		return nil
	}
	inc := ""
	if len(k.rescues) > 0 {
		inc = k.rescues[len(k.rescues)-1].incarnation
	}
	return []crashloop.Event{{Kind: crashloop.EventResumed, Key: key, Incarnation: inc, Time: now,
		Reason: crashloop.ReasonNeedsHuman, Attempts: k.escChain, Limit: m.cfg.MaxChain, Window: m.cfg.ResetGap}}
}

// ---------------------------------------------------------------------------
// RestartLoopGuard

type modelGuard struct {
	cfg      crashloop.GuardConfig
	name     string
	clk      modelClock
	restarts []int64 // at most MaxRestarts newest
}

func newModelGuard(cfg crashloop.GuardConfig, name string, base time.Time) *modelGuard {
	return &modelGuard{cfg: cfg, name: name, clk: newModelClock(base)}
}

func (m *modelGuard) RecordAt(now time.Time) (bool, []crashloop.Event) {
	t := m.clk.at(now)
	before := modelKeep(m.restarts, t, m.cfg.Window)
	m.restarts = modelAppend(before, t, m.cfg.MaxRestarts)
	n := len(m.restarts)
	trip := n >= m.cfg.MaxRestarts
	// Announced when this restart takes the guard from not tripped (just
	// before it, at now) to tripped: a function of the window alone.
	announce := trip && len(before) < m.cfg.MaxRestarts
	if !announce {
		return trip, nil
	}
	return trip, []crashloop.Event{{Kind: crashloop.EventGuardTripped, Key: m.name, Time: now, Reason: "restart_loop_guard",
		Attempts: n, Limit: m.cfg.MaxRestarts, Window: m.cfg.Window}}
}

func (m *modelGuard) TrippedAt(now time.Time) bool {
	t := m.clk.at(now)
	m.restarts = modelKeep(m.restarts, t, m.cfg.Window)
	return len(m.restarts) >= m.cfg.MaxRestarts
}

func (m *modelGuard) RestartsAt(now time.Time) int {
	t := m.clk.at(now)
	m.restarts = modelKeep(m.restarts, t, m.cfg.Window)
	return len(m.restarts)
}

func (m *modelGuard) Reset() { m.restarts = nil }

// ---------------------------------------------------------------------------
// FleetSupervisionPolicy

type modelFleet struct {
	cfg     crashloop.FleetConfig
	name    string
	clk     modelClock
	hour    []int64 // restarts in the rolling hour, at most RestartsPerHour newest
	tripped bool
	since   int64  // effective time of the trip or of its latest extension
	why     string // the trip's reason: the rate, or the failing fraction
	failing int
	total   int
}

func newModelFleet(cfg crashloop.FleetConfig, name string, base time.Time) *modelFleet {
	return &modelFleet{cfg: cfg, name: name, clk: newModelClock(base)}
}

func (m *modelFleet) event(kind crashloop.EventKind, now time.Time, restarts int) crashloop.Event {
	return crashloop.Event{Kind: kind, Key: m.name, Time: now, Reason: m.why, Attempts: restarts,
		Limit: m.cfg.RestartsPerHour, Window: m.cfg.Cooldown, Failing: m.failing, Total: m.total}
}

// rearm: once Cooldown has passed since the trip (exactly at trip +
// Cooldown included), the breaker re-arms with an empty hour.
func (m *modelFleet) rearm(t int64, now time.Time) []crashloop.Event {
	if !m.tripped || !modelAtLeast(t, m.since, m.cfg.Cooldown) {
		return nil
	}
	m.tripped, m.hour = false, nil
	return []crashloop.Event{m.event(crashloop.EventFleetRearmed, now, 0)}
}

// modelAtLeast reports whether now - t >= span, exactly.
func modelAtLeast(now, t int64, span time.Duration) bool {
	age := new(big.Int).Sub(big.NewInt(now), big.NewInt(t))
	return age.Cmp(big.NewInt(int64(span))) >= 0
}

func (m *modelFleet) NoteRestartAt(now time.Time) (bool, []crashloop.Event) {
	t := m.clk.at(now)
	evs := m.rearm(t, now)
	if m.tripped {
		return true, evs // held restarts are not recorded
	}
	m.hour = modelAppend(modelKeep(m.hour, t, time.Hour), t, m.cfg.RestartsPerHour)
	if len(m.hour) >= m.cfg.RestartsPerHour {
		m.tripped, m.since = true, t
		m.why = "fleet_restart_rate"
		evs = append(evs, m.event(crashloop.EventFleetTripped, now, len(m.hour)))
	}
	return m.tripped, evs
}

func (m *modelFleet) NoteFleetStateAt(failing, total int, now time.Time) (bool, []crashloop.Event) {
	total = max(total, 0)
	failing = min(max(failing, 0), total)
	t := m.clk.at(now)
	evs := m.rearm(t, now)
	m.failing, m.total = failing, total
	if failing >= m.cfg.MinFailing && float64(failing)/float64(total) >= m.cfg.FailingFraction {
		if !m.tripped {
			m.hour = modelKeep(m.hour, t, time.Hour)
			m.why = "fleet_failing_fraction"
			evs = append(evs, m.event(crashloop.EventFleetTripped, now, len(m.hour)))
		}
		m.tripped, m.since = true, t // trip, or extend the hold
	}
	return m.tripped, evs
}

func (m *modelFleet) TrippedAt(now time.Time) (bool, []crashloop.Event) {
	t := m.clk.at(now)
	evs := m.rearm(t, now)
	return m.tripped, evs
}

func (m *modelFleet) StatusAt(now time.Time) (crashloop.FleetStatus, []crashloop.Event) {
	t := m.clk.at(now)
	evs := m.rearm(t, now)
	m.hour = modelKeep(m.hour, t, time.Hour)
	st := crashloop.FleetStatus{BreakerTripped: m.tripped, FleetRestartsPerHour: m.cfg.RestartsPerHour,
		FailingKeys: m.failing, Keys: m.total, RestartsInHour: len(m.hour)}
	if m.tripped {
		// rearm_at is the effective trip time plus the cooldown: when the
		// re-arm really happens, also after the clock went back.
		at := m.clk.base.Add(time.Duration(m.since)).Add(m.cfg.Cooldown)
		st.RearmAt = &at
	}
	return st, evs
}

func (m *modelFleet) Reset() {
	m.hour, m.tripped, m.failing, m.total = nil, false, 0, 0
}
