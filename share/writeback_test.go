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

// heldLedger is a flakyLedger whose next Restore, once held, tells it has
// begun on entered and waits for release before it runs.
type heldLedger struct {
	*flakyLedger
	hold             atomic.Bool
	entered, release chan struct{}
}

func (l *heldLedger) Restore(ctx context.Context, parks []*crashloop.ParkedError) ([]share.Restored, error) {
	if l.hold.CompareAndSwap(true, false) {
		l.entered <- struct{}{}
		<-l.release
	}
	return l.flakyLedger.Restore(ctx, parks)
}

// A park decided alone while the write-back that ends an outage is under
// way is written back by that write-back too, before the ledger is used
// again: not left waiting for a Flush with the ledger in use. The recovery
// is announced once, the park once (by the replica that decided it).
func TestSharedParkDecidedDuringWriteBack(t *testing.T) {
	ledgers := memoryReplicas(2)
	held := &heldLedger{flakyLedger: &flakyLedger{Ledger: ledgers[0]}, entered: make(chan struct{}), release: make(chan struct{})}
	sups, recs, _ := replicas(t, crashloop.DefaultSupervisorConfig(), []share.Ledger{held, ledgers[1]})
	s := sups[0]
	boom := errors.New("boom")

	held.down.Store(true)
	assert.Equal(t, crashloop.ActionRestart, s.DecideAt(context.Background(), "a", crashloop.RunResult{Err: boom}, testT0).Action)
	require.Len(t, eventsOf(recs[0], crashloop.EventStoreUnavailable), 1)

	// Back a second later: a decision writes back, and its Restore is held
	// while the key k is parked alone.
	held.down.Store(false)
	held.hold.Store(true)
	at := testT0.Add(time.Second)
	done := make(chan crashloop.Decision)
	go func() { done <- s.DecideAt(context.Background(), "a", crashloop.RunResult{Err: boom}, at) }()
	<-held.entered
	var d crashloop.Decision
	for range 4 {
		d = s.DecideAt(context.Background(), "k", crashloop.RunResult{Err: boom}, at)
	}
	require.ErrorIs(t, d.Err, crashloop.ErrParked, "decided alone: the write-back is under way")
	close(held.release)
	assert.Equal(t, crashloop.ActionRestart, (<-done).Action)

	assert.ErrorIs(t, sups[1].Run(context.Background(), "k", func(context.Context) error { return nil }), crashloop.ErrParked,
		"the other replica refuses the key written back")
	assert.Equal(t, []crashloop.Event{{Kind: crashloop.EventStoreRecovered, Key: "store", Time: at, Attempts: 1}},
		recovered(recs[0]))
	require.NoError(t, layerOf(s).Flush(context.Background()), "nothing left to write back")
	assert.Len(t, recovered(recs[0]), 1, "announced once")
	assert.Equal(t, 1, countKind(recs, crashloop.EventStartupExhausted))
	assert.Equal(t, 1, recs[0].Of(crashloop.EventStartupExhausted))
}

// recovered returns the EventStoreRecovered events r recorded, as they
// were emitted.
func recovered(r *recorder) []crashloop.Event {
	var out []crashloop.Event
	for _, ev := range r.All() {
		if ev.Kind == crashloop.EventStoreRecovered {
			out = append(out, ev)
		}
	}
	return out
}

// claimSettled is how far a test moves a Supervisor's clock for the claims
// it makes of what its ledger told it (after a grace of a second) to run.
const claimSettled = 2 * time.Second

// lateLedger is a flakyLedger that tells the Supervisor of a loss of its
// state outside any call (lose), and whose next Restore, once held, writes
// and then waits for release before it replies: a reply still on its way.
type lateLedger struct {
	*flakyLedger
	notify           func(share.Change)
	hold             atomic.Bool
	entered, release chan struct{}
}

func (l *lateLedger) Open(cfg crashloop.SupervisorConfig, notify func(share.Change)) error {
	l.notify = notify
	return l.flakyLedger.Open(cfg, notify)
}

func (l *lateLedger) Restore(ctx context.Context, parks []*crashloop.ParkedError) ([]share.Restored, error) {
	if err := l.fail(); err != nil {
		return nil, err
	}
	stand, err := l.flakyLedger.Restore(ctx, parks)
	if l.hold.CompareAndSwap(true, false) {
		l.entered <- struct{}{}
		<-l.release
	}
	return stand, err
}

// A loss of the ledger's state found while the write-back that ends an
// outage is under way (its epoch check can find it first, as Redis's does
// after a restart without persistence) is written back after that
// write-back, not beside it: a second write-back beside it found the park
// standing, wrote nothing, and announced store.recovered with Attempts 0
// before the first could say it wrote the park. One write-back runs at a
// time; store.recovered tells of the park written, once, after the loss.
func TestLossFoundDuringTheWriteBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &lateLedger{flakyLedger: &flakyLedger{Ledger: share.NewMemoryLedger()},
			entered: make(chan struct{}), release: make(chan struct{})}
		rec, c := newRecorder(), mockAt(testT0)
		s, err := newShared(crashloop.DefaultSupervisorConfig(), l,
			crashloop.WithClock(c), crashloop.WithEventHandler(rec))
		require.NoError(t, err)

		l.down.Store(true)
		d := s.DecideAt(context.Background(), "solo", crashloop.RunResult{Err: crashloop.Permanent(errors.New("bad config"))}, testT0)
		require.ErrorIs(t, d.Err, crashloop.ErrParked, "decided alone")

		l.down.Store(false)
		l.hold.Store(true)
		flushed := make(chan error)
		go func() { flushed <- layerOf(s).Flush(context.Background()) }()
		<-l.entered // the park is written; the reply is on its way
		l.notify(share.Change{StateLost: &share.StateLostError{Announce: true, Epoch: "e2"}})
		synctest.Wait() // the loss's write-back ran, or waits for this one
		close(l.release)
		require.NoError(t, <-flushed)
		c.Add(claimSettled) // the claims of what the ledger told, on its clock
		synctest.Wait()

		var got []crashloop.Event
		for _, ev := range rec.All() {
			if ev.Kind != crashloop.EventStartupExhausted {
				got = append(got, ev)
			}
		}
		assert.Equal(t, []crashloop.Event{
			{Kind: crashloop.EventStoreUnavailable, Key: "store", Time: testT0, LastError: errRefused},
			{Kind: crashloop.EventStoreStateLost, Key: "store", Time: testT0},
			{Kind: crashloop.EventStoreRecovered, Key: "store", Time: testT0, Attempts: 1},
		}, got)
		assert.Equal(t, []string{"solo"}, s.Parked())
	})
}

// A write-back announces with no lock and no token held: an EventHandler
// that flushes on store.unavailable (from a failed write-back) and on
// store.recovered (from one that wrote) runs its Flush, which finds the
// ledger failing and then nothing left to write, rather than deadlocking
// on the write-back that called it.
func TestWriteBackAnnouncesWithNothingHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &flakyLedger{Ledger: share.NewMemoryLedger()}
		rec := newRecorder()
		var s *crashloop.Supervisor
		var flushes []error
		h := crashloop.EventHandlerFunc(func(ev crashloop.Event) {
			rec.HandleEvent(ev)
			if ev.Kind == crashloop.EventStoreUnavailable || ev.Kind == crashloop.EventStoreRecovered {
				flushes = append(flushes, layerOf(s).Flush(context.Background()))
			}
		})
		var err error
		c := mockAt(testT0)
		s, err = newShared(crashloop.DefaultSupervisorConfig(), l,
			crashloop.WithClock(c), crashloop.WithEventHandler(h))
		require.NoError(t, err)

		l.down.Store(true)
		d := s.DecideAt(context.Background(), "solo", crashloop.RunResult{Err: crashloop.Permanent(errors.New("bad config"))}, testT0)
		require.ErrorIs(t, d.Err, crashloop.ErrParked, "decided alone")
		require.Len(t, flushes, 1)
		require.ErrorIs(t, flushes[0], share.ErrUnavailable, "the Flush inside the announcement finds the ledger failing")
		l.down.Store(false)
		require.NoError(t, layerOf(s).Flush(context.Background()))
		require.Equal(t, []error{flushes[0], nil}, flushes, "the Flush inside store.recovered finds nothing left")
		c.Add(claimSettled)
		synctest.Wait()
		assert.Equal(t, []crashloop.Event{{Kind: crashloop.EventStoreRecovered, Key: "store", Time: testT0, Attempts: 1}}, recovered(rec))
	})
}
