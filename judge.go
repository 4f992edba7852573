package crashloop

import (
	"cmp"
	"slices"
	"time"

	"github.com/crashloopguard/crashloop/internal/rolling"
	"github.com/crashloopguard/crashloop/internal/seam"
)

// keyGuards is what the guards of a Supervisor keep for one key, the part
// of its record that a shared Ledger keeps for every replica: the windows
// each guard judges by, the restart count, the park and a held restart's
// place.
type keyGuards struct {
	respawns window     // the budget's: respawns after failed starts
	chain    chainState // reactive rescues after healthy runs
	guard    window     // the per-key fast guard's: every restart
	hourly   window     // the hourly cap's: every restart
	restarts int        // since the key was first run or last resumed
	park     *ParkedError
	held     uint64 // while held by the fleet: the order it was held in (0: not held)
	release  int64  // once the breaker re-armed or the cause was released: when the held restart may leave
	cause    string // while held for a shared cause: the cause ("" for the breaker's hold)
	probe    int64  // while parked: when the next probe may go (0: none; see probe.go)
	probes   int    // while parked: the probes let go
}

// settle clears the respawn window of a key that is not parked: a run that
// became healthy was a good start, so the next failure starts afresh.
func (g *keyGuards) settle() {
	if g.park == nil {
		g.respawns.Clear()
	}
}

// resume clears the park and everything the guards counted: a full budget,
// a fresh chain, empty per-key windows and no restarts.
func (g *keyGuards) resume() {
	*g = keyGuards{respawns: g.respawns, guard: g.guard, hourly: g.hourly}
	g.respawns.Clear()
	g.guard.Clear()
	g.hourly.Clear()
}

// fleetBook is the fleet breaker of a Supervisor or a ledger, with the
// counter that numbers the restarts it holds and the causes it tracks.
type fleetBook struct {
	f      fleetState
	holds  uint64
	causes causeBook
}

// rules is the part of a SupervisorConfig that the guards judge by.
type rules struct {
	budget BudgetConfig
	chain  *ChainConfig
	guard  *GuardConfig
	hourly GuardConfig // MaxRestarts 0: off
	fleet  *FleetConfig
	cause  *SharedCauseConfig // with its defaults; nil: off
	probe  probeRules
}

func rulesOf(cfg SupervisorConfig) rules {
	ru := rules{budget: cfg.Budget, chain: cfg.Chain, guard: cfg.Guard, fleet: cfg.Fleet,
		hourly: GuardConfig{MaxRestarts: cfg.HourlyCap, Window: time.Hour},
		probe:  probeRules{after: cfg.ProbeAfter, max: cfg.ProbeMax, healthy: cfg.HealthyAfter}}
	if cfg.Fleet != nil && cfg.Fleet.SharedCause != nil {
		sc := cfg.Fleet.SharedCause.withDefaults()
		ru.cause = &sc
	}
	return ru
}

// judge decides j at t on the guard state g of its key and the fleet book
// fb, and commits the decision there. A park records no restart; a restart
// held for a shared cause records nothing; a restart passes every guard
// first. Call rearm first.
func (ru *rules) judge(g *keyGuards, fb *fleetBook, j *seam.Judgment, t int64, now time.Time) verdict {
	v := verdict{Now: now, Park: g.park, Restarts: g.restarts}
	if g.park != nil {
		v.ProbeAt = probeAt(g, t, now)
		return v
	}
	if j.Healthy || j.Ending == seam.EndingClean {
		g.settle() // a healthy run, or one that finished its work, was a good start
	}
	if j.Ending == seam.EndingClean {
		g.guard.Clear() // a clean run clears the fast guard
		return v
	}
	if ru.holdCause(g, fb, j, t, &v) {
		return v
	}
	switch j.Ending {
	case seam.EndingPermanent:
		return ru.park(g, fb, j, ReasonPermanent, ru.budget.count(&g.respawns, t), t, now)
	case seam.EndingFailedStart:
		if n := ru.budget.count(&g.respawns, t); n >= ru.budget.MaxRespawns {
			return ru.park(g, fb, j, ReasonBudgetExhausted, n, t, now)
		}
	case seam.EndingCrash:
		if c := ru.chain; c != nil {
			if n := c.length(&g.chain, j.Incarnation, t); n >= c.MaxChain {
				return ru.park(g, fb, j, ReasonNeedsHuman, n, t, now)
			}
		}
	}
	if c := ru.guard; c != nil {
		if n := c.count(&g.guard, t); n >= c.MaxRestarts {
			return ru.park(g, fb, j, ReasonRestartLoopGuard, n, t, now)
		}
	}
	if c := ru.hourly; c.MaxRestarts > 0 {
		if n := c.count(&g.hourly, t); n >= c.MaxRestarts {
			return ru.park(g, fb, j, ReasonHourlyCap, n, t, now)
		}
	}

	switch j.Ending {
	case seam.EndingFailedStart:
		v.Attempt, _ = ru.budget.respawn(&g.respawns, t)
	case seam.EndingCrash, seam.EndingPlanned:
		if c := ru.chain; c != nil {
			c.rescue(&g.chain, j.Incarnation, j.Ending == seam.EndingCrash, t) // a planned restart ends the chain
		}
	}
	if c := ru.guard; c != nil {
		g.guard.Push(t, c.MaxRestarts)
	}
	if c := ru.hourly; c.MaxRestarts > 0 {
		g.hourly.Push(t, c.MaxRestarts)
	}
	g.restarts++
	v.Restarts = g.restarts
	if ru.fleet != nil {
		tripped, trippedNow := ru.fleet.noteRestart(&fb.f, t)
		if trippedNow {
			v.Tripped = fb.f.change()
		}
		if tripped {
			fb.holds++
			g.held, g.release = fb.holds, 0
			v.Held, v.Wait = true, ru.untilRearm(&fb.f, t)
		}
	}
	return v
}

// park parks the key of g for reason after n counted, and judges the fleet's
// failing fraction: the seam.Judgment's counts and the parked key.
func (ru *rules) park(g *keyGuards, fb *fleetBook, j *seam.Judgment, reason string, n int, t int64, now time.Time) verdict {
	g.park = &ParkedError{Key: j.Key, Reason: reason, Attempts: n, Since: now}
	if j.Cause != "" {
		g.park.LastError = restoreError(&j.Cause, reason)
	}
	g.held, g.release, g.cause = 0, 0, ""
	ru.schedule(g, t)
	v := verdict{Now: now, Park: g.park, NewPark: true, Restarts: g.restarts, ProbeAt: probeAt(g, t, now)}
	if ru.fleet != nil {
		if _, trippedNow := ru.fleet.noteState(&fb.f, j.Failing+1, j.Members+1, t); trippedNow {
			v.Tripped = fb.f.change()
		}
	}
	return v
}

// release commits, at t, what the end of the run judged by j (nil for a
// step that judges no run) tells the holds on shared causes: a healthy
// run of a cause's prober releases its cause, and any other run of a
// prober ends its probe; else a prober that went HealthyAfter ago and has
// not failed since releases its cause. It releases at most one cause a
// step, and returns it, or nil. each must call its argument with the
// guard state of every key. Call it after rearm, before judge.
func (ru *rules) release(fb *fleetBook, j *seam.Judgment, t int64, each func(func(*keyGuards))) *seam.CauseChange {
	if ru.cause == nil {
		return nil
	}
	if j != nil && !j.Healthy {
		ru.probeFailed(fb, j.Key)
	}
	if j != nil && j.Healthy {
		if ch := ru.releaseCause(fb, j.Key, t, each); ch != nil {
			return ch
		}
	}
	return ru.releaseCause(fb, "", t, each)
}

// untilRearm returns how long after t the tripped fleet breaker re-arms (at
// least 1ns, so that a hold always waits).
func (ru *rules) untilRearm(f *fleetState, t int64) time.Duration {
	left := ru.fleet.Cooldown - time.Duration(rolling.Age(t, f.since))
	return max(left, time.Nanosecond)
}

// rearm re-arms the fleet breaker if its cooldown has ended at t, and
// schedules the release of the restarts it held: they leave in the order
// they were held, spread evenly over one cooldown from the re-arm, so that
// they do not all start at the same instant. They are not counted in the
// breaker's hour (they were counted, or refused, when they were held), so
// the release itself can never trip the breaker again; a released key that
// fails again is a new restart and counts. each must call its argument with
// the guard state of every key. It returns the re-arm, or nil.
func (ru *rules) rearm(fb *fleetBook, t int64, each func(func(*keyGuards))) *fleetChange {
	if ru.fleet == nil || !ru.fleet.rearm(&fb.f, t) {
		return nil
	}
	var held []*keyGuards
	each(func(g *keyGuards) {
		if g.held != 0 && g.cause == "" { // a cause's hold ends with the cause
			held = append(held, g)
		}
	})
	slices.SortFunc(held, func(a, b *keyGuards) int { return cmp.Compare(a.held, b.held) })
	if n := len(held); n > 0 {
		gap := ru.fleet.Cooldown / time.Duration(n)
		for i, g := range held {
			g.release = t + int64(time.Duration(i)*gap)
		}
	}
	return fb.f.change()
}

// proceed asks whether the held restart of g may go at t: it releases it
// once the breaker has re-armed or its cause was released, and its turn
// has come; a restart held for a cause may go as its probe. For a parked
// key it claims the probe if one is due. Call rearm first.
func (ru *rules) proceed(g *keyGuards, fb *fleetBook, key string, t int64, now time.Time) verdict {
	v := verdict{Now: now, Park: g.park, Restarts: g.restarts}
	switch {
	case g.park != nil:
		v.Probe = ru.claim(g, t)
		v.ProbeAt = probeAt(g, t, now)
	case g.held == 0:
	case g.cause != "" && ru.proceedCause(g, fb, key, t, &v):
	case ru.fleet != nil && fb.f.tripped:
		v.Held, v.Wait = true, ru.untilRearm(&fb.f, t)
	case g.release > t:
		v.Held, v.Wait = true, time.Duration(g.release-t)
	default:
		g.held, g.release = 0, 0
	}
	return v
}
