package share

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/eventrec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, time.January, 2, 3, 4, 5, 0, time.UTC)

func mockAt(at time.Time) *clock.Mock {
	m := clock.NewMock()
	m.Set(at)
	return m
}

// A park decided alone after the write-back that ended an outage marked
// the ledger in use (the decision found it failing before the write-back
// ended; no hook can hold a decision there, so the park is kept as that
// decision keeps it) is written back by the next call, without a second
// store.recovered.
func TestDecidedAloneAfterTheWriteBack(t *testing.T) {
	first := NewMemoryLedger()
	rec := &eventrec.Recorder[crashloop.Event]{}
	y := New(first)
	s, err := crashloop.NewSupervisor(crashloop.DefaultSupervisorConfig(), crashloop.WithSharing(y),
		crashloop.WithClock(mockAt(t0)), crashloop.WithEventHandler(rec))
	require.NoError(t, err)
	other, err := crashloop.NewSupervisor(crashloop.DefaultSupervisorConfig(), crashloop.WithSharing(New(first.Replica())),
		crashloop.WithClock(mockAt(t0)))
	require.NoError(t, err)

	pe := &crashloop.ParkedError{Key: "k", Reason: crashloop.ReasonBudgetExhausted, LastError: errors.New("boom"), Attempts: 3, Since: t0}
	y.h.Lock()
	require.False(t, y.down, "the ledger is in use")
	y.h.Parked("k", pe, t0)
	y.Alone("k", pe, t0)
	y.h.Unlock()

	assert.Equal(t, crashloop.ActionRestart, s.DecideAt(context.Background(), "a", crashloop.RunResult{Err: errors.New("boom")}, t0).Action)
	assert.ErrorIs(t, other.Run(context.Background(), "k", func(context.Context) error { return nil }), crashloop.ErrParked,
		"written back by the next call")
	y.h.Lock()
	assert.Empty(t, y.alone)
	assert.False(t, y.down)
	y.h.Unlock()
	count := func(k crashloop.EventKind) int {
		return rec.Count(func(ev crashloop.Event) bool { return ev.Kind == k })
	}
	assert.Zero(t, count(crashloop.EventStoreRecovered), "its recovery was announced by the write-back that ended it")
	assert.Zero(t, count(crashloop.EventStoreUnavailable))
}
