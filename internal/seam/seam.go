// Package seam holds the language of crashloop's composed judgment: what a
// Supervisor asks of it (Judgment) and what it answers (Verdict). The
// Supervisor and package share both speak it; share exports it, as
// share.Judgment, share.Ending and share.Verdict, for a ledger's author.
// A Verdict is generic in the park and fleet change types only because
// they live in package crashloop, which imports this one.
package seam

import (
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
// the part of its decision that the guards' state settles. A shared
// ledger takes it whole, in one atomic step. It is a plain value; its
// zero value is not a judgment a Supervisor makes (it has no key and no
// Ending).
type Judgment struct {
	Key         string
	Ending      Ending
	Healthy     bool   // the run was healthy: the respawn window is cleared first
	Incarnation string // what ran under the key; the chain counts per incarnation
	Cause       string // the failure's text, kept with a park
	// Shared is the failure's cause as the hold on a shared cause compares
	// them: Cause with numbers, addresses and ids normalized; "" when the
	// hold is off or the run did not fail.
	Shared string
	Now    time.Time // the Supervisor's reading of its clock
	// Members and Failing count the fleet members and failing members,
	// leaving out the key judged: a park judges the failing fraction with
	// them and the parked key. A shared layer counts the deployment's.
	Members, Failing int
}

// Verdict is what a judgment decided and committed: everything the
// Supervisor needs to act on it and to announce it. It is a plain value;
// its zero value decides nothing (no park, no hold: a restart at once).
type Verdict[P, F any] struct {
	// Now is the time the step decided at: the Judgment's, or a shared
	// ledger's own clock when it reads its server's time.
	Now time.Time
	// Park is the key's park: made by this step when NewPark is set, else
	// found (the key was already parked, and nothing was recorded).
	Park    P
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
	// fleet breaker: exactly one step does each, whichever replica it
	// serves.
	Tripped F
	Rearmed F
	// Cause is the shared cause that holds the restart ("" for the fleet
	// breaker's hold, or none). CauseHeld and CauseReleased are set when
	// this step began or ended the hold on a cause: exactly one step does
	// each.
	Cause         string
	CauseHeld     *CauseChange
	CauseReleased *CauseChange
	// Probe reports that this step let a restart go as a probe: of the
	// key's park (a Proceed of a parked key whose probe was due), or of a
	// held cause. ProbeAt is when the parked key's next probe is due (zero:
	// none).
	Probe   bool
	ProbeAt time.Time
}

// CauseChange is the start or the end of a hold on a shared cause, with
// what the event announcing it carries. It is a plain value.
type CauseChange struct {
	Cause string // the normalized cause
	Keys  int    // distinct keys failing with it (held: in the window; released: keys let go)
}

// FleetChange is a change of the fleet breaker, a trip or a re-arm, with
// what the event announcing it carries: a Verdict holds the ones its step
// made. It is a plain value, safe to copy; its zero value
// is a change with no reason and no counts.
type FleetChange struct {
	Reason   string // why the breaker tripped: fleet_restart_rate or fleet_failing_fraction
	Restarts int    // restarts in the rolling hour
	Failing  int    // failing members, as noted
	Total    int    // members, as noted
}

// NewGuards is set by package crashloop: it returns the composed judgment
// over many keys for a crashloop.SupervisorConfig (see share.MemoryLedger),
// or the config's error.
var NewGuards func(cfg any) (any, error)
