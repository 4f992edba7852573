package crashloop

import (
	"errors"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A clock that moves backwards never panics, never un-parks, never trips
// anything falsely and never lets anything expire early.

func TestClockBackwardsGuard(t *testing.T) {
	m := coreMock()
	rec := &coreRecorder{}
	g, err := NewRestartLoopGuard(3, time.Minute, WithClock(m), WithEventHandler(rec))
	require.NoError(t, err)

	require.False(t, g.Record())
	m.Add(time.Second)
	require.False(t, g.Record())

	m.Set(coreT0.Add(-time.Hour))
	assert.False(t, g.Tripped())
	assert.Equal(t, 2, g.Restarts(), "nothing expired and nothing became younger than zero")
	m.Set(coreT0.Add(-2 * time.Hour))
	assert.False(t, g.Tripped())
	assert.Empty(t, rec.All())

	// Back to normal: the restarts age out a minute after they happened,
	// not a minute after the clock recovers.
	m.Set(coreT0.Add(time.Second + time.Minute))
	assert.Equal(t, 1, g.Restarts())
	m.Add(time.Nanosecond)
	assert.Equal(t, 0, g.Restarts())
	assert.False(t, g.Tripped())
}

// A guard whose restarts all happened while the clock was behind still trips
// on a real storm: the restarts are real, only their clock was wrong.
func TestClockBackwardsGuardStillTripsOnARealStorm(t *testing.T) {
	m := coreMock()
	g, err := NewRestartLoopGuard(3, time.Minute, WithClock(m))
	require.NoError(t, err)
	require.False(t, g.Record())
	m.Set(coreT0.Add(-time.Hour))
	require.False(t, g.Record())
	assert.True(t, g.Record())
}

func TestClockBackwardsBudget(t *testing.T) {
	m := coreMock()
	rec := &coreRecorder{}
	b, err := NewRespawnBudget(DefaultBudgetConfig(), WithClock(m), WithEventHandler(rec))
	require.NoError(t, err)

	// Two respawns, then the clock jumps back an hour.
	for i := 0; i < 2; i++ {
		_, err := b.Failed("s", errors.New("boom"))
		require.NoError(t, err)
	}
	m.Set(coreT0.Add(-time.Hour))
	assert.Equal(t, 2, b.Respawns("s"))
	d, err := b.Failed("s", errors.New("boom"))
	require.NoError(t, err)
	assert.Equal(t, 1500*time.Millisecond, d, "the third respawn, not a first one")

	// The park happens as usual.
	m.Set(coreT0.Add(-2 * time.Hour))
	_, err = b.Failed("s", errors.New("boom"))
	require.ErrorIs(t, err, ErrParked)
	rec.Take()

	// And a parked session stays parked whichever way the clock goes.
	for _, at := range []time.Time{coreT0.Add(-24 * time.Hour), coreT0, coreT0.Add(24 * time.Hour), coreT0.Add(-time.Hour)} {
		m.Set(at)
		assert.True(t, b.IsParked("s"))
		require.ErrorIs(t, b.Spawn("s"), ErrParked)
		_, err := b.Failed("s", errors.New("boom"))
		require.ErrorIs(t, err, ErrParked)
	}
	assert.Equal(t, []string{"s"}, b.Parked())
	assert.Empty(t, rec.All())
}

func TestClockBackwardsBudgetWindow(t *testing.T) {
	m := coreMock()
	b, err := NewRespawnBudget(DefaultBudgetConfig(), WithClock(m))
	require.NoError(t, err)
	_, err = b.Failed("s", errors.New("boom"))
	require.NoError(t, err)

	m.Set(coreT0.Add(-time.Hour))
	m.Set(coreT0.Add(-time.Hour + 2*time.Minute))
	assert.Equal(t, 1, b.Respawns("s"), "two minutes of clock after a jump back are not two minutes since the respawn")
	m.Set(coreT0.Add(time.Minute))
	assert.Equal(t, 1, b.Respawns("s"))
	m.Add(time.Nanosecond)
	assert.Equal(t, 0, b.Respawns("s"))
}

func TestClockBackwardsChain(t *testing.T) {
	m := coreMock()
	rec := &coreRecorder{}
	d, err := NewChainDetector(DefaultChainConfig(), WithClock(m), WithEventHandler(rec))
	require.NoError(t, err)

	n, err := d.Rescue("k", "i", true)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	m.Add(10 * time.Minute)
	n, err = d.Rescue("k", "i", true)
	require.NoError(t, err)
	require.Equal(t, 2, n)

	m.Set(coreT0.Add(-time.Hour))
	assert.Equal(t, 2, d.Chain("k", "i"), "a jump back neither breaks nor extends the chain")
	n, err = d.Rescue("k", "i", true)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Empty(t, rec.All())

	// A rescue 20 minutes after the newest one keeps the chain, measured on
	// the clock the detector has seen, not on the jumped-back one.
	m.Set(coreT0.Add(30 * time.Minute))
	_, err = d.Rescue("k", "i", true)
	require.ErrorIs(t, err, ErrNeedsHuman)
	assert.Equal(t, 1, rec.count(EventChainEscalated))
}

func TestClockBackwardsFleet(t *testing.T) {
	m := coreMock()
	rec := &coreRecorder{}
	p, err := NewFleetSupervisionPolicy(DefaultFleetConfig(), WithClock(m), WithEventHandler(rec))
	require.NoError(t, err)

	require.True(t, p.NoteFleetState(2, 4))
	m.Set(coreT0.Add(-time.Hour))
	assert.True(t, p.Tripped())
	m.Set(coreT0.Add(-time.Hour + 120*time.Second))
	assert.True(t, p.Tripped(), "120s of clock after a jump back are not the cooldown")
	assert.True(t, p.NoteRestart())
	assert.True(t, p.Status().BreakerTripped)
	m.Set(coreT0.Add(119 * time.Second))
	assert.True(t, p.Tripped())
	assert.Equal(t, 0, rec.count(EventFleetRearmed))
	m.Set(coreT0.Add(120 * time.Second))
	assert.False(t, p.Tripped())
	assert.Equal(t, 1, rec.count(EventFleetRearmed))
}

// A fleet that has not tripped does not trip because the clock went back:
// restarts spread over more than an hour stay spread.
func TestClockBackwardsFleetNoFalseTrip(t *testing.T) {
	m := coreMock()
	p, err := NewFleetSupervisionPolicy(FleetConfig{RestartsPerHour: 3, FailingFraction: 0.5, MinFailing: 2, Cooldown: time.Minute}, WithClock(m))
	require.NoError(t, err)
	require.False(t, p.NoteRestart())
	m.Add(61 * time.Minute)
	require.False(t, p.NoteRestart())
	m.Set(coreT0)
	assert.False(t, p.Tripped())
	assert.Equal(t, 1, p.Status().RestartsInHour, "the first restart stays expired")
	assert.False(t, p.NoteRestart())
}

// The explicit forms accept any time, even ones no real clock gives, without
// a panic.
func TestExtremeTimes(t *testing.T) {
	zero := time.Time{}
	far := time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC)
	require.NotPanics(t, func() {
		g, err := NewRestartLoopGuard(2, time.Minute, WithClock(coreMock()))
		require.NoError(t, err)
		assert.False(t, g.RecordAt(zero))
		assert.True(t, g.RecordAt(zero))
		assert.False(t, g.RecordAt(far), "both restarts at the zero time are centuries old")
		assert.True(t, g.RecordAt(zero), "a time before the latest one reads as the latest one")

		b, err := NewRespawnBudget(DefaultBudgetConfig(), WithClock(coreMock()))
		require.NoError(t, err)
		_, err = b.FailedAt("s", nil, zero)
		require.NoError(t, err)
		assert.Equal(t, 0, b.RespawnsAt("s", far))

		d, err := NewChainDetector(DefaultChainConfig(), WithClock(coreMock()))
		require.NoError(t, err)
		n, err := d.RescueAt("k", "i", true, zero)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		n, err = d.RescueAt("k", "i", true, far)
		require.NoError(t, err)
		assert.Equal(t, 1, n)

		p, err := NewFleetSupervisionPolicy(DefaultFleetConfig(), WithClock(coreMock()))
		require.NoError(t, err)
		assert.True(t, p.NoteFleetStateAt(2, 2, zero))
		assert.False(t, p.TrippedAt(far))
	})
}

// Time never runs backwards for a keyed object: a reading for one key is
// raised to a later reading the object used for any other key, so the time
// of every key, too, never runs backwards.
func TestClockBackwardsAcrossKeys(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cfg := BudgetConfig{MaxRespawns: 5, Window: time.Minute, InitialBackoff: time.Second, MaxBackoff: time.Second}
	b, err := NewRespawnBudget(cfg, WithClock(clock.NewMock()))
	require.NoError(t, err)

	_, err = b.FailedAt("first", errors.New("boom"), t0.Add(2*time.Minute))
	require.NoError(t, err)
	_, err = b.FailedAt("second", errors.New("boom"), t0) // two minutes earlier
	require.NoError(t, err)
	// second's respawn was recorded at t0+2m, the latest time the budget
	// used: at t0+2m30s it is inside the window, at t0+3m0s+1ns it is not.
	assert.Equal(t, 1, b.RespawnsAt("second", t0.Add(2*time.Minute+30*time.Second)))
	assert.Equal(t, 1, b.RespawnsAt("second", t0), "read as t0+2m30s")
	assert.Equal(t, 0, b.RespawnsAt("second", t0.Add(3*time.Minute+time.Nanosecond)))

	d, err := NewChainDetector(ChainConfig{MaxChain: 3, ResetGap: time.Minute}, WithClock(clock.NewMock()))
	require.NoError(t, err)
	_, err = d.RescueAt("first", "i", true, t0.Add(5*time.Minute))
	require.NoError(t, err)
	_, err = d.RescueAt("second", "i", true, t0)
	require.NoError(t, err)
	assert.Equal(t, 1, d.ChainAt("second", "i", t0.Add(5*time.Minute+30*time.Second)), "rescued at t0+5m, 30s ago")
	assert.Equal(t, 0, d.ChainAt("second", "i", t0.Add(6*time.Minute+time.Nanosecond)))
}
