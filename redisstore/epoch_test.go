package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Losses of the server's state found without a call of the replica
// (docs/redis.md, Versions: the server's state lost).

// serverEpoch returns the deployment's epoch as the server holds it ("" for
// none).
func serverEpoch(t *testing.T, s *redistest.Server, st *Store) string {
	t.Helper()
	e, err := s.Client(nil).Get(context.Background(), st.keys.epoch()).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	require.NoError(t, err)
	return e
}

// The server loses its state (FLUSHALL) while every replica is idle: each
// finds it by its periodic check of the epoch, within about a second, and
// writes back the parks it knows at once; exactly one announces
// store.state_lost, and a replica that never knew a park refuses its key. (Before, nothing happened until each replica's next
// call, and a replica that never knew a park could restart its key
// meanwhile.)
func TestALossFoundWhileIdle(t *testing.T) {
	s := redistest.Start(t)
	rs := fleet(t, 3, crashloop.DefaultSupervisorConfig(), false, onServer(t, s, Options{}))
	reconciled(t, rs[0].store, rs[1].store, rs[2].store)
	ctx := context.Background()
	flaky := crashloop.RunResult{Err: errors.New("flaky")}
	// Each replica knows only its own key: none has a claim pending (which
	// would find the loss too, when it is sent).
	rs[0].sup.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig})
	require.Equal(t, crashloop.ActionRestart, rs[1].sup.Decide(ctx, "other", flaky).Action)
	rs[2].sup.Decide(ctx, "j", crashloop.RunResult{Err: errBadConfig})
	old := serverEpoch(t, s, rs[0].store)

	op := New(testClient(t, s), Options{Prefix: rs[0].store.o.Prefix})
	require.NoError(t, s.Client(nil).FlushAll(ctx).Err())
	flushed := time.Now()
	require.Eventually(t, func() bool {
		parks, err := op.Parked(ctx)
		return err == nil && len(parks) == 2 && parks[0].Key == "j" && parks[1].Key == "k"
	}, watchdog, time.Millisecond, "every park written back")
	took := time.Since(flushed)
	t.Logf("parks written back %v after the flush", took)
	require.Less(t, took, 3*time.Second, "the bound: a check a second, then one write-back")
	epoch := serverEpoch(t, s, rs[0].store)
	require.NotEqual(t, old, epoch)
	announced(t, rs, crashloop.EventStoreStateLost, rs[0].store.keys.claimLost(epoch), s, []int{0, 0, 0})
	for i, r := range rs {
		require.Empty(t, r.evs.of(crashloop.EventStoreUnavailable), "replica %d: a loss of state is no outage", i)
		require.Empty(t, r.evs.of(crashloop.EventStoreRecovered), "replica %d", i)
	}
	require.Equal(t, []string{"k"}, rs[0].sup.Parked())
	require.Equal(t, []string{"j"}, rs[2].sup.Parked())
	require.Equal(t, 2, count(rs, crashloop.EventStartupExhausted), "the parks written back are not announced again")
	d := rs[1].sup.Decide(ctx, "k", flaky)
	require.ErrorIs(t, d.Err, crashloop.ErrParked, "a replica that never knew the park refuses the key")
}

// lossyHook makes the first command whose arguments hold match lose its
// reply: the server runs it, the caller gets an error.
type lossyHook struct {
	match string
	lost  atomic.Bool
}

func (h *lossyHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lossyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && strings.Contains(fmt.Sprint(cmd.Args()), h.match) && h.lost.CompareAndSwap(false, true) {
			cmd.SetErr(errLostReply)
			return errLostReply
		}
		return err
	}
}

func (h *lossyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// The claim of a loss loses its reply: the replica claims it again a
// second later, wins, and announces store.state_lost, once. (Before, the
// loss was never announced.)
func TestLossAnnouncedAfterALostClaimReply(t *testing.T) {
	s := redistest.Start(t)
	hook := &lossyHook{match: "claim:lost:"}
	rs := fleet(t, 1, crashloop.DefaultSupervisorConfig(), false, func(int) *Store {
		c := testClient(t, s)
		c.AddHook(hook)
		return New(c, Options{Prefix: newPrefix(), Replica: "replica-0"})
	})
	reconciled(t, rs[0].store)
	ctx := context.Background()
	rs[0].sup.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig})
	require.NoError(t, s.Client(nil).FlushAll(ctx).Err())
	require.Eventually(t, func() bool { return len(rs[0].evs.of(crashloop.EventStoreStateLost)) > 0 }, watchdog, time.Millisecond)
	require.True(t, hook.lost.Load(), "the first claim's reply was lost")
	epoch := serverEpoch(t, s, rs[0].store)
	holder, err := s.Client(nil).Get(ctx, rs[0].store.keys.claimLost(epoch)).Result()
	require.NoError(t, err)
	require.Equal(t, rs[0].store.claimant(), holder)
	require.Len(t, rs[0].evs.of(crashloop.EventStoreStateLost), 1)
	require.Equal(t, []string{"k"}, rs[0].sup.Parked())
}

// A notice made after a loss of state names the new epoch: a replica that
// has not found the loss yet (no call, and here no periodic check either)
// takes the loss first, then the notice. (Before, the notice of the new
// state's first park, version 1, was ignored by a replica whose mirror
// held version 2 of the state lost, until its next call.)
func TestNoticeOfANewEpochTakenBeforeTheNextCall(t *testing.T) {
	s := redistest.Start(t)
	newStore := onServer(t, s, Options{})
	rs := fleet(t, 2, crashloop.DefaultSupervisorConfig(), false, func(i int) *Store {
		st := newStore(i)
		st.epochs = time.Hour // no periodic check: the notice alone tells
		return st
	})
	reconciled(t, rs[0].store, rs[1].store)
	ctx := context.Background()
	flaky := crashloop.RunResult{Err: errors.New("flaky")}
	require.Equal(t, crashloop.ActionRestart, rs[0].sup.Decide(ctx, "k", flaky).Action)
	rs[1].sup.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig}) // version 1
	parkedOn(t, rs, "k")
	require.NoError(t, rs[1].sup.Resume(ctx, "k")) // version 2
	parkedOn(t, rs)

	require.NoError(t, s.Client(nil).FlushAll(ctx).Err())
	d := rs[1].sup.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig}) // finds the loss; parks at version 1 of the new state
	require.ErrorIs(t, d.Err, crashloop.ErrParked)
	var pe *crashloop.ParkedError
	require.ErrorAs(t, d.Err, &pe)
	require.Equal(t, int64(1), pe.Version)
	parkedOn(t, rs, "k")
	require.Equal(t, crashloop.StateParked, rs[0].sup.Status(ctx).Keys["k"].State)
	require.Len(t, rs[1].evs.of(crashloop.EventStoreStateLost), 1, "the first to find the loss announces it")
	require.Empty(t, rs[0].evs.of(crashloop.EventStoreStateLost))
	require.Equal(t, serverEpoch(t, s, rs[0].store), rs[0].store.epoch)
}
