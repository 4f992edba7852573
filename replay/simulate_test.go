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
		// kubelet (client-go's flowcontrol.Backoff as kubelet sets it up): the
		// first restart at once, then 10s, 20s, 40s, 80s, 160s, 300s.
		{"kubelet", crasher(10 * time.Second), 12 * time.Minute, replay.Simulation{Starts: secs(0, 10, 30, 60, 110, 200, 370, 680)}},
		// ... a run of 10 minutes from the start it let go is not more than 10
		// minutes: the back-off goes on; a run of 10m1s resets it: at once.
		{"kubelet", crasher(10 * time.Minute), 31 * time.Minute, replay.Simulation{Starts: secs(0, 600, 1210, 1830)}},
		{"kubelet", crasher(10*time.Minute + time.Second), 31 * time.Minute, replay.Simulation{Starts: secs(0, 601, 1202, 1803)}},
		{"kubelet", outage(5 * time.Minute), time.Hour, replay.Simulation{Starts: secs(0, 0, 10, 30, 70, 150, 310), Recovered: true, ExtraDelay: 10 * time.Second}},
		// KEP-4603: at once, then 1s doubling to 60s.
		{"KEP-4603", crasher(10 * time.Second), 6 * time.Minute, replay.Simulation{Starts: secs(0, 10, 21, 33, 47, 65, 91, 133, 203, 273, 343)}},
		{"KEP-4603", outage(30 * time.Second), time.Hour, replay.Simulation{Starts: secs(0, 0, 1, 3, 7, 15, 31), Recovered: true, ExtraDelay: time.Second}},
		// systemd: 100ms between starts; the 6th start within 10s fails the unit.
		{"systemd", crasher(10 * time.Second), 35 * time.Second, replay.Simulation{Starts: secs(0, 10.1, 20.2, 30.3)}},
		{"systemd", crasher(time.Second), time.Minute,
			replay.Simulation{Starts: secs(0, 1.1, 2.2, 3.3, 4.4), GaveUp: true, GaveUpAt: 5400 * time.Millisecond}},
		{"systemd", crasher(1500 * time.Millisecond), time.Minute,
			replay.Simulation{Starts: secs(0, 1.6, 3.2, 4.8, 6.4), GaveUp: true, GaveUpAt: 7900 * time.Millisecond}},
		{"systemd", outage(30 * time.Second), time.Hour, replay.Simulation{Starts: secs(0, .1, .2, .3, .4), GaveUp: true, GaveUpAt: 400 * time.Millisecond}},
		// systemd-steps: 1s x 60^((n-1)/5) for the n-th restart, to the
		// microsecond: 1s, 2.267933s, 5.14352s, 11.665161s, 26.455806s, then 60s.
		{"systemd-steps", crasher(10 * time.Second), 3 * time.Minute, replay.Simulation{Starts: secs(0, 11, 23.267933, 38.411453, 60.076614, 96.53242, 166.53242)}},
		{"systemd-steps", outage(30 * time.Second), time.Hour,
			replay.Simulation{Starts: secs(0, 1, 3.267933, 8.411453, 20.076614, 46.53242), Recovered: true, ExtraDelay: 16532420 * time.Microsecond}},
		// docker: 100ms doubling to 1m; a run of 10s resets it.
		{"docker", crasher(10 * time.Second), 25 * time.Second, replay.Simulation{Starts: secs(0, 10.1, 20.2)}},
		{"docker", crasher(9 * time.Second), 40 * time.Second, replay.Simulation{Starts: secs(0, 9.1, 18.3, 27.7, 37.5)}},
		{"docker", outage(30 * time.Second), time.Hour,
			replay.Simulation{Starts: secs(0, .1, .3, .7, 1.5, 3.1, 6.3, 12.7, 25.5, 51.1), Recovered: true, ExtraDelay: 21100 * time.Millisecond}},
		// pm2: 100ms x1.5, to the millisecond down, to 15s: 100, 150, 225, 337...
		{"pm2", crasher(10 * time.Second), 41 * time.Second, replay.Simulation{Starts: secs(0, 10.1, 20.25, 30.475, 40.812)}},
		// ... the failed starts of an outage are unstable only within 16s of
		// the app's creation: 11 of them, under 16, so it never stops.
		{"pm2", outage(5 * time.Minute), time.Hour, replay.Simulation{Starts: secs(0, .1, .25, .475, .812, 1.317, 2.074, 3.209, 4.911, 7.464,
			11.293, 17.036, 25.65, 38.571, 53.571, 68.571, 83.571, 98.571, 113.571, 128.571, 143.571, 158.571, 173.571, 188.571, 203.571,
			218.571, 233.571, 248.571, 263.571, 278.571, 293.571, 308.571), Recovered: true, ExtraDelay: 8571 * time.Millisecond}},
		// ... nor on a 100ms crasher: 11 of its exits come within 16s.
		{"pm2", crasher(100 * time.Millisecond), 17 * time.Second, replay.Simulation{Starts: secs(0, .2, .45, .775, 1.212, 1.817, 2.674,
			3.909, 5.711, 8.364, 12.293)}},
		// nomad: 15s; the 3rd failure within 30m of the first start fails the task.
		{"nomad", crasher(10 * time.Second), 2 * time.Minute, replay.Simulation{Starts: secs(0, 25, 50), GaveUp: true, GaveUpAt: time.Minute}},
		{"nomad", crasher(20 * time.Minute), 90 * time.Minute, replay.Simulation{Starts: secs(0, 1215, 2430, 3645, 4860)}},
		{"nomad", outage(30 * time.Second), time.Hour, replay.Simulation{Starts: secs(0, 15, 30), Recovered: true}},
		{"nomad", outage(5 * time.Minute), time.Hour, replay.Simulation{Starts: secs(0, 15, 30), GaveUp: true, GaveUpAt: 30 * time.Second}},
		// A failure after the interval begins a new one, and counts in it
		// (RestartTracker.GetState: count = 0, then count++): failures at
		// 600s, 1215s, 1830s (a new interval), 2445s, and the 3060s one is
		// the 3rd of the interval begun at 1830s: the task fails.
		{"nomad", crasher(10 * time.Minute), 2 * time.Hour, replay.Simulation{Starts: secs(0, 615, 1230, 1845, 2460), GaveUp: true, GaveUpAt: 3060 * time.Second}},
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

// outagesTable returns the second table of docs/policies.md: the outages
// shared by 10 keys under the defaults as crashloop runs them (the fleet
// breaker off) and what the probe and the hold change of them.
func outagesTable(t *testing.T) string {
	t.Helper()
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Fleet = nil
	var policies []replay.Policy
	for _, v := range replay.OutageVariants(replay.Candidate{Name: "crashloop defaults", Config: cfg}) {
		p, err := replay.CandidatePolicy(v)
		require.NoError(t, err)
		policies = append(policies, p)
	}
	rows, err := replay.SimulateOutages(policies, replay.OutageTableOutages, replay.OutageTableKeys, 24*time.Hour)
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, replay.WriteOutageTable(&b, replay.OutageTableOutages, replay.OutageTableKeys, rows))
	return b.String()
}

// TestOutagesDoc: docs/policies.md holds the outage table the command
// makes after the KEP table (crashloop simulate), with these numbers (see
// TestSimulateOutageProbe and TestSimulateOutageHold for how they come).
func TestOutagesDoc(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/policies.md")
	require.NoError(t, err)
	table := outagesTable(t)
	assert.Contains(t, string(doc), "\n"+table+"\n", "regenerate the table with: go run ./cmd/crashloop simulate")
	assert.Equal(t, `| policy | 30s outage over 10 keys: keys parked | restarts (probes) | back after | 5m: keys parked | restarts (probes) | back after | 1h: keys parked | restarts (probes) | back after |
|---|---:|---:|---|---:|---:|---|---:|---:|---|
| crashloop defaults | 10 | 30 | gave up after 3s | 10 | 30 | gave up after 3s | 10 | 30 | gave up after 3s |
| crashloop defaults + probe_after 30s | 10 | 40 (10 probes) | 3s | 10 | 70 (40 probes) | 2m33s | 10 | 140 (110 probes) | 3m33s |
| crashloop defaults + fleet | 10 | 30 | gave up after 3s | 10 | 30 | gave up after 3s | 10 | 30 | gave up after 3s |
| crashloop defaults + fleet.shared_cause | 0 | 12 (1 probe) | 0s to 36.667s | 0 | 21 (10 probes) | 0s to 36.667s | 0 | 131 (120 probes) | 0s to 36.667s |
| crashloop defaults + both | 0 | 12 (1 probe) | 0s to 36.667s | 0 | 21 (10 probes) | 0s to 36.667s | 0 | 131 (120 probes) | 0s to 36.667s |
`, table)
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
| kubelet | 5 | 10 | never | 0s | 10s | 10s |
| KEP-4603 | 9 | 30 | never | 1s | 3s | 3s |
| systemd | 29 | 178 | never | gave up | gave up | gave up |
| systemd-steps | 7 | 29 | never | 16.532s | 46.532s | 46.532s |
| docker | 29 | 178 | never | 21.1s | 42.3s | 42.3s |
| pm2 | 18 | 78 | never | 8.571s | 8.571s | 8.571s |
| nomad | 2 | 2 | 1m | 0s | gave up | gave up |
`, table)
}

// TestProbeOnTheKEPTable pins the numbers docs/policies.md argues with:
// probe_after 30s over the defaults brings each outage back at its first
// probe after the end (3s, 2m33s, 3m33s), and leaves the 10s crasher,
// whose runs pass HealthyAfter, parked by the chain (needs_human parks are
// not probed): 3 restarts, given up after 41.5s, as without probes.
// With HealthyAfter 0 the crasher's probes fail and double: 6 and 9.
func TestProbeOnTheKEPTable(t *testing.T) {
	t.Parallel()
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Fleet, cfg.ProbeAfter = nil, 30*time.Second
	p, err := replay.CandidatePolicy(replay.Candidate{Name: "probe", Config: cfg})
	require.NoError(t, err)
	assert.Equal(t, []replay.KEPRow{{Policy: "probe", Curve: "crashloop budget 3 in 1m, linear 500ms to 5s, chain 3 within 20m, probe after 30s up to every 8m",
		Restarts5m: 3, Restarts30m: 3, GivesUp: 41500 * time.Millisecond, Outages: [3]time.Duration{3 * time.Second, 153 * time.Second, 213 * time.Second},
		Probes: [3]int{1, 4, 11}}}, replay.SimulateKEP([]replay.Policy{p}))
	var b bytes.Buffer
	require.NoError(t, replay.WriteKEPTable(&b, replay.SimulateKEP([]replay.Policy{p})))
	assert.Contains(t, b.String(), "| probe | 3 | 3 | 41.5s | 3s (parked, 1 probe) | 2m33s (parked, 4 probes) | 3m33s (parked, 11 probes) |\n")
	doc, err := os.ReadFile("../docs/policies.md")
	require.NoError(t, err)
	assert.Contains(t, string(doc), "\n| flags | 3 | 3 | 41.5s | 3s (parked, 1 probe) | 2m33s (parked, 4 probes) | 3m33s (parked, 11 probes) |\n",
		"docs/policies.md quotes crashloop simulate --reference=false --defaults --probe-after 30s")

	cfg.HealthyAfter = 0
	p, err = replay.CandidatePolicy(replay.Candidate{Config: cfg})
	require.NoError(t, err)
	sim, err := replay.Simulate(p, replay.Program{CrashAfter: 10 * time.Second}, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, []int{6, 9}, []int{sim.Restarts(5 * time.Minute), sim.Restarts(30 * time.Minute)})
	assert.False(t, sim.GaveUp)
}
