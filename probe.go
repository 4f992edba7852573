package crashloop

import (
	"math"
	"time"
)

// A probe after a park: with SupervisorConfig.ProbeAfter set, a key parked
// for any reason but ReasonPermanent and ReasonNeedsHuman gets one probe
// start ProbeAfter after the park, then after twice that, four times, and so on up to ProbeMax.
// A probe is claimed by a Proceed of the parked key once it is due; the
// claim moves the next probe past the probe's run (at least HealthyAfter),
// so that one probe at a time runs per key, across replicas too. A probe
// whose run becomes healthy resumes the key (EventResumed, reason
// ReasonProbe); a failed one leaves it parked until the next.

// defaultProbeMax is ProbeMax's default, in multiples of ProbeAfter.
const defaultProbeMax = 16

// probeMax is the cap of the interval between probes.
func (ru *rules) probeMax() time.Duration {
	if ru.probe.max > 0 {
		return ru.probe.max
	}
	return min(ru.probe.after, math.MaxInt64/defaultProbeMax) * defaultProbeMax
}

// probeRules is the part of a SupervisorConfig that schedules probes.
type probeRules struct {
	after, max, healthy time.Duration
}

// schedule gives a key that g's new park parked at t its first probe, if
// probes are on and the park may be probed. A permanent error is not
// retried, and the chain's park is not probed: it parks a slow loop that
// passes every health check, which a probe judges by.
func (ru *rules) schedule(g *keyGuards, t int64) {
	g.probe, g.probes = 0, 0
	if ru.probe.after > 0 && probed(g.park.Reason) {
		g.probe = t + int64(ru.probe.after)
	}
}

// claim lets the parked key of g go as a probe at t if its probe is due,
// and moves its next probe past the probe's run: twice the last interval,
// up to the cap, and no sooner than HealthyAfter. It reports whether it
// let the probe go.
func (ru *rules) claim(g *keyGuards, t int64) bool {
	if g.probe == 0 || t < g.probe {
		return false
	}
	g.probes++
	every := ru.probeMax()
	if g.probes < 63 && ru.probe.after <= every>>g.probes {
		every = ru.probe.after << g.probes // no overflow: at most the cap
	}
	g.probe = t + int64(max(every, ru.probe.healthy))
	return true
}

// probeAt is when the next probe of g is due, on now's clock at t; zero if
// none is scheduled.
func probeAt(g *keyGuards, t int64, now time.Time) time.Time {
	if g.park == nil || g.probe == 0 {
		return time.Time{}
	}
	return now.Add(time.Duration(g.probe - t))
}

// probed reports whether a park for reason gets probes.
func probed(reason string) bool { return reason != ReasonPermanent && reason != ReasonNeedsHuman }
