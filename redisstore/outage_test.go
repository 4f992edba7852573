package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// What the shared state keeps and what a decision does when the server
// fails: durability across a kill with AOF, and decisions that end within
// their timeout.

// standing makes a park, a needs-human mark and a fleet trip, and a budget
// that is merely counting.
func standing(t *testing.T, k *kernel) {
	ctx := context.Background()
	_, err := k.budgetFailed(ctx, crashloop.BudgetConfig{MaxRespawns: 0, Window: time.Minute}, "parked", errors.New("exit 1"), t0)
	require.NoError(t, err)
	_, err = k.budgetFailed(ctx, crashloop.DefaultBudgetConfig(), "counting", nil, t0)
	require.NoError(t, err)
	for range 2 {
		_, err = k.chainRescue(ctx, crashloop.ChainConfig{MaxChain: 1, ResetGap: time.Minute}, "seat", "i", true, t0)
		require.NoError(t, err)
	}
	d, err := k.fleetRestart(ctx, crashloop.FleetConfig{RestartsPerHour: 1, FailingFraction: 1, MinFailing: 1, Cooldown: time.Hour}, "fleet", t0)
	require.NoError(t, err)
	require.True(t, d.trippedNow)
}

// With appendonly yes and appendfsync always, a park, a needs-human mark and
// a fleet trip survive a SIGKILL of the server, and so do the expiries of
// the keys that have one.
func TestStandingMarksSurviveAKillWithAOF(t *testing.T) {
	s := redistest.Start(t, redistest.WithAOF(t.TempDir()))
	k := testKernel(t, s, false)
	standing(t, k)
	s.Kill()
	s.Restart()

	ctx := context.Background()
	pe, err := k.budgetSpawn(ctx, "parked")
	require.NoError(t, err)
	require.Equal(t, `key="parked" reason="respawn_budget_exhausted" cause=error: exit 1 attempts=0 since=1800000000000000`, parkText(pe))
	marked, err := k.chainMarked(ctx, "seat")
	require.NoError(t, err)
	require.True(t, marked)
	d, err := k.fleetTripped(ctx, crashloop.FleetConfig{RestartsPerHour: 1, FailingFraction: 1, MinFailing: 1, Cooldown: time.Hour}, "fleet", t0)
	require.NoError(t, err)
	require.True(t, d.tripped)

	rdb := s.Client(nil)
	require.Equal(t, time.Duration(-1), ttlOf(t, rdb, k.keys.budget("parked")))
	ttl := ttlOf(t, rdb, k.keys.budget("counting"))
	require.Greater(t, ttl, time.Duration(0), "an expiry is kept as an absolute time")
	n, _, err := k.budgetView(ctx, crashloop.DefaultBudgetConfig(), "counting", t0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// Without persistence a restarted server has forgotten everything: the
// guarantees above need AOF.
func TestWithoutPersistenceARestartForgetsParks(t *testing.T) {
	s := redistest.Start(t)
	k := testKernel(t, s, false)
	standing(t, k)
	s.Kill()
	s.Restart()
	pe, err := k.budgetSpawn(context.Background(), "parked")
	require.NoError(t, err)
	require.Nil(t, pe)
}

// boundedKernel is a kernel as a supervisor runs it: bounded options, and
// the same bound on each call.
func boundedKernel(t *testing.T, o *redis.Options) *kernel {
	ks, err := newKeyspace("outage")
	require.NoError(t, err)
	rdb := redis.NewClient(BoundedOptions(o, budget))
	t.Cleanup(func() { _ = rdb.Close() })
	return &kernel{rdb: rdb, keys: ks, grace: time.Minute, timeout: budget}
}

func failOnce(k *kernel) func() error {
	return func() error {
		_, err := k.budgetFailed(context.Background(), crashloop.DefaultBudgetConfig(), "w", nil, t0)
		return err
	}
}

// A decision ends within its timeout whatever the failure, and says which.
func TestDecisionsEndWithinTheirTimeout(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		s := redistest.Start(t)
		k := boundedKernel(t, s.Options(nil))
		s.Kill()
		measure(t, "decision, refused", 5, failOnce(k), refused)
	})
	t.Run("black hole", func(t *testing.T) {
		s := redistest.Start(t, redistest.InNetns())
		k := boundedKernel(t, s.Options(nil))
		require.NoError(t, failOnce(k)())
		s.BlackHole()
		measure(t, "decision, black hole", 3, failOnce(k), isTimeout)
	})
	t.Run("slow", func(t *testing.T) {
		s := redistest.Start(t)
		p := redistest.NewSlowProxy(t, s, time.Hour)
		k := boundedKernel(t, p.Options(nil))
		measure(t, "decision, slow server", 3, failOnce(k), isTimeout)
	})
}

// A decision that timed out may have been made all the same: the server ran
// the script and only its reply was late. The caller cannot tell, and must
// not send it again (BoundedOptions sets no retries): it decides locally
// instead, and the shared budget may then count the failure a second time
// when the local decision is written back.
func TestATimedOutDecisionMayHaveBeenApplied(t *testing.T) {
	s := redistest.Start(t)
	p := redistest.NewSlowProxy(t, s, 0)
	k := boundedKernel(t, p.Options(nil))
	require.NoError(t, failOnce(k)()) // loads the script
	p.SetDelay(time.Hour)
	err := failOnce(k)()
	require.True(t, isTimeout(err), "%v", err)
	p.SetDelay(0)
	n, _, err := k.budgetView(context.Background(), crashloop.DefaultBudgetConfig(), "w", t0)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the timed-out failure was recorded")
}
