package crashloop_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// errDoNotRestart stands for a peer's "do not restart me" error, such as
// suture.ErrDoNotRestart.
var errDoNotRestart = errors.New("do not restart")

// Wrap turns a function into one supervised run per call, for a peer's
// restart loop: each call waits the decided backoff before it returns, and
// once the key parks the call returns the configured refusal without
// running the function again.
func TestWrapGivesUpWithTheRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, starts := newRecorder(), newSupStarts()
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig(), crashloop.WithEventHandler(rec))
		boom := errors.New("boom")
		serve := s.Wrap("svc", func(context.Context) error {
			starts.mark()
			return boom
		}, crashloop.WithRefusal(errDoNotRestart))

		// The peer's loop: restart until told not to.
		var errs []error
		for {
			err := serve(t.Context())
			errs = append(errs, err)
			if errors.Is(err, errDoNotRestart) {
				break
			}
		}
		assert.Equal(t, []time.Duration{0, millis(500), millis(1500), millis(3000)}, starts.times())
		require.Len(t, errs, 4)
		for _, err := range errs[:3] {
			assert.Same(t, boom, err, "a restart returns the run's error, after its backoff")
		}
		var pe *crashloop.ParkedError
		require.ErrorAs(t, errs[3], &pe)
		assert.Equal(t, crashloop.ReasonBudgetExhausted, pe.Reason)
		assert.ErrorIs(t, errs[3], crashloop.ErrParked)
		assert.Equal(t, 1, rec.Of(crashloop.EventStartupExhausted))

		// A parked key is refused at once, without running fn.
		err := serve(t.Context())
		assert.ErrorIs(t, err, errDoNotRestart)
		assert.ErrorIs(t, err, pe)
		assert.Len(t, starts.times(), 4)

		// After a Resume it runs again with a full budget.
		require.NoError(t, s.Resume(context.Background(), "svc"))
		assert.Same(t, boom, serve(t.Context()))
		assert.Len(t, starts.times(), 5)
	})
}

func TestWrapCleanExitAndPlannedRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig())
		reload := errors.New("reload")
		n := 0
		serve := s.Wrap("svc", func(ctx context.Context) error {
			n++
			if n == 1 {
				return crashloop.Restart(reload)
			}
			return nil
		})
		assert.Same(t, reload, serve(t.Context()), "a planned restart returns its cause, at once")
		assert.NoError(t, serve(t.Context()), "a clean exit ends supervision; without a refusal, nil")
		assert.Equal(t, crashloop.StateExited, s.Status(context.Background()).Keys["svc"].State)
		assert.Equal(t, "svc#1", s.Status(context.Background()).Keys["svc"].Incarnation, "the calls of one wrapped function share an incarnation")

		// With a refusal, a clean exit returns it: a peer that restarts a
		// function returning nil (suture) then stops.
		done := s.Wrap("job", func(context.Context) error { return nil }, crashloop.WithRefusal(errDoNotRestart))
		assert.Same(t, errDoNotRestart, done(t.Context()))
	})
}

// Process is one supervised attempt for a work queue: it says when to
// requeue the item, and when to drop it because its key is parked.
func TestProcessTellsAQueueWhatToDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig(), crashloop.WithEventHandler(rec))
		runs := 0
		fail := func(context.Context) error { runs++; return errors.New("bad item") }

		var got []crashloop.Decision
		for range 4 {
			d := s.Process(t.Context(), "item-7", fail, crashloop.WithRefusal(errDoNotRestart))
			got = append(got, d)
			time.Sleep(d.Wait) // the queue's AddAfter
		}
		require.Len(t, got, 4)
		assert.Equal(t, []crashloop.Decision{
			{Action: crashloop.ActionRestart, Wait: millis(500)},
			{Action: crashloop.ActionRestart, Wait: time.Second},
			{Action: crashloop.ActionRestart, Wait: millis(1500)},
		}, got[:3])
		assert.Equal(t, crashloop.ActionStop, got[3].Action, "drop the item")
		assert.ErrorIs(t, got[3].Err, errDoNotRestart)
		assert.ErrorIs(t, got[3].Err, crashloop.ErrParked)

		// A parked key's item is dropped without running.
		d := s.Process(t.Context(), "item-7", fail)
		assert.Equal(t, crashloop.ActionStop, d.Action)
		assert.ErrorIs(t, d.Err, crashloop.ErrParked)
		assert.Equal(t, 4, runs)

		// A good item is done.
		assert.Equal(t, crashloop.Decision{Action: crashloop.ActionStop},
			s.Process(t.Context(), "item-8", func(context.Context) error { return nil }))
		// An ended context stops without a decision.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		d = s.Process(ctx, "item-9", func(ctx context.Context) error { return ctx.Err() })
		assert.Equal(t, crashloop.ActionStop, d.Action)
		assert.ErrorIs(t, d.Err, context.Canceled)
	})
}

// While an item waits in its queue between two attempts, its key shows
// the backoff and still counts as a member of the fleet.
func TestProcessKeepsTheBackoffBetweenAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig())
		d := s.Process(t.Context(), "item", func(context.Context) error { return errors.New("x") })
		require.Equal(t, crashloop.ActionRestart, d.Action)
		st := s.Status(context.Background())
		assert.Equal(t, crashloop.StateBackoff, st.Keys["item"].State)
		assert.Equal(t, 1, st.Fleet.Keys)
	})
}
