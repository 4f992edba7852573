package crashloop

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"
)

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

// runState is what the context of one run carries: its readiness signal.
type runState struct {
	s     *Supervisor
	key   string
	ready atomic.Bool
	reset atomic.Bool // ResetRestarts was called
	done  atomic.Bool // the run has ended: a late Ready changes nothing
}

type runStateKey struct{}

// Ready tells the Supervisor running fn that this run is up and healthy
// (like sd_notify READY=1): the budget's window is cleared at once, and a
// later failure is a reactive rescue rather than a failed start. Call it
// with the context fn received, from fn or from any goroutine while the run
// lasts (it is safe for concurrent use); with any other context, or after
// that run has ended (a goroutine fn left behind), it does nothing.
func Ready(ctx context.Context) {
	if ctx == nil {
		return
	}
	if rs, ok := ctx.Value(runStateKey{}).(*runState); ok && !rs.done.Load() && rs.ready.CompareAndSwap(false, true) {
		rs.s.settle(rs.key)
		rs.s.probeHealthy(ctx, rs.key, rs.s.o.clock.Now())
	}
}

// ResetRestarts tells the Supervisor running fn that its key starts
// afresh, as sd_notify's RESTART_RESET=1 does for systemd: when the run
// ends, its key's respawn window and chain of rescues are cleared before
// the end is judged (on a shared Ledger too), and the key gets its next
// incarnation ("KEY#N"). The window this Supervisor keeps is cleared at
// once. It does not make the run healthy: see Ready. Call it with the
// context fn received, from fn or from any goroutine while the run lasts
// (it is safe for concurrent use); with any other context, or after that
// run has ended, it does nothing.
func ResetRestarts(ctx context.Context) {
	if ctx == nil {
		return
	}
	if rs, ok := ctx.Value(runStateKey{}).(*runState); ok && !rs.done.Load() {
		rs.reset.Store(true)
		rs.s.settle(rs.key)
	}
}

// settle clears the respawn window of key after a healthy start.
func (s *Supervisor) settle(key string) {
	s.mu.Lock()
	if r := s.keys[key]; r != nil {
		r.settle()
	}
	s.mu.Unlock()
}

// runOnce runs fn once as a run of key (which begin marked running) and
// judges how it ended. It returns the context's error, with no decision,
// when ctx ended.
func (s *Supervisor) runOnce(ctx context.Context, key string, fn func(context.Context) error) (Decision, error) {
	start := s.started(key)
	rs := &runState{s: s, key: key}
	stop := s.watchProbe(ctx, key, rs)
	err := call(context.WithValue(ctx, runStateKey{}, rs), fn)
	rs.done.Store(true)
	stop()
	if ctx.Err() != nil {
		return Decision{}, ctx.Err()
	}
	return s.DecideAt(ctx, key, RunResult{Err: err, Started: start, Ready: rs.ready.Load(), Reset: rs.reset.Load()}, s.o.clock.Now()), nil
}

// started marks a run of key as started and returns when.
func (s *Supervisor) started(key string) time.Time {
	now := s.o.clock.Now()
	s.mu.Lock()
	if r := s.keys[key]; r != nil && r.park == nil { // a probe's key stays parked until the probe is healthy
		r.held, r.release, r.cause = 0, 0, ""
		s.setState(r, StateRunning, now)
	}
	s.mu.Unlock()
	s.save(now, false)
	return now
}

// call calls fn, turning a panic into a *PanicError.
func call(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return fn(ctx)
}
