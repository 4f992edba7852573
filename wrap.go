package crashloop

import (
	"context"
	"errors"
	"fmt"
)

// Wrap returns fn as a function that another tool's restart loop calls, each
// call one supervised run of key: a suture service's Serve, an errgroup
// worker, a goroutine a framework relaunches. A call returns at once while
// key is parked; else it runs fn, judges the run as Decide does, and sleeps
// the backoff it decided before it returns fn's error, so that the caller's
// loop restarts fn when it should.
//
// After a clean exit, or when a guard gives up, a call returns the refusal of
// WithRefusal (with the *ParkedError when parked), so that a loop which
// restarts a function that returned nil stops. docs/supervisor.md tells each
// case. Calls for one key must not overlap: an overlapping call returns an
// error matching ErrAlreadyRunning. The returned function is safe for
// concurrent use with other keys.
func (s *Supervisor) Wrap(key string, fn func(ctx context.Context) error, opts ...RunOption) func(ctx context.Context) error {
	ro := buildRunOptions(opts)
	return func(ctx context.Context) error {
		var runErr error
		d, err := s.attempt(ctx, key, ro, func(ctx context.Context) error {
			runErr = fn(ctx)
			return runErr
		})
		if err != nil {
			return ro.refuse(err)
		}
		done, err := s.follow(ctx, key, d)
		s.end(key, err == nil && !done) // between two calls the key waits in its loop
		switch {
		case err != nil:
			return ro.refuse(err)
		case done:
			return ro.refusal
		}
		var planned *restartError
		if errors.As(runErr, &planned) {
			return planned.err
		}
		return runErr
	}
}

// Process runs fn once as one supervised run of key and returns the
// Decision, for work queues that retry an item by putting it back. Requeue
// the item after d.Wait unless d.Action is ActionStop. On ActionStop the item
// is done (d.Err nil) or its key is parked (d.Err the *ParkedError). While
// the key is parked or held, Process does not run fn: it returns the park, or
// the hold and its wait. Forget a key that names one item once the item is
// done for good. Calls for one key must not overlap: an overlapping call
// returns ActionStop with an error matching ErrAlreadyRunning. It is safe for
// concurrent use with other keys.
func (s *Supervisor) Process(ctx context.Context, key string, fn func(ctx context.Context) error, opts ...RunOption) Decision {
	ro := buildRunOptions(opts)
	d, err := s.attempt(ctx, key, ro, fn)
	s.end(key, err == nil && d.Action != ActionStop) // a requeued item waits in its queue
	if err != nil {
		return Decision{Action: ActionStop, Err: ro.refuse(err)}
	}
	if d.Action == ActionStop && s.resumedSince(key, d.Err) {
		return Decision{Action: ActionRestart} // a handler resumed the key: the Resume wins
	}
	d.Err = ro.refuse(d.Err)
	return d
}

// attempt is one run of Wrap or Process: it refuses a parked key, returns
// the hold of a held one without running fn, and otherwise runs fn once and
// judges it. Unless it returns an error, the key stays marked running: the
// caller ends it.
func (s *Supervisor) attempt(ctx context.Context, key string, ro runOptions, fn func(context.Context) error) (Decision, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if fn == nil {
		return Decision{}, fmt.Errorf("crashloop: run of %q: fn is nil", key)
	}
	if err := s.begin(ctx, key, ro.incarnation, false); err != nil {
		return Decision{}, err
	}
	if d := s.ProceedAt(ctx, key, s.o.clock.Now()); d.Action != ActionRestart {
		return d, nil
	}
	d, err := s.runOnce(ctx, key, fn)
	if err != nil {
		s.end(key, false)
	}
	return d, err
}
