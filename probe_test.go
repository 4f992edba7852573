package crashloop_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// probeConfig is the defaults with a probe a minute after a park, doubling
// up to 5m.
func probeConfig() crashloop.SupervisorConfig {
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.ProbeAfter, cfg.ProbeMax = time.Minute, 5*time.Minute
	return cfg
}

// parkW parks key "w" by four failed starts, the last at 3s, and returns
// the park.
func parkW(t *testing.T, s *crashloop.Supervisor, boom error) *crashloop.ParkedError {
	t.Helper()
	var d crashloop.Decision
	for i := range 4 {
		d = s.DecideAt(context.Background(), "w", crashloop.RunResult{Err: boom}, testT0.Add(time.Duration(i)*time.Second))
	}
	var pe *crashloop.ParkedError
	require.ErrorAs(t, d.Err, &pe)
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionStop, Err: pe, Wait: time.Minute}, d, "the park's decision says when its probe is due")
	return pe
}

// After a park, one probe goes when it is due: at the park + 1m, then 2m
// after that probe, 4m, and 5m (the cap). A failed probe keeps the key
// parked and spends nothing; a healthy one resumes it (reason probe), and
// its run is then judged as any run of a fresh key.
func TestProbeAfterAPark(t *testing.T) {
	s, rec := decideSupervisor(t, probeConfig())
	at := func(d time.Duration) time.Time { return testT0.Add(d) }
	ctx := context.Background()
	boom := errors.New("boom")
	pe := parkW(t, s, boom)
	rec.Take()
	assert.Equal(t, at(63*time.Second), s.StatusAt(ctx, at(10*time.Second)).Keys["w"].NextProbe)

	// Not due: refused with the wait until it is.
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionStop, Err: pe, Wait: 33 * time.Second}, s.ProceedAt(ctx, "w", at(30*time.Second)))
	// Due: one probe goes, and the next is due 2m later.
	for _, p := range []struct{ claim, fail, next time.Duration }{
		{63 * time.Second, 65 * time.Second, 183 * time.Second},   // +2m
		{183 * time.Second, 184 * time.Second, 423 * time.Second}, // +4m
		{430 * time.Second, 431 * time.Second, 730 * time.Second}, // +8m, capped at 5m
	} {
		assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart}, s.ProceedAt(ctx, "w", at(p.claim)), "probe at %v", p.claim)
		assert.Equal(t, crashloop.ActionStop, s.ProceedAt(ctx, "w", at(p.claim)).Action, "one probe at a time")
		d := s.DecideAt(ctx, "w", crashloop.RunResult{Err: boom, Started: at(p.claim)}, at(p.fail))
		assert.Equal(t, crashloop.Decision{Action: crashloop.ActionStop, Err: pe, Wait: p.next - p.fail}, d, "a failed probe at %v", p.claim)
		assert.Equal(t, at(p.next), s.StatusAt(ctx, at(p.fail)).Keys["w"].NextProbe)
	}
	assert.Empty(t, rec.Events(), "a failed probe announces nothing and spends nothing")
	assert.Equal(t, 3, s.StatusAt(ctx, at(731*time.Second)).Keys["w"].TotalRestarts, "the restarts before the park; a probe counts none")

	// A healthy probe (it ran HealthyAfter) resumes the key; its crash is
	// then a rescue of a fresh key.
	require.Equal(t, crashloop.ActionRestart, s.ProceedAt(ctx, "w", at(730*time.Second)).Action)
	d := s.DecideAt(ctx, "w", crashloop.RunResult{Err: boom, Started: at(730 * time.Second)}, at(745*time.Second))
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: millis(500)}, d)
	assert.Equal(t, []supEvent{
		{At: 745 * time.Second, Event: crashloop.Event{Kind: crashloop.EventResumed, Key: "w", Reason: crashloop.ReasonProbe,
			LastError: boom, Limit: 3, Window: time.Minute}},
		restartEv(745*time.Second, "w", "w#1", crashloop.ReasonCrashed, boom, 1, millis(500)),
	}, rec.Events())
	ks := s.StatusAt(ctx, at(746*time.Second)).Keys["w"]
	assert.Equal(t, crashloop.StateBackoff, ks.State)
	assert.True(t, ks.NextProbe.IsZero())
}

// A park for a permanent error is never probed, nor the chain's (a slow
// loop passes the health mark a probe is judged by), and with ProbeAfter 0
// no park is.
func TestNoProbe(t *testing.T) {
	ctx := context.Background()
	for name, cfg := range map[string]crashloop.SupervisorConfig{"permanent": probeConfig(), "needs_human": probeConfig(),
		"off": crashloop.DefaultSupervisorConfig()} {
		t.Run(name, func(t *testing.T) {
			s, _ := decideSupervisor(t, cfg)
			err := errors.New("bad config")
			if name == "permanent" {
				err = crashloop.Permanent(err)
			}
			var d crashloop.Decision
			for i := range 4 {
				d = s.DecideAt(ctx, "w", crashloop.RunResult{Err: err, Ready: name == "needs_human"}, testT0.Add(time.Duration(i)*time.Second))
			}
			require.Equal(t, crashloop.ActionStop, d.Action)
			var pe *crashloop.ParkedError
			require.ErrorAs(t, d.Err, &pe)
			assert.Equal(t, map[string]string{"permanent": crashloop.ReasonPermanent, "needs_human": crashloop.ReasonNeedsHuman,
				"off": crashloop.ReasonBudgetExhausted}[name], pe.Reason)
			assert.Zero(t, d.Wait, "no probe")
			p := s.ProceedAt(ctx, "w", testT0.Add(24*time.Hour))
			assert.Equal(t, crashloop.ActionStop, p.Action)
			assert.Zero(t, p.Wait)
			assert.True(t, s.StatusAt(ctx, testT0.Add(24*time.Hour)).Keys["w"].NextProbe.IsZero())
		})
	}
}

// Run starts a parked key's probe once it is due, and the probe resumes
// the key as soon as its run is healthy (HealthyAfter), while it runs.
// Before the probe is due Run refuses the key.
func TestRunProbesAParkedKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		cfg := probeConfig()
		s, err := crashloop.NewSupervisor(cfg, crashloop.WithEventHandler(rec))
		require.NoError(t, err)
		ctx := t.Context()
		boom := errors.New("boom")
		err = s.Run(ctx, "w", func(context.Context) error { return boom })
		var pe *crashloop.ParkedError
		require.ErrorAs(t, err, &pe)
		parkedAt := time.Since(rec.Start) // 500ms + 1s + 1.5s
		assert.Equal(t, 3*time.Second, parkedAt)

		assert.ErrorIs(t, s.Run(ctx, "w", func(context.Context) error { t.Error("ran before its probe"); return nil }), crashloop.ErrParked)
		time.Sleep(time.Minute)

		started := make(chan struct{})
		stop := make(chan struct{})
		done := make(chan error)
		go func() {
			done <- s.Run(ctx, "w", func(ctx context.Context) error {
				close(started)
				<-stop
				return boom
			})
		}()
		<-started
		synctest.Wait()
		assert.Equal(t, crashloop.StateParked, s.Status(ctx).Keys["w"].State, "parked while the probe is not yet healthy")
		time.Sleep(10 * time.Second) // HealthyAfter
		synctest.Wait()
		assert.Equal(t, crashloop.StateRunning, s.Status(ctx).Keys["w"].State, "resumed while it runs")
		resumed := eventsOf(rec, crashloop.EventResumed)
		require.Len(t, resumed, 1)
		assert.Equal(t, crashloop.ReasonProbe, resumed[0].Reason)
		assert.Equal(t, parkedAt+time.Minute+10*time.Second, resumed[0].At)
		close(stop)
		// the resumed key's crash is a rescue: it restarts, and fails its
		// starts again until it parks
		require.ErrorAs(t, <-done, &pe)
		assert.Equal(t, crashloop.ReasonBudgetExhausted, pe.Reason)
	})
}

// Ready makes a probe healthy at once.
func TestReadyProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		cfg := probeConfig()
		cfg.HealthyAfter = 0 // Ready alone
		s, err := crashloop.NewSupervisor(cfg, crashloop.WithEventHandler(rec))
		require.NoError(t, err)
		ctx := t.Context()
		boom := errors.New("boom")
		require.ErrorIs(t, s.Run(ctx, "w", func(context.Context) error { return boom }), crashloop.ErrParked)
		time.Sleep(time.Minute)
		assert.NoError(t, s.Run(ctx, "w", func(ctx context.Context) error {
			crashloop.Ready(ctx)
			assert.Empty(t, s.Parked(), "resumed by Ready")
			return nil
		}))
		resumed := eventsOf(rec, crashloop.EventResumed)
		require.Len(t, resumed, 1)
		assert.Equal(t, crashloop.ReasonProbe, resumed[0].Reason)
	})
}

func TestProbeConfigErrors(t *testing.T) {
	for _, c := range []struct {
		set   func(*crashloop.SupervisorConfig)
		field string
	}{
		{func(c *crashloop.SupervisorConfig) { c.ProbeAfter = -time.Second }, "probe_after"},
		{func(c *crashloop.SupervisorConfig) { c.ProbeAfter, c.ProbeMax = time.Minute, time.Second }, "probe_max"},
		{func(c *crashloop.SupervisorConfig) { c.Fleet.SharedCause = &crashloop.SharedCauseConfig{Keys: 1} }, "fleet.shared_cause.keys"},
		{func(c *crashloop.SupervisorConfig) { c.Fleet.SharedCause = &crashloop.SharedCauseConfig{Keys: 1001} }, "fleet.shared_cause.keys"},
		{func(c *crashloop.SupervisorConfig) { c.Fleet.SharedCause = &crashloop.SharedCauseConfig{Window: -1} }, "fleet.shared_cause.window"},
		{func(c *crashloop.SupervisorConfig) {
			c.Fleet.SharedCause = &crashloop.SharedCauseConfig{ProbeEvery: -1}
		}, "fleet.shared_cause.probe_every"},
		{func(c *crashloop.SupervisorConfig) {
			c.Fleet.SharedCause = &crashloop.SharedCauseConfig{ProbeEvery: 10 * time.Second} // HealthyAfter 10s: a probe never proves healthy
		}, "fleet.shared_cause.probe_every"},
	} {
		cfg := crashloop.DefaultSupervisorConfig()
		c.set(&cfg)
		_, err := crashloop.NewSupervisor(cfg)
		var ce *crashloop.ConfigError
		require.ErrorAs(t, err, &ce, c.field)
		assert.Equal(t, c.field, ce.Field)
	}
}

// A snapshot keeps the probe schedule, so that a program restarted while a
// probe is due runs it; a snapshot written with probes off gets a first
// probe ProbeAfter after the park.
func TestProbeScheduleSurvivesASnapshot(t *testing.T) {
	ctx := context.Background()
	at := func(d time.Duration) time.Time { return testT0.Add(d) }
	boom := errors.New("boom")
	s, _ := decideSupervisor(t, probeConfig())
	parkW(t, s, boom)
	require.Equal(t, crashloop.ActionRestart, s.ProceedAt(ctx, "w", at(63*time.Second)).Action)
	s.DecideAt(ctx, "w", crashloop.RunResult{Err: boom}, at(64*time.Second)) // next: 183s, 1 probe
	doc, err := s.Snapshot()
	require.NoError(t, err)
	assert.Contains(t, string(doc), `"next_probe": "`+at(183*time.Second).UTC().Format(time.RFC3339Nano)+`",`)
	assert.Contains(t, string(doc), `"probes": 1`)

	r, _ := decideSupervisor(t, probeConfig())
	require.NoError(t, r.RestoreAt(doc, at(100*time.Second)))
	assert.Equal(t, at(183*time.Second), r.StatusAt(ctx, at(100*time.Second)).Keys["w"].NextProbe)
	assert.Equal(t, crashloop.ActionStop, r.ProceedAt(ctx, "w", at(182*time.Second)).Action)
	require.Equal(t, crashloop.ActionRestart, r.ProceedAt(ctx, "w", at(183*time.Second)).Action)
	d := r.DecideAt(ctx, "w", crashloop.RunResult{Err: boom}, at(184*time.Second))
	assert.Equal(t, 423*time.Second-184*time.Second, d.Wait, "the second probe's interval: 4m")

	// written with probes off: the first probe a minute after the park (3s)
	off, _ := decideSupervisor(t, crashloop.DefaultSupervisorConfig())
	parkW2 := func() {
		for i := range 4 {
			off.DecideAt(ctx, "w", crashloop.RunResult{Err: boom}, at(time.Duration(i)*time.Second))
		}
	}
	parkW2()
	doc, err = off.Snapshot()
	require.NoError(t, err)
	assert.NotContains(t, string(doc), "next_probe")
	r, _ = decideSupervisor(t, probeConfig())
	require.NoError(t, r.RestoreAt(doc, at(10*time.Second)))
	assert.Equal(t, at(63*time.Second), r.StatusAt(ctx, at(10*time.Second)).Keys["w"].NextProbe)

	bad := strings.Replace(string(doc), `"state": "parked"`, `"state": "parked", "next_probe": "soon"`, 1)
	require.NotEqual(t, string(doc), bad)
	assert.ErrorIs(t, r.RestoreAt([]byte(bad), at(10*time.Second)), crashloop.ErrBadSnapshot)
}
