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
)

// Reason codes: the stable value of Event.Reason, of the reason of every
// log line, of ParkedError.Reason and KeyStatus.Reason.
// A code never carries numbers; docs/monitoring.md tells which event
// carries each, and the codes of the crashloop command's own lines.
const (
	ReasonBudgetExhausted      = "respawn_budget_exhausted" // the respawn budget ran out: a park
	ReasonPermanent            = "permanent_error"          // a Permanent error, or a "park" exit rule: a park
	ReasonNeedsHuman           = "needs_human"              // the chain reached its limit: a park
	ReasonRestartLoopGuard     = "restart_loop_guard"       // the per-key guard tripped (a park, in a Supervisor)
	ReasonHourlyCap            = "hourly_restart_cap"       // the hourly cap tripped: a park
	ReasonFleetRestartRate     = "fleet_restart_rate"       // the fleet breaker tripped on its restarts an hour
	ReasonFleetFailingFraction = "fleet_failing_fraction"   // the fleet breaker tripped on the failing fraction
	ReasonCrashed              = "crashed"                  // a restart after a failure of a healthy run
	ReasonPlanned              = "planned"                  // a restart after Restart(err), or a "planned" exit rule
	ReasonCleanExit            = "clean_exit"               // a restart after a clean exit, with RestartOnCleanExit
	ReasonProbe                = "probe"                    // a resume by a healthy probe
	ReasonSharedCause          = "shared_cause"             // a hold on a shared cause, its events and its held restarts
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
	// Version numbers the park among the transitions of its key in a
	// shared layer (package share); 0 without one.
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
