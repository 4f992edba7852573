package crashloop

import (
	"cmp"
	"slices"
	"strconv"
	"time"
)

// Ending is how a run ended, as a Supervisor's judgment tells them apart.
// Its zero value is not an ending; String returns the names below.
type Ending int

// The endings of a run.
const (
	// EndingClean: the run returned nil and supervision ends.
	EndingClean Ending = iota + 1
	// EndingPermanent: Permanent(err); the key parks at once.
	EndingPermanent
	// EndingFailedStart: a failure before the run was healthy; the budget
	// judges it.
	EndingFailedStart
	// EndingCrash: a failure after a healthy run; the chain judges it.
	EndingCrash
	// EndingPlanned: Restart(err), or a clean exit after a healthy run
	// with RestartOnCleanExit; no budget, and the chain ends.
	EndingPlanned
)

// String returns "clean", "permanent", "failed_start", "crash" or "planned".
func (e Ending) String() string {
	switch e {
	case EndingClean:
		return "clean"
	case EndingPermanent:
		return "permanent"
	case EndingFailedStart:
		return "failed_start"
	case EndingCrash:
		return "crash"
	case EndingPlanned:
		return "planned"
	}
	return "Ending(" + strconv.Itoa(int(e)) + ")"
}

// Judgment is what a Supervisor asks about the end of one run of a key:
// the part of its decision that the guards' state settles. A Ledger takes
// it whole, in one atomic step. It is a plain value; its zero value is not
// a judgment a Supervisor makes (it has no key and no Ending).
type Judgment struct {
	Key         string
	Ending      Ending
	Healthy     bool      // the run was healthy: the respawn window is cleared first
	Incarnation string    // what ran under the key; the chain counts per incarnation
	Cause       string    // the failure's text, kept with a park
	Now         time.Time // the Supervisor's reading of its clock
	// Members and Failing count this Supervisor's fleet members and failing
	// members, leaving out the key judged: a park judges the failing
	// fraction with them and the parked key.
	Members, Failing int
}

// Verdict is what a step of a Ledger decided and committed: everything the
// Supervisor needs to act on it and to announce it. It is a plain value;
// its zero value decides nothing (no park, no hold: a restart at once).
type Verdict struct {
	// Now is the time the step decided at: the Judgment's, or the ledger's
	// own clock for a shared ledger that reads its server's time.
	Now time.Time
	// Park is the key's park: made by this step when NewPark is set, else
	// found (the key was already parked, and nothing was recorded).
	Park    *ParkedError
	NewPark bool
	// Attempt is, for a failed start, the respawn's number in the budget's
	// window.
	Attempt int
	// Restarts is the key's count of restarts since it was first run or
	// last resumed, this one included.
	Restarts int
	// Held reports that the fleet breaker holds the restart; Wait is then
	// how long until the breaker re-arms, or (from Proceed) until the
	// restart's turn to leave. A Proceed verdict that is not Held
	// releases the restart.
	Held bool
	Wait time.Duration
	// Tripped and Rearmed are set when this step tripped or re-armed the
	// fleet breaker: exactly one step does each, whichever Supervisor it
	// serves.
	Tripped *FleetChange
	Rearmed *FleetChange
}

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
	held     uint64 // while held by the fleet breaker: the order it was held in (0: not held)
	release  int64  // once the breaker re-armed: when the held restart may leave
}

// settle clears the respawn window of a key that is not parked: a run that
// became healthy was a good start, so the next failure starts afresh.
func (g *keyGuards) settle() {
	if g.park == nil {
		g.respawns.clear()
	}
}

// resume clears the park and everything the guards counted: a full budget,
// a fresh chain, empty per-key windows and no restarts.
func (g *keyGuards) resume() {
	*g = keyGuards{respawns: g.respawns, guard: g.guard, hourly: g.hourly}
	g.respawns.clear()
	g.guard.clear()
	g.hourly.clear()
}

// fleetBook is the fleet breaker of a Supervisor or a ledger, with the
// counter that numbers the restarts it holds.
type fleetBook struct {
	f     fleetState
	holds uint64
}

// rules is the part of a SupervisorConfig that the guards judge by.
type rules struct {
	budget BudgetConfig
	chain  *ChainConfig
	guard  *GuardConfig
	hourly GuardConfig // MaxRestarts 0: off
	fleet  *FleetConfig
}

func rulesOf(cfg SupervisorConfig) rules {
	return rules{budget: cfg.Budget, chain: cfg.Chain, guard: cfg.Guard, fleet: cfg.Fleet,
		hourly: GuardConfig{MaxRestarts: cfg.HourlyCap, Window: time.Hour}}
}

// judge decides j at t on the guard state g of its key and the fleet book
// fb, and commits the decision there. A park records no restart; a restart
// passes every guard first. Call rearm first.
func (ru *rules) judge(g *keyGuards, fb *fleetBook, j *Judgment, t int64, now time.Time) Verdict {
	v := Verdict{Now: now, Park: g.park, Restarts: g.restarts}
	if g.park != nil {
		return v
	}
	if j.Healthy || j.Ending == EndingClean {
		g.settle() // a healthy run, or one that finished its work, was a good start
	}
	if j.Ending == EndingClean {
		g.guard.clear() // a clean run clears the fast guard
		return v
	}
	switch j.Ending {
	case EndingPermanent:
		return ru.park(g, fb, j, ReasonPermanent, ru.budget.count(&g.respawns, t), t, now)
	case EndingFailedStart:
		if n := ru.budget.count(&g.respawns, t); n >= ru.budget.MaxRespawns {
			return ru.park(g, fb, j, ReasonBudgetExhausted, n, t, now)
		}
	case EndingCrash:
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
	case EndingFailedStart:
		v.Attempt, _ = ru.budget.respawn(&g.respawns, t)
	case EndingCrash, EndingPlanned:
		if c := ru.chain; c != nil {
			c.rescue(&g.chain, j.Incarnation, j.Ending == EndingCrash, t) // a planned restart ends the chain
		}
	}
	if c := ru.guard; c != nil {
		g.guard.push(t, c.MaxRestarts)
	}
	if c := ru.hourly; c.MaxRestarts > 0 {
		g.hourly.push(t, c.MaxRestarts)
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
// failing fraction: the Judgment's counts and the parked key.
func (ru *rules) park(g *keyGuards, fb *fleetBook, j *Judgment, reason string, n int, t int64, now time.Time) Verdict {
	g.park = &ParkedError{Key: j.Key, Reason: reason, Attempts: n, Since: now}
	if j.Cause != "" {
		g.park.LastError = restoreError(&j.Cause, reason)
	}
	g.held, g.release = 0, 0
	v := Verdict{Now: now, Park: g.park, NewPark: true, Restarts: g.restarts}
	if ru.fleet != nil {
		if _, trippedNow := ru.fleet.noteState(&fb.f, j.Failing+1, j.Members+1, t); trippedNow {
			v.Tripped = fb.f.change()
		}
	}
	return v
}

// untilRearm returns how long after t the tripped fleet breaker re-arms (at
// least 1ns, so that a hold always waits).
func (ru *rules) untilRearm(f *fleetState, t int64) time.Duration {
	left := ru.fleet.Cooldown - time.Duration(age(t, f.since))
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
func (ru *rules) rearm(fb *fleetBook, t int64, each func(func(*keyGuards))) *FleetChange {
	if ru.fleet == nil || !ru.fleet.rearm(&fb.f, t) {
		return nil
	}
	var held []*keyGuards
	each(func(g *keyGuards) {
		if g.held != 0 {
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
// once the breaker has re-armed and its turn has come. Call rearm first.
func (ru *rules) proceed(g *keyGuards, fb *fleetBook, t int64, now time.Time) Verdict {
	v := Verdict{Now: now, Park: g.park, Restarts: g.restarts}
	switch {
	case g.park != nil || g.held == 0:
	case ru.fleet != nil && fb.f.tripped:
		v.Held, v.Wait = true, ru.untilRearm(&fb.f, t)
	case g.release > t:
		v.Held, v.Wait = true, time.Duration(g.release-t)
	default:
		g.held, g.release = 0, 0
	}
	return v
}
