package redisstore

import (
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/suptest"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/stretchr/testify/require"
)

// serverScenario is n Supervisors of cfg on Stores of one deployment on a
// real redis-server, in client time (suptest's scenarios give the times),
// for suptest's scenarios: a change reaches the other replicas by a
// notice.
func serverScenario(t *testing.T, cfg crashloop.SupervisorConfig, n int) suptest.Replicas {
	s := redistest.Start(t)
	rs := fleet(t, n, cfg, true, onServer(t, s, Options{ClientTime: true}))
	r := suptest.Replicas{
		Events: func(kind crashloop.EventKind) []crashloop.Event {
			var out []crashloop.Event
			for _, r := range rs {
				out = append(out, r.evs.of(kind)...)
			}
			return out
		},
		Settle: func(t *testing.T, cond func() bool, msg string) {
			require.Eventually(t, cond, watchdog, 100*time.Microsecond, msg)
		}}
	for _, rep := range rs {
		r.Sups = append(r.Sups, rep.sup)
	}
	return r
}

// One probe of a parked key at a time across three replicas on Redis,
// its resume announced once (suptest.ProbeOnce): the claim is one step of
// the script that moves the next probe.
func TestProbeOnceFleetWide(t *testing.T) {
	suptest.ProbeOnce(t, serverScenario(t, suptest.ProbeConfig(), 3), start)
}

// One hold on a shared cause across two replicas on Redis, held and
// released once (suptest.CauseHeldOnce).
func TestCauseHeldOnceFleetWide(t *testing.T) {
	suptest.CauseHeldOnce(t, serverScenario(t, suptest.CauseConfig(), 2), start)
}
