package examples

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/crashloopguard/crashloop"
	"golang.org/x/sync/errgroup"
)

// restartEverySecond is the usual hand-written restart loop of an errgroup
// worker, before crashloop: restart a second after each failure, forever.
func restartEverySecond(ctx context.Context, fn func(ctx context.Context) error) error {
	for {
		err := fn(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			return nil
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// An errgroup worker restarted by the usual loop fails forever: 61 starts
// in the first minute, and it only ends with the group's context.
func TestErrgroupAloneRestartsForever(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		starts := newStarts()
		ctx, cancel := context.WithCancel(context.Background())
		var g errgroup.Group
		defer func() { cancel(); _ = g.Wait() }() // on an early failure
		g.Go(func() error {
			return restartEverySecond(ctx, func(context.Context) error {
				starts.note()
				return errRefused
			})
		})

		time.Sleep(time.Minute)
		synctest.Wait()
		got := starts.times()
		if len(got) != 61 || got[60] != time.Minute {
			t.Errorf("starts in the first minute: %v, want 61, one a second", got)
		}
		time.Sleep(time.Minute) // still going
		synctest.Wait()
		if n := starts.n(); n != 121 {
			t.Errorf("starts in two minutes: %d, want 121", n)
		}

		cancel()
		if err := g.Wait(); !errors.Is(err, context.Canceled) {
			t.Errorf("Wait returned %v, want context.Canceled", err)
		}
	})
}

// With Supervise, the failing worker starts 4 times, 500ms, 1s and 1.5s
// apart, and returns the *ParkedError at 3s; the healthy worker keeps
// working, and the group's Wait returns the *ParkedError.
func TestErrgroupSuperviseParksCrashLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sup, evs := newSupervisor(t)
		epoch := time.Now()
		starts := newStarts()
		var ticks atomic.Int64
		var parkedAt atomic.Int64
		ctx, cancel := context.WithCancel(context.Background())
		var g errgroup.Group
		defer func() { cancel(); _ = g.Wait() }() // on an early failure
		g.Go(func() error {
			err := Supervise(ctx, sup, "ingest", func(context.Context) error {
				starts.note()
				return errRefused
			})
			parkedAt.Store(int64(time.Since(epoch)))
			return err
		})
		g.Go(func() error { return Supervise(ctx, sup, "api", ticker(&ticks)) })

		time.Sleep(time.Minute)
		synctest.Wait()
		if got := starts.times(); fmt.Sprint(got) != fmt.Sprint(wantStarts) {
			t.Errorf("starts of ingest: %v, want %v", got, wantStarts)
		}
		if at := time.Duration(parkedAt.Load()); at != 3*time.Second {
			t.Errorf("the ingest worker returned at %v, want 3s", at)
		}
		if rest := checkBudgetEvents(t, evs, "ingest"); len(rest) != 0 {
			t.Errorf("events of ingest after the park: %v", rest)
		}
		if n := ticks.Load(); n != 60 {
			t.Errorf("api ticked %d times in a minute, want 60", n)
		}
		// A worker started again for a parked key is refused at once.
		if err := Supervise(ctx, sup, "ingest", func(context.Context) error {
			starts.note()
			return nil
		}); starts.n() != 4 {
			t.Errorf("a parked key ran again")
		} else {
			checkParked(t, err, "ingest")
		}
		if n := evs.count(crashloop.EventStartupExhausted); n != 1 {
			t.Errorf("%d parks announced, want 1", n)
		}

		cancel()
		err := g.Wait()
		checkParked(t, err, "ingest")
		if errors.Is(err, context.Canceled) {
			t.Errorf("Wait returned %v, want the park, not the cancellation", err)
		}
	})
}
