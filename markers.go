package crashloop

import (
	"fmt"
	"sync/atomic"
)

type atomicBool = atomic.Bool

// Permanent marks err as a failure that restarting cannot fix (a missing
// binary, a bad configuration): a Supervisor parks the key at once with
// reason "permanent_error", like s6's exit 125 or systemd's
// RestartPreventExitStatus. errors.Unwrap gives err; Permanent(nil) is a
// permanent failure with no cause.
func Permanent(err error) error { return &permanentError{err: err} }

type permanentError struct{ err error }

func (e *permanentError) Error() string {
	if e.err == nil {
		return "crashloop: permanent failure"
	}
	return "crashloop: permanent failure: " + e.err.Error()
}

func (e *permanentError) Unwrap() error { return e.err }

// Restart marks an intentional exit (a reload, a self-upgrade): a Supervisor
// restarts at once, with no backoff and no budget spent, and the chain of
// reactive rescues ends. The per-key guards and the fleet breaker still see
// the restart, so a function that restarts itself in a tight loop is still
// caught when they are on. errors.Unwrap gives err, which may be nil.
func Restart(err error) error { return &restartError{err: err} }

type restartError struct{ err error }

func (e *restartError) Error() string {
	if e.err == nil {
		return "crashloop: planned restart"
	}
	return "crashloop: planned restart: " + e.err.Error()
}

func (e *restartError) Unwrap() error { return e.err }

// PanicError is the failure of a run that panicked: the supervised function
// is treated as failed, and the Supervisor keeps going. Value is what was
// passed to panic and Stack the goroutine's stack at that point. If Value is
// an error, errors.Unwrap gives it.
type PanicError struct {
	Value any
	Stack []byte
}

// Error returns "crashloop: panic: VALUE".
func (e *PanicError) Error() string { return fmt.Sprintf("crashloop: panic: %v", e.Value) }

// Unwrap returns Value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
