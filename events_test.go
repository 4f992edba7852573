package crashloop

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEventKindString(t *testing.T) {
	for kind, want := range map[EventKind]string{
		EventRespawnScheduled:   "agent.respawn_scheduled",
		EventStartupExhausted:   "agent.startup_exhausted",
		EventResumed:            "agent.resumed",
		EventChainEscalated:     "rescue.needs_human",
		EventGuardTripped:       "channel.crash_loop_tripped",
		EventFleetTripped:       "fleet.breaker_tripped",
		EventFleetRearmed:       "fleet.breaker_rearmed",
		EventRestartScheduled:   "agent.restart_scheduled",
		EventStoreUnavailable:   "store.unavailable",
		EventStoreRecovered:     "store.recovered",
		EventStoreStateLost:     "store.state_lost",
		EventStoreMisconfigured: "store.misconfigured",
		EventFleetCauseHeld:     "fleet.cause_held",
		EventFleetCauseReleased: "fleet.cause_released",
		0:                       "EventKind(0)",
		15:                      "EventKind(15)",
		-1:                      "EventKind(-1)",
		math.MaxInt:             "EventKind(9223372036854775807)",
		math.MinInt:             "EventKind(-9223372036854775808)",
	} {
		assert.Equal(t, want, kind.String())
		assert.Equal(t, want, fmt.Sprint(kind))
	}
	// The kinds are numbered from 1, in the order of the contract; new
	// kinds come after the old ones, so no value changes meaning.
	assert.Equal(t, []EventKind{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, []EventKind{EventRespawnScheduled, EventStartupExhausted, EventResumed,
		EventChainEscalated, EventGuardTripped, EventFleetTripped, EventFleetRearmed,
		EventRestartScheduled, EventStoreUnavailable, EventStoreRecovered, EventStoreStateLost, EventStoreMisconfigured,
		EventFleetCauseHeld, EventFleetCauseReleased})
}

// One question tells whether an event stopped a key, whatever guard
// decided.
func TestEventKindStops(t *testing.T) {
	var stops []EventKind
	for k := EventKind(0); k <= EventStoreMisconfigured+1; k++ {
		if k.Stops() {
			stops = append(stops, k)
		}
	}
	assert.Equal(t, []EventKind{EventStartupExhausted, EventChainEscalated, EventGuardTripped}, stops)
}

func TestParkedErrorText(t *testing.T) {
	cause := errors.New("adapter binary not found")
	pe := &ParkedError{Key: "sess-1", Reason: ReasonBudgetExhausted, LastError: cause, Attempts: 3, Since: coreT0}
	assert.Equal(t, `crashloop: key "sess-1" is parked (respawn_budget_exhausted after 3 respawns; resume it once the cause is fixed): adapter binary not found`, pe.Error())
	assert.ErrorIs(t, pe, ErrParked)
	assert.ErrorIs(t, pe, cause)
	assert.NotErrorIs(t, pe, ErrNotParked)
	assert.NotErrorIs(t, pe, ErrInvalidConfig)
	assert.Same(t, cause, errors.Unwrap(pe))

	bare := &ParkedError{Key: "sess-2", Reason: ReasonBudgetExhausted}
	assert.Equal(t, `crashloop: key "sess-2" is parked (respawn_budget_exhausted after 0 respawns; resume it once the cause is fixed)`, bare.Error())
	assert.ErrorIs(t, bare, ErrParked)
	assert.Nil(t, errors.Unwrap(bare))

	// Each reason names what its guard counted, in the right number.
	for _, tc := range []struct {
		reason string
		n      int
		want   string
	}{
		{ReasonBudgetExhausted, 1, "respawn_budget_exhausted after 1 respawn"},
		{ReasonNeedsHuman, 3, "needs_human after 3 reactive rescues"},
		{ReasonNeedsHuman, 1, "needs_human after 1 reactive rescue"},
		{ReasonRestartLoopGuard, 3, "restart_loop_guard after 3 restarts"},
		{ReasonHourlyCap, 10, "hourly_restart_cap after 10 restarts"},
		{ReasonPermanent, 2, "permanent_error"},
	} {
		pe := &ParkedError{Key: "k", Reason: tc.reason, Attempts: tc.n}
		assert.Equal(t, `crashloop: key "k" is parked (`+tc.want+`; resume it once the cause is fixed)`, pe.Error())
	}

	// Wrapped further by a caller, it is still found.
	wrapped := fmt.Errorf("supervisor: %w", pe)
	var got *ParkedError
	require.ErrorAs(t, wrapped, &got)
	assert.Same(t, pe, got)
	assert.ErrorIs(t, wrapped, ErrParked)
}

// A parked budget with a nil cause still refuses cleanly.
func TestParkedWithNilCause(t *testing.T) {
	b, err := NewRespawnBudget(BudgetConfig{MaxRespawns: 0, Window: time.Minute}, WithClock(coreMock()))
	require.NoError(t, err)
	_, err = b.Failed("s", nil)
	require.ErrorIs(t, err, ErrParked)
	assert.EqualError(t, err, `crashloop: key "s" is parked (respawn_budget_exhausted after 0 respawns; resume it once the cause is fixed)`)
	assert.Nil(t, errors.Unwrap(err))
}

func TestSentinelErrorText(t *testing.T) {
	assert.EqualError(t, ErrParked, "crashloop: key is parked")
	assert.EqualError(t, ErrNotParked, "crashloop: key is not parked")
	assert.EqualError(t, ErrNeedsHuman, "crashloop: crash loop needs a human")
	assert.EqualError(t, ErrInvalidConfig, "crashloop: invalid configuration")
}

// WithEventHandler(nil), a nil EventHandlerFunc and a nil Option mean no
// handler; a later option overrides an earlier one. The guard and the fleet
// policy also get a name, which changes nothing without a handler.
func TestOptionsNilHandler(t *testing.T) {
	rec := &coreRecorder{}
	for name, opts := range map[string][]Option{
		"nil handler":               {WithEventHandler(nil)},
		"nil handler func":          {WithEventHandler(EventHandlerFunc(nil))},
		"later nil overrides":       {WithEventHandler(rec), WithEventHandler(nil)},
		"nil option is skipped":     {nil, WithEventHandler(nil), nil},
		"no options at all":         nil,
		"clock without a handler":   {WithClock(coreMock())},
		"nil clock without handler": {WithClock(nil), WithEventHandler(nil)},
	} {
		t.Run(name, func(t *testing.T) {
			require.NotPanics(t, func() {
				b, err := NewRespawnBudget(BudgetConfig{MaxRespawns: 1, Window: time.Minute}, opts...)
				require.NoError(t, err)
				_, err = b.Failed("s", errors.New("boom"))
				require.NoError(t, err)
				_, err = b.Failed("s", errors.New("boom"))
				require.ErrorIs(t, err, ErrParked)
				require.NoError(t, b.Resume("s"))

				d, err := NewChainDetector(ChainConfig{MaxChain: 1, ResetGap: time.Hour}, opts...)
				require.NoError(t, err)
				_, err = d.Rescue("k", "i", true)
				require.NoError(t, err)
				_, err = d.Rescue("k", "i", true)
				require.ErrorIs(t, err, ErrNeedsHuman)

				named := append(opts[:len(opts):len(opts)], WithName("x"))
				g, err := NewRestartLoopGuard(1, time.Hour, named...)
				require.NoError(t, err)
				require.True(t, g.Record())

				p, err := NewFleetSupervisionPolicy(FleetConfig{RestartsPerHour: 1, FailingFraction: 1, MinFailing: 1, Cooldown: 0}, named...)
				require.NoError(t, err)
				require.True(t, p.NoteRestart())
				p.Tripped() // re-arms (cooldown 0) with nobody to tell
			})
		})
	}
	assert.Empty(t, rec.All())
}

// WithClock(nil) and no WithClock mean the real clock.
func TestOptionsNilClockIsRealClock(t *testing.T) {
	for name, opts := range map[string][]Option{
		"nil clock":            {WithClock(nil)},
		"no clock":             nil,
		"later nil overrides":  {WithClock(coreMock()), WithClock(nil)},
		"nil options are skip": {nil, WithClock(nil)},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &coreRecorder{}
			opts := append(opts[:len(opts):len(opts)], WithEventHandler(rec))

			before := time.Now()
			g, err := NewRestartLoopGuard(1, time.Hour, append(opts[:len(opts):len(opts)], WithName("real"))...)
			require.NoError(t, err)
			require.True(t, g.Record())
			b, err := NewRespawnBudget(DefaultBudgetConfig(), opts...)
			require.NoError(t, err)
			_, err = b.Failed("s", nil)
			require.NoError(t, err)
			after := time.Now()

			evs := rec.All()
			require.Len(t, evs, 2)
			for _, ev := range evs {
				assert.False(t, ev.Time.Before(before), "%v is before %v", ev.Time, before)
				assert.False(t, ev.Time.After(after), "%v is after %v", ev.Time, after)
			}
			assert.Equal(t, "real", evs[0].Key, "a guard's events carry its name")
			assert.Equal(t, "s", evs[1].Key, "a budget's events carry the call's key")
		})
	}
}

func TestEventHandlerFunc(t *testing.T) {
	var got []Event
	var h EventHandler = EventHandlerFunc(func(ev Event) { got = append(got, ev) })
	h.HandleEvent(Event{Kind: EventResumed, Key: "k"})
	assert.Equal(t, []Event{{Kind: EventResumed, Key: "k"}}, got)
	assert.NotPanics(t, func() { EventHandlerFunc(nil).HandleEvent(Event{}) })
}
