package crashloop

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A park decided alone after the write-back that ended an outage marked
// the ledger in use (the decision found it failing before the write-back
// ended; no hook can hold a decision there, so the park is kept as that
// decision keeps it) is written back by the next call, without a second
// store.recovered.
func TestDecidedAloneAfterTheWriteBack(t *testing.T) {
	first := NewMemoryLedger()
	rec := &coreRecorder{}
	s, err := NewSharedSupervisor(DefaultSupervisorConfig(), first, WithClock(coreMock()), WithEventHandler(rec))
	require.NoError(t, err)
	other, err := NewSharedSupervisor(DefaultSupervisorConfig(), first.Replica(), WithClock(coreMock()))
	require.NoError(t, err)

	pe := &ParkedError{Key: "k", Reason: ReasonBudgetExhausted, LastError: errors.New("boom"), Attempts: 3, Since: coreT0}
	s.mu.Lock()
	require.False(t, s.shared.down, "the ledger is in use")
	r := s.record("k", coreT0)
	r.park = pe
	s.setState(r, StateParked, coreT0)
	s.decidedAlone("k", pe, coreT0)
	s.mu.Unlock()

	assert.Equal(t, ActionRestart, s.DecideAt(context.Background(), "a", RunResult{Err: errors.New("boom")}, coreT0).Action)
	assert.ErrorIs(t, other.Run(context.Background(), "k", func(context.Context) error { return nil }), ErrParked,
		"written back by the next call")
	s.mu.Lock()
	assert.Empty(t, s.shared.alone)
	assert.False(t, s.shared.down)
	s.mu.Unlock()
	assert.Zero(t, rec.count(EventStoreRecovered), "its recovery was announced by the write-back that ended it")
	assert.Zero(t, rec.count(EventStoreUnavailable))
}
