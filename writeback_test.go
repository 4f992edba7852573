package crashloop_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
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

func (l *heldLedger) Restore(ctx context.Context, parks []*crashloop.ParkedError) ([]crashloop.Restored, error) {
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
	sups, recs, _ := replicas(t, crashloop.DefaultSupervisorConfig(), []crashloop.Ledger{held, ledgers[1]})
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
	require.NoError(t, s.Flush(context.Background()), "nothing left to write back")
	assert.Len(t, recovered(recs[0]), 1, "announced once")
	assert.Equal(t, 1, countKind(recs, crashloop.EventStartupExhausted))
	assert.Equal(t, 1, recs[0].count(crashloop.EventStartupExhausted))
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
