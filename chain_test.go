package crashloop

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultChainConfig(t *testing.T) {
	assert.Equal(t, ChainConfig{MaxChain: 3, ResetGap: 20 * time.Minute}, DefaultChainConfig())
}

// Three reactive rescues of one incarnation, each within ResetGap: the fourth
// is refused, the key needs a human, and the escalation is announced once.
func TestChainEscalatesOnFourthReactiveRescue(t *testing.T) {
	rec := &coreRecorder{}
	d, err := NewChainDetector(DefaultChainConfig(), WithClock(coreMock()), WithEventHandler(rec))
	require.NoError(t, err)
	assert.Equal(t, DefaultChainConfig(), d.Config())

	at := func(m time.Duration) time.Time { return coreT0.Add(m * time.Minute) }
	for i, want := range []int{1, 2, 3} {
		n, err := d.RescueAt("seat-7", "sess-a", true, at(time.Duration(10*i)))
		require.NoError(t, err)
		assert.Equal(t, want, n)
	}
	assert.Empty(t, rec.All())
	assert.Equal(t, 3, d.ChainAt("seat-7", "sess-a", at(20)))
	assert.Empty(t, d.NeedsHuman())

	n, err := d.RescueAt("seat-7", "sess-a", true, at(30))
	require.ErrorIs(t, err, ErrNeedsHuman)
	assert.EqualError(t, err, `crashloop: "seat-7" needs a human: crash-loop: gave up after 3 reactive rescues`)
	assert.Equal(t, 3, n)
	assert.Equal(t, []Event{{Kind: EventChainEscalated, Key: "seat-7", Incarnation: "sess-a", Time: at(30),
		Reason: "needs_human", Attempts: 3, Limit: 3, Window: 20 * time.Minute}}, rec.All())
	assert.Equal(t, []string{"seat-7"}, d.NeedsHuman())
	assert.Contains(t, d.NeedsHuman(), "seat-7")

	// Every further rescue is refused, whatever its kind, incarnation or
	// time, and nothing more is announced.
	for i, call := range []struct {
		inc      string
		reactive bool
		now      time.Time
	}{
		{"sess-a", true, at(31)},
		{"sess-a", false, at(32)},
		{"sess-b", true, at(33)},
		{"sess-a", true, at(24 * 60)},
	} {
		n, err := d.RescueAt("seat-7", call.inc, call.reactive, call.now)
		require.ErrorIs(t, err, ErrNeedsHuman, "call %d", i)
		assert.Equal(t, 3, n, "call %d", i)
	}
	assert.Len(t, rec.All(), 1)
	assert.Equal(t, []string{"seat-7"}, d.NeedsHuman())

	// Clear is the operator's reset: the chain and the mark are gone, and
	// the key is announced resumed.
	d.ClearAt("seat-7", at(24*60))
	assert.Empty(t, d.NeedsHuman())
	assert.NotContains(t, d.NeedsHuman(), "seat-7")
	assert.Equal(t, 0, d.ChainAt("seat-7", "sess-a", at(24*60)))
	n, err = d.RescueAt("seat-7", "sess-a", true, at(24*60))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	evs := rec.All()
	require.Len(t, evs, 2)
	assert.Equal(t, Event{Kind: EventResumed, Key: "seat-7", Incarnation: "sess-a", Time: at(24 * 60), Reason: ReasonNeedsHuman,
		Attempts: 3, Limit: 3, Window: 20 * time.Minute}, evs[1])
	assert.Equal(t, EventResumed, evs[1].Kind)

	// Clearing a key that was not marked announces nothing.
	d.Clear("seat-7")
	assert.Len(t, rec.All(), 2)
}

// A gap of exactly ResetGap keeps the chain; a nanosecond more breaks it.
func TestChainResetGapBoundary(t *testing.T) {
	newDetector := func(t *testing.T) *ChainDetector {
		d, err := NewChainDetector(DefaultChainConfig(), WithClock(coreMock()))
		require.NoError(t, err)
		n, err := d.RescueAt("k", "i", true, coreT0)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		return d
	}

	t.Run("exactly reset gap keeps the chain", func(t *testing.T) {
		d := newDetector(t)
		n, err := d.RescueAt("k", "i", true, coreT0.Add(20*time.Minute))
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		n, err = d.RescueAt("k", "i", true, coreT0.Add(40*time.Minute))
		require.NoError(t, err)
		assert.Equal(t, 3, n)
		_, err = d.RescueAt("k", "i", true, coreT0.Add(60*time.Minute))
		require.ErrorIs(t, err, ErrNeedsHuman)
	})

	t.Run("one nanosecond longer breaks it", func(t *testing.T) {
		d := newDetector(t)
		n, err := d.RescueAt("k", "i", true, coreT0.Add(20*time.Minute+time.Nanosecond))
		require.NoError(t, err)
		assert.Equal(t, 1, n, "a real recovery: the chain starts again")
	})

	t.Run("a long gap in the middle of a chain breaks it", func(t *testing.T) {
		d := newDetector(t)
		n, err := d.RescueAt("k", "i", true, coreT0.Add(10*time.Minute))
		require.NoError(t, err)
		require.Equal(t, 2, n)
		n, err = d.RescueAt("k", "i", true, coreT0.Add(30*time.Minute+time.Nanosecond))
		require.NoError(t, err)
		assert.Equal(t, 1, n)
	})
}

// A planned (non-reactive) rescue ends the chain.
func TestChainPlannedRescueEndsChain(t *testing.T) {
	rec := &coreRecorder{}
	d, err := NewChainDetector(DefaultChainConfig(), WithClock(coreMock()), WithEventHandler(rec))
	require.NoError(t, err)

	var got []int
	for i, reactive := range []bool{true, true, false, true, true, true} {
		n, err := d.RescueAt("k", "i", reactive, coreT0.Add(time.Duration(i)*time.Minute))
		require.NoError(t, err, "rescue %d", i)
		got = append(got, n)
	}
	assert.Equal(t, []int{1, 2, 0, 1, 2, 3}, got)
	assert.Empty(t, rec.All())
	_, err = d.RescueAt("k", "i", true, coreT0.Add(6*time.Minute))
	require.ErrorIs(t, err, ErrNeedsHuman)
	assert.Equal(t, 1, rec.count(EventChainEscalated))
}

// A new incarnation on a reused key starts a fresh chain, and the old one is
// gone for good.
func TestChainNewIncarnationEndsChain(t *testing.T) {
	d, err := NewChainDetector(DefaultChainConfig(), WithClock(coreMock()))
	require.NoError(t, err)

	type step struct {
		inc  string
		want int
	}
	for i, s := range []step{{"old", 1}, {"old", 2}, {"new", 1}, {"new", 2}, {"old", 1}, {"new", 1}} {
		n, err := d.RescueAt("pane-3", s.inc, true, coreT0.Add(time.Duration(i)*time.Minute))
		require.NoError(t, err, "step %d", i)
		assert.Equal(t, s.want, n, "step %d (%s)", i, s.inc)
	}
	now := coreT0.Add(5 * time.Minute)
	assert.Equal(t, 1, d.ChainAt("pane-3", "new", now))
	assert.Equal(t, 0, d.ChainAt("pane-3", "old", now))
}

// ChainAt counts without recording, and a chain whose newest rescue is more
// than ResetGap before now has ended.
func TestChainAtIsNonRecording(t *testing.T) {
	m := coreMock()
	rec := &coreRecorder{}
	d, err := NewChainDetector(DefaultChainConfig(), WithClock(m), WithEventHandler(rec))
	require.NoError(t, err)

	assert.Equal(t, 0, d.Chain("k", "i"), "unknown key")
	for i := 0; i < 2; i++ {
		_, err := d.Rescue("k", "i", true)
		require.NoError(t, err)
		m.Add(time.Minute)
	}
	for i := 0; i < 100; i++ {
		require.Equal(t, 2, d.Chain("k", "i"))
		require.Equal(t, 2, d.ChainAt("k", "i", m.Now()))
	}
	assert.Equal(t, 0, d.Chain("k", "other"))
	assert.Equal(t, 0, d.Chain("other", "i"))
	assert.Empty(t, d.NeedsHuman())
	assert.Empty(t, rec.All())

	n, err := d.Rescue("k", "i", true)
	require.NoError(t, err)
	assert.Equal(t, 3, n, "the 200 queries recorded nothing")

	last := m.Now()
	assert.Equal(t, 3, d.ChainAt("k", "i", last.Add(20*time.Minute)))
	assert.Equal(t, 0, d.ChainAt("k", "i", last.Add(20*time.Minute+time.Nanosecond)))
	assert.Empty(t, d.NeedsHuman(), "a query never escalates")
	assert.Empty(t, rec.All())
}

func TestChainNeedsHumanIsSorted(t *testing.T) {
	rec := &coreRecorder{}
	d, err := NewChainDetector(ChainConfig{MaxChain: 1, ResetGap: time.Minute}, WithClock(coreMock()), WithEventHandler(rec))
	require.NoError(t, err)
	assert.Empty(t, d.NeedsHuman())
	for _, key := range []string{"seat-c", "seat-a", "seat-b", "healthy"} {
		n, err := d.RescueAt(key, "i", true, coreT0)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	for _, key := range []string{"seat-c", "seat-a", "seat-b"} {
		n, err := d.RescueAt(key, "i", true, coreT0)
		require.ErrorIs(t, err, ErrNeedsHuman)
		assert.Equal(t, 1, n)
	}
	assert.Equal(t, []string{"seat-a", "seat-b", "seat-c"}, d.NeedsHuman())
	assert.Equal(t, 3, rec.count(EventChainEscalated))
	d.Clear("seat-b")
	assert.Equal(t, []string{"seat-a", "seat-c"}, d.NeedsHuman())
}

// The story's seat: it respawns, passes its health check, and dies sixteen
// minutes later, every time. At the default 20-minute gap the fourth crash is
// refused and the seat is handed to a human.
func TestChainCatchesSixteenMinuteLoop(t *testing.T) {
	m := coreMock()
	rec := &coreRecorder{}
	d, err := NewChainDetector(DefaultChainConfig(), WithClock(m), WithEventHandler(rec))
	require.NoError(t, err)

	var chains []int
	var crash int
	for crash = 1; crash <= 10; crash++ {
		n, err := d.Rescue("seat-7", "sess-1", true)
		if err != nil {
			require.ErrorIs(t, err, ErrNeedsHuman)
			break
		}
		chains = append(chains, n)
		m.Add(16 * time.Minute)
	}
	assert.Equal(t, 4, crash, "caught on the 4th crash")
	assert.Equal(t, []int{1, 2, 3}, chains)
	assert.Equal(t, []Event{{Kind: EventChainEscalated, Key: "seat-7", Incarnation: "sess-1", Time: coreT0.Add(48 * time.Minute),
		Reason: "needs_human", Attempts: 3, Limit: 3, Window: 20 * time.Minute}}, rec.All())
}

// A seat that dies every 31 minutes lands at most two restarts in any hour,
// so a one-hour window of 3 never trips, however long it loops. A chain with
// a 40-minute gap catches it on its 4th crash. Both guards see the same crash
// times.
func TestChainCatchesLoopThatAWindowMisses(t *testing.T) {
	m := coreMock()
	guard, err := NewRestartLoopGuard(3, time.Hour, WithClock(m))
	require.NoError(t, err)
	chain, err := NewChainDetector(ChainConfig{MaxChain: 3, ResetGap: 40 * time.Minute}, WithClock(m))
	require.NoError(t, err)

	var tripped []bool
	var restarts []int
	var chains []int
	var escalatedAt int
	for crash := 1; crash <= 12; crash++ { // six hours of crashes
		tripped = append(tripped, guard.Record())
		restarts = append(restarts, guard.Restarts())
		n, err := chain.Rescue("seat-9", "sess-1", true)
		chains = append(chains, n)
		if err != nil {
			require.ErrorIs(t, err, ErrNeedsHuman)
			if escalatedAt == 0 {
				escalatedAt = crash
			}
		}
		m.Add(31 * time.Minute)
	}
	assert.Equal(t, make([]bool, 12), tripped, "the one-hour window never trips")
	assert.Equal(t, []int{1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, restarts)
	assert.Equal(t, 4, escalatedAt, "the chain catches it on its 4th crash")
	assert.Equal(t, []int{1, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}, chains)
}
