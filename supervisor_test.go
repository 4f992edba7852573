package crashloop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every test in this file runs inside a testing/synctest bubble: the
// Supervisor's default real clock is the bubble's fake clock, time starts at
// 2000-01-01T00:00:00Z and only moves when every goroutine is blocked, so
// all start times below are exact.

func TestSupervisorFailsAtOnceParksAfterBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, starts := newRecorder(), newSupStarts()
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig(), crashloop.WithEventHandler(rec))
		boom := errors.New("boom")

		err := s.Run(t.Context(), "worker", func(context.Context) error {
			starts.mark()
			return boom
		})

		assert.Equal(t, 3*time.Second, time.Since(starts.start), "Run returns at the park")
		assert.Equal(t, []time.Duration{0, millis(500), millis(1500), millis(3000)}, starts.times())
		var pe *crashloop.ParkedError
		require.ErrorAs(t, err, &pe)
		assert.ErrorIs(t, err, crashloop.ErrParked)
		assert.ErrorIs(t, err, boom)
		assert.NotErrorIs(t, err, crashloop.ErrNeedsHuman)
		assert.Equal(t, "worker", pe.Key)
		assert.Equal(t, crashloop.ReasonBudgetExhausted, pe.Reason)
		assert.Equal(t, "respawn_budget_exhausted", pe.Reason)
		assert.Same(t, boom, pe.LastError)
		assert.Equal(t, 3, pe.Attempts)
		assert.True(t, pe.Since.Equal(starts.start.Add(3*time.Second)), "Since = %v", pe.Since)

		assert.Equal(t, []supEvent{
			respawnEv(0, "worker", boom, 1, millis(500)),
			respawnEv(millis(500), "worker", boom, 2, time.Second),
			respawnEv(millis(1500), "worker", boom, 3, millis(1500)),
			exhaustedEv(3*time.Second, "worker", "respawn_budget_exhausted", boom, 3),
		}, rec.Events())
		assert.Equal(t, []string{"worker"}, s.Parked())

		ks := s.Status(context.Background()).Keys["worker"]
		assert.Equal(t, crashloop.StateParked, ks.State)
		assert.Equal(t, 3, ks.Respawns)
		assert.False(t, ks.CanRestart)
		assert.Equal(t, "boom", ks.LastError)
		assert.Equal(t, "respawn_budget_exhausted", ks.Reason)
		assert.True(t, ks.Since.Equal(starts.start.Add(3*time.Second)))
	})
}

func TestSupervisorSlowLoopNeedsHuman(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, starts := newRecorder(), newSupStarts()
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig(), crashloop.WithEventHandler(rec))
		died := errors.New("died after 16 minutes")

		err := s.Run(t.Context(), "seat-7", func(context.Context) error {
			starts.mark()
			time.Sleep(16 * time.Minute) // long past HealthyAfter: passes every health check
			return died
		}, crashloop.WithIncarnation("pane-3/session-a"))

		// Each crash is a reactive rescue after a healthy run: the restart
		// waits the curve's first step (500ms); the 4th crash finds a chain
		// of 3 and escalates.
		assert.Equal(t, []time.Duration{
			0,
			16*time.Minute + millis(500),
			32*time.Minute + millis(1000),
			48*time.Minute + millis(1500),
		}, starts.times())
		end := 64*time.Minute + millis(1500)
		assert.Equal(t, end, time.Since(starts.start))

		var pe *crashloop.ParkedError
		require.ErrorAs(t, err, &pe)
		assert.ErrorIs(t, err, crashloop.ErrNeedsHuman)
		assert.ErrorIs(t, err, crashloop.ErrParked)
		assert.ErrorIs(t, err, died)
		assert.Equal(t, "needs_human", pe.Reason)
		assert.Equal(t, crashloop.ReasonNeedsHuman, pe.Reason)
		assert.Equal(t, 3, pe.Attempts, "the chain's length")
		assert.Equal(t, `crashloop: key "seat-7" is parked (needs_human after 3 reactive rescues; resume it once the cause is fixed): `+
			`crashloop: "seat-7" needs a human: crash-loop: gave up after 3 reactive rescues: died after 16 minutes`, pe.Error())

		// Every restart is announced, with the key's total restarts.
		const inc = "pane-3/session-a"
		assert.Equal(t, []supEvent{
			restartEv(16*time.Minute, "seat-7", inc, "crashed", died, 1, millis(500)),
			restartEv(32*time.Minute+millis(500), "seat-7", inc, "crashed", died, 2, millis(500)),
			restartEv(48*time.Minute+millis(1000), "seat-7", inc, "crashed", died, 3, millis(500)),
			{At: end, Event: crashloop.Event{Kind: crashloop.EventChainEscalated, Key: "seat-7",
				Incarnation: inc, Reason: "needs_human", LastError: died,
				Attempts: 3, Limit: 3, Window: 20 * time.Minute}}}, rec.Events())

		ks := s.Status(context.Background()).Keys["seat-7"]
		assert.Equal(t, crashloop.StateNeedsHuman, ks.State)
		assert.Equal(t, "needs_human", ks.Reason)
		assert.Equal(t, "pane-3/session-a", ks.Incarnation)
		assert.Equal(t, `crashloop: "seat-7" needs a human: crash-loop: gave up after 3 reactive rescues: died after 16 minutes`, ks.LastError)
		assert.Equal(t, []string{"seat-7"}, s.Parked())
	})
}

func TestSupervisorHealthyHourlyFailuresNeverPark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, starts := newRecorder(), newSupStarts()
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig(), crashloop.WithEventHandler(rec))
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			time.Sleep(72 * time.Hour)
			cancel()
		}()
		hourly := errors.New("hourly hiccup")

		err := s.Run(ctx, "svc", func(ctx context.Context) error {
			starts.mark()
			if err := sleepOrDone(ctx, time.Hour); err != nil {
				return err
			}
			return hourly
		})

		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 72*time.Hour, time.Since(starts.start), "Run returns as the context ends")
		// Start k is at k*(1h + 500ms): a gap of an hour breaks every chain.
		got := starts.times()
		require.Len(t, got, 72)
		for k, at := range got {
			require.Equal(t, time.Duration(k)*(time.Hour+millis(500)), at, "start %d", k)
		}
		// Every restart is announced, and nothing else: no respawn, park,
		// escalation or fleet event.
		evs := rec.Events()
		require.Len(t, evs, 71)
		for k, ev := range evs {
			require.Equal(t, restartEv(time.Duration(k+1)*time.Hour+time.Duration(k)*millis(500), "svc", "svc#1", "crashed",
				hourly, k+1, millis(500)), ev)
		}
		assert.Empty(t, s.Parked())
		ks := s.Status(context.Background()).Keys["svc"]
		assert.Equal(t, crashloop.StateExited, ks.State)
		assert.Equal(t, 0, ks.Respawns)
		assert.Equal(t, 71, ks.TotalRestarts)
		assert.True(t, ks.CanRestart)
	})
}

func TestSupervisorPermanentParksAfterOneStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, starts := newRecorder(), newSupStarts()
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig(), crashloop.WithEventHandler(rec))
		missing := errors.New("exec: \"agent\": executable file not found")
		perm := crashloop.Permanent(missing)

		err := s.Run(t.Context(), "agent", func(context.Context) error {
			starts.mark()
			return perm
		})

		assert.Equal(t, []time.Duration{0}, starts.times())
		var pe *crashloop.ParkedError
		require.ErrorAs(t, err, &pe)
		assert.ErrorIs(t, err, crashloop.ErrParked)
		assert.ErrorIs(t, err, missing)
		assert.Equal(t, "permanent_error", pe.Reason)
		assert.Equal(t, crashloop.ReasonPermanent, pe.Reason)
		assert.Same(t, perm, pe.LastError)
		assert.Equal(t, []supEvent{exhaustedEv(0, "agent", "permanent_error", perm, 0)}, rec.Events())
		assert.Equal(t, []string{"agent"}, s.Parked())
		assert.Equal(t, "crashloop: permanent failure: "+missing.Error(), s.Status(context.Background()).Keys["agent"].LastError)
	})
}

func TestSupervisorPlannedRestartCostsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, starts := newRecorder(), newSupStarts()
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig(), crashloop.WithEventHandler(rec))
		boom, reload := errors.New("boom"), errors.New("config reloaded")

		err := s.Run(t.Context(), "w", func(context.Context) error {
			switch starts.mark() {
			case 1, 3:
				return boom
			case 2:
				return crashloop.Restart(reload)
			}
			return nil
		})

		require.NoError(t, err)
		// The planned restart (start 2) is followed at the same instant by
		// start 3, and the failure after it is the 2nd respawn (1s), not the
		// 3rd: the planned restart spent no budget.
		assert.Equal(t, []time.Duration{0, millis(500), millis(500), millis(1500)}, starts.times())
		evs := rec.Events()
		require.Len(t, evs, 3)
		assert.Equal(t, respawnEv(0, "w", boom, 1, millis(500)), evs[0])
		assert.Equal(t, crashloop.EventRestartScheduled, evs[1].Kind, "the planned restart is announced")
		assert.Equal(t, restartEv(millis(500), "w", "w#1", "planned", evs[1].LastError, 2, 0), evs[1])
		assert.ErrorIs(t, evs[1].LastError, reload)
		assert.Equal(t, respawnEv(millis(500), "w", boom, 2, time.Second), evs[2])
		ks := s.Status(context.Background()).Keys["w"]
		assert.Equal(t, 0, ks.Respawns, "the clean exit that ended it was a good start: the window is cleared")
		assert.Equal(t, 3, ks.TotalRestarts)
		assert.Equal(t, crashloop.StateExited, ks.State)
	})
}

func TestSupervisorPlannedRestartBreaksTheChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, starts := newRecorder(), newSupStarts()
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig(), crashloop.WithEventHandler(rec))
		died := errors.New("died")

		err := s.Run(t.Context(), "seat", func(context.Context) error {
			n := starts.mark()
			time.Sleep(16 * time.Minute)
			if n == 3 {
				return crashloop.Restart(nil)
			}
			return died
		})

		// Rescues: chain 1, 2, planned restart (chain 0, no wait), then
		// 1, 2, 3, and the 7th crash escalates. Without the break the 4th
		// crash would have escalated.
		assert.Equal(t, []time.Duration{
			0,
			16*time.Minute + millis(500),
			32*time.Minute + millis(1000),
			48*time.Minute + millis(1000),
			64*time.Minute + millis(1500),
			80*time.Minute + millis(2000),
			96*time.Minute + millis(2500),
		}, starts.times())
		assert.ErrorIs(t, err, crashloop.ErrNeedsHuman)
		var reasons []string
		for _, ev := range rec.Events() {
			reasons = append(reasons, ev.Kind.String()+" "+ev.Reason)
		}
		assert.Equal(t, []string{"agent.restart_scheduled crashed", "agent.restart_scheduled crashed",
			"agent.restart_scheduled planned", "agent.restart_scheduled crashed", "agent.restart_scheduled crashed",
			"agent.restart_scheduled crashed", "rescue.needs_human needs_human"}, reasons)
		assert.Equal(t, supEvent{At: 112*time.Minute + millis(2500), Event: crashloop.Event{Kind: crashloop.EventChainEscalated,
			Key: "seat", Incarnation: "seat#1", Reason: "needs_human", LastError: died,
			Attempts: 3, Limit: 3, Window: 20 * time.Minute}}, rec.Events()[6])
	})
}

func TestSupervisorFleetBreakerHoldsRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		cfg := crashloop.DefaultSupervisorConfig()
		fleet := crashloop.DefaultFleetConfig()
		fleet.RestartsPerHour = 10
		cfg.Fleet = &fleet
		s := newTestSupervisor(t, cfg, crashloop.WithEventHandler(rec))
		ctx, cancel := context.WithCancel(t.Context())
		shared := errors.New("provider down")

		var mu sync.Mutex
		calls := map[string]int{}
		var healthyAt []time.Duration
		errs := make(chan error, 10)
		for i := range 10 {
			key := fmt.Sprintf("k%d", i)
			go func() {
				time.Sleep(time.Duration(i) * time.Millisecond) // k0 first, k9 last
				errs <- s.Run(ctx, key, func(ctx context.Context) error {
					mu.Lock()
					calls[key]++
					n := calls[key]
					if n > 2 {
						healthyAt = append(healthyAt, time.Since(rec.Start))
					}
					mu.Unlock()
					if n <= 2 {
						return shared // the first two starts of every key fail together
					}
					crashloop.Ready(ctx)
					<-ctx.Done()
					return nil
				})
			}()
		}
		totalCalls := func() int {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, c := range calls {
				n += c
			}
			return n
		}

		// 0-9ms: ten failures; the restart of k9 is the 10th of the hour:
		// it trips the breaker and is held, announced as held until the
		// re-arm. The 9 others start after 500ms and fail again: their
		// restarts are held too, uncounted.
		time.Sleep(2 * time.Second)
		st := s.Status(context.Background())
		require.NotNil(t, st.Fleet)
		assert.True(t, st.Fleet.BreakerTripped)
		assert.Equal(t, 10, st.Fleet.RestartsInHour)
		require.NotNil(t, st.Fleet.RearmAt)
		tripAt := millis(9)
		assert.True(t, st.Fleet.RearmAt.Equal(rec.Start.Add(120*time.Second+tripAt)), "rearm at %v", st.Fleet.RearmAt)
		require.Len(t, st.Keys, 10)
		for key, ks := range st.Keys {
			assert.Equal(t, crashloop.StateHeld, ks.State, key)
			assert.False(t, ks.CanRestart, key)
			assert.Empty(t, ks.Reason, key)
		}
		assert.Equal(t, 19, totalCalls())
		respawns := eventsOf(rec, crashloop.EventRespawnScheduled)
		require.Len(t, respawns, 19)
		assert.Equal(t, respawnEv(tripAt, "k9", shared, 1, 120*time.Second), supEvent{At: respawns[9].At,
			Event: func() crashloop.Event { ev := respawns[9].Event; ev.Held = false; return ev }()})
		assert.True(t, respawns[9].Held, "the restart that tripped the breaker is announced as held")
		for i, ev := range respawns {
			assert.Equal(t, i >= 9, ev.Held, "respawn %d", i)
		}
		assert.Equal(t, []supEvent{{At: tripAt, Event: crashloop.Event{Kind: crashloop.EventFleetTripped, Key: "fleet",
			Reason: "fleet_restart_rate", Attempts: 10, Limit: 10, Window: 120 * time.Second, Total: 10}}},
			eventsOf(rec, crashloop.EventFleetTripped))

		// Held time costs no budget: nobody parks while held.
		time.Sleep(100 * time.Second)
		assert.Empty(t, s.Parked())
		assert.Equal(t, 19, totalCalls(), "no start while the breaker is tripped")

		// At the re-arm the ten held restarts leave in the order they were
		// held (k9 first), spread over one cooldown: one every 12s. They
		// are not counted again, so the release cannot trip the breaker:
		// k9's start is its 2nd and fails (a new restart, counted: 1 in the
		// fresh hour); every other key is healthy on its 3rd.
		time.Sleep(10 * time.Minute)
		assert.Equal(t, 30, totalCalls(), "every key went on to its healthy 3rd start")
		assert.Equal(t, 20, rec.Of(crashloop.EventRespawnScheduled))
		assert.Equal(t, []time.Duration{tripAt}, atsOf(rec, crashloop.EventFleetTripped), "no re-trip")
		rearmAt := 120*time.Second + tripAt
		assert.Equal(t, []time.Duration{rearmAt}, atsOf(rec, crashloop.EventFleetRearmed))
		want := []time.Duration{rearmAt + millis(500)} // k9: released first, failed (its first respawn aged out meanwhile), healthy after 500ms
		for i := 1; i < 10; i++ {
			want = append(want, rearmAt+time.Duration(i)*12*time.Second)
		}
		slices.Sort(want)
		assert.Equal(t, want, healthyAt)
		assert.Zero(t, rec.Of(crashloop.EventStartupExhausted))
		assert.Zero(t, rec.Of(crashloop.EventChainEscalated))
		assert.Zero(t, rec.Of(crashloop.EventGuardTripped))
		assert.Empty(t, s.Parked())
		st = s.Status(context.Background())
		assert.False(t, st.Fleet.BreakerTripped)
		assert.Equal(t, 1, st.Fleet.RestartsInHour)
		for key, ks := range st.Keys {
			assert.Equal(t, crashloop.StateRunning, ks.State, key)
			assert.True(t, ks.CanRestart, key)
		}

		cancel()
		for range 10 {
			assert.ErrorIs(t, <-errs, context.Canceled)
		}
	})
}

// No herd on re-arm: 100 keys held by a breaker of 40 an hour leave in the
// order they were held, paced over one cooldown, without tripping it again;
// every key is restarted.
func TestSupervisorReleaseAfterRearmIsPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		cfg := crashloop.DefaultSupervisorConfig() // fleet: 40 an hour, 120s cooldown
		s := newTestSupervisor(t, cfg, crashloop.WithEventHandler(rec))
		ctx, cancel := context.WithCancel(t.Context())
		const keys = 100
		var mu sync.Mutex
		var order []string
		released := map[string]time.Duration{}
		errs := make(chan error, keys)
		for i := range keys {
			key := fmt.Sprintf("k%02d", i)
			go func() {
				time.Sleep(time.Duration(i) * time.Millisecond)
				first := true
				errs <- s.Run(ctx, key, func(ctx context.Context) error {
					if first {
						first = false
						return errors.New("shared provider down")
					}
					mu.Lock()
					order = append(order, key)
					released[key] = time.Since(rec.Start)
					mu.Unlock()
					crashloop.Ready(ctx)
					<-ctx.Done()
					return nil
				})
			}()
		}
		// The 40th failure (k39, at 39ms) trips the breaker; it and the 60
		// restarts after it are held. Keys k00-k38 restart after 500ms.
		time.Sleep(time.Hour)
		mu.Lock()
		require.Len(t, order, keys, "every key was restarted")
		held := order[39:]
		mu.Unlock()
		for i, key := range held {
			assert.Equal(t, fmt.Sprintf("k%02d", 39+i), key, "released in the order they were held")
		}
		rearmAt := 120*time.Second + millis(39)
		gap := 120 * time.Second / 61
		for i, key := range held {
			assert.Equal(t, rearmAt+time.Duration(i)*gap, released[key], key)
		}
		assert.Equal(t, []time.Duration{millis(39)}, atsOf(rec, crashloop.EventFleetTripped), "the release never re-trips the breaker")
		assert.Equal(t, []time.Duration{rearmAt}, atsOf(rec, crashloop.EventFleetRearmed))
		assert.Empty(t, s.Parked())
		assert.Equal(t, 0, s.Status(context.Background()).Fleet.RestartsInHour, "a release is not counted again")
		cancel()
		for range keys {
			assert.ErrorIs(t, <-errs, context.Canceled)
		}
	})
}

func TestSupervisorCancelInBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, starts := newRecorder(), newSupStarts()
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig(), crashloop.WithEventHandler(rec))
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			time.Sleep(200 * time.Millisecond) // inside the 500ms backoff
			cancel()
		}()
		boom := errors.New("boom")

		err := s.Run(ctx, "w", func(context.Context) error {
			starts.mark()
			return boom
		})

		assert.Equal(t, context.Canceled, err)
		assert.Equal(t, millis(200), time.Since(starts.start))
		time.Sleep(time.Minute)
		assert.Equal(t, []time.Duration{0}, starts.times(), "no start after the cancel")
		assert.Equal(t, []supEvent{respawnEv(0, "w", boom, 1, millis(500))}, rec.Events())
		assert.Equal(t, crashloop.StateExited, s.Status(context.Background()).Keys["w"].State)
	})
}

func TestSupervisorCancelInHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		starts := newSupStarts()
		cfg := crashloop.DefaultSupervisorConfig()
		fleet := crashloop.DefaultFleetConfig()
		fleet.RestartsPerHour = 1 // the first restart trips the breaker
		cfg.Fleet = &fleet
		s := newTestSupervisor(t, cfg)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)

		go func() {
			done <- s.Run(ctx, "w", func(context.Context) error {
				starts.mark()
				return errors.New("boom")
			})
		}()

		time.Sleep(5 * time.Second)
		assert.Equal(t, crashloop.StateHeld, s.Status(context.Background()).Keys["w"].State)
		cancel()
		err := <-done
		assert.Equal(t, context.Canceled, err)
		assert.Equal(t, 5*time.Second, time.Since(starts.start), "Run returns at the cancel, not at the re-arm")
		time.Sleep(5 * time.Minute)
		assert.Equal(t, []time.Duration{0}, starts.times())
		assert.Equal(t, crashloop.StateExited, s.Status(context.Background()).Keys["w"].State)
	})
}

func TestSupervisorCancelDuringRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, starts := newRecorder(), newSupStarts()
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig(), crashloop.WithEventHandler(rec))
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			time.Sleep(5 * time.Second)
			cancel()
		}()

		err := s.Run(ctx, "w", func(ctx context.Context) error {
			starts.mark()
			<-ctx.Done()
			return errors.New("interrupted") // whatever fn returns, Run reports ctx.Err()
		})

		assert.Equal(t, context.Canceled, err)
		assert.Equal(t, 5*time.Second, time.Since(starts.start))
		assert.Equal(t, []time.Duration{0}, starts.times())
		assert.Empty(t, rec.Events(), "a cancelled run is not a failure")
		ks := s.Status(context.Background()).Keys["w"]
		assert.Equal(t, crashloop.StateExited, ks.State)
		assert.Equal(t, 0, ks.Respawns)

		// An already-ended context starts nothing.
		err = s.Run(ctx, "w2", func(context.Context) error {
			starts.mark()
			return nil
		})
		assert.Equal(t, context.Canceled, err)
		assert.Len(t, starts.times(), 1)
	})
}

func TestSupervisorHealthyAfterClearsBudget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		healthy bool
		third   func(ctx context.Context) // how the 3rd run behaves before it fails
	}{
		{"lasted HealthyAfter", true, func(context.Context) { time.Sleep(10 * time.Second) }},
		{"called Ready", true, func(ctx context.Context) { crashloop.Ready(ctx) }},
		{"1ns short of HealthyAfter", false, func(context.Context) { time.Sleep(10*time.Second - 1) }},
		{"Ready with a foreign context", false, func(context.Context) { crashloop.Ready(context.Background()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec, starts := newRecorder(), newSupStarts()
				s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig(), crashloop.WithEventHandler(rec))
				boom := errors.New("boom")
				var third time.Duration

				err := s.Run(t.Context(), "w", func(ctx context.Context) error {
					switch starts.mark() {
					case 3:
						tc.third(ctx)
						third = time.Since(starts.start)
						return boom
					case 4:
						return boom
					case 5:
						return nil
					}
					return boom
				})

				if tc.healthy {
					require.NoError(t, err)
					// The healthy run cleared the window: its failure waits the
					// curve's first step with no respawn, and the next failed
					// start is respawn 1 again.
					assert.Equal(t, []time.Duration{0, millis(500), millis(1500), third + millis(500), third + millis(1000)}, starts.times())
					assert.Equal(t, []supEvent{
						respawnEv(0, "w", boom, 1, millis(500)),
						respawnEv(millis(500), "w", boom, 2, time.Second),
						restartEv(third, "w", "w#1", "crashed", boom, 3, millis(500)),
						respawnEv(third+millis(500), "w", boom, 1, millis(500)),
					}, rec.Events())
					return
				}
				// Not healthy: the 3rd failure is the 3rd respawn, and the 4th parks.
				assert.ErrorIs(t, err, crashloop.ErrParked)
				assert.Equal(t, []time.Duration{0, millis(500), millis(1500), third + millis(1500)}, starts.times())
				assert.Equal(t, []supEvent{
					respawnEv(0, "w", boom, 1, millis(500)),
					respawnEv(millis(500), "w", boom, 2, time.Second),
					respawnEv(third, "w", boom, 3, millis(1500)),
					exhaustedEv(third+millis(1500), "w", "respawn_budget_exhausted", boom, 3),
				}, rec.Events())
			})
		})
	}
}

func TestSupervisorGuardParksKey(t *testing.T) {
	// A function that restarts itself in a tight loop spends no budget and
	// ends every chain; the per-key guard sees every restart and, like the
	// budget, allows its 3 and parks on the 4th.
	t.Run("a tight loop of planned restarts", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec, starts := newRecorder(), newSupStarts()
			cfg := crashloop.DefaultSupervisorConfig()
			cfg.Guard = &crashloop.GuardConfig{MaxRestarts: 3, Window: 60 * time.Second}
			s := newTestSupervisor(t, cfg, crashloop.WithEventHandler(rec))
			reload := errors.New("reload")

			err := s.Run(t.Context(), "telegram", func(context.Context) error {
				starts.mark()
				return crashloop.Restart(reload)
			})

			assert.Equal(t, []time.Duration{0, 0, 0, 0}, starts.times())
			var pe *crashloop.ParkedError
			require.ErrorAs(t, err, &pe)
			assert.ErrorIs(t, err, crashloop.ErrParked)
			assert.ErrorIs(t, err, reload)
			assert.Equal(t, crashloop.ReasonRestartLoopGuard, pe.Reason)
			assert.Equal(t, 3, pe.Attempts, "the restarts in the guard's window")
			assert.Equal(t, 3, rec.Of(crashloop.EventRestartScheduled))
			trip := guardEv(0, "telegram", "restart_loop_guard", 3, 3, 60*time.Second)
			trip.LastError = pe.LastError
			assert.Equal(t, []supEvent{trip}, eventsOf(rec, crashloop.EventGuardTripped))
			assert.True(t, crashloop.EventGuardTripped.Stops())
			assert.Equal(t, []string{"telegram"}, s.Parked())
			ks := s.Status(context.Background()).Keys["telegram"]
			assert.Equal(t, crashloop.StateParked, ks.State)
			assert.Equal(t, "restart_loop_guard", ks.Reason)
			assert.Equal(t, 3, ks.TotalRestarts)
		})
	})

	// On failed starts alone, a guard of N never parks before a budget of
	// N has spent its N respawns: the budget judges them first.
	t.Run("failed starts: the budget decides", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec, starts := newRecorder(), newSupStarts()
			cfg := crashloop.DefaultSupervisorConfig()
			cfg.Guard = &crashloop.GuardConfig{MaxRestarts: 3, Window: 60 * time.Second}
			s := newTestSupervisor(t, cfg, crashloop.WithEventHandler(rec))
			crash := errors.New("crash on start")

			err := s.Run(t.Context(), "telegram", func(context.Context) error {
				starts.mark()
				return crash
			})

			assert.Equal(t, []time.Duration{0, millis(500), millis(1500), millis(3000)}, starts.times())
			var pe *crashloop.ParkedError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, crashloop.ReasonBudgetExhausted, pe.Reason)
			assert.Equal(t, 3, pe.Attempts)
			assert.Zero(t, rec.Of(crashloop.EventGuardTripped))
		})
	})
}

func TestSupervisorGuardIsPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		cfg := crashloop.DefaultSupervisorConfig()
		cfg.Guard = &crashloop.GuardConfig{MaxRestarts: 3, Window: 60 * time.Second}
		s := newTestSupervisor(t, cfg, crashloop.WithEventHandler(rec))
		ctx, cancel := context.WithCancel(t.Context())
		errs := make(chan error, 2)
		for _, key := range []string{"telegram", "slack"} {
			n := 0
			go func() {
				errs <- s.Run(ctx, key, func(ctx context.Context) error {
					if n++; n <= 2 {
						return errors.New(key + " crashed")
					}
					<-ctx.Done()
					return nil
				})
			}()
		}

		// Two crashes per key: four in 60s between them, but a guard of 3
		// per key never trips.
		time.Sleep(10 * time.Second)
		assert.Empty(t, s.Parked())
		assert.Zero(t, rec.Of(crashloop.EventGuardTripped))
		assert.Equal(t, 4, rec.Of(crashloop.EventRespawnScheduled))
		for key, ks := range s.Status(context.Background()).Keys {
			assert.Equal(t, crashloop.StateRunning, ks.State, key)
		}
		cancel()
		assert.ErrorIs(t, <-errs, context.Canceled)
		assert.ErrorIs(t, <-errs, context.Canceled)
	})
}

func TestSupervisorHourlyCapParksKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, starts := newRecorder(), newSupStarts()
		cfg := crashloop.DefaultSupervisorConfig()
		cfg.HourlyCap = 10
		cfg.Chain = nil // only the cap judges these healthy-then-failing runs
		s := newTestSupervisor(t, cfg, crashloop.WithEventHandler(rec))
		flaky := errors.New("flaky")

		err := s.Run(t.Context(), "bot", func(ctx context.Context) error {
			starts.mark()
			crashloop.Ready(ctx)
			time.Sleep(time.Minute)
			return flaky
		})

		// Start k at k*60.5s; the cap allows 10 restarts within the hour and
		// the 11th failure parks.
		got := starts.times()
		require.Len(t, got, 11)
		for k, at := range got {
			assert.Equal(t, time.Duration(k)*(time.Minute+millis(500)), at, "start %d", k)
		}
		end := 10*(time.Minute+millis(500)) + time.Minute
		assert.Equal(t, end, time.Since(starts.start))
		var pe *crashloop.ParkedError
		require.ErrorAs(t, err, &pe)
		assert.ErrorIs(t, err, flaky)
		assert.Equal(t, "hourly_restart_cap", pe.Reason)
		assert.Equal(t, crashloop.ReasonHourlyCap, pe.Reason)
		assert.Equal(t, 10, pe.Attempts)
		trip := guardEv(end, "bot", "hourly_restart_cap", 10, 10, time.Hour)
		trip.LastError = flaky
		assert.Equal(t, []supEvent{trip}, eventsOf(rec, crashloop.EventGuardTripped),
			"one trip, no respawn (healthy runs) and no EventStartupExhausted")
		assert.Equal(t, 10, rec.Of(crashloop.EventRestartScheduled))
		assert.Len(t, rec.Events(), 11)
	})
}

func TestSupervisorAlreadyRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig())
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- s.Run(ctx, "k", func(ctx context.Context) error {
				<-ctx.Done()
				return nil
			})
		}()
		synctest.Wait()

		start := time.Now()
		called := false
		err := s.Run(ctx, "k", func(context.Context) error {
			called = true
			return nil
		})
		assert.ErrorIs(t, err, crashloop.ErrAlreadyRunning)
		assert.False(t, called)
		assert.Zero(t, time.Since(start), "refused at once")
		assert.Equal(t, crashloop.StateRunning, s.Status(context.Background()).Keys["k"].State, "the first Run is undisturbed")

		// Another key runs alongside.
		require.NoError(t, s.Run(ctx, "other", func(context.Context) error { return nil }))

		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
		// Once the first Run has ended, the key can run again.
		assert.ErrorIs(t, s.Run(ctx, "k", func(context.Context) error { return nil }), context.Canceled)
		require.NoError(t, s.Run(t.Context(), "k", func(context.Context) error { return nil }))
	})
}

func TestSupervisorParkedRunAndResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, starts := newRecorder(), newSupStarts()
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig(), crashloop.WithEventHandler(rec))
		boom := errors.New("boom")
		fail := func(context.Context) error {
			starts.mark()
			return boom
		}

		first := s.Run(t.Context(), "w", fail)
		var pe *crashloop.ParkedError
		require.ErrorAs(t, first, &pe)

		// A parked key is refused without calling fn, with its own error.
		time.Sleep(7 * time.Second) // now 10s: its respawns are still in the window
		again := s.Run(t.Context(), "w", fail)
		var pe2 *crashloop.ParkedError
		require.ErrorAs(t, again, &pe2)
		assert.Same(t, pe, pe2)
		assert.Len(t, starts.times(), 4)

		assert.ErrorIs(t, s.Resume(context.Background(), "unknown"), crashloop.ErrNotParked)
		require.NoError(t, s.Resume(context.Background(), "w"))
		assert.ErrorIs(t, s.Resume(context.Background(), "w"), crashloop.ErrNotParked, "resumed once")
		assert.Empty(t, s.Parked())
		ks := s.Status(context.Background()).Keys["w"]
		assert.Equal(t, crashloop.StateExited, ks.State)
		assert.Equal(t, 0, ks.Respawns)
		assert.True(t, ks.CanRestart)

		// After Resume: a full budget, the same curve again.
		third := s.Run(t.Context(), "w", fail)
		assert.ErrorIs(t, third, crashloop.ErrParked)
		sec := time.Second
		assert.Equal(t, []time.Duration{0, millis(500), millis(1500), 3 * sec, 10 * sec, 10*sec + millis(500), 11*sec + millis(500), 13 * sec}, starts.times())
		assert.Equal(t, []supEvent{
			respawnEv(0, "w", boom, 1, millis(500)),
			respawnEv(millis(500), "w", boom, 2, time.Second),
			respawnEv(millis(1500), "w", boom, 3, millis(1500)),
			exhaustedEv(3*sec, "w", "respawn_budget_exhausted", boom, 3),
			{At: 10 * sec, Event: crashloop.Event{Kind: crashloop.EventResumed, Key: "w", Reason: "respawn_budget_exhausted",
				LastError: boom, Limit: 3, Window: 60 * time.Second}},
			respawnEv(10*sec, "w", boom, 1, millis(500)),
			respawnEv(10*sec+millis(500), "w", boom, 2, time.Second),
			respawnEv(11*sec+millis(500), "w", boom, 3, millis(1500)),
			exhaustedEv(13*sec, "w", "respawn_budget_exhausted", boom, 3),
		}, rec.Events())
	})
}

func TestSupervisorResumeNeedsHumanStartsFreshChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, starts := newRecorder(), newSupStarts()
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig(), crashloop.WithEventHandler(rec))
		died := errors.New("died")
		slow := func(context.Context) error {
			starts.mark()
			time.Sleep(16 * time.Minute)
			return died
		}
		inc := crashloop.WithIncarnation("session-a")

		assert.ErrorIs(t, s.Run(t.Context(), "seat", slow, inc), crashloop.ErrNeedsHuman)
		assert.Len(t, starts.times(), 4)
		called := false
		assert.ErrorIs(t, s.Run(t.Context(), "seat", func(context.Context) error { called = true; return nil }, inc), crashloop.ErrNeedsHuman)
		assert.False(t, called)

		time.Sleep(time.Minute - millis(1500)) // now 65m
		require.NoError(t, s.Resume(context.Background(), "seat"))
		// The same incarnation again: the chain starts from zero.
		assert.ErrorIs(t, s.Run(t.Context(), "seat", slow, inc), crashloop.ErrNeedsHuman)
		m := time.Minute
		assert.Equal(t, []time.Duration{0, 16*m + millis(500), 32*m + millis(1000), 48*m + millis(1500),
			65 * m, 81*m + millis(500), 97*m + millis(1000), 113*m + millis(1500)}, starts.times())
		assert.Equal(t, []time.Duration{64*m + millis(1500), 129*m + millis(1500)}, atsOf(rec, crashloop.EventChainEscalated))
		resumed := eventsOf(rec, crashloop.EventResumed)
		require.Len(t, resumed, 1)
		assert.Equal(t, 65*m, resumed[0].At)
		assert.Equal(t, "needs_human", resumed[0].Reason)
		assert.ErrorIs(t, resumed[0].LastError, died)
	})
}

func TestSupervisorParkedListIsSorted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := crashloop.DefaultSupervisorConfig()
		cfg.Chain = &crashloop.ChainConfig{MaxChain: 1, ResetGap: 20 * time.Minute}
		s := newTestSupervisor(t, cfg)
		ctx := t.Context()

		assert.ErrorIs(t, s.Run(ctx, "zeta", func(ctx context.Context) error {
			crashloop.Ready(ctx)
			return errors.New("died after ready")
		}), crashloop.ErrNeedsHuman)
		assert.ErrorIs(t, s.Run(ctx, "mid", func(context.Context) error { return errors.New("no start") }), crashloop.ErrParked)
		assert.ErrorIs(t, s.Run(ctx, "alpha", func(context.Context) error { return crashloop.Permanent(nil) }), crashloop.ErrParked)
		require.NoError(t, s.Run(ctx, "beta", func(context.Context) error { return nil }))

		assert.Equal(t, []string{"alpha", "mid", "zeta"}, s.Parked())
		st := s.Status(context.Background())
		assert.Equal(t, crashloop.StateNeedsHuman, st.Keys["zeta"].State)
		assert.Equal(t, crashloop.StateParked, st.Keys["mid"].State)
		assert.Equal(t, crashloop.StateParked, st.Keys["alpha"].State)
		assert.Equal(t, crashloop.StateExited, st.Keys["beta"].State)
		assert.ErrorIs(t, s.Resume(context.Background(), "beta"), crashloop.ErrNotParked)
		require.NoError(t, s.Resume(context.Background(), "zeta"))
		assert.Equal(t, []string{"alpha", "mid"}, s.Parked())
	})
}

func TestSupervisorPanicIsAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, starts := newRecorder(), newSupStarts()
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig(), crashloop.WithEventHandler(rec))
		sentinel := errors.New("nil map")

		err := s.Run(t.Context(), "w", func(context.Context) error {
			switch starts.mark() {
			case 1:
				panic("kaboom")
			case 2:
				panic(sentinel)
			}
			return nil
		})

		require.NoError(t, err, "the supervisor kept going after both panics")
		assert.Equal(t, []time.Duration{0, millis(500), millis(1500)}, starts.times())
		evs := rec.Events()
		require.Len(t, evs, 2)
		for i, want := range []any{"kaboom", sentinel} {
			assert.Equal(t, crashloop.EventRespawnScheduled, evs[i].Kind)
			var p *crashloop.PanicError
			require.ErrorAs(t, evs[i].LastError, &p)
			assert.Equal(t, want, p.Value)
			assert.NotEmpty(t, p.Stack)
			assert.Contains(t, string(p.Stack), "panic")
		}
		assert.Equal(t, "crashloop: panic: kaboom", evs[0].LastError.Error())
		assert.ErrorIs(t, evs[1].LastError, sentinel)
		assert.Equal(t, "crashloop: panic: nil map", s.Status(context.Background()).Keys["w"].LastError)
	})
}

func TestSupervisorCleanExit(t *testing.T) {
	t.Run("ends supervision by default", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec, starts := newRecorder(), newSupStarts()
			s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig(), crashloop.WithEventHandler(rec))
			err := s.Run(t.Context(), "job", func(context.Context) error {
				starts.mark()
				return nil
			})
			require.NoError(t, err)
			assert.Equal(t, []time.Duration{0}, starts.times())
			assert.Empty(t, rec.Events())
			assert.Equal(t, crashloop.StateExited, s.Status(context.Background()).Keys["job"].State)
		})
	})
	t.Run("RestartOnCleanExit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec, starts := newRecorder(), newSupStarts()
			cfg := crashloop.DefaultSupervisorConfig()
			cfg.RestartOnCleanExit = true
			s := newTestSupervisor(t, cfg, crashloop.WithEventHandler(rec))

			err := s.Run(t.Context(), "job", func(ctx context.Context) error {
				switch starts.mark() {
				case 1:
					crashloop.Ready(ctx) // healthy at once, then a clean exit
				case 2:
					time.Sleep(10 * time.Second) // healthy by HealthyAfter
				}
				return nil // from the 3rd start on: a clean exit before healthy
			})

			// Clean exits after healthy runs restart at once; clean exits
			// before healthy are failed starts, judged by the budget.
			sec := time.Second
			assert.Equal(t, []time.Duration{0, 0, 10 * sec, 10*sec + millis(500), 11*sec + millis(500), 13 * sec}, starts.times())
			var pe *crashloop.ParkedError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, "respawn_budget_exhausted", pe.Reason)
			require.Error(t, pe.LastError)
			assert.Equal(t, "crashloop: exited cleanly before it was healthy", pe.LastError.Error())
			evs := rec.Events()
			require.Len(t, evs, 6)
			// The clean-exit restarts are announced as such, and at once.
			assert.Equal(t, restartEv(0, "job", "job#1", "clean_exit", nil, 1, 0), evs[0])
			assert.Equal(t, restartEv(10*sec, "job", "job#1", "clean_exit", nil, 2, 0), evs[1])
			for i, want := range []time.Duration{millis(500), time.Second, millis(1500)} {
				assert.Equal(t, crashloop.EventRespawnScheduled, evs[2+i].Kind)
				assert.Equal(t, want, evs[2+i].Backoff)
				assert.Equal(t, i+1, evs[2+i].Attempts)
			}
			assert.Equal(t, crashloop.EventStartupExhausted, evs[5].Kind)
			assert.Equal(t, 13*sec, evs[5].At)
		})
	})
}

// TestSupervisorStatusGolden checks the JSON of Status against
// testdata/status.golden.json. Set CRASHLOOP_UPDATE_GOLDEN=1 to rewrite it.
func TestSupervisorStatusGolden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig())
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		// Started one by one, so that incarnations and fleet counts are
		// deterministic.
		go s.Run(ctx, "db", func(ctx context.Context) error {
			crashloop.Ready(ctx)
			<-ctx.Done()
			return nil
		})
		synctest.Wait()
		go s.Run(ctx, "api", func(context.Context) error { return errors.New("listen tcp :8080: address already in use") })
		synctest.Wait()
		go s.Run(ctx, "migrate", func(context.Context) error { return crashloop.Permanent(errors.New("bad schema version")) })
		synctest.Wait()

		// 3s: api parks, and with migrate that is 2 of 3 keys failing: the
		// fleet breaker trips on the fraction.
		time.Sleep(10 * time.Second)
		st := s.Status(context.Background())
		// Times come from the bubble (2000-01-01T00:00:00Z) in time.Local;
		// write them in UTC so the document does not depend on TZ.
		for k, ks := range st.Keys {
			ks.Since = ks.Since.UTC()
			st.Keys[k] = ks
		}
		if st.Fleet != nil && st.Fleet.RearmAt != nil {
			at := st.Fleet.RearmAt.UTC()
			st.Fleet.RearmAt = &at
		}
		got, err := json.MarshalIndent(st, "", "  ")
		require.NoError(t, err)
		got = append(got, '\n')

		golden := filepath.Join("testdata", "status.golden.json")
		if os.Getenv("CRASHLOOP_UPDATE_GOLDEN") != "" {
			require.NoError(t, os.MkdirAll("testdata", 0o755))
			require.NoError(t, os.WriteFile(golden, got, 0o644))
		}
		want, err := os.ReadFile(golden)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got))

		// The document names what the contract promises.
		var doc map[string]map[string]any
		require.NoError(t, json.Unmarshal(got, &doc))
		keys := make([]string, 0, len(doc["keys"]))
		for k := range doc["keys"] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		assert.Equal(t, []string{"api", "db", "migrate"}, keys)
		assert.True(t, strings.Contains(string(got), `"breaker_tripped": true`))
	})
}

func TestDefaultSupervisorConfig(t *testing.T) {
	cfg := crashloop.DefaultSupervisorConfig()
	assert.Equal(t, crashloop.SupervisorConfig{
		Budget:             crashloop.BudgetConfig{MaxRespawns: 3, Window: 60 * time.Second, InitialBackoff: 500 * time.Millisecond, MaxBackoff: 5 * time.Second},
		HealthyAfter:       10 * time.Second,
		Backoff:            nil,
		Chain:              &crashloop.ChainConfig{MaxChain: 3, ResetGap: 20 * time.Minute},
		Fleet:              &crashloop.FleetConfig{RestartsPerHour: 40, FailingFraction: 0.5, MinFailing: 2, Cooldown: 120 * time.Second},
		Guard:              nil,
		HourlyCap:          0,
		RestartOnCleanExit: false,
	}, cfg)
	// Each call returns fresh optional configs: editing one is private.
	cfg.Chain.MaxChain = 9
	cfg.Fleet.Cooldown = 0
	assert.Equal(t, 3, crashloop.DefaultSupervisorConfig().Chain.MaxChain)
	assert.Equal(t, 120*time.Second, crashloop.DefaultSupervisorConfig().Fleet.Cooldown)

	s, err := crashloop.NewSupervisor(crashloop.DefaultSupervisorConfig())
	require.NoError(t, err)
	assert.Equal(t, crashloop.DefaultSupervisorConfig(), s.Config())
}

func TestSupervisorConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*crashloop.SupervisorConfig)
		value any
	}{
		{"budget.max_respawns", func(c *crashloop.SupervisorConfig) { c.Budget.MaxRespawns = -1 }, -1},
		{"budget.window", func(c *crashloop.SupervisorConfig) { c.Budget.Window = 0 }, time.Duration(0)},
		{"budget.initial_backoff", func(c *crashloop.SupervisorConfig) { c.Budget.InitialBackoff = -1 }, time.Duration(-1)},
		{"budget.max_backoff", func(c *crashloop.SupervisorConfig) { c.Budget.MaxBackoff = time.Millisecond }, time.Millisecond},
		{"healthy_after", func(c *crashloop.SupervisorConfig) { c.HealthyAfter = -time.Second }, -time.Second},
		{"backoff.factor", func(c *crashloop.SupervisorConfig) { c.Backoff = crashloop.Exponential(time.Second, 0.9, time.Second) }, 0.9},
		{"chain.max_chain", func(c *crashloop.SupervisorConfig) { c.Chain.MaxChain = 0 }, 0},
		{"chain.reset_gap", func(c *crashloop.SupervisorConfig) { c.Chain.ResetGap = 0 }, time.Duration(0)},
		{"fleet.restarts_per_hour", func(c *crashloop.SupervisorConfig) { c.Fleet.RestartsPerHour = 0 }, 0},
		{"fleet.failing_fraction", func(c *crashloop.SupervisorConfig) { c.Fleet.FailingFraction = 0 }, 0.0},
		{"fleet.failing_fraction", func(c *crashloop.SupervisorConfig) { c.Fleet.FailingFraction = 1.5 }, 1.5},
		{"fleet.min_failing", func(c *crashloop.SupervisorConfig) { c.Fleet.MinFailing = 0 }, 0},
		{"fleet.cooldown", func(c *crashloop.SupervisorConfig) { c.Fleet.Cooldown = -1 }, time.Duration(-1)},
		{"guard.max_restarts", func(c *crashloop.SupervisorConfig) {
			c.Guard = &crashloop.GuardConfig{MaxRestarts: 0, Window: time.Second}
		}, 0},
		{"guard.window", func(c *crashloop.SupervisorConfig) { c.Guard = &crashloop.GuardConfig{MaxRestarts: 3, Window: 0} }, time.Duration(0)},
		{"hourly_cap", func(c *crashloop.SupervisorConfig) { c.HourlyCap = -1 }, -1},
		// The whole-budget rule: the default curve, 20s+40s+60s > 60s.
		{"budget.window", func(c *crashloop.SupervisorConfig) {
			c.Budget.InitialBackoff, c.Budget.MaxBackoff = 20*time.Second, time.Minute
		}, 60 * time.Second},
		// Field rules come first, in the config's order.
		{"budget.window", func(c *crashloop.SupervisorConfig) {
			c.Budget.Window = 0
			c.Guard = &crashloop.GuardConfig{}
			c.HourlyCap = -1
		}, time.Duration(0)},
		{"chain.max_chain", func(c *crashloop.SupervisorConfig) {
			c.Chain.MaxChain = 0
			c.Fleet.MinFailing = 0
			c.Budget.InitialBackoff = time.Minute // never parks, but that is judged last
			c.Budget.MaxBackoff = time.Minute
		}, 0},
	} {
		t.Run(tc.field, func(t *testing.T) {
			cfg := crashloop.DefaultSupervisorConfig()
			tc.edit(&cfg)
			s, err := crashloop.NewSupervisor(cfg)
			assert.Nil(t, s)
			var ce *crashloop.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, crashloop.ErrInvalidConfig)
			assert.Equal(t, tc.field, ce.Field)
			assert.Equal(t, tc.value, ce.Value)
			assert.NotEmpty(t, ce.Rule)
			assert.Contains(t, err.Error(), tc.field)
		})
	}

	t.Run("NaN failing fraction", func(t *testing.T) {
		cfg := crashloop.DefaultSupervisorConfig()
		cfg.Fleet.FailingFraction = math.NaN()
		_, err := crashloop.NewSupervisor(cfg)
		var ce *crashloop.ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, "fleet.failing_fraction", ce.Field)
	})
	t.Run("optional guards off and edge values", func(t *testing.T) {
		cfg := crashloop.DefaultSupervisorConfig()
		cfg.Chain, cfg.Fleet, cfg.Guard = nil, nil, nil
		cfg.HealthyAfter = 0
		cfg.Budget.MaxRespawns = 0
		cfg.Fleet = &crashloop.FleetConfig{RestartsPerHour: 1, FailingFraction: 1, MinFailing: 1, Cooldown: 0}
		_, err := crashloop.NewSupervisor(cfg)
		require.NoError(t, err)
	})
}

// TestSupervisorEventsSeeCommittedState checks that a handler calling back
// into the Supervisor sees the outcome each event announces: events are
// delivered after the Supervisor's own state change is committed.
func TestSupervisorEventsSeeCommittedState(t *testing.T) {
	type seen struct {
		Kind   crashloop.EventKind
		State  crashloop.KeyState
		Reason string
		Parked bool
	}
	synctest.Test(t, func(t *testing.T) {
		var (
			mu   sync.Mutex
			got  []seen
			sups []*crashloop.Supervisor
		)
		handler := func(i int) crashloop.EventHandler {
			return crashloop.EventHandlerFunc(func(ev crashloop.Event) {
				s := sups[i]
				ks := s.Status(context.Background()).Keys[ev.Key]
				mu.Lock()
				got = append(got, seen{ev.Kind, ks.State, ks.Reason, slices.Contains(s.Parked(), ev.Key)})
				mu.Unlock()
			})
		}
		cfg := crashloop.DefaultSupervisorConfig()
		cfg.Fleet = nil
		s := newTestSupervisor(t, cfg, crashloop.WithEventHandler(handler(0)))
		cfg.Guard = &crashloop.GuardConfig{MaxRestarts: 2, Window: time.Minute}
		g := newTestSupervisor(t, cfg, crashloop.WithEventHandler(handler(1)))
		sups = []*crashloop.Supervisor{s, g}
		ctx := t.Context()
		take := func() []seen {
			mu.Lock()
			defer mu.Unlock()
			out := got
			got = nil
			return out
		}

		_ = s.Run(ctx, "budget", func(context.Context) error { return errors.New("x") })
		assert.Equal(t, []seen{
			{crashloop.EventRespawnScheduled, crashloop.StateBackoff, "", false},
			{crashloop.EventRespawnScheduled, crashloop.StateBackoff, "", false},
			{crashloop.EventRespawnScheduled, crashloop.StateBackoff, "", false},
			{crashloop.EventStartupExhausted, crashloop.StateParked, "respawn_budget_exhausted", true},
		}, take())

		_ = s.Run(ctx, "perm", func(context.Context) error { return crashloop.Permanent(nil) })
		assert.Equal(t, []seen{{crashloop.EventStartupExhausted, crashloop.StateParked, "permanent_error", true}}, take())

		_ = s.Run(ctx, "slow", func(context.Context) error {
			time.Sleep(16 * time.Minute)
			return errors.New("x")
		})
		assert.Equal(t, []seen{
			{crashloop.EventRestartScheduled, crashloop.StateBackoff, "", false},
			{crashloop.EventRestartScheduled, crashloop.StateBackoff, "", false},
			{crashloop.EventRestartScheduled, crashloop.StateBackoff, "", false},
			{crashloop.EventChainEscalated, crashloop.StateNeedsHuman, "needs_human", true},
		}, take())

		_ = g.Run(ctx, "telegram", func(context.Context) error { return errors.New("x") })
		assert.Equal(t, []seen{
			{crashloop.EventRespawnScheduled, crashloop.StateBackoff, "", false},
			{crashloop.EventRespawnScheduled, crashloop.StateBackoff, "", false},
			{crashloop.EventGuardTripped, crashloop.StateParked, "restart_loop_guard", true},
		}, take())

		require.NoError(t, s.Resume(context.Background(), "budget"))
		require.NoError(t, s.Resume(context.Background(), "slow"))
		assert.Equal(t, []seen{
			{crashloop.EventResumed, crashloop.StateExited, "", false},
			{crashloop.EventResumed, crashloop.StateExited, "", false},
		}, take())
	})
}

func TestSupervisorResumeResetsGuard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, starts := newRecorder(), newSupStarts()
		cfg := crashloop.DefaultSupervisorConfig()
		cfg.Guard = &crashloop.GuardConfig{MaxRestarts: 3, Window: 60 * time.Second}
		s := newTestSupervisor(t, cfg, crashloop.WithEventHandler(rec))
		loop := func(context.Context) error {
			starts.mark()
			return crashloop.Restart(nil) // a tight loop of planned restarts
		}

		assert.ErrorIs(t, s.Run(t.Context(), "telegram", loop), crashloop.ErrParked)
		time.Sleep(10 * time.Second) // the old restarts are still in the guard's window
		require.NoError(t, s.Resume(context.Background(), "telegram"))
		err := s.Run(t.Context(), "telegram", loop)
		var pe *crashloop.ParkedError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "restart_loop_guard", pe.Reason)

		sec := time.Second
		assert.Equal(t, []time.Duration{0, 0, 0, 0, 10 * sec, 10 * sec, 10 * sec, 10 * sec}, starts.times(),
			"after Resume the guard counts from zero")
		assert.Equal(t, []time.Duration{0, 10 * sec}, atsOf(rec, crashloop.EventGuardTripped), "each trip is announced")
		assert.Equal(t, 3, s.Status(context.Background()).Keys["telegram"].TotalRestarts, "counted since the resume")
	})
}

func TestSupervisorParkIsAnnouncedBeforeTheFleetTripItCauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			kinds []string
			s     *crashloop.Supervisor
		)
		s = newTestSupervisor(t, crashloop.DefaultSupervisorConfig(), crashloop.WithEventHandler(crashloop.EventHandlerFunc(func(ev crashloop.Event) {
			line := ev.Kind.String() + " " + ev.Key
			if ev.Kind == crashloop.EventFleetTripped {
				line += fmt.Sprintf(" %d/%d parked=%v", ev.Failing, ev.Total, s.Parked())
			}
			mu.Lock()
			kinds = append(kinds, line)
			mu.Unlock()
		})))
		perm := func(context.Context) error { return crashloop.Permanent(errors.New("bad config")) }
		assert.ErrorIs(t, s.Run(t.Context(), "a", perm), crashloop.ErrParked)
		assert.ErrorIs(t, s.Run(t.Context(), "b", perm), crashloop.ErrParked)
		assert.Equal(t, []string{
			"agent.startup_exhausted a",
			"agent.startup_exhausted b",
			"fleet.breaker_tripped fleet 2/2 parked=[a b]",
		}, kinds)
	})
}

// A goroutine that fn leaves behind and that calls Ready after its run
// ended must not clear the budget: a worker that always fails still parks.
func TestSupervisorLateReadyChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := crashloop.NewSupervisor(crashloop.DefaultSupervisorConfig())
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour) // a loop that never parks ends here
		defer cancel()
		starts := 0
		err = s.Run(ctx, "w", func(ctx context.Context) error {
			starts++
			go func() {
				time.Sleep(100 * time.Millisecond) // after fn returned, inside the backoff
				crashloop.Ready(ctx)
			}()
			return errors.New("boom")
		})
		require.ErrorIs(t, err, crashloop.ErrParked)
		assert.Equal(t, 4, starts, "parked after the budget, as without the late Ready")
		time.Sleep(time.Second) // let the last late Ready run out
		assert.Equal(t, []string{"w"}, s.Parked())
	})
}

// The Supervisor keeps its own copy of the configuration: changing the
// caller's guard settings afterwards changes nothing, nor does changing what
// Config returns.
func TestSupervisorConfigIsCopied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := crashloop.DefaultSupervisorConfig()
		g := crashloop.DefaultGuardConfig()
		cfg.Guard = &g
		s, err := crashloop.NewSupervisor(cfg)
		require.NoError(t, err)
		cfg.Guard.MaxRestarts = 1
		cfg.Chain.MaxChain = 1
		got := s.Config()
		got.Guard.MaxRestarts = 1
		assert.Equal(t, 3, s.Config().Guard.MaxRestarts)
		assert.Equal(t, 3, s.Config().Chain.MaxChain)

		starts := 0
		err = s.Run(context.Background(), "w", func(context.Context) error {
			starts++
			return crashloop.Restart(nil)
		})
		var pe *crashloop.ParkedError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, crashloop.ReasonRestartLoopGuard, pe.Reason)
		assert.Equal(t, 4, starts, "the guard of 3 in 60s, not of 1: 3 restarts, and the 4th parks")
	})
}

// A jittered curve of the caller's own has no JSON form: MarshalJSON says so
// rather than writing a document UnmarshalJSON would refuse.
func TestSupervisorConfigJSONRefusesJitteredCustomCurve(t *testing.T) {
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Backoff = crashloop.FullJitter(supConstCurve(time.Second), nil)
	_, err := json.Marshal(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has no JSON form")
}
