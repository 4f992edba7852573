package replay_test

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/replay"
)

// secs returns the durations of seconds.
func secs(ss ...float64) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = time.Duration(s * float64(time.Second))
	}
	return out
}

// reference returns the reference policy named name.
func reference(t *testing.T, name string) replay.Policy {
	t.Helper()
	for _, p := range replay.ReferencePolicies() {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no reference policy %s", name)
	return replay.Policy{}
}

// TestReferencePoliciesFollowTheirCurves checks each reference policy's
// starts against its documented curve, worked out by hand.
func TestReferencePoliciesFollowTheirCurves(t *testing.T) {
	t.Parallel()
	crasher := func(d time.Duration) replay.Program { return replay.Program{CrashAfter: d} }
	outage := func(d time.Duration) replay.Program { return replay.Program{Outage: d} }
	for _, c := range []struct {
		policy  string
		prog    replay.Program
		horizon time.Duration
		want    replay.Simulation
	}{
		// kubelet: a 10s crasher waits 10s, 20s, 40s, 80s, 160s, then 300s.
		{"kubelet", crasher(10 * time.Second), 12 * time.Minute, replay.Simulation{Starts: secs(0, 20, 50, 100, 190, 360, 670)}},
		// ... and a run of 10 minutes resets the wait to 10s.
		{"kubelet", crasher(10 * time.Minute), 31 * time.Minute, replay.Simulation{Starts: secs(0, 610, 1220, 1830)}},
		{"kubelet", outage(5 * time.Minute), time.Hour, replay.Simulation{Starts: secs(0, 10, 30, 70, 150, 310), Recovered: true, ExtraDelay: 10 * time.Second}},
		// KEP-4603: 1s doubling to 60s.
		{"KEP-4603", crasher(10 * time.Second), 6 * time.Minute, replay.Simulation{Starts: secs(0, 11, 23, 37, 55, 81, 123, 193, 263, 333)}},
		{"KEP-4603", outage(30 * time.Second), time.Hour, replay.Simulation{Starts: secs(0, 1, 3, 7, 15, 31), Recovered: true, ExtraDelay: time.Second}},
		// systemd: 100ms between starts; the 6th start within 10s fails the unit.
		{"systemd", crasher(10 * time.Second), 35 * time.Second, replay.Simulation{Starts: secs(0, 10.1, 20.2, 30.3)}},
		{"systemd", crasher(time.Second), time.Minute,
			replay.Simulation{Starts: secs(0, 1.1, 2.2, 3.3, 4.4), GaveUp: true, GaveUpAt: 5400 * time.Millisecond}},
		{"systemd", crasher(1500 * time.Millisecond), time.Minute,
			replay.Simulation{Starts: secs(0, 1.6, 3.2, 4.8, 6.4), GaveUp: true, GaveUpAt: 7900 * time.Millisecond}},
		{"systemd", outage(30 * time.Second), time.Hour, replay.Simulation{Starts: secs(0, .1, .2, .3, .4), GaveUp: true, GaveUpAt: 400 * time.Millisecond}},
		// docker: 100ms doubling to 1m; a run of 10s resets it.
		{"docker", crasher(10 * time.Second), 25 * time.Second, replay.Simulation{Starts: secs(0, 10.1, 20.2)}},
		{"docker", crasher(9 * time.Second), 40 * time.Second, replay.Simulation{Starts: secs(0, 9.1, 18.3, 27.7, 37.5)}},
		{"docker", outage(30 * time.Second), time.Hour,
			replay.Simulation{Starts: secs(0, .1, .3, .7, 1.5, 3.1, 6.3, 12.7, 25.5, 51.1), Recovered: true, ExtraDelay: 21100 * time.Millisecond}},
		// pm2: 100ms x1.5 to 15s; runs under 1s are unstable, and the 17th in a row stops it.
		{"pm2", crasher(10 * time.Second), 41 * time.Second, replay.Simulation{Starts: secs(0, 10.1, 20.25, 30.475, 40.8125)}},
		{"pm2", outage(5 * time.Minute), time.Hour, replay.Simulation{Starts: secs(0, .1, .25, .475, .8125, 1.31875, 2.078125, 3.2171875,
			4.92578125, 7.488671875, 11.3330078125, 17.099511719, 25.749267578, 38.723901367, 53.723901367, 68.723901367, 83.723901367),
			GaveUp: true, GaveUpAt: 83723901367}},
	} {
		sim, err := replay.Simulate(reference(t, c.policy), c.prog, c.horizon)
		require.NoError(t, err)
		for i := range sim.Starts { // the curve's products, worked out by hand, to 100µs
			sim.Starts[i] = sim.Starts[i].Round(100 * time.Microsecond)
		}
		for i := range c.want.Starts {
			c.want.Starts[i] = c.want.Starts[i].Round(100 * time.Microsecond)
		}
		sim.GaveUpAt, c.want.GaveUpAt = sim.GaveUpAt.Round(100*time.Microsecond), c.want.GaveUpAt.Round(100*time.Microsecond)
		assert.Equal(t, c.want, sim, "%s, %s", c.policy, c.prog)
	}
}

// TestCrashloopDefaultsSimulated: the defaults judge a 10s crasher's runs
// healthy (HealthyAfter 10s), so the chain gives up on the 4th crash; an
// outage's failed starts spend the budget: 500ms, 1s, 1.5s, then the park.
func TestCrashloopDefaultsSimulated(t *testing.T) {
	t.Parallel()
	p, err := replay.CandidatePolicy(replay.Candidate{Config: crashloop.DefaultSupervisorConfig()})
	require.NoError(t, err)
	assert.Equal(t, "crashloop", p.Name)
	sim, err := replay.Simulate(p, replay.Program{CrashAfter: 10 * time.Second}, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, replay.Simulation{Starts: secs(0, 10.5, 21, 31.5), GaveUp: true, GaveUpAt: 41500 * time.Millisecond}, sim)
	sim, err = replay.Simulate(p, replay.Program{Outage: time.Minute}, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, replay.Simulation{Starts: secs(0, .5, 1.5, 3), GaveUp: true, GaveUpAt: 3 * time.Second}, sim)

	_, err = replay.Simulate(p, replay.Program{}, time.Hour)
	assert.EqualError(t, err, "replay: a program crashes after a time (CrashAfter > 0) or waits out an outage (Outage > 0)")
	_, err = replay.Simulate(p, replay.Program{Outage: time.Minute}, 0)
	assert.EqualError(t, err, "replay: horizon 0s: must be > 0")
	_, err = replay.CandidatePolicy(replay.Candidate{})
	assert.ErrorIs(t, err, crashloop.ErrInvalidConfig)
}

// policiesTable returns the table of docs/policies.md as SimulateKEP
// writes it for the defaults and the reference policies.
func policiesTable(t *testing.T) string {
	t.Helper()
	p, err := replay.CandidatePolicy(replay.Candidate{Name: "crashloop defaults", Config: crashloop.DefaultSupervisorConfig()})
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, replay.WriteKEPTable(&b, replay.SimulateKEP(append([]replay.Policy{p}, replay.ReferencePolicies()...))))
	return b.String()
}

// TestPoliciesDoc: docs/policies.md holds the table the command makes
// (crashloop simulate), and its numbers are the curves' (see
// TestReferencePoliciesFollowTheirCurves for how each follows its curve).
func TestPoliciesDoc(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/policies.md")
	require.NoError(t, err)
	table := policiesTable(t)
	assert.Contains(t, string(doc), "\n"+table+"\n", "regenerate the table with: go run ./cmd/crashloop simulate")
	assert.Equal(t, `| policy | restarts, 10s crasher, first 5m | first 30m | gives up on it after | extra delay after a 30s outage | 5m outage | 1h outage |
|---|---:|---:|---:|---:|---:|---:|
| crashloop defaults | 3 | 3 | 41.5s | gave up | gave up | gave up |
| kubelet | 4 | 9 | never | 0s | 10s | 10s |
| KEP-4603 | 8 | 29 | never | 1s | 3s | 3s |
| systemd | 29 | 178 | never | gave up | gave up | gave up |
| docker | 29 | 178 | never | 21.1s | 42.3s | 42.3s |
| pm2 | 18 | 78 | never | 8.724s | gave up | gave up |
`, table)
}
