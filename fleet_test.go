package crashloop

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultFleetConfig(t *testing.T) {
	assert.Equal(t, FleetConfig{RestartsPerHour: 40, FailingFraction: 0.5, MinFailing: 2, Cooldown: 120 * time.Second}, DefaultFleetConfig())
}

// coreFleet returns a default policy named "fleet" on a mock clock at coreT0.
func coreFleet(t *testing.T, cfg FleetConfig) (*FleetSupervisionPolicy, *coreRecorder) {
	t.Helper()
	rec := &coreRecorder{}
	p, err := NewFleetSupervisionPolicy(cfg, WithName("fleet"), WithClock(coreMock()), WithEventHandler(rec))
	require.NoError(t, err)
	assert.Equal(t, cfg, p.Config())
	return p, rec
}

// coreTripFleetAt trips p at now with RestartsPerHour restarts.
func coreTripFleetAt(t *testing.T, p *FleetSupervisionPolicy, now time.Time) {
	t.Helper()
	for i := 1; i < p.Config().RestartsPerHour; i++ {
		require.False(t, p.NoteRestartAt(now))
	}
	require.True(t, p.NoteRestartAt(now))
}

// coreRateReason is the reason of a trip on the rate.
const coreRateReason = "fleet_restart_rate"

func coreFleetEvent(kind EventKind, at time.Time, reason string, attempts, failing, total int) Event {
	return Event{Kind: kind, Key: "fleet", Time: at, Reason: reason, Attempts: attempts,
		Limit: 40, Window: 120 * time.Second, Failing: failing, Total: total}
}

// The 40th restart within the hour trips the breaker; the 39th does not.
func TestFleetTripsOnFortiethRestart(t *testing.T) {
	p, rec := coreFleet(t, DefaultFleetConfig())

	for i := 0; i < 39; i++ { // one a minute
		require.False(t, p.NoteRestartAt(coreT0.Add(time.Duration(i)*time.Minute)), "restart %d", i+1)
	}
	assert.Equal(t, 39, p.StatusAt(coreT0.Add(38*time.Minute)).RestartsInHour)
	assert.False(t, p.TrippedAt(coreT0.Add(38*time.Minute)))
	assert.Empty(t, rec.All())

	tripAt := coreT0.Add(39 * time.Minute)
	assert.True(t, p.NoteRestartAt(tripAt), "restart 40")
	assert.True(t, p.TrippedAt(tripAt))
	assert.Equal(t, []Event{{Kind: EventFleetTripped, Key: "fleet", Time: tripAt, Reason: coreRateReason,
		Attempts: 40, Limit: 40, Window: 120 * time.Second}}, rec.All())
}

// A restart exactly an hour old still counts towards the rate; one a
// nanosecond older does not.
func TestFleetHourBoundary(t *testing.T) {
	for _, tc := range []struct {
		name string
		last time.Duration
		trip bool
	}{
		{"exactly an hour old counts", time.Hour, true},
		{"a nanosecond older does not", time.Hour + time.Nanosecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := coreFleet(t, DefaultFleetConfig())
			for i := 0; i < 39; i++ {
				require.False(t, p.NoteRestartAt(coreT0))
			}
			assert.Equal(t, tc.trip, p.NoteRestartAt(coreT0.Add(tc.last)))
		})
	}
}

// While tripped, restarts are held and recorded nothing: the hour does not
// grow and a held restart never renews it. At trip + Cooldown the breaker
// re-arms with an empty hour (1ns before, it is still tripped).
func TestFleetHeldRestartsAndRearm(t *testing.T) {
	p, rec := coreFleet(t, DefaultFleetConfig())
	tripAt := coreT0
	coreTripFleetAt(t, p, tripAt)
	assert.Equal(t, []Event{coreFleetEvent(EventFleetTripped, tripAt, coreRateReason, 40, 0, 0)}, rec.Take())

	for s := 1; s < 120; s++ {
		now := tripAt.Add(time.Duration(s) * time.Second)
		require.True(t, p.NoteRestartAt(now), "held restart at +%ds", s)
		require.Equal(t, 40, p.StatusAt(now).RestartsInHour, "held restarts are not recorded")
	}
	assert.True(t, p.TrippedAt(tripAt.Add(120*time.Second-time.Nanosecond)))
	assert.Empty(t, rec.All())

	rearmAt := tripAt.Add(120 * time.Second)
	assert.False(t, p.TrippedAt(rearmAt))
	assert.Equal(t, []Event{coreFleetEvent(EventFleetRearmed, rearmAt, coreRateReason, 0, 0, 0)}, rec.Take())
	assert.Equal(t, 0, p.StatusAt(rearmAt).RestartsInHour, "re-arm clears the hour")
	assert.False(t, p.TrippedAt(rearmAt))
	assert.Empty(t, rec.All(), "re-armed once")

	// The hour is really empty: it takes 40 fresh restarts to trip again.
	for i := 0; i < 39; i++ {
		require.False(t, p.NoteRestartAt(rearmAt), "restart %d after re-arm", i+1)
	}
	assert.True(t, p.NoteRestartAt(rearmAt))
	assert.Equal(t, []Event{coreFleetEvent(EventFleetTripped, rearmAt, coreRateReason, 40, 0, 0)}, rec.All())
}

// The re-arm happens on whichever call first sees trip + Cooldown.
func TestFleetRearmsOnAnyCall(t *testing.T) {
	tripAt := coreT0
	rearmAt := tripAt.Add(120 * time.Second)
	for _, tc := range []struct {
		name  string
		call  func(p *FleetSupervisionPolicy, now time.Time) bool // reports tripped
		after int                                                 // restarts in the hour after the call
		total int                                                 // members noted when it re-arms
	}{
		{"TrippedAt", func(p *FleetSupervisionPolicy, now time.Time) bool { return p.TrippedAt(now) }, 0, 0},
		{"NoteRestartAt", func(p *FleetSupervisionPolicy, now time.Time) bool { return p.NoteRestartAt(now) }, 1, 0},
		// The call 1ns before the end noted 0/4; the re-arm reports that.
		{"NoteFleetStateAt", func(p *FleetSupervisionPolicy, now time.Time) bool { return p.NoteFleetStateAt(0, 4, now) }, 0, 4},
		{"StatusAt", func(p *FleetSupervisionPolicy, now time.Time) bool { return p.StatusAt(now).BreakerTripped }, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, rec := coreFleet(t, DefaultFleetConfig())
			coreTripFleetAt(t, p, tripAt)
			assert.True(t, tc.call(p, rearmAt.Add(-time.Nanosecond)), "1ns before the end of the cooldown")
			assert.Equal(t, 1, len(rec.All()))

			assert.False(t, tc.call(p, rearmAt))
			assert.Equal(t, []Event{coreFleetEvent(EventFleetTripped, tripAt, coreRateReason, 40, 0, 0), coreFleetEvent(EventFleetRearmed, rearmAt, coreRateReason, 0, 0, tc.total)}, rec.All())
			assert.Equal(t, tc.after, p.StatusAt(rearmAt).RestartsInHour)
			assert.False(t, p.TrippedAt(rearmAt))
			assert.Len(t, rec.All(), 2, "re-armed exactly once")
		})
	}

	t.Run("clock forms", func(t *testing.T) {
		m := coreMock()
		rec := &coreRecorder{}
		p, err := NewFleetSupervisionPolicy(DefaultFleetConfig(), WithClock(m), WithEventHandler(rec))
		require.NoError(t, err)
		for i := 0; i < 40; i++ {
			p.NoteRestart()
		}
		require.True(t, p.Tripped())
		m.Add(120*time.Second - time.Nanosecond)
		assert.True(t, p.Tripped())
		assert.True(t, p.NoteRestart())
		assert.True(t, p.NoteFleetState(0, 4))
		assert.True(t, p.Status().BreakerTripped)
		m.Add(time.Nanosecond)
		assert.False(t, p.Status().BreakerTripped)
		assert.Equal(t, 1, rec.count(EventFleetRearmed))
		assert.Equal(t, coreT0.Add(120*time.Second), rec.All()[1].Time)
	})
}

// NoteFleetState trips on the failing fraction, but never on fewer than
// MinFailing failing members.
func TestFleetFailingFraction(t *testing.T) {
	for _, tc := range []struct {
		failing, total int
		minFailing     int
		trip           bool
	}{
		{2, 4, 2, true},
		{1, 1, 2, false}, // a 1-channel fleet never false-trips
		{1, 2, 2, false},
		{2, 5, 2, false}, // 0.4 < 0.5
		{3, 5, 2, true},
		{2, 3, 2, true},
		{0, 4, 2, false},
		{0, 0, 2, false},
		{1, 1, 1, true}, // MinFailing 1 opts into single-member trips
		{1, 2, 1, true},
		{1, 3, 1, false},
	} {
		cfg := DefaultFleetConfig()
		cfg.MinFailing = tc.minFailing
		p, rec := coreFleet(t, cfg)
		assert.Equal(t, tc.trip, p.NoteFleetStateAt(tc.failing, tc.total, coreT0), "%d/%d, min_failing %d", tc.failing, tc.total, tc.minFailing)
		assert.Equal(t, tc.trip, p.TrippedAt(coreT0))
		if tc.trip {
			assert.Equal(t, []Event{coreFleetEvent(EventFleetTripped, coreT0, "fleet_failing_fraction", 0, tc.failing, tc.total)}, rec.All())
		} else {
			assert.Empty(t, rec.All(), "%d/%d, min_failing %d", tc.failing, tc.total, tc.minFailing)
		}
	}
}

func TestFleetTripEventPayload(t *testing.T) {
	p, rec := coreFleet(t, DefaultFleetConfig())
	p.NoteRestartAt(coreT0)
	p.NoteRestartAt(coreT0.Add(time.Second))
	require.True(t, p.NoteFleetStateAt(2, 4, coreT0.Add(2*time.Second)))
	assert.Equal(t, []Event{{Kind: EventFleetTripped, Key: "fleet", Time: coreT0.Add(2 * time.Second),
		Reason: "fleet_failing_fraction", Attempts: 2, Limit: 40, Window: 120 * time.Second,
		Failing: 2, Total: 4}}, rec.All())
}

// A trip by rate gives the rate as its reason, and carries the fleet state
// last noted.
func TestFleetRateTripReportsTheRate(t *testing.T) {
	p, rec := coreFleet(t, DefaultFleetConfig())
	require.False(t, p.NoteFleetStateAt(1, 4, coreT0))
	coreTripFleetAt(t, p, coreT0)
	assert.Equal(t, []Event{{Kind: EventFleetTripped, Key: "fleet", Time: coreT0, Reason: coreRateReason,
		Attempts: 40, Limit: 40, Window: 120 * time.Second, Failing: 1, Total: 4}}, rec.All())
}

// While tripped, a fleet state that still qualifies extends the hold to
// Cooldown from now; one that does not, does not.
func TestFleetStateExtendsHold(t *testing.T) {
	t.Run("qualifying state extends", func(t *testing.T) {
		p, rec := coreFleet(t, DefaultFleetConfig())
		require.True(t, p.NoteFleetStateAt(2, 4, coreT0))
		extendedAt := coreT0.Add(100 * time.Second)
		require.True(t, p.NoteFleetStateAt(3, 4, extendedAt))
		assert.Len(t, rec.All(), 1, "an extension is not a new trip")

		assert.True(t, p.TrippedAt(coreT0.Add(120*time.Second)), "the original cooldown no longer applies")
		assert.True(t, p.TrippedAt(extendedAt.Add(120*time.Second-time.Nanosecond)))
		assert.False(t, p.TrippedAt(extendedAt.Add(120*time.Second)))
		assert.Equal(t, []Event{
			coreFleetEvent(EventFleetTripped, coreT0, "fleet_failing_fraction", 0, 2, 4),
			// The re-arm says why the breaker had tripped, and the state noted last.
			coreFleetEvent(EventFleetRearmed, extendedAt.Add(120*time.Second), "fleet_failing_fraction", 0, 3, 4),
		}, rec.All())
	})

	t.Run("state that no longer qualifies does not extend", func(t *testing.T) {
		p, rec := coreFleet(t, DefaultFleetConfig())
		require.True(t, p.NoteFleetStateAt(2, 4, coreT0))
		assert.True(t, p.NoteFleetStateAt(1, 4, coreT0.Add(100*time.Second)), "still cooling down")
		assert.True(t, p.TrippedAt(coreT0.Add(120*time.Second-time.Nanosecond)))
		assert.False(t, p.TrippedAt(coreT0.Add(120*time.Second)))
		assert.Equal(t, 1, rec.count(EventFleetRearmed))
	})

	t.Run("held restarts do not extend", func(t *testing.T) {
		p, _ := coreFleet(t, DefaultFleetConfig())
		require.True(t, p.NoteFleetStateAt(2, 4, coreT0))
		assert.True(t, p.NoteRestartAt(coreT0.Add(119*time.Second)))
		assert.False(t, p.TrippedAt(coreT0.Add(120*time.Second)))
	})
}

// Status marshals to the JSON block of a health endpoint.
func TestFleetStatusJSON(t *testing.T) {
	p, _ := coreFleet(t, DefaultFleetConfig())
	marshal := func(st FleetStatus) string {
		b, err := json.Marshal(st)
		require.NoError(t, err)
		return string(b)
	}

	assert.Equal(t, `{"breaker_tripped":false,"fleet_restarts_per_hour":40,"failing_keys":0,"keys":0,"restarts_in_hour":0}`,
		marshal(p.StatusAt(coreT0)))

	for i := 0; i < 3; i++ {
		p.NoteRestartAt(coreT0)
	}
	require.True(t, p.NoteFleetStateAt(2, 4, coreT0.Add(time.Second)))
	st := p.StatusAt(coreT0.Add(2 * time.Second))
	rearm := coreT0.Add(time.Second + 120*time.Second)
	assert.Equal(t, FleetStatus{BreakerTripped: true, FleetRestartsPerHour: 40, FailingKeys: 2, Keys: 4,
		RestartsInHour: 3, RearmAt: &rearm}, st)
	assert.Equal(t, `{"breaker_tripped":true,"fleet_restarts_per_hour":40,"failing_keys":2,"keys":4,"restarts_in_hour":3,"rearm_at":"2026-01-02T03:06:06Z"}`,
		marshal(st))

	// The keys the contract names, whatever else the snapshot carries.
	var keys map[string]any
	require.NoError(t, json.Unmarshal([]byte(marshal(st)), &keys))
	for _, k := range []string{"breaker_tripped", "fleet_restarts_per_hour", "failing_keys", "keys"} {
		assert.Contains(t, keys, k)
	}

	assert.Equal(t, `{"breaker_tripped":false,"fleet_restarts_per_hour":40,"failing_keys":2,"keys":4,"restarts_in_hour":0}`,
		marshal(p.StatusAt(rearm)))
}

// A cooldown of 0 holds nothing: the breaker re-arms at the trip instant, on
// the next call.
func TestFleetCooldownZero(t *testing.T) {
	cfg := DefaultFleetConfig()
	cfg.Cooldown = 0
	p, rec := coreFleet(t, cfg)

	require.True(t, p.NoteFleetStateAt(2, 4, coreT0), "the trip itself is reported")
	assert.False(t, p.TrippedAt(coreT0))
	evs := rec.Take()
	require.Len(t, evs, 2)
	assert.Equal(t, EventFleetTripped, evs[0].Kind)
	assert.Equal(t, Event{Kind: EventFleetRearmed, Key: "fleet", Time: coreT0, Reason: "fleet_failing_fraction",
		Limit: 40, Window: 0, Failing: 2, Total: 4}, evs[1])

	coreTripFleetAt(t, p, coreT0.Add(time.Second))
	assert.False(t, p.NoteRestartAt(coreT0.Add(time.Second)), "re-armed with an empty hour: this restart is the first")
	assert.Equal(t, 1, p.StatusAt(coreT0.Add(time.Second)).RestartsInHour)
	assert.Equal(t, []EventKind{EventFleetTripped, EventFleetRearmed}, []EventKind{rec.All()[0].Kind, rec.All()[1].Kind})
}

func TestFleetReset(t *testing.T) {
	p, rec := coreFleet(t, DefaultFleetConfig())
	require.True(t, p.NoteFleetStateAt(2, 4, coreT0))
	p.NoteRestartAt(coreT0)
	rec.Take()
	p.Reset()
	assert.Equal(t, FleetStatus{FleetRestartsPerHour: 40}, p.StatusAt(coreT0))
	assert.False(t, p.TrippedAt(coreT0))
	assert.Empty(t, rec.All(), "Reset announces nothing")
}

// Bad counts are clamped (negative to 0, failing to total): never a panic,
// never a trip that the clamped counts do not justify.
func TestFleetStateBadCounts(t *testing.T) {
	const maxInt = int(^uint(0) >> 1)
	for _, tc := range []struct {
		failing, total         int
		wantFailing, wantTotal int
		trip                   bool
	}{
		{-1, 4, 0, 4, false},
		{-5, -5, 0, 0, false},
		{3, -1, 0, 0, false},
		{3, 0, 0, 0, false},
		{5, 1, 1, 1, false}, // one member, however many are claimed failing
		{maxInt, 0, 0, 0, false},
		{math.MinInt, maxInt, 0, maxInt, false},
		{5, 2, 2, 2, true}, // every member failing
		{maxInt, maxInt, maxInt, maxInt, true},
	} {
		p, _ := coreFleet(t, DefaultFleetConfig())
		var tripped bool
		require.NotPanics(t, func() { tripped = p.NoteFleetStateAt(tc.failing, tc.total, coreT0) })
		assert.Equal(t, tc.trip, tripped, "%d/%d", tc.failing, tc.total)
		st := p.StatusAt(coreT0)
		assert.Equal(t, tc.wantFailing, st.FailingKeys, "%d/%d", tc.failing, tc.total)
		assert.Equal(t, tc.wantTotal, st.Keys, "%d/%d", tc.failing, tc.total)
		assert.Equal(t, tc.trip, st.BreakerTripped)
	}
}
