package share_test

import (
	"testing"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/suptest"
)

// memoryScenario is replicas of cfg on one MemoryLedger for suptest's
// scenarios: a change reaches every replica within the step that made it.
func memoryScenario(t *testing.T, cfg crashloop.SupervisorConfig, n int) suptest.Replicas {
	sups, recs, _ := replicas(t, cfg, memoryReplicas(n))
	return suptest.Replicas{Sups: sups,
		Events: func(kind crashloop.EventKind) []crashloop.Event {
			var out []crashloop.Event
			for _, r := range recs {
				for _, ev := range eventsOf(r, kind) {
					out = append(out, ev.Event)
				}
			}
			return out
		},
		Settle: func(t *testing.T, cond func() bool, msg string) {
			if !cond() {
				t.Fatal(msg + ": not at once")
			}
		}}
}

// One probe of a parked key at a time across three replicas, its resume
// announced once (suptest.ProbeOnce).
func TestSharedProbeOnce(t *testing.T) {
	suptest.ProbeOnce(t, memoryScenario(t, suptest.ProbeConfig(), 3), testT0)
}

// One hold on a shared cause across two replicas, held and released once
// (suptest.CauseHeldOnce).
func TestSharedCauseHeldOnce(t *testing.T) {
	suptest.CauseHeldOnce(t, memoryScenario(t, suptest.CauseConfig(), 2), testT0)
}
