package share_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordedOn returns a Supervisor with the default configuration sharing
// l, on the real clock (the bubble's), and its recorder.
func recordedOn(t *testing.T, l share.Ledger) (*crashloop.Supervisor, *recorder) {
	t.Helper()
	rec := newRecorder()
	s, err := newShared(crashloop.DefaultSupervisorConfig(), l, crashloop.WithEventHandler(rec))
	require.NoError(t, err)
	return s, rec
}

// runUntilStopped runs key under s on a goroutine, with work that runs
// until its context ends; stop cancels it and checks that Run returned
// context.Canceled.
func runUntilStopped(t *testing.T, s *crashloop.Supervisor, key string) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- s.Run(ctx, key, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	}()
	return func() {
		t.Helper()
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	}
}

// A Run whose work keeps running after a decision that found the ledger
// failing asks the ledger again by itself, every second, and is back on it
// at the first ask after the ledger answers: store.recovered while the
// work runs, with no decision to bring it. While the ledger is in use,
// before the outage and after it, nothing asks it.
func TestRejoinWhileRunRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		flaky := &flakyLedger{Ledger: share.NewMemoryLedger()}
		s, rec := recordedOn(t, flaky)
		boom := errors.New("boom")
		failNow := make(chan struct{})
		runs := 0
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- s.Run(ctx, "k", func(ctx context.Context) error {
				if runs++; runs == 1 {
					<-failNow
					flaky.down.Store(true) // the decision finds the ledger failing
					return boom
				}
				<-ctx.Done() // the restarted work keeps running
				return ctx.Err()
			})
		}()

		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Equal(t, int64(1), flaky.calls.Load(), "the ledger up: Run's lookup, then nothing")

		close(failNow) // at 1m
		synctest.Wait()
		assert.Equal(t, int64(2), flaky.calls.Load(), "the judge step, failed")
		time.Sleep(1500 * time.Millisecond) // the restart at 1m0.5s, the first ask at 1m1s
		synctest.Wait()
		assert.Equal(t, 2, runs)
		assert.Equal(t, int64(3), flaky.calls.Load(), "asked again a second after the outage")
		time.Sleep(time.Second) // 1m2.5s: the second ask failed too
		synctest.Wait()
		assert.Equal(t, int64(4), flaky.calls.Load())

		flaky.down.Store(false)
		time.Sleep(499 * time.Millisecond)
		synctest.Wait()
		assert.Zero(t, rec.Of(crashloop.EventStoreRecovered), "not before the next ask")
		time.Sleep(time.Millisecond) // 1m3s: the next ask
		synctest.Wait()
		m := time.Minute
		assert.Equal(t, []supEvent{
			{At: m, Event: crashloop.Event{Kind: crashloop.EventStoreUnavailable, Key: "store", LastError: errRefused}},
			restartEv(m, "k", "k#1", crashloop.ReasonCrashed, boom, 1, millis(500)), // healthy for a minute: a crash
			{At: m + 3*time.Second, Event: crashloop.Event{Kind: crashloop.EventStoreRecovered, Key: "store"}},
		}, rec.Events())
		assert.Equal(t, int64(5), flaky.calls.Load())

		time.Sleep(time.Hour) // back on the ledger: nothing asks it
		synctest.Wait()
		assert.Equal(t, int64(5), flaky.calls.Load())
		assert.Equal(t, 2, runs, "the work ran on")

		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
		assert.Equal(t, 1, rec.Of(crashloop.EventStoreRecovered))
	})
}

// Two keys running at once on one Supervisor, a Run and a Wrap, share one
// rejoin: the ledger is asked once a second, not once per key; a park
// decided alone meanwhile is written back while they run, so another
// replica refuses the key; store.recovered is announced once.
func TestRejoinOnceForConcurrentRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ledgers := memoryReplicas(2)
		flaky := &flakyLedger{Ledger: ledgers[0]}
		s, rec := recordedOn(t, flaky)
		other, err := newShared(crashloop.DefaultSupervisorConfig(), ledgers[1])
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		work := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
		done := make(chan error, 2)
		go func() { done <- s.Run(ctx, "a", work) }()
		go func() { done <- s.Wrap("b", work)(ctx) }()
		synctest.Wait()
		up := flaky.calls.Load()

		// The ledger fails; a run of p fails for good and is parked alone.
		flaky.down.Store(true)
		bad := errors.New("bad config")
		err = s.Run(ctx, "p", func(context.Context) error { return crashloop.Permanent(bad) })
		require.ErrorIs(t, err, crashloop.ErrParked)
		assert.Equal(t, up+1, flaky.calls.Load(), "p's lookup failed; its decision was made alone")
		assert.Equal(t, 1, rec.Of(crashloop.EventStoreUnavailable))
		assert.Equal(t, 1, rec.Of(crashloop.EventStartupExhausted))
		ch, err := ledgers[1].Lookup(t.Context(), "p")
		require.NoError(t, err)
		assert.Nil(t, ch.Park, "the ledger does not know of the park")

		time.Sleep(5*time.Second + time.Millisecond)
		synctest.Wait()
		assert.Equal(t, up+1+5, flaky.calls.Load(), "one ask a second for both keys")

		flaky.down.Store(false)
		time.Sleep(time.Second) // 6s: the next ask writes the park back
		synctest.Wait()
		assert.Equal(t, []supEvent{{At: 6 * time.Second, Event: crashloop.Event{Kind: crashloop.EventStoreRecovered, Key: "store", Attempts: 1}}},
			eventsOf(rec, crashloop.EventStoreRecovered))
		ch, err = ledgers[1].Lookup(t.Context(), "p")
		require.NoError(t, err)
		require.NotNil(t, ch.Park, "written back while a and b run")
		assert.Equal(t, crashloop.ReasonPermanent, ch.Park.Reason)
		assert.ErrorIs(t, other.Run(t.Context(), "p", func(context.Context) error { return nil }), crashloop.ErrParked,
			"the other replica refuses p")
		assert.Equal(t, []string{"p"}, s.Parked())

		asked := flaky.calls.Load()
		time.Sleep(time.Hour)
		synctest.Wait()
		assert.Equal(t, asked, flaky.calls.Load(), "nothing asks a ledger in use")
		cancel()
		for range 2 {
			assert.ErrorIs(t, <-done, context.Canceled)
		}
		assert.Equal(t, 1, rec.Of(crashloop.EventStoreRecovered))
		assert.Equal(t, 1, rec.Of(crashloop.EventStoreUnavailable))
	})
}

// The rejoin ends with the last Run: once no key runs, the ledger is asked
// again only at the Supervisor's next call.
func TestRejoinEndsWithTheLastRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		flaky := &flakyLedger{Ledger: share.NewMemoryLedger()}
		flaky.down.Store(true)
		s, rec := recordedOn(t, flaky)
		stop := runUntilStopped(t, s, "k")
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, int64(3), flaky.calls.Load(), "the lookup at 0s, asks at 1s and 2s")

		stop()
		time.Sleep(time.Hour)
		synctest.Wait()
		assert.Equal(t, int64(3), flaky.calls.Load(), "no key runs: nothing asks")
		assert.Equal(t, 1, rec.Of(crashloop.EventStoreUnavailable))
		assert.Zero(t, rec.Of(crashloop.EventStoreRecovered))
	})
}

// An EventHandler may call back into the Supervisor from the rejoin's
// store.recovered, even to run a key: the end of that run, the last one,
// stops the rejoin without waiting for it (it is the goroutine running
// the handler).
func TestRejoinHandlerRunsAKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		flaky := &flakyLedger{Ledger: share.NewMemoryLedger()}
		flaky.down.Store(true)
		release := make(chan struct{})
		processed := make(chan crashloop.Decision, 1)
		var s *crashloop.Supervisor
		s, err := newShared(crashloop.DefaultSupervisorConfig(), flaky,
			crashloop.WithEventHandler(crashloop.EventHandlerFunc(func(ev crashloop.Event) {
				if ev.Kind == crashloop.EventStoreRecovered {
					processed <- s.Process(context.Background(), "x", func(context.Context) error { <-release; return nil })
				}
			})))
		require.NoError(t, err)
		stop := runUntilStopped(t, s, "k")
		synctest.Wait()
		flaky.down.Store(false)
		time.Sleep(time.Second) // the ask at 1s: store.recovered, and the handler runs x
		synctest.Wait()
		stop()
		close(release) // x ends: no key runs any more
		assert.Equal(t, crashloop.Decision{Action: crashloop.ActionStop}, <-processed)
	})
}

// slowLedger holds every Restore while slow until its context ends, as a
// server that accepts a command and never answers does, and bounds each
// call by its CallTimeout, as redisstore's Store does.
type slowLedger struct {
	*flakyLedger
	slow  atomic.Bool
	ended atomic.Int64 // when the last Restore held returned, in Unix nanoseconds
}

func (l *slowLedger) CallTimeout() time.Duration { return 200 * time.Millisecond }

func (l *slowLedger) Restore(ctx context.Context, parks []*crashloop.ParkedError) ([]share.Restored, error) {
	if l.slow.Load() {
		l.calls.Add(1)
		<-ctx.Done()
		l.ended.Store(time.Now().UnixNano())
		return nil, ctx.Err()
	}
	return l.flakyLedger.Restore(ctx, parks)
}

// Each ask of the rejoin is bounded by the ledger's CallTimeout, as a
// decision is: an ask that gets no answer fails at the deadline, as the
// same outage, and the next comes a second after it began.
func TestRejoinAskBoundedByCallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		slow := &slowLedger{flakyLedger: &flakyLedger{Ledger: share.NewMemoryLedger()}}
		slow.down.Store(true)
		s, rec := recordedOn(t, slow)
		stop := runUntilStopped(t, s, "k")
		synctest.Wait() // the lookup at 0s failed
		slow.down.Store(false)
		slow.slow.Store(true)
		time.Sleep(1500 * time.Millisecond) // the ask at 1s got no answer
		synctest.Wait()
		assert.Equal(t, int64(2), slow.calls.Load())
		assert.Equal(t, start.Add(1200*time.Millisecond).UnixNano(), slow.ended.Load(), "the ask ended at its deadline")

		slow.slow.Store(false)
		time.Sleep(499 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, int64(2), slow.calls.Load(), "no ask before 2s")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		assert.Equal(t, []supEvent{{At: 2 * time.Second, Event: crashloop.Event{Kind: crashloop.EventStoreRecovered, Key: "store"}}},
			eventsOf(rec, crashloop.EventStoreRecovered))
		assert.Len(t, eventsOf(rec, crashloop.EventStoreUnavailable), 1, "the timeout is the same outage")
		stop()
	})
}
