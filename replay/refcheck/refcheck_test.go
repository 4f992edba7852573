package refcheck_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/restartmanager"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/flowcontrol"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/crashloopguard/crashloop/replay"
)

// programs are the synthetic programs each reference policy is held to its
// real code on, with the simulated time of each.
var programs = []struct {
	prog    replay.Program
	horizon time.Duration
}{
	{replay.Program{CrashAfter: time.Second}, 30 * time.Minute},
	{replay.Program{CrashAfter: 9 * time.Second}, 30 * time.Minute},
	{replay.Program{CrashAfter: 10 * time.Second}, time.Hour},
	{replay.Program{CrashAfter: 10 * time.Minute}, 3 * time.Hour},
	{replay.Program{CrashAfter: 10*time.Minute + time.Second}, 3 * time.Hour},
	{replay.Program{Outage: 30 * time.Second}, 2 * time.Hour},
	{replay.Program{Outage: 5 * time.Minute}, 2 * time.Hour},
	{replay.Program{Outage: time.Hour}, 3 * time.Hour},
}

// base is the time the simulations start at.
var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// starts runs prog as replay.Simulate does, asking wait for the wait after
// each failed run, and returns the program's starts (from the first, 0)
// until it recovers from its outage or the horizon.
func starts(prog replay.Program, horizon time.Duration, wait func(start, end time.Time) time.Duration) []time.Duration {
	var out []time.Duration
	for t := time.Duration(0); t <= horizon; {
		out = append(out, t)
		if prog.Outage > 0 && t >= prog.Outage {
			break
		}
		end := t + prog.CrashAfter
		t = end + wait(base.Add(t), base.Add(end))
	}
	return out
}

// reference returns simulate's reference policy name.
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

// modelled returns the starts of prog under simulate's reference policy.
func modelled(t *testing.T, name string, prog replay.Program, horizon time.Duration) []time.Duration {
	t.Helper()
	sim, err := replay.Simulate(reference(t, name), prog, horizon)
	require.NoError(t, err)
	require.False(t, sim.GaveUp, "%s never gives up", name)
	return sim.Starts
}

// TestKubeletIsClientGoBackoff: "kubelet" and "KEP-4603" restart as
// client-go's flowcontrol.Backoff does, set up as kubelet sets it up
// (pkg/kubelet/kubelet.go: NewBackOff(base, max) and a HasExpiredFunc of
// 600s) and driven as kubelet drives it (kuberuntime_manager.go doBackOff:
// IsInBackOffSince the container's finish; once it is not, Next and the
// start).
func TestKubeletIsClientGoBackoff(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		policy       string
		initial, max time.Duration
	}{{"kubelet", 10 * time.Second, 300 * time.Second}, {"KEP-4603", time.Second, 60 * time.Second}} {
		for _, p := range programs {
			clk := testingclock.NewFakeClock(base)
			b := flowcontrol.NewFakeBackOff(c.initial, c.max, clk)
			b.HasExpiredFunc = func(eventTime time.Time, lastUpdate time.Time, _ time.Duration) bool {
				return eventTime.Sub(lastUpdate) > 600*time.Second
			}
			const key = "pod_ns_uid_container"
			real := starts(p.prog, p.horizon, func(_, end time.Time) time.Duration {
				clk.SetTime(end)
				wait := time.Duration(0)
				if b.IsInBackOffSince(key, end) {
					// kubelet syncs until the back-off since the finish has passed.
					wait = b.Get(key)
					clk.SetTime(end.Add(wait - time.Nanosecond))
					require.True(t, b.IsInBackOffSince(key, end))
					clk.SetTime(end.Add(wait))
					require.False(t, b.IsInBackOffSince(key, end))
				}
				b.Next(key, end)
				return wait
			})
			assert.Equal(t, real, modelled(t, c.policy, p.prog, p.horizon), "%s, %s", c.policy, p.prog)
		}
	}
}

// TestDockerIsRestartManager: "docker" restarts as moby's restartmanager
// (restart policy always) does: the wait is the timer ShouldRestart starts,
// measured in a synctest bubble.
func TestDockerIsRestartManager(t *testing.T) {
	t.Parallel()
	for _, p := range programs {
		synctest.Test(t, func(t *testing.T) {
			rm := restartmanager.New(container.RestartPolicy{Name: container.RestartPolicyAlways}, 0)
			real := starts(p.prog, p.horizon, func(start, end time.Time) time.Duration {
				restart, ch, err := rm.ShouldRestart(1, false, end.Sub(start))
				require.NoError(t, err)
				require.True(t, restart)
				began := time.Now()
				require.NoError(t, <-ch) // closed when the timer fires
				return time.Since(began)
			})
			assert.Equal(t, real, modelled(t, "docker", p.prog, p.horizon), "docker, %s", p.prog)
		})
	}
}
