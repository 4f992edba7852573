package replay_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/replay"
)

// outageConfigs are the defaults as crashloop runs them (no fleet), with
// probe_after 30s, with the fleet breaker alone, and with the hold on a
// shared cause, each at its defaults.
func outageConfigs() (plain, probe, fleet, hold crashloop.SupervisorConfig) {
	plain = crashloop.DefaultSupervisorConfig()
	plain.Fleet = nil
	probe = plain
	probe.ProbeAfter = 30 * time.Second
	fleet = crashloop.DefaultSupervisorConfig()
	hold = crashloop.DefaultSupervisorConfig()
	f := crashloop.DefaultFleetConfig()
	f.SharedCause = &crashloop.SharedCauseConfig{}
	hold.Fleet = &f
	return plain, probe, fleet, hold
}

// simulateOutage simulates an outage of d over n keys under cfg for a day
// past its end.
func simulateOutage(t *testing.T, cfg crashloop.SupervisorConfig, d time.Duration, n int) replay.Outcome {
	t.Helper()
	p, err := replay.CandidatePolicy(replay.Candidate{Config: cfg})
	require.NoError(t, err)
	out, err := replay.SimulateOutage(p, replay.SharedOutage{Outage: d, Keys: n}, 24*time.Hour)
	require.NoError(t, err)
	return out
}

// TestSimulateOutageOfOneKeyIsSimulate: one key under the defaults spends
// the budget as Simulate's outage program does (500ms, 1s, 1.5s) and is
// parked at 3s for good, whatever the outage's length.
func TestSimulateOutageOfOneKeyIsSimulate(t *testing.T) {
	t.Parallel()
	plain, _, _, _ := outageConfigs()
	for _, d := range []time.Duration{30 * time.Second, time.Hour} {
		out := simulateOutage(t, plain, d, 1)
		assert.Equal(t, replay.Outcome{Keys: []replay.KeyOutcome{{Starts: secs(0, .5, 1.5, 3), Parked: true, ParkedAt: 3 * time.Second, GaveUp: true}},
			CauseHeld: -1, CauseReleased: -1, Tripped: -1}, out, d)
		p, err := replay.CandidatePolicy(replay.Candidate{Config: plain})
		require.NoError(t, err)
		sim, err := replay.Simulate(p, replay.Program{Outage: d}, d+24*time.Hour)
		require.NoError(t, err)
		assert.Equal(t, sim.Starts, out.Keys[0].Starts)
	}
}

// TestSimulateOutageProbe: with probe_after 30s the park at 3s is probed
// at 33s, then after 60s, 120s, 240s, then every 480s (16 x 30s); the
// first probe after the outage's end brings the key back.
func TestSimulateOutageProbe(t *testing.T) {
	t.Parallel()
	_, probe, _, _ := outageConfigs()
	for _, c := range []struct {
		outage time.Duration
		starts []time.Duration
		probes int
		back   time.Duration
	}{
		{30 * time.Second, secs(0, .5, 1.5, 3, 33), 1, 3 * time.Second},
		{33 * time.Second, secs(0, .5, 1.5, 3, 33), 1, 0},
		{34 * time.Second, secs(0, .5, 1.5, 3, 33, 93), 2, 59 * time.Second},
		{5 * time.Minute, secs(0, .5, 1.5, 3, 33, 93, 213, 453), 4, 153 * time.Second},
		{time.Hour, secs(0, .5, 1.5, 3, 33, 93, 213, 453, 933, 1413, 1893, 2373, 2853, 3333, 3813), 11, 213 * time.Second},
	} {
		out := simulateOutage(t, probe, c.outage, 1)
		assert.Equal(t, []replay.KeyOutcome{{Starts: c.starts, Probes: c.probes, Parked: true, ParkedAt: 3 * time.Second, Back: true, BackAfter: c.back}},
			out.Keys, c.outage)
		// The single program's simulation probes alike.
		p, err := replay.CandidatePolicy(replay.Candidate{Config: probe})
		require.NoError(t, err)
		sim, err := replay.Simulate(p, replay.Program{Outage: c.outage}, c.outage+24*time.Hour)
		require.NoError(t, err)
		assert.Equal(t, replay.Simulation{Starts: c.starts, Recovered: true, ExtraDelay: c.back, Probes: c.probes}, sim, c.outage)
	}
}

// TestSimulateOutageHold: ten keys fail with one cause at 0s; the third
// starts the hold (keys 1 and 2 restart at 500ms and are held then).
// Every held key waits for the probe at 30s: key 1 goes (the first key on
// a tie) and runs. 10s later (HealthyAfter) the hold is released, and the
// other nine are released 30s/9 apart in the order they were held: keys
// 3 to 10, then key 2. No key parks; each spends one restart of the
// budget at most. A 5m outage costs a probe every 30s (10), the last
// healthy at 5m; the release is the same.
func TestSimulateOutageHold(t *testing.T) {
	t.Parallel()
	_, _, _, hold := outageConfigs()
	gap := 30 * time.Second / 9
	out := simulateOutage(t, hold, 30*time.Second, 10)
	want := []replay.KeyOutcome{
		{Starts: secs(0, .5, 30), Probes: 1, Held: 1, Back: true, BackAfter: 0},
		{Starts: []time.Duration{0, 500 * time.Millisecond, 40*time.Second + 8*gap}, Held: 1, Back: true, BackAfter: 10*time.Second + 8*gap},
	}
	for i := range 8 {
		at := 40*time.Second + time.Duration(i)*gap
		want = append(want, replay.KeyOutcome{Starts: []time.Duration{0, at}, Held: 1, Back: true, BackAfter: at - 30*time.Second})
	}
	assert.Equal(t, replay.Outcome{Keys: want, CauseHeld: 0, CauseReleased: 40 * time.Second, Tripped: -1}, out)
	assert.Equal(t, 0, out.Parked())
	n, first, last := out.Back()
	assert.Equal(t, []any{10, time.Duration(0), 36666666664 * time.Nanosecond}, []any{n, first, last})

	out = simulateOutage(t, hold, 5*time.Minute, 10)
	restarts, probes, held := out.Totals()
	assert.Equal(t, []int{0, 21, 10, 19}, []int{out.Parked(), restarts, probes, held})
	assert.Equal(t, secs(0, .5, 30, 60, 90, 120, 150, 180, 210, 240, 270, 300), out.Keys[0].Starts, "key 1 probes every 30s")
	assert.Equal(t, 5*time.Minute+10*time.Second, out.CauseReleased)
	n, first, last = out.Back()
	assert.Equal(t, []any{10, time.Duration(0), 36666666664 * time.Nanosecond}, []any{n, first, last})

	// Fewer keys than the hold's 3 are judged as usual: both park.
	out = simulateOutage(t, hold, 30*time.Second, 2)
	assert.Equal(t, []any{2, time.Duration(-1)}, []any{out.Parked(), out.CauseHeld})
}

// TestSimulateOutageFleetBreaker: the fleet breaker alone trips at 3s,
// when the fifth of ten keys parks (half the fleet), but each key parks
// by its own budget at that same failure: all ten are parked for good.
func TestSimulateOutageFleetBreaker(t *testing.T) {
	t.Parallel()
	_, _, fleet, _ := outageConfigs()
	out := simulateOutage(t, fleet, 30*time.Second, 10)
	n, at := out.GaveUp()
	assert.Equal(t, []any{10, 3 * time.Second, 3 * time.Second}, []any{n, at, out.Tripped})
	restarts, probes, held := out.Totals()
	assert.Equal(t, []int{30, 0, 0}, []int{restarts, probes, held})
}

// TestSimulateOutageOfOtherPolicies: another system's policy judges each
// key alone: every key does what its one program does.
func TestSimulateOutageOfOtherPolicies(t *testing.T) {
	t.Parallel()
	out, err := replay.SimulateOutage(reference(t, "kubelet"), replay.SharedOutage{Outage: 5 * time.Minute, Keys: 3}, time.Hour)
	require.NoError(t, err)
	k := replay.KeyOutcome{Starts: secs(0, 0, 10, 30, 70, 150, 310), Back: true, BackAfter: 10 * time.Second}
	assert.Equal(t, replay.Outcome{Keys: []replay.KeyOutcome{k, k, k}, CauseHeld: -1, CauseReleased: -1, Tripped: -1}, out)
	out, err = replay.SimulateOutage(reference(t, "nomad"), replay.SharedOutage{Outage: 5 * time.Minute, Keys: 2}, time.Hour)
	require.NoError(t, err)
	n, at := out.GaveUp()
	assert.Equal(t, []any{2, 30 * time.Second}, []any{n, at})

	for _, c := range []struct {
		o       replay.SharedOutage
		horizon time.Duration
		msg     string
	}{
		{replay.SharedOutage{Keys: 1}, time.Hour, "replay: outage 0s: must be > 0"},
		{replay.SharedOutage{Outage: time.Second}, time.Hour, "replay: keys 0: must be >= 1"},
		{replay.SharedOutage{Outage: time.Second, Keys: 1}, 0, "replay: horizon 0s: must be > 0"},
	} {
		_, err := replay.SimulateOutage(k8s(t), c.o, c.horizon)
		assert.EqualError(t, err, c.msg)
	}
	_, err = replay.Simulate(k8s(t), replay.Program{Outage: time.Second, Keys: 2}, time.Hour)
	assert.EqualError(t, err, "replay: an outage of 2 keys: simulate it with SimulateOutage")
}

func k8s(t *testing.T) replay.Policy { return reference(t, "kubelet") }

// TestOutageVariants: the variants add what the configuration lacks,
// each named by what it adds.
func TestOutageVariants(t *testing.T) {
	t.Parallel()
	plain, probe, _, hold := outageConfigs()
	var names []string
	for _, v := range replay.OutageVariants(replay.Candidate{Name: "d", Config: plain}) {
		names = append(names, v.Name)
	}
	assert.Equal(t, []string{"d", "d + probe_after 30s", "d + fleet", "d + fleet.shared_cause", "d + both"}, names)
	vs := replay.OutageVariants(replay.Candidate{Name: "d", Config: plain})
	assert.Equal(t, 30*time.Second, vs[4].Config.ProbeAfter)
	assert.Equal(t, crashloop.SharedCauseConfig{}, *vs[4].Config.Fleet.SharedCause)
	assert.Nil(t, plain.Fleet, "the candidate's configuration is left alone")

	both := hold
	both.ProbeAfter = probe.ProbeAfter
	vs = replay.OutageVariants(replay.Candidate{Config: both})
	require.Len(t, vs, 1, "nothing to add")
	assert.Equal(t, "crashloop", vs[0].Name)
}
