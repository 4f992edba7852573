package examples

import (
	"context"
	"time"

	"github.com/crashloopguard/crashloop"
)

// Supervise runs fn under key in a restart loop of its own, for an
// errgroup worker:
//
//	g.Go(func() error { return Supervise(ctx, sup, "ingest", ingest) })
//
// errgroup runs each function once; the loop that restarts a worker is the
// caller's, and the usual one (restart after a second, forever) never gives
// up. This one asks sup before each run (Proceed: a parked key is refused
// before fn runs, a held one waits for the fleet breaker) and after it
// (Decide: restart after the backoff, or stop), under ctx, which also
// bounds every wait on a shared ledger. It returns nil after a clean exit,
// ctx.Err() once ctx ends, and the *crashloop.ParkedError once
// the budget is spent; with errgroup.WithContext that error also cancels
// the other workers, with a plain errgroup.Group they keep working and
// Wait returns it when they are done.
//
// This is the loop Supervisor.Run runs; write one like it when the loop does
// something of its own between runs (metrics, a re-dial, a log line), and
// call sup.Run otherwise. Unlike Run, this loop does not recover a panic of
// fn, and fn cannot report readiness with crashloop.Ready: a run counts as a
// healthy start once it lasted the config's HealthyAfter (10s). The loop
// reads the real clock, which is the Supervisor's default clock.
func Supervise(ctx context.Context, sup *crashloop.Supervisor, key string, fn func(ctx context.Context) error) error {
	d := sup.Proceed(ctx, key)
	for {
		switch d.Action {
		case crashloop.ActionStop:
			return d.Err
		case crashloop.ActionHold:
			if err := sleep(ctx, d.Wait); err != nil {
				return err
			}
			d = sup.Proceed(ctx, key)
			continue
		}
		if err := sleep(ctx, d.Wait); err != nil {
			return err
		}
		started := time.Now()
		err := fn(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d = sup.Decide(ctx, key, crashloop.RunResult{Err: err, Started: started})
	}
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
