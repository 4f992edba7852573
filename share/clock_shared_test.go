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

// The waits of a shared Supervisor read its injected Clock, as its guards
// do: a claim's retry and the rejoin are driven by a clock.Mock alone (the
// bubble only tells when every goroutine waits).

// refusingClaims is a ledger whose claims fail while refusing is set.
type refusingClaims struct {
	share.Ledger
	refusing atomic.Bool
	claims   atomic.Int64
}

func (l *refusingClaims) Claim(ctx context.Context, v int64) (bool, error) {
	l.claims.Add(1)
	if l.refusing.Load() {
		return false, errRefused
	}
	return l.Ledger.Claim(ctx, v)
}

// A park whose claim could not be sent is claimed again a second later by
// the Supervisor's clock, and announced then, once.
func TestClaimRetryOnTheInjectedClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &refusingClaims{Ledger: share.NewMemoryLedger()}
		rec, c := newRecorder(), mockAt(testT0)
		s, err := newShared(crashloop.DefaultSupervisorConfig(), l,
			crashloop.WithClock(c), crashloop.WithEventHandler(rec))
		require.NoError(t, err)
		l.refusing.Store(true)
		var d crashloop.Decision
		for range 4 {
			d = s.Decide(context.Background(), "k", crashloop.RunResult{Err: errors.New("boom")})
		}
		require.ErrorIs(t, d.Err, crashloop.ErrParked)
		synctest.Wait()
		assert.Equal(t, int64(1), l.claims.Load(), "claimed at the step's reply, refused")
		assert.Zero(t, rec.Of(crashloop.EventStartupExhausted))

		l.refusing.Store(false)
		c.Add(time.Second - time.Millisecond)
		synctest.Wait()
		assert.Equal(t, int64(1), l.claims.Load(), "not before a second on the mock clock")
		c.Add(time.Millisecond)
		synctest.Wait()
		assert.Equal(t, int64(2), l.claims.Load())
		assert.Equal(t, 1, rec.Of(crashloop.EventStartupExhausted), "won and announced at the retry")
		c.Add(time.Hour)
		synctest.Wait()
		assert.Equal(t, int64(2), l.claims.Load(), "won: no more claims")
		assert.Equal(t, 1, rec.Of(crashloop.EventStartupExhausted))
	})
}

// A Run whose restarted work keeps running rejoins its ledger at the first
// ask after it answers, a second after the failure by the mock clock.
func TestRejoinOnTheInjectedClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		flaky := &flakyLedger{Ledger: share.NewMemoryLedger()}
		rec, c := newRecorder(), mockAt(testT0)
		s, err := newShared(crashloop.DefaultSupervisorConfig(), flaky,
			crashloop.WithClock(c), crashloop.WithEventHandler(rec))
		require.NoError(t, err)
		var runs atomic.Int32
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- s.Run(ctx, "k", func(ctx context.Context) error {
				if runs.Add(1) == 1 {
					flaky.down.Store(true) // the decision finds the ledger failing
					return errors.New("boom")
				}
				<-ctx.Done() // the restarted work keeps running
				return ctx.Err()
			})
		}()
		synctest.Wait()
		require.Equal(t, int32(1), runs.Load(), "waiting out the backoff on the mock clock")
		c.Add(500 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, int32(2), runs.Load())
		calls := flaky.calls.Load()

		flaky.down.Store(false)
		c.Add(499 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, calls, flaky.calls.Load(), "no ask before a second after the failure")
		assert.Zero(t, rec.Of(crashloop.EventStoreRecovered))
		c.Add(time.Millisecond)
		synctest.Wait()
		assert.Equal(t, calls+1, flaky.calls.Load(), "the rejoin's ask")
		assert.Equal(t, []crashloop.Event{{Kind: crashloop.EventStoreRecovered, Key: "store", Time: testT0.Add(time.Second)}}, recovered(rec))

		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})
}
