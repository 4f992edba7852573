package crashloop

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultBudgetConfig(t *testing.T) {
	assert.Equal(t, BudgetConfig{MaxRespawns: 3, Window: 60 * time.Second, InitialBackoff: 500 * time.Millisecond, MaxBackoff: 5 * time.Second},
		DefaultBudgetConfig())
}

// The whole life of a session at the defaults: a free first spawn, three
// respawns with a linear backoff, a park on the fourth failure, refusals
// while parked, and a resume that restores the full budget.
func TestBudgetDefaultsBackoffParkResume(t *testing.T) {
	m := coreMock()
	rec := &coreRecorder{}
	b, err := NewRespawnBudget(DefaultBudgetConfig(), WithClock(m), WithEventHandler(rec))
	require.NoError(t, err)
	assert.Equal(t, DefaultBudgetConfig(), b.Config())

	// The first spawn is free: no error, nothing consumed, nothing announced.
	require.NoError(t, b.Spawn("s"))
	require.NoError(t, b.Spawn("s"))
	assert.Equal(t, 0, b.Respawns("s"))
	assert.Empty(t, rec.All())

	causes := []error{errors.New("boom 1"), errors.New("boom 2"), errors.New("boom 3"), errors.New("boom 4")}
	wantBackoffs := []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond}
	var wantEvents []Event
	for i, want := range wantBackoffs {
		now := m.Now()
		d, err := b.Failed("s", causes[i])
		require.NoError(t, err, "failure %d", i+1)
		assert.Equal(t, want, d, "backoff of failure %d", i+1)
		assert.Equal(t, i+1, b.Respawns("s"))
		wantEvents = append(wantEvents, Event{Kind: EventRespawnScheduled, Key: "s", Time: now, LastError: causes[i],
			Attempts: i + 1, Limit: 3, Window: 60 * time.Second, Backoff: want})
		require.NoError(t, b.Spawn("s"), "a session with budget left may spawn")
		m.Add(d) // the supervisor waits the backoff, respawns, and it fails again at once
	}
	assert.Equal(t, wantEvents, rec.Take())
	assert.False(t, b.IsParked("s"))

	// The fourth failure finds 3 respawns in the window: the key is parked.
	parkedAt := m.Now()
	require.Equal(t, coreT0.Add(3*time.Second), parkedAt)
	d, err := b.Failed("s", causes[3])
	assert.Equal(t, time.Duration(0), d)
	require.ErrorIs(t, err, ErrParked)
	var pe *ParkedError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, &ParkedError{Key: "s", Reason: "respawn_budget_exhausted", LastError: causes[3], Attempts: 3, Since: parkedAt}, pe)
	assert.Same(t, causes[3], errors.Unwrap(err))
	assert.Equal(t, []Event{{Kind: EventStartupExhausted, Key: "s", Time: parkedAt, Reason: "respawn_budget_exhausted",
		LastError: causes[3], Attempts: 3, Limit: 3, Window: 60 * time.Second}}, rec.Take())
	assert.True(t, b.IsParked("s"))
	assert.Equal(t, []string{"s"}, b.Parked())

	// Parked is terminal: Spawn and Failed refuse with the same *ParkedError
	// (carrying the cause that parked it), record nothing and announce nothing,
	// however much time passes.
	for i := 0; i < 3; i++ {
		m.Add(time.Hour)
		err := b.Spawn("s")
		require.ErrorIs(t, err, ErrParked)
		var spe *ParkedError
		require.ErrorAs(t, err, &spe)
		assert.Same(t, pe, spe)

		d, err := b.Failed("s", errors.New("another failure"))
		assert.Equal(t, time.Duration(0), d)
		var fpe *ParkedError
		require.ErrorAs(t, err, &fpe)
		assert.Same(t, pe, fpe)
		assert.Same(t, causes[3], errors.Unwrap(err))
	}
	assert.Empty(t, rec.All())
	assert.True(t, b.IsParked("s"))

	// Resume clears the park and the window, and announces it.
	resumedAt := m.Now()
	require.NoError(t, b.Resume("s"))
	assert.Equal(t, []Event{{Kind: EventResumed, Key: "s", Time: resumedAt, Reason: "respawn_budget_exhausted",
		LastError: causes[3], Limit: 3, Window: 60 * time.Second}}, rec.Take())
	assert.False(t, b.IsParked("s"))
	assert.Empty(t, b.Parked())
	require.NoError(t, b.Spawn("s"))
	assert.Equal(t, 0, b.Respawns("s"))

	// A full budget again: 500ms, 1s, 1.5s, then the park (all at one instant,
	// so only the resume can have emptied the window).
	for i, want := range wantBackoffs {
		d, err := b.Failed("s", causes[i])
		require.NoError(t, err)
		assert.Equal(t, want, d)
	}
	_, err = b.Failed("s", causes[3])
	require.ErrorIs(t, err, ErrParked)
	assert.Equal(t, 1, rec.count(EventStartupExhausted))
}

func TestBudgetResumeOfKeyNotParked(t *testing.T) {
	b, err := NewRespawnBudget(DefaultBudgetConfig(), WithClock(coreMock()))
	require.NoError(t, err)

	err = b.Resume("never-seen")
	require.ErrorIs(t, err, ErrNotParked)
	assert.EqualError(t, err, `crashloop: key is not parked: "never-seen"`)

	_, err = b.Failed("failing", errors.New("boom"))
	require.NoError(t, err)
	require.ErrorIs(t, b.Resume("failing"), ErrNotParked)
	assert.Equal(t, 1, b.Respawns("failing"), "a refused Resume does not clear the window")

	// A second Resume of a resumed key is refused too.
	for i := 0; i < 3; i++ {
		_, err = b.Failed("failing", errors.New("boom"))
	}
	require.ErrorIs(t, err, ErrParked)
	require.NoError(t, b.Resume("failing"))
	require.ErrorIs(t, b.Resume("failing"), ErrNotParked)
}

func TestBudgetResumeAtStampsTheGivenTime(t *testing.T) {
	rec := &coreRecorder{}
	cfg := BudgetConfig{MaxRespawns: 0, Window: time.Minute}
	b, err := NewRespawnBudget(cfg, WithClock(coreMock()), WithEventHandler(rec))
	require.NoError(t, err)
	cause := errors.New("bad token")
	_, err = b.FailedAt("s", cause, coreT0)
	require.ErrorIs(t, err, ErrParked)
	require.NoError(t, b.ResumeAt("s", coreT0.Add(time.Hour)))
	assert.Equal(t, []Event{
		{Kind: EventStartupExhausted, Key: "s", Time: coreT0, Reason: ReasonBudgetExhausted, LastError: cause, Limit: 0, Window: time.Minute},
		{Kind: EventResumed, Key: "s", Time: coreT0.Add(time.Hour), Reason: ReasonBudgetExhausted, LastError: cause, Limit: 0, Window: time.Minute},
	}, rec.All())
}

// MaxBackoff caps the linear curve: with room for 1000 respawns, attempts 1-9
// grow by InitialBackoff, and attempt 10 onwards (1000 included) waits 5s.
func TestBudgetMaxBackoffCaps(t *testing.T) {
	cfg := BudgetConfig{MaxRespawns: 1000, Window: 2 * time.Hour, InitialBackoff: 500 * time.Millisecond, MaxBackoff: 5 * time.Second}
	rec := &coreRecorder{}
	b, err := NewRespawnBudget(cfg, WithClock(coreMock()), WithEventHandler(rec))
	require.NoError(t, err)

	got := make([]time.Duration, 0, 1000)
	for i := 0; i < 1000; i++ {
		d, err := b.FailedAt("s", errors.New("boom"), coreT0)
		require.NoError(t, err)
		got = append(got, d)
	}
	for attempt := 1; attempt <= 9; attempt++ {
		assert.Equal(t, time.Duration(attempt)*500*time.Millisecond, got[attempt-1], "attempt %d", attempt)
	}
	assert.Equal(t, 5*time.Second, got[10-1], "attempt 10")
	assert.Equal(t, 5*time.Second, got[11-1], "attempt 11")
	assert.Equal(t, 5*time.Second, got[1000-1], "attempt 1000")
	for attempt := 10; attempt <= 1000; attempt++ {
		require.Equal(t, 5*time.Second, got[attempt-1], "attempt %d", attempt)
	}
	evs := rec.Take()
	require.Len(t, evs, 1000)
	assert.Equal(t, Event{Kind: EventRespawnScheduled, Key: "s", Time: coreT0, LastError: evs[999].LastError,
		Attempts: 1000, Limit: 1000, Window: 2 * time.Hour, Backoff: 5 * time.Second}, evs[999])

	_, err = b.FailedAt("s", errors.New("boom"), coreT0)
	var pe *ParkedError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 1000, pe.Attempts)
}

// The backoff formula itself, for attempts no budget can reach in a test.
func TestBudgetBackoffFormula(t *testing.T) {
	c := DefaultBudgetConfig()
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{
		{0, 0}, {-1, 0}, {1, 500 * time.Millisecond}, {2, time.Second}, {3, 1500 * time.Millisecond},
		{9, 4500 * time.Millisecond}, {10, 5 * time.Second}, {11, 5 * time.Second}, {1000, 5 * time.Second},
		{1 << 40, 5 * time.Second}, {int(^uint(0) >> 1), 5 * time.Second},
	} {
		assert.Equal(t, tc.want, newLinear(c.InitialBackoff, c.MaxBackoff).Delay(tc.attempt, 0), "attempt %d", tc.attempt)
	}
}

// A respawn exactly Window old still counts; one a nanosecond older does not.
func TestBudgetWindowBoundary(t *testing.T) {
	fail3 := func(t *testing.T) *RespawnBudget {
		b, err := NewRespawnBudget(DefaultBudgetConfig(), WithClock(coreMock()))
		require.NoError(t, err)
		for i := 0; i < 3; i++ {
			_, err := b.FailedAt("s", errors.New("boom"), coreT0.Add(time.Duration(i)*time.Second))
			require.NoError(t, err)
		}
		return b
	}

	t.Run("exactly window old counts", func(t *testing.T) {
		b := fail3(t)
		now := coreT0.Add(60 * time.Second) // the first respawn is exactly 60s old
		assert.Equal(t, 3, b.RespawnsAt("s", now))
		d, err := b.FailedAt("s", errors.New("boom"), now)
		assert.Equal(t, time.Duration(0), d)
		var pe *ParkedError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, 3, pe.Attempts)
		assert.Equal(t, now, pe.Since)
	})

	t.Run("one nanosecond older does not", func(t *testing.T) {
		b := fail3(t)
		now := coreT0.Add(60*time.Second + time.Nanosecond)
		assert.Equal(t, 2, b.RespawnsAt("s", now))
		d, err := b.FailedAt("s", errors.New("boom"), now)
		require.NoError(t, err)
		assert.Equal(t, 1500*time.Millisecond, d, "two respawns left in the window: this is attempt 3")
		// The window is full again: the next failure at the same instant parks.
		_, err = b.FailedAt("s", errors.New("boom"), now)
		require.ErrorIs(t, err, ErrParked)
	})
}

// A session that stays up until its respawns age out regains the full
// budget with no operator action and no event.
func TestBudgetRegainsFullBudgetWhenRespawnsAgeOut(t *testing.T) {
	m := coreMock()
	rec := &coreRecorder{}
	b, err := NewRespawnBudget(DefaultBudgetConfig(), WithClock(m), WithEventHandler(rec))
	require.NoError(t, err)

	for _, want := range []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond} {
		d, err := b.Failed("s", errors.New("boom"))
		require.NoError(t, err)
		require.Equal(t, want, d)
		m.Add(d)
	}
	// The last respawn was at t0+1.5s. It stays up until that one is more
	// than a window old.
	m.Set(coreT0.Add(1500*time.Millisecond + 60*time.Second))
	assert.Equal(t, 1, b.Respawns("s"), "the newest respawn is exactly 60s old and still counts")
	m.Add(time.Nanosecond)
	assert.Equal(t, 0, b.Respawns("s"))
	rec.Take()

	for _, want := range []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond} {
		d, err := b.Failed("s", errors.New("boom"))
		require.NoError(t, err)
		assert.Equal(t, want, d)
	}
	_, err = b.Failed("s", errors.New("boom"))
	require.ErrorIs(t, err, ErrParked)
	assert.Equal(t, 0, rec.count(EventResumed))
}

func TestBudgetKeysAreIndependent(t *testing.T) {
	b, err := NewRespawnBudget(DefaultBudgetConfig(), WithClock(coreMock()))
	require.NoError(t, err)

	for i := 0; i < 3; i++ {
		_, err := b.FailedAt("a", errors.New("boom"), coreT0)
		require.NoError(t, err)
	}
	_, err = b.FailedAt("a", errors.New("boom"), coreT0)
	require.ErrorIs(t, err, ErrParked)

	require.NoError(t, b.Spawn("b"))
	assert.False(t, b.IsParked("b"))
	assert.Equal(t, 0, b.RespawnsAt("b", coreT0))
	d, err := b.FailedAt("b", errors.New("boom"), coreT0)
	require.NoError(t, err)
	assert.Equal(t, 500*time.Millisecond, d, "b's budget is untouched by a's failures")
	assert.Equal(t, []string{"a"}, b.Parked())

	require.NoError(t, b.ResumeAt("a", coreT0))
	assert.Equal(t, 1, b.RespawnsAt("b", coreT0), "resuming a leaves b's window alone")
	assert.Equal(t, 0, b.RespawnsAt("a", coreT0))
}

func TestBudgetParkedIsSorted(t *testing.T) {
	b, err := NewRespawnBudget(BudgetConfig{MaxRespawns: 0, Window: time.Minute}, WithClock(coreMock()))
	require.NoError(t, err)
	assert.Empty(t, b.Parked())
	for _, key := range []string{"zeta", "alpha", "mike", "Bravo", "alpha-2"} {
		_, err := b.FailedAt(key, errors.New("boom"), coreT0)
		require.ErrorIs(t, err, ErrParked)
	}
	// A resumed key leaves the list.
	_, err = b.FailedAt("resumed", nil, coreT0)
	require.ErrorIs(t, err, ErrParked)
	require.NoError(t, b.ResumeAt("resumed", coreT0))
	assert.Equal(t, []string{"Bravo", "alpha", "alpha-2", "mike", "zeta"}, b.Parked())
}

func TestBudgetForgetDropsState(t *testing.T) {
	rec := &coreRecorder{}
	b, err := NewRespawnBudget(DefaultBudgetConfig(), WithClock(coreMock()), WithEventHandler(rec))
	require.NoError(t, err)

	for i := 0; i < 2; i++ {
		_, err := b.FailedAt("a", errors.New("boom"), coreT0)
		require.NoError(t, err)
	}
	b.Forget("a")
	assert.Equal(t, 0, b.RespawnsAt("a", coreT0))
	d, err := b.FailedAt("a", errors.New("boom"), coreT0)
	require.NoError(t, err)
	assert.Equal(t, 500*time.Millisecond, d, "a forgotten key starts with a full budget")

	for i := 0; i < 4; i++ {
		_, err = b.FailedAt("p", errors.New("boom"), coreT0)
	}
	require.ErrorIs(t, err, ErrParked)
	rec.Take()
	b.Forget("p")
	assert.False(t, b.IsParked("p"))
	require.NoError(t, b.Spawn("p"))
	assert.Empty(t, b.Parked())
	require.ErrorIs(t, b.Resume("p"), ErrNotParked)
	b.Forget("never-seen")
	assert.Empty(t, rec.All(), "Forget announces nothing")
}

func TestBudgetZeroRespawnsParksOnFirstFailure(t *testing.T) {
	rec := &coreRecorder{}
	b, err := NewRespawnBudget(BudgetConfig{MaxRespawns: 0, Window: time.Minute, InitialBackoff: time.Second, MaxBackoff: time.Second},
		WithClock(coreMock()), WithEventHandler(rec))
	require.NoError(t, err)

	require.NoError(t, b.Spawn("s"), "the first spawn is still free")
	cause := errors.New("missing binary")
	d, err := b.Failed("s", cause)
	assert.Equal(t, time.Duration(0), d)
	var pe *ParkedError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, &ParkedError{Key: "s", Reason: ReasonBudgetExhausted, LastError: cause, Attempts: 0, Since: coreT0}, pe)
	assert.Equal(t, []Event{{Kind: EventStartupExhausted, Key: "s", Time: coreT0, Reason: ReasonBudgetExhausted,
		LastError: cause, Attempts: 0, Limit: 0, Window: time.Minute}}, rec.All())
}

func TestBudgetZeroInitialBackoff(t *testing.T) {
	for _, maxBackoff := range []time.Duration{0, 5 * time.Second} {
		b, err := NewRespawnBudget(BudgetConfig{MaxRespawns: 3, Window: time.Minute, InitialBackoff: 0, MaxBackoff: maxBackoff},
			WithClock(coreMock()))
		require.NoError(t, err)
		for i := 0; i < 3; i++ {
			d, err := b.Failed("s", errors.New("boom"))
			require.NoError(t, err)
			assert.Equal(t, time.Duration(0), d, "max_backoff %v, attempt %d", maxBackoff, i+1)
		}
		_, err = b.Failed("s", errors.New("boom"))
		require.ErrorIs(t, err, ErrParked, "max_backoff %v", maxBackoff)
	}
}
