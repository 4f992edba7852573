package crashloop_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// causeConfig is the defaults with the hold on a shared cause: 3 keys in
// a minute, a probe every 30s.
func causeConfig() crashloop.SupervisorConfig {
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Fleet.SharedCause = &crashloop.SharedCauseConfig{Keys: 3, Window: time.Minute, ProbeEvery: 30 * time.Second}
	return cfg
}

// When three keys fail with one cause within the window, the fleet holds
// the restarts failing with it: no budget is spent and nothing parks. One
// held key goes as a probe every 30s; a probe that fails is held again;
// one that stays up HealthyAfter releases every key held, spread over
// 30s. A key failing with another cause is judged as usual beside them.
func TestHoldOnASharedCause(t *testing.T) {
	s, rec := decideSupervisor(t, causeConfig())
	at := func(d time.Duration) time.Time { return testT0.Add(d) }
	ctx := context.Background()
	db := func(host string) error {
		return errors.New("dial tcp 10.0.0." + host + ":5432: connect: connection refused")
	}
	const cause = "dial tcp N.N.N.N:N: connect: connection refused"
	fail := func(key string, err error, sec int) crashloop.Decision {
		return s.DecideAt(ctx, key, crashloop.RunResult{Err: err, Started: at(time.Duration(sec)*time.Second - time.Second)}, at(time.Duration(sec)*time.Second))
	}
	hold := func(wait time.Duration) crashloop.Decision {
		return crashloop.Decision{Action: crashloop.ActionHold, Wait: wait}
	}
	restart := func(wait time.Duration) crashloop.Decision {
		return crashloop.Decision{Action: crashloop.ActionRestart, Wait: wait}
	}

	assert.Equal(t, restart(millis(500)), fail("a", db("1"), 1), "one key: judged as usual")
	assert.Equal(t, restart(millis(500)), fail("b", db("2"), 2))
	assert.Equal(t, hold(30*time.Second), fail("c", db("3"), 3), "the third key: held until the first probe")
	assert.Equal(t, hold(29*time.Second), fail("a", db("1"), 4), "a key that fails with it again: held")
	// another cause beside it: judged as usual, until it parks
	for i, want := range []time.Duration{millis(500), time.Second, millis(1500)} {
		assert.Equal(t, restart(want), fail("d", errors.New("disk full"), 5+i))
	}
	require.Equal(t, crashloop.ActionStop, fail("d", errors.New("disk full"), 8).Action)

	st := s.StatusAt(ctx, at(9*time.Second))
	assert.Equal(t, []string{cause}, st.Fleet.HeldCauses)
	assert.Equal(t, cause, st.Keys["a"].Cause)
	assert.Equal(t, crashloop.StateHeld, st.Keys["a"].State)
	assert.Equal(t, 1, st.Keys["a"].Respawns, "a held restart spends no budget")
	assert.Empty(t, st.Keys["d"].Cause)

	// Before the slot: held. At it: one key goes as the probe.
	assert.Equal(t, hold(23*time.Second), s.ProceedAt(ctx, "c", at(10*time.Second)))
	assert.Equal(t, restart(0), s.ProceedAt(ctx, "c", at(33*time.Second)), "the probe")
	assert.Equal(t, hold(10*time.Second), s.ProceedAt(ctx, "a", at(33*time.Second)), "held until the probe has run HealthyAfter")
	// The probe fails before it is healthy: held again; the next slot lets
	// another key go.
	assert.Equal(t, hold(28*time.Second), fail("c", db("3"), 35))
	assert.Equal(t, restart(0), s.ProceedAt(ctx, "a", at(63*time.Second)), "the next probe")
	assert.Equal(t, hold(10*time.Second), s.ProceedAt(ctx, "c", at(63*time.Second)))
	// The probe stays up HealthyAfter: the cause is released, and the keys
	// held for it go in the order they were held, spread over 30s (c alone).
	assert.Equal(t, restart(0), s.ProceedAt(ctx, "c", at(73*time.Second)))
	st = s.StatusAt(ctx, at(73*time.Second))
	assert.Empty(t, st.Fleet.HeldCauses)
	assert.Equal(t, 0, st.Keys["c"].Respawns, "its held failures spent no budget")

	var causeEvs []supEvent
	for _, ev := range rec.Events() {
		if ev.Kind == crashloop.EventFleetCauseHeld || ev.Kind == crashloop.EventFleetCauseReleased {
			causeEvs = append(causeEvs, ev)
		}
	}
	assert.Equal(t, []supEvent{
		{At: 3 * time.Second, Event: crashloop.Event{Kind: crashloop.EventFleetCauseHeld, Key: "fleet", Reason: crashloop.ReasonSharedCause,
			Cause: cause, Attempts: 3, Limit: 3, Window: 30 * time.Second}},
		{At: 73 * time.Second, Event: crashloop.Event{Kind: crashloop.EventFleetCauseReleased, Key: "fleet", Reason: crashloop.ReasonSharedCause,
			Cause: cause, Attempts: 1, Limit: 3, Window: 30 * time.Second}},
	}, causeEvs)
	held := eventsOf(rec, crashloop.EventRestartScheduled)
	require.NotEmpty(t, held)
	assert.Equal(t, supEvent{At: 3 * time.Second, Event: crashloop.Event{Kind: crashloop.EventRestartScheduled, Key: "c", Incarnation: "c#1",
		Reason: crashloop.ReasonSharedCause, LastError: db("3"), Backoff: 30 * time.Second, Held: true, Cause: cause}}, held[0])
	assert.Equal(t, 1, rec.Of(crashloop.EventStartupExhausted), "d alone parked")
}

// A release spreads the held keys over one ProbeEvery, in the order they
// were held, and a healthy end of the probe's run releases as its having
// run HealthyAfter does.
func TestSharedCauseReleaseIsSpread(t *testing.T) {
	s, _ := decideSupervisor(t, causeConfig())
	at := func(d time.Duration) time.Time { return testT0.Add(d) }
	ctx := context.Background()
	err := errors.New("upstream 503")
	for i, key := range []string{"a", "b", "c", "d", "e"} {
		s.DecideAt(ctx, key, crashloop.RunResult{Err: err}, at(time.Duration(i)*time.Second))
	}
	// held: c, d, e (a and b failed before the hold)
	s.DecideAt(ctx, "a", crashloop.RunResult{Err: err}, at(5*time.Second))
	require.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart}, s.ProceedAt(ctx, "d", at(32*time.Second)), "the probe")
	// the probe's run ends healthy (Ready) with a crash: the cause is
	// released first, then the crash is noted afresh
	d := s.DecideAt(ctx, "d", crashloop.RunResult{Err: err, Ready: true}, at(34*time.Second))
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: millis(500)}, d)
	for _, c := range []struct {
		key  string
		wait time.Duration
	}{{"c", 0}, {"e", 10 * time.Second}, {"a", 20 * time.Second}} {
		want := crashloop.Decision{Action: crashloop.ActionHold, Wait: c.wait}
		if c.wait == 0 {
			want = crashloop.Decision{Action: crashloop.ActionRestart}
		}
		assert.Equal(t, want, s.ProceedAt(ctx, c.key, at(34*time.Second)), c.key)
	}
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart}, s.ProceedAt(ctx, "a", at(54*time.Second)))
}
