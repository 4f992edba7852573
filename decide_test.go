package crashloop_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decideSupervisor is a Supervisor on a mock clock at testT0 that records
// its events.
func decideSupervisor(t *testing.T, cfg crashloop.SupervisorConfig) (*crashloop.Supervisor, *recorder) {
	t.Helper()
	rec := newRecorder()
	rec.Start = testT0
	s, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(mockAt(testT0)), crashloop.WithEventHandler(rec))
	require.NoError(t, err)
	return s, rec
}

// Decide is the whole judgment of one run's end, for a loop of the
// caller's own: each way of ending gets its decision and its one event.
func TestDecideJudgesEachEnding(t *testing.T) {
	s, rec := decideSupervisor(t, crashloop.DefaultSupervisorConfig())
	at := func(d time.Duration) time.Time { return testT0.Add(d) }
	boom := errors.New("boom")

	// Failed starts: the budget's backoffs, then the park.
	for i, want := range []time.Duration{millis(500), time.Second, millis(1500)} {
		d := s.DecideAt(context.Background(), "w", crashloop.RunResult{Err: boom, Started: at(time.Duration(i) * time.Second)}, at(time.Duration(i)*time.Second))
		assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: want}, d, "failure %d", i+1)
	}
	d := s.DecideAt(context.Background(), "w", crashloop.RunResult{Err: boom}, at(3*time.Second))
	assert.Equal(t, crashloop.ActionStop, d.Action)
	var pe *crashloop.ParkedError
	require.ErrorAs(t, d.Err, &pe)
	assert.Equal(t, crashloop.ReasonBudgetExhausted, pe.Reason)
	assert.Equal(t, 3, pe.Attempts)
	// A parked key stops at once, with the same park, announcing nothing.
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionStop, Err: pe}, s.DecideAt(context.Background(), "w", crashloop.RunResult{Err: boom}, at(4*time.Second)))
	assert.Equal(t, []supEvent{
		respawnEv(0, "w", boom, 1, millis(500)),
		respawnEv(time.Second, "w", boom, 2, time.Second),
		respawnEv(2*time.Second, "w", boom, 3, millis(1500)),
		exhaustedEv(3*time.Second, "w", crashloop.ReasonBudgetExhausted, boom, 3),
	}, rec.Events())
	rec.Take()

	// A crash after a healthy run (it lasted HealthyAfter, or it was
	// Ready): the chain, and the curve's first step.
	d = s.DecideAt(context.Background(), "h", crashloop.RunResult{Err: boom, Started: testT0}, at(10*time.Second))
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: millis(500)}, d)
	d = s.DecideAt(context.Background(), "h", crashloop.RunResult{Err: boom, Ready: true}, at(11*time.Second))
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: millis(500)}, d)
	// A run 1ns short of HealthyAfter was a failed start.
	d = s.DecideAt(context.Background(), "h", crashloop.RunResult{Err: boom, Started: at(12*time.Second + 1)}, at(22*time.Second))
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: millis(500)}, d)
	// A planned restart goes at once; Permanent parks at once.
	d = s.DecideAt(context.Background(), "h", crashloop.RunResult{Err: crashloop.Restart(nil)}, at(23*time.Second))
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart}, d)
	d = s.DecideAt(context.Background(), "p", crashloop.RunResult{Err: crashloop.Permanent(boom)}, at(24*time.Second))
	require.ErrorAs(t, d.Err, &pe)
	assert.Equal(t, crashloop.ReasonPermanent, pe.Reason)
	// A clean exit ends supervision.
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionStop}, s.DecideAt(context.Background(), "c", crashloop.RunResult{}, at(25*time.Second)))

	kinds := []string{}
	for _, ev := range rec.Take() {
		kinds = append(kinds, fmt.Sprintf("%s %s %s %d", ev.Kind, ev.Key, ev.Reason, ev.Attempts))
	}
	assert.Equal(t, []string{
		"agent.restart_scheduled h crashed 1",
		"agent.restart_scheduled h crashed 2",
		"agent.respawn_scheduled h  1",
		"agent.restart_scheduled h planned 4",
		"agent.startup_exhausted p permanent_error 0",
		// w and p parked: 2 failing members of 3 (h, and c before its clean exit).
		"fleet.breaker_tripped fleet fleet_failing_fraction 7",
	}, kinds)

	st := s.StatusAt(context.Background(), at(25*time.Second))
	assert.Equal(t, 4, st.Keys["h"].TotalRestarts, "every restart counts, whatever judged it")
	assert.Equal(t, crashloop.StateBackoff, st.Keys["h"].State)
	assert.Equal(t, crashloop.StateExited, st.Keys["c"].State)
	assert.Equal(t, "h#1", st.Keys["h"].Incarnation, "a loop of the caller's own is one incarnation")
	rearm := at(24*time.Second + 120*time.Second)
	assert.Equal(t, &crashloop.FleetStatus{BreakerTripped: true, FleetRestartsPerHour: 40, FailingKeys: 2, Keys: 3,
		RestartsInHour: 7, RearmAt: &rearm}, st.Fleet, "w and p parked; c exited cleanly and is no longer a member")
}

func TestDecideRefusesTheEmptyKey(t *testing.T) {
	s, rec := decideSupervisor(t, crashloop.DefaultSupervisorConfig())
	d := s.DecideAt(context.Background(), "", crashloop.RunResult{Err: errors.New("boom")}, testT0)
	assert.Equal(t, crashloop.ActionStop, d.Action)
	assert.ErrorIs(t, d.Err, crashloop.ErrInvalidKey)
	assert.ErrorIs(t, s.Run(context.Background(), "", func(context.Context) error { return nil }), crashloop.ErrInvalidKey)
	assert.ErrorIs(t, s.Forget(context.Background(), ""), crashloop.ErrInvalidKey)
	assert.ErrorIs(t, s.Resume(context.Background(), ""), crashloop.ErrNotParked)
	assert.Empty(t, s.Status(context.Background()).Keys)
	assert.Empty(t, rec.Take())
}

// While the fleet breaker is tripped a restart is held, announced as held
// with the wait until the re-arm, and Proceed releases it in its turn.
func TestDecideHoldAndProceed(t *testing.T) {
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Fleet = &crashloop.FleetConfig{RestartsPerHour: 2, FailingFraction: 0.5, MinFailing: 2, Cooldown: 100 * time.Second}
	s, rec := decideSupervisor(t, cfg)
	at := func(d time.Duration) time.Time { return testT0.Add(d) }
	boom := errors.New("boom")

	assert.Equal(t, crashloop.ActionRestart, s.DecideAt(context.Background(), "a", crashloop.RunResult{Err: boom}, testT0).Action)
	// The 2nd restart of the hour trips the breaker: it is held itself.
	d := s.DecideAt(context.Background(), "b", crashloop.RunResult{Err: boom}, at(time.Second))
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionHold, Wait: 100 * time.Second}, d)
	// Restarts while tripped are held, not counted.
	d = s.DecideAt(context.Background(), "c", crashloop.RunResult{Err: boom}, at(51*time.Second))
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionHold, Wait: 50 * time.Second}, d)
	evs := rec.Take()
	require.Len(t, evs, 4)
	assert.Equal(t, crashloop.Event{Kind: crashloop.EventRespawnScheduled, Key: "b", Time: at(time.Second), LastError: boom,
		Attempts: 1, Limit: 3, Window: time.Minute, Backoff: 100 * time.Second, Held: true}, evs[1])
	assert.Equal(t, crashloop.EventFleetTripped, evs[2].Kind, "announced after the restart that tripped it")
	assert.Equal(t, "fleet_restart_rate", evs[2].Reason)
	assert.True(t, evs[3].Held)
	st := s.StatusAt(context.Background(), at(51*time.Second))
	assert.Equal(t, crashloop.StateHeld, st.Keys["b"].State)
	assert.False(t, st.Keys["a"].CanRestart, "nobody restarts while the breaker is tripped")
	assert.Equal(t, 2, st.Fleet.RestartsInHour)

	// Before the re-arm, still held; at it, b (held first) goes, and c
	// half a cooldown later (two held: one every 50s).
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionHold, Wait: time.Nanosecond}, s.ProceedAt(context.Background(), "b", at(101*time.Second-1)))
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart}, s.ProceedAt(context.Background(), "b", at(101*time.Second)))
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionHold, Wait: 50 * time.Second}, s.ProceedAt(context.Background(), "c", at(101*time.Second)))
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart}, s.ProceedAt(context.Background(), "c", at(151*time.Second)))
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart}, s.ProceedAt(context.Background(), "a", at(151*time.Second)), "a was never held")
	evs = rec.Take()
	require.Len(t, evs, 1)
	assert.Equal(t, crashloop.EventFleetRearmed, evs[0].Kind)
	assert.Equal(t, 0, s.StatusAt(context.Background(), at(151*time.Second)).Fleet.RestartsInHour, "a release is not counted again")
}

// Keys come and go: a key that ended cleanly stops counting as a fleet
// member, and Forget drops a key from Status, Parked and the fleet.
func TestForgetAndMembership(t *testing.T) {
	s, _ := decideSupervisor(t, crashloop.DefaultSupervisorConfig())
	boom := errors.New("boom")
	// 100 work items ran and finished cleanly.
	for i := range 100 {
		key := fmt.Sprintf("item-%d", i)
		require.Equal(t, crashloop.ActionStop, s.DecideAt(context.Background(), key, crashloop.RunResult{}, testT0).Action)
	}
	assert.Len(t, s.Status(context.Background()).Keys, 100)
	// Two keys fail their way to a park: 2 failing members of 2, which
	// trips the breaker (the 100 finished items do not dilute it).
	for _, key := range []string{"x", "y"} {
		for range 4 {
			s.DecideAt(context.Background(), key, crashloop.RunResult{Err: boom}, testT0)
		}
	}
	st := s.Status(context.Background())
	assert.Equal(t, 2, st.Fleet.FailingKeys)
	assert.Equal(t, 2, st.Fleet.Keys)
	assert.True(t, st.Fleet.BreakerTripped)

	for i := range 100 {
		require.NoError(t, s.Forget(context.Background(), fmt.Sprintf("item-%d", i)))
	}
	require.NoError(t, s.Forget(context.Background(), "x"))
	require.NoError(t, s.Forget(context.Background(), "never-seen"))
	st = s.Status(context.Background())
	assert.Equal(t, []string{"y"}, s.Parked())
	assert.Len(t, st.Keys, 1)
	assert.Equal(t, 1, st.Fleet.FailingKeys)
	assert.Equal(t, 1, st.Fleet.Keys)
	// A forgotten key is new again: a full budget (once the breaker that
	// its park tripped has re-armed).
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: millis(500)},
		s.DecideAt(context.Background(), "x", crashloop.RunResult{Err: boom}, testT0.Add(120*time.Second)))
}

func TestForgetRefusesARunningKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig())
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- s.Run(ctx, "k", func(ctx context.Context) error { <-ctx.Done(); return nil }) }()
		synctest.Wait()
		assert.ErrorIs(t, s.Forget(context.Background(), "k"), crashloop.ErrAlreadyRunning)
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
		require.NoError(t, s.Forget(context.Background(), "k"))
		assert.Empty(t, s.Status(context.Background()).Keys)
	})
}

// Incarnations are numbered per key: each Run of a key gets the next.
func TestIncarnationsArePerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig())
		var incs []string
		for _, key := range []string{"a", "b", "c", "a", "b", "a"} {
			require.NoError(t, s.Run(t.Context(), key, func(context.Context) error { return nil }))
			incs = append(incs, s.Status(context.Background()).Keys[key].Incarnation)
		}
		assert.Equal(t, []string{"a#1", "b#1", "c#1", "a#2", "b#2", "a#3"}, incs)
		require.NoError(t, s.Run(t.Context(), "a", func(context.Context) error { return nil }, crashloop.WithIncarnation("pane-3")))
		assert.Equal(t, "pane-3", s.Status(context.Background()).Keys["a"].Incarnation)
	})
}

// A handler that resumes the key from the event that parked it wins: Run
// goes on with a full budget instead of returning the park.
func TestResumeFromTheParkHandlerWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s *crashloop.Supervisor
		resumed := 0
		s = newTestSupervisor(t, crashloop.DefaultSupervisorConfig(), crashloop.WithEventHandler(crashloop.EventHandlerFunc(func(ev crashloop.Event) {
			if ev.Kind.Stops() && resumed == 0 {
				resumed++
				assert.NoError(t, s.Resume(context.Background(), ev.Key))
			}
		})))
		starts := 0
		err := s.Run(t.Context(), "w", func(context.Context) error {
			starts++
			if starts <= 4 {
				return errors.New("boom") // the 4th failure parks; the handler resumes it
			}
			return nil
		})
		require.NoError(t, err, "Run went on after the resume and ended cleanly")
		assert.Equal(t, 5, starts)
		assert.Empty(t, s.Parked())
		assert.Equal(t, crashloop.StateExited, s.Status(context.Background()).Keys["w"].State)
	})
}
