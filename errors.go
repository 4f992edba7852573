package crashloop

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Test for them with errors.Is: the errors this package
// returns wrap them with details.
var (
	// ErrParked is matched by every *ParkedError: the session is parked and
	// will not be started again until an operator resumes it.
	ErrParked = errors.New("crashloop: session is parked")
	// ErrNotParked is returned by Resume for a key that is not parked.
	ErrNotParked = errors.New("crashloop: session is not parked")
	// ErrNeedsHuman is returned once a chain of reactive rescues reached its
	// limit, until the key is cleared.
	ErrNeedsHuman = errors.New("crashloop: crash loop needs a human")
	// ErrInvalidConfig is matched by every *ConfigError.
	ErrInvalidConfig = errors.New("crashloop: invalid configuration")
)

// ParkedError is the refusal of a parked session: errors.Is(err, ErrParked)
// holds, and errors.Unwrap gives LastError, the failure that parked it. A
// ParkedError is immutable once returned and may be shared between callers.
type ParkedError struct {
	Key       string    // the parked session's key
	Reason    string    // why it was parked, e.g. "respawn_budget_exhausted"
	LastError error     // the failure that parked it
	Attempts  int       // respawns counted in the window when it was parked
	Since     time.Time // when it was parked (the clock's reading, or the explicit now)
}

// Error returns a one-line description naming the key, the reason, the
// attempts and the last error.
func (e *ParkedError) Error() string {
	msg := fmt.Sprintf("crashloop: session %q is parked (%s after %d respawns)", e.Key, e.Reason, e.Attempts)
	if e.LastError != nil {
		msg += ": " + e.LastError.Error()
	}
	return msg
}

// Is reports whether target is ErrParked.
func (e *ParkedError) Is(target error) bool { return target == ErrParked }

// Unwrap returns LastError.
func (e *ParkedError) Unwrap() error { return e.LastError }

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
