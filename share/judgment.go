package share

import (
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/seam"
)

// The language of the composed judgment that a Supervisor and a Ledger
// exchange. docs/ledger.md tells each field.

// Judgment is what a Supervisor asks about the end of one run of a key:
// the key, its Ending, whether the run was healthy, its incarnation, the
// failure's text and the Supervisor's time. A Ledger takes it whole, in
// one atomic step.
type Judgment = seam.Judgment

// Ending is how a run ended: EndingClean, EndingPermanent,
// EndingFailedStart, EndingCrash or EndingPlanned.
type Ending = seam.Ending

// The endings of a run.
const (
	EndingClean       = seam.EndingClean       // the run returned nil and supervision ends
	EndingPermanent   = seam.EndingPermanent   // crashloop.Permanent(err): the key parks at once
	EndingFailedStart = seam.EndingFailedStart // a failure before the run was healthy: the budget judges it
	EndingCrash       = seam.EndingCrash       // a failure after a healthy run: the chain judges it
	EndingPlanned     = seam.EndingPlanned     // crashloop.Restart(err), or a clean exit with RestartOnCleanExit
)

// Verdict is what a step of a Ledger decided and committed: the time it
// decided at, the key's park (NewPark when the step made it), the
// respawn's Attempt, the key's Restarts, whether the fleet breaker Held
// the restart and for how long (Wait), and the breaker's trip or re-arm
// the step made (Tripped, Rearmed). Its zero value is a restart at once.
type Verdict = seam.Verdict[*crashloop.ParkedError, *FleetChange]

// FleetChange is a trip or a re-arm of the fleet breaker that a step made:
// its reason, the restarts in the rolling hour, and the failing and total
// members as noted.
type FleetChange = seam.FleetChange

// guards is the composed judgment over many keys, the one a Supervisor
// makes, without its records or events: the state a MemoryLedger keeps.
type guards interface {
	Judge(j Judgment) Verdict
	Proceed(key string, now time.Time) Verdict
	Park(key string) *crashloop.ParkedError
	SetPark(pe *crashloop.ParkedError)
	Forget(key string)
	Fleet(now time.Time, failing, total int) crashloop.FleetStatus
}

// newGuards returns the composed judgment of cfg.
func newGuards(cfg crashloop.SupervisorConfig) (guards, error) {
	g, err := seam.NewGuards(cfg)
	if err != nil {
		return nil, err
	}
	return g.(guards), nil
}

// CauseChange is the start or the end of a hold on a shared cause that a
// step made (Verdict.CauseHeld, CauseReleased): the normalized cause and
// its keys.
type CauseChange = seam.CauseChange
