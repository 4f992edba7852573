package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/crashloopguard/crashloop/internal/ctxdone"
	"github.com/redis/go-redis/v9"
)

// eval runs a step of the script (see program) on keys with args, and returns as soon as either
// the reply comes, the Store's Timeout passes, or ctx ends: then with
// ctx's error.
//
// go-redis bounds a command's socket reads and writes by its context's
// deadline only: a cancel does not wake a read that waits on a stalled
// server, which would keep the caller waiting until the Timeout. So a
// command under a context that can be cancelled runs on a goroutine of its
// own, under a context that keeps ctx's values and deadline but not its
// cancel, bounded by the Timeout; the caller waits for its reply or for
// ctx, whichever comes first. A command the caller left behind ends by the
// Timeout at the latest, when go-redis drops its connection (a command that
// timed out leaves its connection out of step, and go-redis closes it); one
// whose reply comes first leaves its connection in step, back in the pool.
// The server may still run a command the caller left behind: the call
// returned ctx's error, but the step may have been applied (see
// docs/redis.md, Cancellation). A context that cannot be cancelled (Done
// returns nil, as context.Background's does) runs the command in place.
func (s *Store) eval(ctx context.Context, keys []string, args []any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // sends nothing
	}
	if ctx.Done() == nil {
		ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
		defer cancel()
		return s.script.run(ctx, s.rdb, &s.scripts, keys, args)
	}
	due := time.Now().Add(s.o.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(due) {
		due = d
	}
	cctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), due)
	done := make(chan evalResult, 1) // the goroutine never blocks on a caller gone
	go func() {
		defer cancel()
		res, err := s.script.run(cctx, s.rdb, &s.scripts, keys, args)
		done <- evalResult{res, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			if err := ctxdone.Err(ctx); err != nil {
				return nil, err // the caller's deadline ended the read
			}
		}
		return r.res, r.err
	case <-ctx.Done():
		select {
		case r := <-done:
			if r.err == nil || errors.Is(r.err, redis.Nil) {
				return r.res, r.err // the reply came too: it says what the server did
			}
		default:
		}
		return nil, ctx.Err()
	}
}

type evalResult struct {
	res any
	err error
}
