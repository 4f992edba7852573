package crashloop

import (
	"errors"
	"fmt"
	"time"

	"github.com/crashloopguard/crashloop/internal/errtext"
)

// Sentinel errors. Test for them with errors.Is: the errors this package
// returns wrap them with details.
var (
	// ErrParked is matched by every *ParkedError: the key is parked and
	// will not be started again until an operator resumes it.
	ErrParked = errors.New("crashloop: key is parked")
	// ErrNotParked is returned by Resume for a key that is not parked.
	ErrNotParked = errors.New("crashloop: key is not parked")
	// ErrNeedsHuman is returned once a chain of reactive rescues reached its
	// limit, until the key is cleared.
	ErrNeedsHuman = errors.New("crashloop: crash loop needs a human")
	// ErrInvalidConfig is matched by every *ConfigError.
	ErrInvalidConfig = errors.New("crashloop: invalid configuration")
	// ErrInvalidKey is returned for the empty key, which names nothing.
	ErrInvalidKey = errors.New("crashloop: invalid key")
	// ErrAlreadyRunning is returned by Supervisor.Run (and Wrap, Process)
	// for a key that another run in the same Supervisor is already
	// supervising, and by Supervisor.Forget for a running key.
	ErrAlreadyRunning = errors.New("crashloop: key is already running")
	// ErrChanged is matched by every *ChangedError: a shared ledger refused
	// a step that named a version of a key older than the key's current
	// one.
	ErrChanged = errors.New("crashloop: key changed since the version named")
	// ErrStateLost is matched by every *StateLostError: a shared ledger
	// found that its server lost its state.
	ErrStateLost = errors.New("crashloop: shared store lost its state")
)

// StateLostError is a shared ledger's refusal of a call because its server
// lost the state the ledger knew (a failover that lost writes, a flush, a
// restart without persistence): the call changed nothing. A ledger that
// finds a loss outside a call (a periodic check, a notice) tells it in
// LedgerChange.StateLost instead. errors.Is(err, ErrStateLost) holds. It
// is a plain value.
type StateLostError struct {
	// Announce is set for exactly one replica of a deployment for each
	// loss: the one that announces EventStoreStateLost. A ledger whose
	// claim of the announcement could not be sent at once may tell the
	// same loss (the same Epoch) again later, with Announce set.
	Announce bool
	// Epoch names the state the ledger found and adopted, so that a
	// Supervisor writes back once for each loss however many times it is
	// told of it; "" for a ledger that does not name its states (each
	// report is then a loss of its own).
	Epoch string
	// Reason says what lost the state: "" when the ledger found the state
	// gone or replaced (a flush, a restart without persistence),
	// ReasonFailover when the server kept it but lost its last
	// acknowledged writes (a failover to a replica they had not reached).
	// EventStoreStateLost carries it.
	Reason string
}

// Error says that the state was lost.
func (e *StateLostError) Error() string { return ErrStateLost.Error() }

// Is matches ErrStateLost.
func (e *StateLostError) Is(target error) bool { return target == ErrStateLost }

// ChangedError is a shared ledger's refusal of a resume, forget or
// write-back that named a version of Key other than the key's current one:
// something happened to the key since its caller learnt of it, and the step
// changed nothing. It carries the key as it stands: its current Version and
// its Park (nil when it is not parked). errors.Is(err, ErrChanged) holds,
// and so does errors.Is(err, ErrNotParked) when the key is not parked.
type ChangedError struct {
	Key     string
	Version int64
	Park    *ParkedError
}

// Error names the key, its current version and whether it is parked.
func (e *ChangedError) Error() string {
	if e.Park == nil {
		return fmt.Sprintf("crashloop: key %q changed (now at version %d, not parked)", e.Key, e.Version)
	}
	return fmt.Sprintf("crashloop: key %q changed (now at version %d, parked: %s)", e.Key, e.Version, e.Park.Reason)
}

// Is matches ErrChanged, and ErrNotParked for a key that is not parked.
func (e *ChangedError) Is(target error) bool {
	return target == ErrChanged || (target == ErrNotParked && e.Park == nil)
}

// Reason codes: the stable value of Event.Reason, of the reason attribute
// of every log line (LogEvents and the crashloop command's own lines), of
// ParkedError.Reason and KeyStatus.Reason, and of FleetChange.Reason. A
// code never carries numbers: they are in the event's fields (Attempts,
// Limit, Window, Failing, Total). docs/monitoring.md has the table of which
// event carries each code.
const (
	// ReasonBudgetExhausted: the respawn budget ran out; a park, announced
	// by EventStartupExhausted.
	ReasonBudgetExhausted = "respawn_budget_exhausted"
	// ReasonPermanent: the run returned an error marked with Permanent; a
	// park, announced by EventStartupExhausted.
	ReasonPermanent = "permanent_error"
	// ReasonNeedsHuman: the chain of reactive rescues reached its limit; a
	// park, announced by EventChainEscalated.
	ReasonNeedsHuman = "needs_human"
	// ReasonRestartLoopGuard: the per-key fast guard (a RestartLoopGuard)
	// tripped; in a Supervisor a park. Announced by EventGuardTripped.
	ReasonRestartLoopGuard = "restart_loop_guard"
	// ReasonHourlyCap: the per-key hourly cap tripped; a park, announced by
	// EventGuardTripped.
	ReasonHourlyCap = "hourly_restart_cap"
	// ReasonWatchdog: the crashloop command stopped a run that stopped
	// feeding systemd's watchdog (WATCHDOG=1) or asked for it
	// (WATCHDOG=trigger). It is the reason of the command's own log line,
	// not of an Event.
	ReasonWatchdog = "watchdog"
	// ReasonUnhealthy: the crashloop command stopped a run whose health
	// check (--health-cmd) failed too many times in a row, as Docker's
	// HEALTHCHECK marks a container unhealthy. It is the reason of the
	// command's own log line, not of an Event.
	ReasonUnhealthy = "unhealthy"
	// ReasonOOMKilled: the kernel's OOM killer killed a run of the
	// crashloop command's program (the oom_kill count of its memory cgroup
	// rose). It is the reason of the command's own log line, not of an
	// Event; the rule "oom" of ExitRules matches such an end.
	ReasonOOMKilled = "oom_killed"
	// ReasonFleetRestartRate: the fleet breaker tripped on RestartsPerHour
	// restarts in the rolling hour (Event.Attempts). Announced by
	// EventFleetTripped, and by the EventFleetRearmed that ends that trip.
	ReasonFleetRestartRate = "fleet_restart_rate"
	// ReasonFleetFailingFraction: the fleet breaker tripped on the failing
	// fraction of the fleet (Event.Failing of Event.Total). Announced by
	// EventFleetTripped, and by the EventFleetRearmed that ends that trip.
	ReasonFleetFailingFraction = "fleet_failing_fraction"
	// ReasonCrashed: EventRestartScheduled of a run that failed after it was
	// healthy.
	ReasonCrashed = "crashed"
	// ReasonPlanned: EventRestartScheduled of a run that ended with an
	// error marked with Restart (an intentional exit).
	ReasonPlanned = "planned"
	// ReasonCleanExit: EventRestartScheduled of a run that returned nil
	// after it was healthy, with RestartOnCleanExit.
	ReasonCleanExit = "clean_exit"
	// ReasonFailover: EventStoreStateLost of a shared ledger whose server
	// kept its state but lost its last acknowledged writes (a failover to
	// a replica they had not reached). A loss with no reason is a state
	// gone or replaced (a flush, a restart without persistence).
	ReasonFailover = "failover"
)

// checkKey refuses the empty key.
func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: the key is empty", ErrInvalidKey)
	}
	return nil
}

// ParkedError is the refusal of a parked key: errors.Is(err, ErrParked)
// holds, and errors.Unwrap gives LastError, the failure that parked it. A
// ParkedError is immutable once returned and may be shared between callers.
type ParkedError struct {
	Key       string    // the parked key
	Reason    string    // why it was parked, e.g. "respawn_budget_exhausted"
	LastError error     // the failure that parked it
	Attempts  int       // what the deciding guard counted: respawns, reactive rescues or restarts
	Since     time.Time // when it was parked (the clock's reading, or the explicit now)
	// Version is, for a park a shared Ledger made, the version of the
	// transition that made it (see Ledger): what a Resume names. It is 0
	// for a park of a Supervisor without a shared ledger. For a park a
	// shared Supervisor decided alone, and in the parks given to
	// Ledger.Restore, it is the version of the key's last transition the
	// Supervisor knew when it parked the key (0 for none).
	Version int64
}

// Error returns a one-line description naming the key, the reason, what was
// counted, how to recover and the last error, e.g. `crashloop: key
// "worker-7" is parked (respawn_budget_exhausted after 3 respawns; resume it
// once the cause is fixed): dial tcp: connection refused`.
func (e *ParkedError) Error() string {
	what := e.Reason
	if noun := attemptNoun(e.Reason); noun != "" {
		what += " after " + errtext.Plural(e.Attempts, noun)
	}
	msg := fmt.Sprintf("crashloop: key %q is parked (%s; resume it once the cause is fixed)", e.Key, what)
	if e.LastError != nil {
		msg += ": " + e.LastError.Error()
	}
	return msg
}

// attemptNoun names what the guard behind reason counts ("" when it counts
// nothing).
func attemptNoun(reason string) string {
	switch reason {
	case ReasonBudgetExhausted:
		return "respawn"
	case ReasonNeedsHuman:
		return "reactive rescue"
	case ReasonRestartLoopGuard, ReasonHourlyCap:
		return "restart"
	}
	return ""
}

// Is reports whether target is ErrParked.
func (e *ParkedError) Is(target error) bool { return target == ErrParked }

// Unwrap returns LastError.
func (e *ParkedError) Unwrap() error { return e.LastError }

// needsHumanError matches ErrNeedsHuman and says which key and chain: the
// refusal of a ChainDetector, and the LastError of a Supervisor's
// needs_human park (with the crash that found the chain full as cause).
type needsHumanError struct {
	key, incarnation string
	chain            int
	cause            error
}

func (e *needsHumanError) Error() string {
	msg := fmt.Sprintf("crashloop: %q needs a human: %s", e.key, chainReason(e.chain))
	if e.cause != nil {
		msg += ": " + e.cause.Error()
	}
	return msg
}

func (e *needsHumanError) Is(target error) bool { return target == ErrNeedsHuman }

func (e *needsHumanError) Unwrap() error { return e.cause }

// chainReason says why a chain of n rescues needs a human, in the words of
// the rescue daemon that first built this guard: the text of the
// needs-human error and of the log line of EventChainEscalated (whose
// Reason is the code ReasonNeedsHuman).
func chainReason(n int) string {
	return "crash-loop: gave up after " + errtext.Plural(n, "reactive rescue")
}

// ConfigError is a rejected setting: errors.Is(err, ErrInvalidConfig) holds.
// Field names the setting in snake_case as a user writes it in a config file
// (with a dotted path inside a SupervisorConfig, e.g. "budget.window"); Value
// is the rejected value and Rule the rule it broke, e.g. ">= 1".
type ConfigError struct {
	Field string
	Value any
	Rule  string
}

// Error returns "crashloop: invalid configuration: FIELD = VALUE: must be RULE".
func (e *ConfigError) Error() string {
	return fmt.Sprintf("crashloop: invalid configuration: %s = %v: must be %s", e.Field, e.Value, e.Rule)
}

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// prefixed returns err with its field placed under path (for nested configs).
func prefixed(path string, err error) error {
	var ce *ConfigError
	if errors.As(err, &ce) {
		return &ConfigError{Field: path + "." + ce.Field, Value: ce.Value, Rule: ce.Rule}
	}
	return err
}
