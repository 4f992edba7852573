package crashloop

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultGuardConfig(t *testing.T) {
	assert.Equal(t, GuardConfig{MaxRestarts: 3, Window: 60 * time.Second}, DefaultGuardConfig())
}

func coreGuardTripEvent(name string, at time.Time) Event {
	return Event{Kind: EventGuardTripped, Key: name, Time: at, Reason: "restart_loop_guard",
		Attempts: 3, Limit: 3, Window: 60 * time.Second}
}

// The guard trips on the 3rd restart within 60s, not on the 2nd, and
// announces the trip once.
func TestGuardTripsOnThirdRestart(t *testing.T) {
	m := coreMock()
	rec := &coreRecorder{}
	g, err := NewRestartLoopGuard(3, 60*time.Second, WithName("telegram"), WithClock(m), WithEventHandler(rec))
	require.NoError(t, err)
	assert.Equal(t, GuardConfig{MaxRestarts: 3, Window: 60 * time.Second}, g.Config())
	assert.False(t, g.Tripped())

	assert.False(t, g.Record(), "1st restart")
	m.Add(10 * time.Second)
	assert.False(t, g.Record(), "2nd restart")
	assert.False(t, g.Tripped())
	assert.Empty(t, rec.All())
	m.Add(10 * time.Second)
	assert.True(t, g.Record(), "3rd restart")
	assert.True(t, g.Tripped())
	assert.Equal(t, []Event{coreGuardTripEvent("telegram", coreT0.Add(20*time.Second))}, rec.All())

	// More restarts keep it tripped; it is the same trip, so no new event.
	m.Add(time.Second)
	assert.True(t, g.Record())
	assert.Equal(t, 3, g.Restarts(), "a guard keeps at most MaxRestarts restarts")
	assert.Len(t, rec.All(), 1)
}

// TrippedAt and RestartsAt record nothing, however often they are called.
func TestGuardTrippedAtIsNonRecording(t *testing.T) {
	rec := &coreRecorder{}
	g, err := NewRestartLoopGuard(3, time.Minute, WithClock(coreMock()), WithEventHandler(rec))
	require.NoError(t, err)

	require.False(t, g.RecordAt(coreT0))
	require.False(t, g.RecordAt(coreT0.Add(time.Second)))
	for i := 0; i < 100; i++ {
		require.False(t, g.TrippedAt(coreT0.Add(time.Second)))
		require.Equal(t, 2, g.RestartsAt(coreT0.Add(time.Second)))
	}
	assert.Empty(t, rec.All())
	assert.True(t, g.RecordAt(coreT0.Add(2*time.Second)), "the queries added nothing: this is only the 3rd restart")
	for i := 0; i < 100; i++ {
		require.True(t, g.TrippedAt(coreT0.Add(2*time.Second)))
	}
	assert.Len(t, rec.All(), 1)
}

// Reset clears the history after a clean run; the next trip is a new
// transition and is announced again.
func TestGuardReset(t *testing.T) {
	rec := &coreRecorder{}
	g, err := NewRestartLoopGuard(3, time.Minute, WithClock(coreMock()), WithEventHandler(rec))
	require.NoError(t, err)

	for i := 0; i < 3; i++ {
		g.RecordAt(coreT0)
	}
	require.True(t, g.TrippedAt(coreT0))
	g.Reset()
	assert.False(t, g.TrippedAt(coreT0))
	assert.Equal(t, 0, g.RestartsAt(coreT0))
	assert.False(t, g.RecordAt(coreT0))
	assert.False(t, g.RecordAt(coreT0))
	assert.True(t, g.RecordAt(coreT0))
	assert.Equal(t, []Event{coreGuardTripEvent("", coreT0), coreGuardTripEvent("", coreT0)}, rec.All())
}

// A restart exactly Window old still counts; one a nanosecond older does not.
func TestGuardWindowBoundary(t *testing.T) {
	newGuard := func(t *testing.T) *RestartLoopGuard {
		g, err := NewRestartLoopGuard(3, 60*time.Second, WithClock(coreMock()))
		require.NoError(t, err)
		require.False(t, g.RecordAt(coreT0))
		require.False(t, g.RecordAt(coreT0.Add(time.Second)))
		return g
	}

	t.Run("record exactly window old counts", func(t *testing.T) {
		g := newGuard(t)
		assert.True(t, g.RecordAt(coreT0.Add(60*time.Second)))
		assert.Equal(t, 3, g.RestartsAt(coreT0.Add(60*time.Second)))
	})
	t.Run("record one nanosecond older drops out", func(t *testing.T) {
		g := newGuard(t)
		assert.False(t, g.RecordAt(coreT0.Add(60*time.Second+time.Nanosecond)))
		assert.Equal(t, 2, g.RestartsAt(coreT0.Add(60*time.Second+time.Nanosecond)))
	})
	t.Run("tripped at the boundary", func(t *testing.T) {
		g := newGuard(t)
		require.True(t, g.RecordAt(coreT0.Add(2*time.Second)))
		assert.True(t, g.TrippedAt(coreT0.Add(60*time.Second)))
		assert.False(t, g.TrippedAt(coreT0.Add(60*time.Second+time.Nanosecond)))
		assert.Equal(t, 2, g.RestartsAt(coreT0.Add(60*time.Second+time.Nanosecond)))
	})
}

// One event per transition into tripped: after the window drains, a second
// storm is announced again; a storm that never lets the window drain is one
// trip.
func TestGuardAnnouncesEachTransition(t *testing.T) {
	t.Run("second storm after the window drains", func(t *testing.T) {
		rec := &coreRecorder{}
		g, err := NewRestartLoopGuard(3, 60*time.Second, WithName("slack"), WithClock(coreMock()), WithEventHandler(rec))
		require.NoError(t, err)
		for i := 0; i < 3; i++ {
			g.RecordAt(coreT0.Add(time.Duration(i) * time.Second))
		}
		second := coreT0.Add(2*time.Second + 60*time.Second + time.Nanosecond)
		assert.False(t, g.RecordAt(second), "the first storm has drained")
		assert.False(t, g.RecordAt(second))
		assert.True(t, g.RecordAt(second))
		assert.Equal(t, []Event{coreGuardTripEvent("slack", coreT0.Add(2*time.Second)), coreGuardTripEvent("slack", second)}, rec.All())
	})

	t.Run("drained while nobody recorded", func(t *testing.T) {
		rec := &coreRecorder{}
		g, err := NewRestartLoopGuard(3, 60*time.Second, WithClock(coreMock()), WithEventHandler(rec))
		require.NoError(t, err)
		for i := 0; i < 3; i++ {
			g.RecordAt(coreT0)
		}
		later := coreT0.Add(time.Hour)
		assert.False(t, g.TrippedAt(later))
		for i := 0; i < 3; i++ {
			g.RecordAt(later)
		}
		assert.Equal(t, []Event{coreGuardTripEvent("", coreT0), coreGuardTripEvent("", later)}, rec.All())
	})

	t.Run("a storm that never drains is one trip", func(t *testing.T) {
		rec := &coreRecorder{}
		g, err := NewRestartLoopGuard(3, 60*time.Second, WithClock(coreMock()), WithEventHandler(rec))
		require.NoError(t, err)
		var got []bool
		for i := 0; i < 20; i++ { // a restart every 20s for 400s
			got = append(got, g.RecordAt(coreT0.Add(time.Duration(20*i)*time.Second)))
		}
		assert.Equal(t, []bool{false, false}, got[:2])
		for i, tripped := range got[2:] {
			assert.True(t, tripped, "restart %d", i+3)
		}
		assert.Equal(t, []Event{coreGuardTripEvent("", coreT0.Add(40*time.Second))}, rec.All())
	})
}

// A limit of 10000 needs 10000 restarts, and the window slides correctly
// through a buffer that had to grow.
func TestGuardLargeLimit(t *testing.T) {
	rec := &coreRecorder{}
	g, err := NewRestartLoopGuard(10000, time.Minute, WithName("big"), WithClock(coreMock()), WithEventHandler(rec))
	require.NoError(t, err)

	// 9999 restarts spread over 9.999s.
	for i := 0; i < 9999; i++ {
		require.False(t, g.RecordAt(coreT0.Add(time.Duration(i)*time.Millisecond)), "restart %d", i+1)
	}
	assert.Equal(t, 9999, g.RestartsAt(coreT0.Add(9998*time.Millisecond)))
	assert.True(t, g.RecordAt(coreT0.Add(9999*time.Millisecond)), "restart 10000")
	assert.Equal(t, []Event{{Kind: EventGuardTripped, Key: "big", Time: coreT0.Add(9999 * time.Millisecond),
		Reason: "restart_loop_guard", Attempts: 10000, Limit: 10000, Window: time.Minute}}, rec.All())

	// At t0+60s+1ms the first restart (t0) is more than a minute old; the
	// second (t0+1ms) is exactly a minute old and still counts.
	now := coreT0.Add(60*time.Second + time.Millisecond)
	assert.Equal(t, 9999, g.RestartsAt(now))
	assert.False(t, g.TrippedAt(now))
	assert.True(t, g.RecordAt(now), "back to 10000")
	assert.Equal(t, 10000, g.RestartsAt(now))
	assert.Len(t, rec.All(), 2, "the window dropped below the limit in between: a new transition")
}
