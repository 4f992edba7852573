package crashloop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/crashloopguard/crashloop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// snapOutcome writes a (backoff, error) result as one comparable line.
func snapOutcome(d time.Duration, err error) string {
	var pe *crashloop.ParkedError
	if errors.As(err, &pe) {
		return fmt.Sprintf("parked key=%s reason=%s attempts=%d since=%s last=%v", pe.Key, pe.Reason, pe.Attempts,
			pe.Since.UTC().Format(time.RFC3339Nano), pe.LastError)
	}
	if err != nil {
		return "error " + err.Error()
	}
	return "backoff " + d.String()
}

var errSnapBoom = errors.New("boom")

// snapBudgetScript drives a budget whose window holds respawns at T0 and
// T0+10s from T0+40s on, and returns what it decided.
func snapBudgetScript(b *crashloop.RespawnBudget, c *clock.Mock) []string {
	var out []string
	step := func(at time.Duration) {
		c.Set(testT0.Add(at))
		out = append(out, fmt.Sprintf("%v: respawns=%d %s", at, b.Respawns("a"), snapOutcome(b.Failed("a", errSnapBoom))))
	}
	step(40 * time.Second) // third respawn: 1.5s
	step(60 * time.Second) // the T0 respawn is exactly 60s old and still counts: park
	return out
}

func TestSnapshotBudgetRoundTrip(t *testing.T) {
	cfg := crashloop.DefaultBudgetConfig() // 3 in 60s, 500ms steps
	c := mockAt(testT0)
	orig, err := crashloop.NewRespawnBudget(cfg, crashloop.WithClock(c))
	require.NoError(t, err)
	assert.Equal(t, "backoff 500ms", snapOutcome(orig.Failed("a", errSnapBoom)))
	c.Add(10 * time.Second)
	assert.Equal(t, "backoff 1s", snapOutcome(orig.Failed("a", errSnapBoom)))

	data, err := orig.Snapshot()
	require.NoError(t, err)
	assert.JSONEq(t, `{"version": 1, "kind": "respawn_budget", "latest": "2026-03-01T12:00:10Z",
		"keys": {"a": {"respawns": ["2026-03-01T12:00:00Z", "2026-03-01T12:00:10Z"]}}}`, string(data))

	// The supervisor restarts 30s later: the restored budget decides as the
	// original would have.
	c2 := mockAt(testT0.Add(40 * time.Second))
	rec := newRecorder()
	restored, err := crashloop.NewRespawnBudget(cfg, crashloop.WithClock(c2), crashloop.WithEventHandler(rec))
	require.NoError(t, err)
	require.NoError(t, restored.Restore(data))

	want := []string{
		"40s: respawns=2 backoff 1.5s",
		"1m0s: respawns=3 parked key=a reason=respawn_budget_exhausted attempts=3 since=2026-03-01T12:01:00Z last=boom",
	}
	assert.Equal(t, want, snapBudgetScript(orig, c))
	assert.Equal(t, want, snapBudgetScript(restored, c2))
	evs := rec.Take()
	require.Len(t, evs, 2)
	assert.Equal(t, crashloop.Event{Kind: crashloop.EventRespawnScheduled, Key: "a", Time: testT0.Add(40 * time.Second),
		LastError: errSnapBoom, Attempts: 3, Limit: 3, Window: time.Minute, Backoff: 1500 * time.Millisecond}, evs[0])
	assert.Equal(t, crashloop.Event{Kind: crashloop.EventStartupExhausted, Key: "a", Time: testT0.Add(time.Minute),
		Reason: crashloop.ReasonBudgetExhausted, LastError: errSnapBoom, Attempts: 3, Limit: 3, Window: time.Minute}, evs[1])

	// 60s + 1ns after T0 the first respawn has aged out of a restored window.
	c3 := mockAt(testT0.Add(time.Minute + time.Nanosecond))
	aged, err := crashloop.NewRespawnBudget(cfg, crashloop.WithClock(c3))
	require.NoError(t, err)
	require.NoError(t, aged.Restore(data))
	assert.Equal(t, 1, aged.Respawns("a"))
	assert.Equal(t, "backoff 1s", snapOutcome(aged.Failed("a", errSnapBoom)))

	// A day later the window is empty: a full budget.
	c4 := mockAt(testT0.Add(24 * time.Hour))
	later, err := crashloop.NewRespawnBudget(cfg, crashloop.WithClock(c4))
	require.NoError(t, err)
	require.NoError(t, later.Restore(data))
	assert.Equal(t, 0, later.Respawns("a"))
	assert.Equal(t, "backoff 500ms", snapOutcome(later.Failed("a", errSnapBoom)))
}

func TestSnapshotBudgetParkedSurvives(t *testing.T) {
	cfg := crashloop.BudgetConfig{MaxRespawns: 1, Window: time.Minute, InitialBackoff: time.Second, MaxBackoff: time.Second}
	c := mockAt(testT0)
	orig, err := crashloop.NewRespawnBudget(cfg, crashloop.WithClock(c))
	require.NoError(t, err)
	_, err = orig.Failed("s", errSnapBoom)
	require.NoError(t, err)
	c.Add(1500 * time.Millisecond)
	_, err = orig.Failed("s", errors.New("exit status 2"))
	require.ErrorIs(t, err, crashloop.ErrParked)
	_, err = orig.Failed("nil-cause", nil) // parked with no last error
	require.NoError(t, err)
	_, err = orig.Failed("nil-cause", nil)
	require.ErrorIs(t, err, crashloop.ErrParked)

	data, err := orig.Snapshot()
	require.NoError(t, err)
	assert.JSONEq(t, `{"version": 1, "kind": "respawn_budget", "latest": "2026-03-01T12:00:01.5Z", "keys": {
		"nil-cause": {"respawns": ["2026-03-01T12:00:01.5Z"],
			"parked": {"reason": "respawn_budget_exhausted", "attempts": 1, "since": "2026-03-01T12:00:01.5Z"}},
		"s": {"respawns": ["2026-03-01T12:00:00Z"],
			"parked": {"reason": "respawn_budget_exhausted", "last_error": "exit status 2", "attempts": 1, "since": "2026-03-01T12:00:01.5Z"}}}}`,
		string(data))

	rec := newRecorder()
	c2 := mockAt(testT0.Add(48 * time.Hour)) // parked is terminal: days later it still is
	restored, err := crashloop.NewRespawnBudget(cfg, crashloop.WithClock(c2), crashloop.WithEventHandler(rec))
	require.NoError(t, err)
	require.NoError(t, restored.Restore(data))
	assert.Equal(t, []string{"nil-cause", "s"}, restored.Parked())

	var pe *crashloop.ParkedError
	require.ErrorAs(t, restored.Spawn("s"), &pe)
	assert.Equal(t, "s", pe.Key)
	assert.Equal(t, crashloop.ReasonBudgetExhausted, pe.Reason)
	assert.Equal(t, 1, pe.Attempts)
	assert.True(t, pe.Since.Equal(testT0.Add(1500*time.Millisecond)), pe.Since)
	require.Error(t, pe.LastError)
	assert.Equal(t, "exit status 2", pe.LastError.Error())
	assert.Equal(t, `crashloop: key "s" is parked (respawn_budget_exhausted after 1 respawn; resume it once the cause is fixed): exit status 2`, pe.Error())
	d, err := restored.Failed("s", errSnapBoom)
	assert.Zero(t, d)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "exit status 2", pe.LastError.Error(), "a parked session keeps the cause that parked it")

	require.ErrorAs(t, restored.Spawn("nil-cause"), &pe)
	assert.NoError(t, pe.LastError)

	require.NoError(t, restored.Resume("s"))
	assert.NoError(t, restored.Spawn("s"))
	assert.Equal(t, 0, restored.Respawns("s"))
	evs := rec.Take()
	require.Len(t, evs, 1)
	assert.Equal(t, crashloop.EventResumed, evs[0].Kind)
	assert.Equal(t, "s", evs[0].Key)
	assert.Equal(t, testT0.Add(48*time.Hour), evs[0].Time)
	assert.Equal(t, crashloop.ReasonBudgetExhausted, evs[0].Reason)
	assert.Equal(t, "exit status 2", evs[0].LastError.Error())
}

func TestSnapshotChainRoundTrip(t *testing.T) {
	cfg := crashloop.DefaultChainConfig() // 3 within 20m
	c := mockAt(testT0)
	orig, err := crashloop.NewChainDetector(cfg, crashloop.WithClock(c))
	require.NoError(t, err)
	for i := 1; i <= 2; i++ {
		n, err := orig.Rescue("w", "w#1", true)
		require.NoError(t, err)
		require.Equal(t, i, n)
		c.Add(17 * time.Minute)
	}
	_, err = orig.RescueAt("p", "p#1", false, testT0.Add(17*time.Minute)) // a planned rescue: chain 0
	require.NoError(t, err)
	data, err := orig.Snapshot()
	require.NoError(t, err)
	assert.JSONEq(t, `{"version": 1, "kind": "chain_detector", "latest": "2026-03-01T12:17:00Z", "keys": {
		"p": {"incarnation": "p#1", "last": "2026-03-01T12:17:00Z", "count": 0},
		"w": {"incarnation": "w#1", "last": "2026-03-01T12:17:00Z", "count": 2}}}`, string(data))

	// Restored 20m after the last rescue (a gap of exactly ResetGap keeps
	// the chain): the third rescue continues it, the fourth escalates.
	for _, d := range []*crashloop.ChainDetector{orig, nil} {
		rec := newRecorder()
		c2 := mockAt(testT0.Add(37 * time.Minute))
		if d == nil {
			d, err = crashloop.NewChainDetector(cfg, crashloop.WithClock(c2), crashloop.WithEventHandler(rec))
			require.NoError(t, err)
			require.NoError(t, d.Restore(data))
		} else {
			c.Set(testT0.Add(37 * time.Minute))
			c2 = c
		}
		assert.Equal(t, 2, d.Chain("w", "w#1"))
		assert.Equal(t, 0, d.Chain("w", "w#2"), "another incarnation has no chain")
		n, err := d.Rescue("w", "w#1", true)
		require.NoError(t, err)
		assert.Equal(t, 3, n)
		c2.Add(time.Minute)
		n, err = d.Rescue("w", "w#1", true)
		assert.ErrorIs(t, err, crashloop.ErrNeedsHuman)
		assert.Equal(t, 3, n)
		assert.Equal(t, []string{"w"}, d.NeedsHuman())
	}

	// Restored 20m + 1ns after the last rescue the chain has ended.
	c3 := mockAt(testT0.Add(37*time.Minute + time.Nanosecond))
	d3, err := crashloop.NewChainDetector(cfg, crashloop.WithClock(c3))
	require.NoError(t, err)
	require.NoError(t, d3.Restore(data))
	assert.Equal(t, 0, d3.Chain("w", "w#1"))
	n, err := d3.Rescue("w", "w#1", true)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

func TestSnapshotChainEscalatedSurvives(t *testing.T) {
	cfg := crashloop.ChainConfig{MaxChain: 1, ResetGap: time.Minute}
	c := mockAt(testT0)
	orig, err := crashloop.NewChainDetector(cfg, crashloop.WithClock(c))
	require.NoError(t, err)
	_, err = orig.Rescue("k", "k#1", true)
	require.NoError(t, err)
	_, err = orig.Rescue("k", "k#1", true)
	require.ErrorIs(t, err, crashloop.ErrNeedsHuman)
	data, err := orig.Snapshot()
	require.NoError(t, err)
	assert.JSONEq(t, `{"version": 1, "kind": "chain_detector", "latest": "2026-03-01T12:00:00Z", "keys": {
		"k": {"incarnation": "k#1", "last": "2026-03-01T12:00:00Z", "count": 1, "escalated": true}}}`, string(data))

	rec := newRecorder()
	d, err := crashloop.NewChainDetector(cfg, crashloop.WithClock(mockAt(testT0.Add(time.Hour))), crashloop.WithEventHandler(rec))
	require.NoError(t, err)
	require.NoError(t, d.Restore(data))
	assert.Contains(t, d.NeedsHuman(), "k")
	n, err := d.Rescue("k", "k#2", true) // even a new incarnation: until Clear
	assert.ErrorIs(t, err, crashloop.ErrNeedsHuman)
	assert.Equal(t, 1, n)
	assert.Empty(t, rec.Take(), "the escalation was announced before the restart, not again")
	d.Clear("k")
	n, err = d.Rescue("k", "k#2", true)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

// The latest reading survives a restore: a clock that went back after the
// restart is read as the latest time the object had seen, as it would have
// been without the restart.
func TestSnapshotKeepsTheLatestReading(t *testing.T) {
	cfg := crashloop.ChainConfig{MaxChain: 5, ResetGap: 20 * time.Minute}
	c := mockAt(testT0)
	orig, err := crashloop.NewChainDetector(cfg, crashloop.WithClock(c))
	require.NoError(t, err)
	_, err = orig.RescueAt("k", "i", true, testT0.Add(10*time.Second))
	require.NoError(t, err)
	data, err := orig.Snapshot()
	require.NoError(t, err)

	back := testT0.Add(-50 * time.Second) // the clock went back a minute
	restored, err := crashloop.NewChainDetector(cfg, crashloop.WithClock(mockAt(back)))
	require.NoError(t, err)
	require.NoError(t, restored.Restore(data))
	for _, d := range []*crashloop.ChainDetector{orig, restored} {
		n, err := d.RescueAt("k", "i", true, back) // read as T0+10s
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		// 20m after T0+10s the chain holds; 20m after T0-50s it would not.
		assert.Equal(t, 2, d.ChainAt("k", "i", testT0.Add(20*time.Minute+10*time.Second)))
		assert.Equal(t, 0, d.ChainAt("k", "i", testT0.Add(20*time.Minute+10*time.Second+time.Nanosecond)))
	}
}

func TestSnapshotGuardRoundTrip(t *testing.T) {
	c := mockAt(testT0)
	rec := newRecorder()
	orig, err := crashloop.NewRestartLoopGuard(3, time.Minute, crashloop.WithClock(c), crashloop.WithName("ch"), crashloop.WithEventHandler(rec))
	require.NoError(t, err)
	assert.False(t, orig.Record())
	c.Add(time.Second)
	assert.False(t, orig.Record())
	data, err := orig.Snapshot()
	require.NoError(t, err)
	assert.JSONEq(t, `{"version": 1, "kind": "restart_loop_guard", "latest": "2026-03-01T12:00:01Z",
		"restarts": ["2026-03-01T12:00:00Z", "2026-03-01T12:00:01Z"], "tripped": false}`, string(data))

	rec2 := newRecorder()
	c2 := mockAt(testT0.Add(30 * time.Second))
	restored, err := crashloop.NewRestartLoopGuard(3, time.Minute, crashloop.WithClock(c2), crashloop.WithName("ch"), crashloop.WithEventHandler(rec2))
	require.NoError(t, err)
	require.NoError(t, restored.Restore(data))
	c.Set(testT0.Add(30 * time.Second))
	for _, g := range []*crashloop.RestartLoopGuard{orig, restored} {
		assert.Equal(t, 2, g.Restarts())
		assert.True(t, g.Record(), "the third restart in the window trips")
	}
	want := crashloop.Event{Kind: crashloop.EventGuardTripped, Key: "ch", Time: testT0.Add(30 * time.Second),
		Reason: "restart_loop_guard", Attempts: 3, Limit: 3, Window: time.Minute}
	assert.Equal(t, []crashloop.Event{want}, rec.Take())
	assert.Equal(t, []crashloop.Event{want}, rec2.Take())

	// A tripped guard restored stays tripped and does not announce again.
	tripped, err := restored.Snapshot()
	require.NoError(t, err)
	assert.Contains(t, string(tripped), `"tripped": true`)
	rec3 := newRecorder()
	c3 := mockAt(testT0.Add(31 * time.Second))
	again, err := crashloop.NewRestartLoopGuard(3, time.Minute, crashloop.WithClock(c3), crashloop.WithName("ch"), crashloop.WithEventHandler(rec3))
	require.NoError(t, err)
	require.NoError(t, again.Restore(tripped))
	assert.True(t, again.Tripped())
	assert.True(t, again.Record())
	assert.Empty(t, rec3.Take())
	// 60s after its second restart (T0+1s) the guard holds only the later ones.
	c3.Set(testT0.Add(61*time.Second + time.Nanosecond))
	assert.Equal(t, 2, again.Restarts())
	assert.False(t, again.Tripped())

	// Restarts pruned by a read: "tripped" is read off the window at the
	// latest time seen, and the restored guard decides as the original.
	c3.Set(testT0.Add(time.Hour))
	assert.False(t, again.Record())
	assert.False(t, again.Record())
	assert.True(t, again.Record())
	assert.Len(t, rec3.Take(), 1)
	c3.Set(testT0.Add(2 * time.Hour))
	assert.Equal(t, 0, again.Restarts())
	pruned, err := again.Snapshot()
	require.NoError(t, err)
	assert.JSONEq(t, `{"version": 1, "kind": "restart_loop_guard", "latest": "2026-03-01T14:00:00Z", "restarts": null, "tripped": false}`, string(pruned))
	fresh, err := crashloop.NewRestartLoopGuard(3, time.Minute, crashloop.WithClock(c3), crashloop.WithName("ch"), crashloop.WithEventHandler(rec3))
	require.NoError(t, err)
	require.NoError(t, fresh.Restore(pruned))
	for _, g := range []*crashloop.RestartLoopGuard{again, fresh} {
		assert.False(t, g.Record())
		assert.False(t, g.Record())
		assert.True(t, g.Record())
	}
	assert.Len(t, rec3.Take(), 2, "each trips and announces once")

	// A day later the window is empty.
	later, err := crashloop.NewRestartLoopGuard(3, time.Minute, crashloop.WithClock(mockAt(testT0.Add(24*time.Hour))))
	require.NoError(t, err)
	require.NoError(t, later.Restore(tripped))
	assert.Equal(t, 0, later.Restarts())
	assert.False(t, later.Tripped())
}

func TestSnapshotFleetRoundTrip(t *testing.T) {
	cfg := crashloop.FleetConfig{RestartsPerHour: 3, FailingFraction: 0.5, MinFailing: 2, Cooldown: 2 * time.Minute}
	c := mockAt(testT0)
	orig, err := crashloop.NewFleetSupervisionPolicy(cfg, crashloop.WithClock(c), crashloop.WithName("fleet"))
	require.NoError(t, err)
	assert.False(t, orig.NoteRestart())
	c.Add(10 * time.Minute)
	assert.False(t, orig.NoteRestart())
	assert.False(t, orig.NoteFleetState(1, 4))
	data, err := orig.Snapshot()
	require.NoError(t, err)
	assert.JSONEq(t, `{"version": 1, "kind": "fleet_supervision_policy", "latest": "2026-03-01T12:10:00Z",
		"restarts": ["2026-03-01T12:00:00Z", "2026-03-01T12:10:00Z"], "tripped": false, "failing": 1, "total": 4}`, string(data))

	rec := newRecorder()
	c2 := mockAt(testT0.Add(30 * time.Minute))
	restored, err := crashloop.NewFleetSupervisionPolicy(cfg, crashloop.WithClock(c2), crashloop.WithName("fleet"), crashloop.WithEventHandler(rec))
	require.NoError(t, err)
	require.NoError(t, restored.Restore(data))
	st := restored.Status()
	assert.Equal(t, crashloop.FleetStatus{FleetRestartsPerHour: 3, FailingKeys: 1, Keys: 4, RestartsInHour: 2}, st)
	assert.True(t, restored.NoteRestart(), "the third restart in the hour trips")
	trip := crashloop.Event{Kind: crashloop.EventFleetTripped, Key: "fleet", Time: testT0.Add(30 * time.Minute),
		Reason: "fleet_restart_rate", Attempts: 3, Limit: 3, Window: 2 * time.Minute, Failing: 1, Total: 4}
	assert.Equal(t, []crashloop.Event{trip}, rec.Take())

	// The trip survives a restart in the middle of its cooldown, and re-arms
	// exactly at trip + cooldown.
	c2.Add(time.Minute)
	tripped, err := restored.Snapshot()
	require.NoError(t, err)
	assert.JSONEq(t, `{"version": 1, "kind": "fleet_supervision_policy", "latest": "2026-03-01T12:30:00Z",
		"restarts": ["2026-03-01T12:00:00Z", "2026-03-01T12:10:00Z", "2026-03-01T12:30:00Z"],
		"tripped": true, "since": "2026-03-01T12:30:00Z", "reason": "fleet_restart_rate",
		"failing": 1, "total": 4}`, string(tripped))
	rec3 := newRecorder()
	c3 := mockAt(testT0.Add(31*time.Minute + 30*time.Second))
	again, err := crashloop.NewFleetSupervisionPolicy(cfg, crashloop.WithClock(c3), crashloop.WithName("fleet"), crashloop.WithEventHandler(rec3))
	require.NoError(t, err)
	require.NoError(t, again.Restore(tripped))
	assert.True(t, again.Tripped())
	rearm := testT0.Add(32 * time.Minute)
	st = again.Status()
	require.NotNil(t, st.RearmAt)
	assert.True(t, st.RearmAt.Equal(rearm), st.RearmAt)
	assert.True(t, again.NoteRestart(), "held restarts are not counted")
	assert.True(t, again.TrippedAt(rearm.Add(-time.Nanosecond)))
	assert.Empty(t, rec3.Take())
	assert.False(t, again.TrippedAt(rearm))
	assert.Equal(t, []crashloop.Event{{Kind: crashloop.EventFleetRearmed, Key: "fleet", Time: rearm,
		Reason: "fleet_restart_rate", Limit: 3, Window: 2 * time.Minute, Failing: 1, Total: 4}}, rec3.Take())
	assert.Equal(t, 0, again.StatusAt(rearm).RestartsInHour, "re-armed with a clean hour")

	// More than an hour later the restored hour is empty.
	later, err := crashloop.NewFleetSupervisionPolicy(cfg, crashloop.WithClock(mockAt(testT0.Add(71*time.Minute))))
	require.NoError(t, err)
	require.NoError(t, later.Restore(data))
	assert.Equal(t, 0, later.Status().RestartsInHour)
}

// Snapshot, Restore into an object created at the same instant, Snapshot
// again: the documents are identical, for every kind.
func TestSnapshotRoundTripIsExact(t *testing.T) {
	at := testT0.Add(123456789 * time.Nanosecond)
	mk := func() *clock.Mock { return mockAt(testT0) }

	b1, _ := crashloop.NewRespawnBudget(crashloop.DefaultBudgetConfig(), crashloop.WithClock(mk()))
	b2, _ := crashloop.NewRespawnBudget(crashloop.DefaultBudgetConfig(), crashloop.WithClock(mk()))
	for i := range 40 {
		key := fmt.Sprintf("k%d", i%7)
		_, _ = b1.FailedAt(key, fmt.Errorf("e%d", i), at.Add(time.Duration(i)*time.Second/3))
	}
	snapSameTwice(t, b1.Snapshot, b2.Restore, b2.Snapshot)

	d1, _ := crashloop.NewChainDetector(crashloop.DefaultChainConfig(), crashloop.WithClock(mk()))
	d2, _ := crashloop.NewChainDetector(crashloop.DefaultChainConfig(), crashloop.WithClock(mk()))
	for i := range 40 {
		_, _ = d1.RescueAt(fmt.Sprintf("k%d", i%5), fmt.Sprintf("i%d", i%3), i%4 != 0, at.Add(time.Duration(i)*time.Minute))
	}
	snapSameTwice(t, d1.Snapshot, d2.Restore, d2.Snapshot)

	g1, _ := crashloop.NewRestartLoopGuard(4, time.Minute, crashloop.WithClock(mk()))
	g2, _ := crashloop.NewRestartLoopGuard(4, time.Minute, crashloop.WithClock(mk()))
	for i := range 9 {
		g1.RecordAt(at.Add(time.Duration(i) * 7 * time.Second))
	}
	snapSameTwice(t, g1.Snapshot, g2.Restore, g2.Snapshot)

	cfg := crashloop.FleetConfig{RestartsPerHour: 5, FailingFraction: 0.5, MinFailing: 2, Cooldown: time.Minute}
	p1, _ := crashloop.NewFleetSupervisionPolicy(cfg, crashloop.WithClock(mk()))
	p2, _ := crashloop.NewFleetSupervisionPolicy(cfg, crashloop.WithClock(mk()))
	for i := range 4 {
		p1.NoteRestartAt(at.Add(time.Duration(i) * time.Second))
	}
	p1.NoteFleetStateAt(3, 4, at.Add(5*time.Second))
	p1.NoteFleetStateAt(3, 4, at) // the clock went back: the trip stays at the latest reading
	snapSameTwice(t, p1.Snapshot, p2.Restore, p2.Snapshot)
	doc, err := p2.Snapshot()
	require.NoError(t, err)
	assert.Contains(t, string(doc), `"since": "2026-03-01T12:00:05.123456789Z"`)
	st1, st2 := p1.StatusAt(at), p2.StatusAt(at)
	assert.Equal(t, st1.RearmAt.String(), st2.RearmAt.String(), "Status reports the same rearm_at")
}

func snapSameTwice(t *testing.T, snap func() ([]byte, error), restore func([]byte) error, snap2 func() ([]byte, error)) {
	t.Helper()
	a, err := snap()
	require.NoError(t, err)
	require.NoError(t, restore(a))
	b, err := snap2()
	require.NoError(t, err)
	assert.Equal(t, string(a), string(b))
}

// The zero-time corner: a time read before the object's base, and a fresh
// object that has read no time at all.
func TestSnapshotEmptyAndEarly(t *testing.T) {
	g, _ := crashloop.NewRestartLoopGuard(2, time.Minute, crashloop.WithClock(mockAt(testT0)))
	data, err := g.Snapshot()
	require.NoError(t, err)
	assert.JSONEq(t, `{"version": 1, "kind": "restart_loop_guard", "restarts": null, "tripped": false}`, string(data))
	g2, _ := crashloop.NewRestartLoopGuard(2, time.Minute, crashloop.WithClock(mockAt(testT0)))
	require.NoError(t, g2.Restore(data))

	b, _ := crashloop.NewRespawnBudget(crashloop.DefaultBudgetConfig(), crashloop.WithClock(mockAt(testT0)))
	_, err = b.FailedAt("old", errSnapBoom, time.Time{}) // year 1: the offset saturates
	require.NoError(t, err)
	data, err = b.Snapshot()
	require.NoError(t, err)
	// The offset saturated at the timeline's initial mark; the mark is
	// written all the same, or the event would lie after it.
	early := testT0.Add(math.MinInt64).Format(time.RFC3339Nano)
	assert.JSONEq(t, `{"version": 1, "kind": "respawn_budget", "latest": "`+early+`", "keys": {"old": {"respawns": ["`+early+`"]}}}`, string(data))
	b2, _ := crashloop.NewRespawnBudget(crashloop.DefaultBudgetConfig(), crashloop.WithClock(mockAt(testT0)))
	require.NoError(t, b2.Restore(data))
	again, err := b2.Snapshot()
	require.NoError(t, err)
	assert.Equal(t, string(data), string(again))
}

// Times an explicit now can bring, far beyond a time.Duration from the base
// and beyond the years RFC 3339 can write, round-trip exactly.
func TestSnapshotFarTimes(t *testing.T) {
	far := []time.Time{{}, time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Unix(1<<62, 0),
		time.Unix(-1<<62, 0), time.Date(-1, 2, 29, 0, 0, 0, 5, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	latest := time.Unix(1<<62, 0) // the latest of them
	mk := func() *clock.Mock { return mockAt(testT0) }

	b1, _ := crashloop.NewRespawnBudget(crashloop.BudgetConfig{MaxRespawns: 1, Window: time.Minute}, crashloop.WithClock(mk()))
	b2, _ := crashloop.NewRespawnBudget(crashloop.BudgetConfig{MaxRespawns: 1, Window: time.Minute}, crashloop.WithClock(mk()))
	for i, at := range far {
		key := fmt.Sprintf("k%d", i)
		_, err := b1.FailedAt(key, errSnapBoom, at)
		require.NoError(t, err)
		_, err = b1.FailedAt(key, errSnapBoom, at) // parked since at
		require.ErrorIs(t, err, crashloop.ErrParked)
	}
	data, err := b1.Snapshot()
	require.NoError(t, err)
	assert.Contains(t, string(data), `"since": "146138514283-06-19T07:45:04Z"`)
	assert.Contains(t, string(data), `"since": "-146138510344-07-14T16:14:56Z"`)
	assert.Contains(t, string(data), `"since": "-0001-03-01T00:00:00.000000005Z"`, "year -1 has no Feb 29")
	assert.Contains(t, string(data), `"since": "10000-01-01T00:00:00Z"`)
	err = b2.Restore(data)
	require.ErrorIs(t, err, crashloop.ErrBadSnapshot, "from the mock's now these times lie in the future")
	require.NoError(t, b2.RestoreAt(data, latest))
	again, err := b2.Snapshot()
	require.NoError(t, err)
	assert.Equal(t, string(data), string(again))
	for i, at := range far {
		var pe *crashloop.ParkedError
		require.ErrorAs(t, b2.Spawn(fmt.Sprintf("k%d", i)), &pe)
		assert.True(t, pe.Since.Equal(at), "%v != %v", pe.Since, at)
	}

	p1, _ := crashloop.NewFleetSupervisionPolicy(crashloop.DefaultFleetConfig(), crashloop.WithClock(mk()))
	p2, _ := crashloop.NewFleetSupervisionPolicy(crashloop.DefaultFleetConfig(), crashloop.WithClock(mk()))
	for _, at := range far {
		p1.NoteRestartAt(at)
	}
	p1.NoteFleetStateAt(2, 2, time.Unix(-1<<62, 0)) // tripped by a reading in year -146138510344
	data, err = p1.Snapshot()
	require.NoError(t, err)
	require.NoError(t, p2.RestoreAt(data, latest))
	again, err = p2.Snapshot()
	require.NoError(t, err)
	assert.Equal(t, string(data), string(again))

	// A document naming Feb 29 of a year that has none is refused.
	bad := `{"version": 1, "kind": "respawn_budget", "keys": {"a": {"parked": {"reason": "x", "attempts": 0, "since": "10001-02-29T00:00:00Z"}}}}`
	err = b2.RestoreAt([]byte(bad), latest)
	require.ErrorIs(t, err, crashloop.ErrBadSnapshot)
	assert.Contains(t, err.Error(), `keys["a"].parked.since: parsing time "10001-02-29T00:00:00Z": day out of range`)
}

// A restore later than the snapshot by less than MaxSnapshotSkew in the
// other direction (the clock is behind) is accepted; RestoreAt takes the
// time explicitly.
func TestSnapshotClockBehind(t *testing.T) {
	c := mockAt(testT0)
	g, _ := crashloop.NewRestartLoopGuard(2, time.Minute, crashloop.WithClock(c))
	g.RecordAt(testT0.Add(59 * time.Minute))
	data, err := g.Snapshot()
	require.NoError(t, err)

	g2, _ := crashloop.NewRestartLoopGuard(2, time.Minute, crashloop.WithClock(mockAt(testT0)))
	require.NoError(t, g2.Restore(data), "59m ahead of the clock: within the skew")
	assert.Equal(t, 1, g2.Restarts(), "an event ahead of now counts as age 0")

	g.RecordAt(testT0.Add(2 * time.Hour))
	data, err = g.Snapshot()
	require.NoError(t, err)
	g3, _ := crashloop.NewRestartLoopGuard(2, time.Minute, crashloop.WithClock(mockAt(testT0)))
	err = g3.Restore(data)
	require.ErrorIs(t, err, crashloop.ErrBadSnapshot)
	assert.Contains(t, err.Error(), "restart_loop_guard.latest: 2026-03-01T14:00:00Z lies in the future")
	require.NoError(t, g3.RestoreAt(data, testT0.Add(2*time.Hour)))
	assert.Equal(t, 1, g3.RestartsAt(testT0.Add(2*time.Hour)), "the restart at 59m aged out before 2h")
}

// snapBadCase is a document that Restore must reject.
type snapBadCase struct {
	name, doc, want string
}

func snapCheckBad(t *testing.T, cases []snapBadCase, snap func() ([]byte, error), restore func([]byte) error) {
	t.Helper()
	before, err := snap()
	require.NoError(t, err)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := restore([]byte(tc.doc))
			require.ErrorIs(t, err, crashloop.ErrBadSnapshot)
			assert.Contains(t, err.Error(), tc.want)
			after, err := snap()
			require.NoError(t, err)
			assert.Equal(t, string(before), string(after), "a rejected document changes nothing")
		})
	}
}

func TestSnapshotBudgetRejectsBadDocuments(t *testing.T) {
	c := mockAt(testT0.Add(time.Minute))
	b, err := crashloop.NewRespawnBudget(crashloop.DefaultBudgetConfig(), crashloop.WithClock(c))
	require.NoError(t, err)
	_, _ = b.FailedAt("live", errSnapBoom, testT0.Add(30*time.Second)) // state that must survive
	const ok = `{"version": 1, "kind": "respawn_budget", "latest": "2026-03-01T12:00:10Z", "keys": {"a": {"respawns": ["2026-03-01T12:00:00Z", "2026-03-01T12:00:10Z"]}}}`
	b2, _ := crashloop.NewRespawnBudget(crashloop.DefaultBudgetConfig(), crashloop.WithClock(c))
	require.NoError(t, b2.Restore([]byte(ok)), "the base document is good")
	cases := []snapBadCase{
		{"empty", ``, "corrupt or truncated document: unexpected end of JSON input"},
		{"truncated", ok[:len(ok)/2], "corrupt or truncated"},
		{"garbage", `{"version": 1, "kind": "respawn_budget", "keys": {"a": 3}}`, `respawn_budget: json: cannot unmarshal number`},
		{"null", `null`, "unknown version 0"},
		{"array", `[]`, "corrupt or truncated"},
		{"version 2", strings.Replace(ok, `"version": 1`, `"version": 2`, 1), "respawn_budget: unknown version 2 (this library reads version 1)"},
		{"no version", strings.Replace(ok, `"version": 1,`, ``, 1), "unknown version 0"},
		{"wrong kind", strings.Replace(ok, `"respawn_budget"`, `"restart_loop_guard"`, 1), `kind "restart_loop_guard", want "respawn_budget"`},
		{"unknown field", strings.Replace(ok, `"keys"`, `"extra": 1, "keys"`, 1), `unknown field "extra"`},
		{"trailing data", ok + `{}`, "corrupt or truncated document: invalid character '{' after top-level value"},
		{"over the limit", `{"version": 1, "kind": "respawn_budget", "latest": "2026-03-01T12:00:10Z", "keys": {"a": {"respawns": ["2026-03-01T12:00:00Z", "2026-03-01T12:00:01Z", "2026-03-01T12:00:02Z", "2026-03-01T12:00:03Z"]}}}`,
			`respawn_budget.keys["a"].respawns: 4 events, more than the limit of 3`},
		{"unsorted", strings.Replace(ok, `["2026-03-01T12:00:00Z", "2026-03-01T12:00:10Z"]`, `["2026-03-01T12:00:10Z", "2026-03-01T12:00:00Z"]`, 1),
			`respawn_budget.keys["a"].respawns[1]: 2026-03-01T12:00:00Z lies before the event ahead of it`},
		{"after latest", strings.Replace(ok, `"latest": "2026-03-01T12:00:10Z"`, `"latest": "2026-03-01T12:00:05Z"`, 1),
			`respawns[1]: 2026-03-01T12:00:10Z lies after the latest reading of the document`},
		{"no latest", strings.Replace(ok, `"latest": "2026-03-01T12:00:10Z",`, ``, 1), `respawns[0]: 2026-03-01T12:00:00Z, but the document has no latest reading`},
		{"far future", strings.Replace(ok, `"latest": "2026-03-01T12:00:10Z"`, `"latest": "2999-01-01T00:00:00Z"`, 1),
			`respawn_budget.latest: 2999-01-01T00:00:00Z lies in the future (more than 1h0m0s after now, 2026-03-01T12:01:00Z)`},
		{"bad time", strings.Replace(ok, `"2026-03-01T12:00:00Z",`, `"yesterday",`, 1), `respawns[0]: parsing time "yesterday"`},
		{"bad backoff", `{"version": 1, "kind": "respawn_budget", "keys": {"a": {"prev_backoff": "soon"}}}`, `keys["a"].prev_backoff: time: invalid duration "soon"`},
		{"park without reason", `{"version": 1, "kind": "respawn_budget", "keys": {"a": {"parked": {"attempts": 1, "since": "2026-03-01T12:00:00Z"}}}}`,
			`keys["a"].parked.reason: missing: a parked key must say why`},
		{"park without since", `{"version": 1, "kind": "respawn_budget", "keys": {"a": {"parked": {"reason": "x", "attempts": 1}}}}`,
			`keys["a"].parked.since: missing time`},
		{"negative attempts", `{"version": 1, "kind": "respawn_budget", "keys": {"a": {"parked": {"reason": "x", "attempts": -1, "since": "2026-03-01T12:00:00Z"}}}}`,
			`keys["a"].parked.attempts: negative count -1`},
		{"park in the future", `{"version": 1, "kind": "respawn_budget", "keys": {"a": {"parked": {"reason": "x", "attempts": 1, "since": "2026-03-01T13:01:00.000000001Z"}}}}`,
			`keys["a"].parked.since: 2026-03-01T13:01:00.000000001Z lies in the future`},
	}
	snapCheckBad(t, cases, b.Snapshot, b.Restore)
	// One hour after now exactly is still accepted.
	require.NoError(t, b2.Restore([]byte(`{"version": 1, "kind": "respawn_budget", "keys": {"a": {"parked": {"reason": "x", "attempts": 1, "since": "2026-03-01T13:01:00Z"}}}}`)))
	// A budget of 0 respawns takes no window at all.
	b0, _ := crashloop.NewRespawnBudget(crashloop.BudgetConfig{MaxRespawns: 0, Window: time.Minute}, crashloop.WithClock(c))
	err = b0.Restore([]byte(ok))
	require.ErrorIs(t, err, crashloop.ErrBadSnapshot)
	assert.Contains(t, err.Error(), "2 events, more than the limit of 0")
}

func TestSnapshotChainRejectsBadDocuments(t *testing.T) {
	c := mockAt(testT0.Add(time.Minute))
	d, _ := crashloop.NewChainDetector(crashloop.DefaultChainConfig(), crashloop.WithClock(c))
	_, _ = d.Rescue("live", "i", true)
	const ok = `{"version": 1, "kind": "chain_detector", "latest": "2026-03-01T12:00:10Z", "keys": {"w": {"incarnation": "w#1", "last": "2026-03-01T12:00:10Z", "count": 2}}}`
	d2, _ := crashloop.NewChainDetector(crashloop.DefaultChainConfig(), crashloop.WithClock(c))
	require.NoError(t, d2.Restore([]byte(ok)))
	cases := []snapBadCase{
		{"truncated", ok[:40], "corrupt or truncated"},
		{"wrong kind", strings.Replace(ok, `"chain_detector"`, `"respawn_budget"`, 1), `kind "respawn_budget", want "chain_detector"`},
		{"negative count", strings.Replace(ok, `"count": 2`, `"count": -2`, 1), `chain_detector.keys["w"].count: negative count -2`},
		{"chain too long", strings.Replace(ok, `"count": 2`, `"count": 4`, 1), `chain_detector.keys["w"].count: a chain of 4, longer than the max chain of 3`},
		{"no last", strings.Replace(ok, `"last": "2026-03-01T12:00:10Z", `, ``, 1), `chain_detector.keys["w"].last: missing time`},
		{"last after latest", strings.Replace(ok, `"last": "2026-03-01T12:00:10Z"`, `"last": "2026-03-01T12:00:11Z"`, 1), `keys["w"].last: 2026-03-01T12:00:11Z lies after the latest reading`},
		{"far future", strings.ReplaceAll(ok, `2026-03-01T12:00:10Z`, `2027-01-01T00:00:00Z`), `chain_detector.latest: 2027-01-01T00:00:00Z lies in the future`},
	}
	snapCheckBad(t, cases, d.Snapshot, d.Restore)
}

func TestSnapshotGuardRejectsBadDocuments(t *testing.T) {
	c := mockAt(testT0.Add(time.Minute))
	g, _ := crashloop.NewRestartLoopGuard(2, time.Minute, crashloop.WithClock(c))
	g.Record()
	const ok = `{"version": 1, "kind": "restart_loop_guard", "latest": "2026-03-01T12:00:10Z", "restarts": ["2026-03-01T12:00:00Z", "2026-03-01T12:00:10Z"], "tripped": true}`
	g2, _ := crashloop.NewRestartLoopGuard(2, time.Minute, crashloop.WithClock(c))
	require.NoError(t, g2.Restore([]byte(ok)))
	cases := []snapBadCase{
		{"version 0", strings.Replace(ok, `"version": 1`, `"version": 0`, 1), "unknown version 0"},
		{"over the limit", strings.Replace(ok, `"2026-03-01T12:00:00Z", `, `"2026-03-01T12:00:00Z", "2026-03-01T12:00:00Z", `, 1), `restart_loop_guard.restarts: 3 events, more than the limit of 2`},
		{"unsorted", strings.Replace(ok, `["2026-03-01T12:00:00Z", "2026-03-01T12:00:10Z"]`, `["2026-03-01T12:00:10Z", "2026-03-01T12:00:00Z"]`, 1), `restarts[1]: 2026-03-01T12:00:00Z lies before the event ahead of it`},
		{"tripped is a string", strings.Replace(ok, `"tripped": true`, `"tripped": "yes"`, 1), "cannot unmarshal string"},
	}
	snapCheckBad(t, cases, g.Snapshot, g.Restore)
}

func TestSnapshotFleetRejectsBadDocuments(t *testing.T) {
	cfg := crashloop.FleetConfig{RestartsPerHour: 2, FailingFraction: 0.5, MinFailing: 2, Cooldown: time.Minute}
	c := mockAt(testT0.Add(time.Minute))
	p, _ := crashloop.NewFleetSupervisionPolicy(cfg, crashloop.WithClock(c))
	p.NoteRestart()
	const ok = `{"version": 1, "kind": "fleet_supervision_policy", "latest": "2026-03-01T12:00:10Z", "restarts": ["2026-03-01T12:00:10Z"], "tripped": true, "since": "2026-03-01T12:00:10Z", "reason": "r", "failing": 2, "total": 3}`
	p2, _ := crashloop.NewFleetSupervisionPolicy(cfg, crashloop.WithClock(c))
	require.NoError(t, p2.Restore([]byte(ok)))
	cases := []snapBadCase{
		{"over the limit", strings.Replace(ok, `"restarts": ["2026-03-01T12:00:10Z"]`, `"restarts": ["2026-03-01T12:00:10Z", "2026-03-01T12:00:10Z", "2026-03-01T12:00:10Z"]`, 1),
			"fleet_supervision_policy.restarts: 3 events, more than the limit of 2"},
		{"negative failing", strings.Replace(ok, `"failing": 2`, `"failing": -1`, 1), "fleet_supervision_policy.failing: negative count -1"},
		{"negative total", strings.Replace(ok, `"total": 3`, `"total": -3`, 1), "fleet_supervision_policy.total: negative count -3"},
		{"failing over total", strings.Replace(ok, `"failing": 2`, `"failing": 4`, 1), "fleet_supervision_policy.failing: 4 failing members of 3"},
		{"tripped without since", strings.Replace(ok, `"since": "2026-03-01T12:00:10Z", `, ``, 1), "fleet_supervision_policy.since: missing time"},
		{"since after latest", strings.Replace(ok, `"since": "2026-03-01T12:00:10Z"`, `"since": "2026-03-01T12:00:11Z"`, 1), "fleet_supervision_policy.since: 2026-03-01T12:00:11Z lies after the latest reading"},
		{"tripped without reason", strings.Replace(ok, `"reason": "r", `, ``, 1), "fleet_supervision_policy.reason: missing: a tripped breaker must say why"},
		{"since_clock is no field", strings.Replace(ok, `"failing"`, `"since_clock": "2026-03-01T12:00:10Z", "failing"`, 1), `unknown field "since_clock"`},
	}
	snapCheckBad(t, cases, p.Snapshot, p.Restore)
}

// snapSupConfig is a Supervisor that never sleeps: no backoff at all.
func snapSupConfig() crashloop.SupervisorConfig {
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Budget = crashloop.BudgetConfig{MaxRespawns: 2, Window: time.Minute}
	return cfg
}

// snapFailN runs key until fn has failed n times, then cancels it (the
// n+1th run sees the context end).
func snapFailN(t *testing.T, s *crashloop.Supervisor, key string, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	err := s.Run(ctx, key, func(ctx context.Context) error {
		calls++
		if calls > n {
			cancel()
			return errors.New("cancelled")
		}
		return errSnapBoom
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, n+1, calls)
}

func TestSnapshotSupervisorRoundTrip(t *testing.T) {
	cfg := snapSupConfig()
	c := mockAt(testT0)
	orig, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(c))
	require.NoError(t, err)
	snapFailN(t, orig, "a", 2) // two respawns in the window
	data, err := orig.Snapshot()
	require.NoError(t, err)
	assert.JSONEq(t, `{"version": 1, "kind": "supervisor",
		"budget": {"version": 1, "kind": "respawn_budget", "latest": "2026-03-01T12:00:00Z",
			"keys": {"a": {"respawns": ["2026-03-01T12:00:00Z", "2026-03-01T12:00:00Z"]}}},
		"chain": {"version": 1, "kind": "chain_detector", "latest": "2026-03-01T12:00:00Z", "keys": {}},
		"fleet": {"version": 1, "kind": "fleet_supervision_policy", "latest": "2026-03-01T12:00:00Z",
			"restarts": ["2026-03-01T12:00:00Z", "2026-03-01T12:00:00Z"], "tripped": false, "failing": 0, "total": 0},
		"keys": {"a": {"state": "exited", "incarnation": "a#1", "runs": 1, "restarts": 2, "last_error": "boom",
			"since": "2026-03-01T12:00:00Z"}}}`,
		string(data))

	// Restored 30s later, the next failure parks, as without the restart.
	c2 := mockAt(testT0.Add(30 * time.Second))
	restored, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(c2))
	require.NoError(t, err)
	require.NoError(t, restored.Restore(data))
	c.Set(testT0.Add(30 * time.Second))
	for _, s := range []*crashloop.Supervisor{orig, restored} {
		calls := 0
		err := s.Run(context.Background(), "a", func(context.Context) error { calls++; return errSnapBoom })
		var pe *crashloop.ParkedError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, 1, calls)
		assert.Equal(t, crashloop.ReasonBudgetExhausted, pe.Reason)
		assert.Equal(t, 2, pe.Attempts)
		assert.Equal(t, testT0.Add(30*time.Second), pe.Since)
		ks := s.Status(context.Background()).Keys["a"]
		assert.Equal(t, crashloop.KeyStatus{State: crashloop.StateParked, Respawns: 2, TotalRestarts: 2, LastError: "boom",
			Reason: crashloop.ReasonBudgetExhausted, Incarnation: "a#2", Since: testT0.Add(30 * time.Second),
			LocalRestarts: 2, ParkedSince: testT0.Add(30 * time.Second)}, ks)
	}

	// A day later the budget is full again.
	c3 := mockAt(testT0.Add(24 * time.Hour))
	later, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(c3))
	require.NoError(t, err)
	require.NoError(t, later.Restore(data))
	snapFailN(t, later, "a", 2)
	assert.Empty(t, later.Parked())
}

func TestSnapshotSupervisorParkedSurvivesRestartThroughFileStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	cfg := snapSupConfig()
	s1, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(mockAt(testT0)), crashloop.WithStore(crashloop.NewFileStore(path)))
	require.NoError(t, err, "a missing file is a fresh start")
	err = s1.Run(context.Background(), "a", func(context.Context) error { return errSnapBoom })
	var pe1 *crashloop.ParkedError
	require.ErrorAs(t, err, &pe1)

	// The supervisor process restarts an hour later; nothing called Save.
	rec := newRecorder()
	c2 := mockAt(testT0.Add(time.Hour))
	s2, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(c2), crashloop.WithEventHandler(rec),
		crashloop.WithStore(crashloop.NewFileStore(path)))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, s2.Parked())
	called := false
	err = s2.Run(context.Background(), "a", func(context.Context) error { called = true; return nil })
	var pe *crashloop.ParkedError
	require.ErrorAs(t, err, &pe)
	assert.False(t, called, "Run refuses a parked key")
	assert.Equal(t, "a", pe.Key)
	assert.Equal(t, crashloop.ReasonBudgetExhausted, pe.Reason)
	assert.Equal(t, 2, pe.Attempts)
	assert.True(t, pe.Since.Equal(testT0))
	assert.Equal(t, "boom", pe.LastError.Error())
	assert.Equal(t, pe1.Error(), pe.Error())
	ks := s2.Status(context.Background()).Keys["a"]
	assert.Equal(t, crashloop.StateParked, ks.State)
	assert.False(t, ks.CanRestart)

	// Resume is saved at once: a third process sees it.
	require.NoError(t, s2.Resume(context.Background(), "a"))
	assert.Equal(t, crashloop.EventResumed, rec.Take()[0].Kind)
	s3, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(mockAt(testT0.Add(2*time.Hour))), crashloop.WithStore(crashloop.NewFileStore(path)))
	require.NoError(t, err)
	assert.Empty(t, s3.Parked())
	require.NoError(t, s3.Run(context.Background(), "a", func(context.Context) error { called = true; return nil }))
	assert.True(t, called)
}

func TestSnapshotSupervisorNeedsHumanSurvives(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	cfg := snapSupConfig()
	s1, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(mockAt(testT0)), crashloop.WithStore(crashloop.NewFileStore(path)))
	require.NoError(t, err)
	runs := 0
	err = s1.Run(context.Background(), "w", func(ctx context.Context) error {
		runs++
		crashloop.Ready(ctx) // healthy, then dies: the slow loop
		return errSnapBoom
	}, crashloop.WithIncarnation("w-1"))
	require.ErrorIs(t, err, crashloop.ErrNeedsHuman)
	assert.Equal(t, 4, runs, "three rescues, the fourth failure escalates")

	s2, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(mockAt(testT0.Add(time.Hour))), crashloop.WithStore(crashloop.NewFileStore(path)))
	require.NoError(t, err)
	err = s2.Run(context.Background(), "w", func(context.Context) error { return nil })
	require.ErrorIs(t, err, crashloop.ErrParked)
	require.ErrorIs(t, err, crashloop.ErrNeedsHuman, "a restored needs_human park still says so")
	var pe *crashloop.ParkedError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, crashloop.ReasonNeedsHuman, pe.Reason)
	assert.Equal(t, `crashloop: "w" needs a human: crash-loop: gave up after 3 reactive rescues: boom`, pe.LastError.Error())
	assert.Equal(t, crashloop.StateNeedsHuman, s2.Status(context.Background()).Keys["w"].State)
	require.NoError(t, s2.Resume(context.Background(), "w"))
	require.NoError(t, s2.Run(context.Background(), "w", func(context.Context) error { return nil }))
}

// Guards that are off are checked and ignored; guards that are on and
// absent start empty.
func TestSnapshotSupervisorConfigChange(t *testing.T) {
	cfg := snapSupConfig()
	guard := crashloop.DefaultGuardConfig()
	cfg.Guard = &guard
	cfg.HourlyCap = 10
	s1, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(mockAt(testT0)))
	require.NoError(t, err)
	snapFailN(t, s1, "a", 1)
	data, err := s1.Snapshot()
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	key := doc["keys"].(map[string]any)["a"].(map[string]any)
	assert.Equal(t, []any{"2026-03-01T12:00:00Z"}, key["guard"].(map[string]any)["restarts"])
	assert.Equal(t, []any{"2026-03-01T12:00:00Z"}, key["hourly"].(map[string]any)["restarts"])

	off := snapSupConfig()
	off.Chain, off.Fleet = nil, nil
	s2, err := crashloop.NewSupervisor(off, crashloop.WithClock(mockAt(testT0)))
	require.NoError(t, err)
	require.NoError(t, s2.Restore(data))
	again, err := s2.Snapshot()
	require.NoError(t, err)
	assert.NotContains(t, string(again), `"guard"`)
	assert.NotContains(t, string(again), `"chain"`)
	assert.NotContains(t, string(again), `"fleet"`)

	// Back on: empty guards, the budget as it was.
	s3, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(mockAt(testT0)))
	require.NoError(t, err)
	require.NoError(t, s3.Restore(again))
	assert.Equal(t, 1, s3.Status(context.Background()).Keys["a"].Respawns)
	final, err := s3.Snapshot()
	require.NoError(t, err)
	assert.Contains(t, string(final), `"guard": {`)
	assert.Contains(t, string(final), `"restarts": null`)

	// A part that is off is still checked.
	bad := strings.Replace(string(data), `"kind": "restart_loop_guard"`, `"kind": "nonsense"`, 1)
	err = s2.Restore([]byte(bad))
	require.ErrorIs(t, err, crashloop.ErrBadSnapshot)
	assert.Contains(t, err.Error(), `supervisor.keys["a"].guard: kind "nonsense", want "restart_loop_guard"`)
}

func TestSnapshotSupervisorRejectsBadDocuments(t *testing.T) {
	cfg := snapSupConfig()
	guard := crashloop.GuardConfig{MaxRestarts: 2, Window: time.Minute}
	cfg.Guard = &guard
	s, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(mockAt(testT0)))
	require.NoError(t, err)
	snapFailN(t, s, "live", 1)
	const ok = `{"version": 1, "kind": "supervisor",
		"budget": {"version": 1, "kind": "respawn_budget", "keys": {}},
		"keys": {"a": {"state": "exited", "since": "2026-03-01T12:00:00Z"}}}`
	s2, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(mockAt(testT0)))
	require.NoError(t, err)
	require.NoError(t, s2.Restore([]byte(ok)))
	cases := []snapBadCase{
		{"wrong kind", strings.Replace(ok, `"supervisor"`, `"respawn_budget"`, 1), `supervisor: kind "respawn_budget", want "supervisor"`},
		{"no budget", strings.Replace(ok, `"budget": {"version": 1, "kind": "respawn_budget", "keys": {}},`, ``, 1), "supervisor.budget: missing"},
		{"budget of another kind", strings.Replace(ok, `"kind": "respawn_budget"`, `"kind": "chain_detector"`, 1), `supervisor.budget: kind "chain_detector", want "respawn_budget"`},
		{"unknown state", strings.Replace(ok, `"exited"`, `"sleeping"`, 1), `supervisor.keys["a"].state: unknown state "sleeping"`},
		{"parked without a park", strings.Replace(ok, `"exited"`, `"parked"`, 1), `supervisor.keys["a"].state: "parked", but the key is not parked`},
		{"no since", strings.Replace(ok, `, "since": "2026-03-01T12:00:00Z"`, ``, 1), `supervisor.keys["a"].since: missing time`},
		{"seq is no field", strings.Replace(ok, `"kind": "supervisor",`, `"kind": "supervisor", "seq": 3,`, 1), `unknown field "seq"`},
		{"guard over its limit", strings.Replace(ok, `"state": "exited"`, `"guard": {"version": 1, "kind": "restart_loop_guard", "latest": "2026-03-01T12:00:00Z", "restarts": ["2026-03-01T12:00:00Z", "2026-03-01T12:00:00Z", "2026-03-01T12:00:00Z"], "tripped": true}, "state": "exited"`, 1),
			`supervisor.keys["a"].guard.restarts: 3 events, more than the limit of 2`},
		{"budget park without reason", strings.Replace(ok, `"keys": {}}`, `"keys": {"a": {"parked": {"attempts": 0, "since": "2026-03-01T12:00:00Z"}}}}`, 1),
			`supervisor.budget.keys["a"].parked.reason: missing`},
	}
	snapCheckBad(t, cases, s.Snapshot, s.Restore)
}

// A key that was running when the snapshot was taken is restored as
// exited; a Supervisor that runs a key refuses to be restored.
func TestSnapshotSupervisorWhileRunning(t *testing.T) {
	c := mockAt(testT0)
	s, err := crashloop.NewSupervisor(snapSupConfig(), crashloop.WithClock(c))
	require.NoError(t, err)
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- s.Run(context.Background(), "a", func(context.Context) error {
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	data, err := s.Snapshot()
	require.NoError(t, err)
	assert.Contains(t, string(data), `"state": "running"`)
	err = s.Restore(data)
	require.ErrorIs(t, err, crashloop.ErrAlreadyRunning)
	assert.NotErrorIs(t, err, crashloop.ErrBadSnapshot)
	close(release)
	require.NoError(t, <-done)

	s2, err := crashloop.NewSupervisor(snapSupConfig(), crashloop.WithClock(mockAt(testT0.Add(time.Minute))))
	require.NoError(t, err)
	require.NoError(t, s2.Restore(data))
	ks := s2.Status(context.Background()).Keys["a"]
	assert.Equal(t, crashloop.StateExited, ks.State)
	assert.Equal(t, testT0.Add(time.Minute), ks.Since)
	assert.Equal(t, "a#1", ks.Incarnation)
}

// Snapshots taken while many goroutines change a budget always restore.
func TestSnapshotConcurrentWithChanges(t *testing.T) {
	c := mockAt(testT0)
	cfg := crashloop.BudgetConfig{MaxRespawns: 5, Window: time.Minute}
	b, err := crashloop.NewRespawnBudget(cfg, crashloop.WithClock(c))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				key := fmt.Sprintf("k%d", (w*7+i)%23)
				at := testT0.Add(time.Duration(i) * time.Second)
				if _, err := b.FailedAt(key, errSnapBoom, at); err != nil {
					_ = b.ResumeAt(key, at)
				}
			}
		}()
	}
	stop := make(chan struct{})
	var snaps int
	go func() {
		defer close(stop)
		for range 50 {
			data, err := b.Snapshot()
			if !assert.NoError(t, err) {
				return
			}
			fresh, _ := crashloop.NewRespawnBudget(cfg, crashloop.WithClock(mockAt(testT0)))
			if !assert.NoError(t, fresh.RestoreAt(data, testT0.Add(300*time.Second))) {
				return
			}
			// Restore into the live budget too: it must not break it.
			if !assert.NoError(t, b.RestoreAt(data, testT0.Add(300*time.Second))) {
				return
			}
			snaps++
		}
	}()
	wg.Wait()
	<-stop
	assert.Equal(t, 50, snaps)
	data, err := b.Snapshot()
	require.NoError(t, err)
	require.NoError(t, b.RestoreAt(data, testT0.Add(300*time.Second)))
	again, err := b.Snapshot()
	require.NoError(t, err)
	assert.Equal(t, string(data), string(again))
}

// The per-key guards of a restored key announce like those of a key the
// Supervisor made itself: after the park is committed.
func TestSnapshotSupervisorRestoredGuardEventsSeeCommittedState(t *testing.T) {
	cfg := snapSupConfig()
	cfg.Guard = &crashloop.GuardConfig{MaxRestarts: 1, Window: time.Minute}
	s1, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(mockAt(testT0)))
	require.NoError(t, err)
	snapFailN(t, s1, "a", 1) // one restart in the guard's window
	data, err := s1.Snapshot()
	require.NoError(t, err)

	type seen struct {
		Kind   crashloop.EventKind
		State  crashloop.KeyState
		Reason string
	}
	var got []seen
	var s2 *crashloop.Supervisor
	s2, err = crashloop.NewSupervisor(cfg, crashloop.WithClock(mockAt(testT0.Add(time.Second))),
		crashloop.WithEventHandler(crashloop.EventHandlerFunc(func(ev crashloop.Event) {
			ks := s2.Status(context.Background()).Keys[ev.Key]
			got = append(got, seen{ev.Kind, ks.State, ks.Reason})
		})))
	require.NoError(t, err)
	require.NoError(t, s2.Restore(data))
	var pe *crashloop.ParkedError
	require.ErrorAs(t, s2.Run(context.Background(), "a", func(context.Context) error { return errSnapBoom }), &pe)
	assert.Equal(t, crashloop.ReasonRestartLoopGuard, pe.Reason)
	assert.Equal(t, []seen{{crashloop.EventGuardTripped, crashloop.StateParked, crashloop.ReasonRestartLoopGuard}}, got)
}

// A budget's state survives a restart of the process: Snapshot before,
// Restore after. The restored budget parks on the same failure as the
// original would have.
func ExampleRespawnBudget_Snapshot() {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := clock.NewMock()
	c.Set(start)
	b, _ := crashloop.NewRespawnBudget(crashloop.DefaultBudgetConfig(), crashloop.WithClock(c))
	b.Failed("worker", errors.New("exit status 1"))
	c.Add(10 * time.Second)
	b.Failed("worker", errors.New("exit status 1"))
	data, _ := b.Snapshot()
	fmt.Println(string(data))

	// The process restarts 30 seconds later.
	c.Add(30 * time.Second)
	restored, _ := crashloop.NewRespawnBudget(crashloop.DefaultBudgetConfig(), crashloop.WithClock(c))
	if err := restored.Restore(data); err != nil {
		fmt.Println(err)
	}
	fmt.Println(restored.Failed("worker", errors.New("exit status 1")))
	fmt.Println(restored.Failed("worker", errors.New("exit status 1")))
	// Output:
	// {
	//   "version": 1,
	//   "kind": "respawn_budget",
	//   "latest": "2026-03-01T12:00:10Z",
	//   "keys": {
	//     "worker": {
	//       "respawns": [
	//         "2026-03-01T12:00:00Z",
	//         "2026-03-01T12:00:10Z"
	//       ]
	//     }
	//   }
	// }
	// 1.5s <nil>
	// 0s crashloop: key "worker" is parked (respawn_budget_exhausted after 3 respawns; resume it once the cause is fixed): exit status 1
}

// WithStore keeps a Supervisor's state in a file: a key parked before a
// restart of the process is still parked after it, until an operator
// resumes it.
func ExampleWithStore() {
	dir, _ := os.MkdirTemp("", "crashloop")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state.json")
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Budget = crashloop.BudgetConfig{MaxRespawns: 2, Window: time.Minute} // no backoff, for the example

	c := clock.NewMock()
	s, _ := crashloop.NewSupervisor(cfg, crashloop.WithClock(c), crashloop.WithStore(crashloop.NewFileStore(path)))
	err := s.Run(context.Background(), "worker", func(context.Context) error { return errors.New("no such file") })
	fmt.Println(err)

	// The supervising process restarts.
	c.Add(time.Hour)
	s, _ = crashloop.NewSupervisor(cfg, crashloop.WithClock(c), crashloop.WithStore(crashloop.NewFileStore(path)))
	fmt.Println(s.Parked())
	err = s.Run(context.Background(), "worker", func(context.Context) error { return nil })
	fmt.Println(errors.Is(err, crashloop.ErrParked))
	fmt.Println(s.Resume(context.Background(), "worker"))
	fmt.Println(s.Run(context.Background(), "worker", func(context.Context) error { return nil }))
	// Output:
	// crashloop: key "worker" is parked (respawn_budget_exhausted after 2 respawns; resume it once the cause is fixed): no such file
	// [worker]
	// true
	// <nil>
	// <nil>
}
