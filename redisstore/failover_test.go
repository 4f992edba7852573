package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/crashloopguard/crashloop/share"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// A failover that keeps the server's epoch but loses its last writes
// (docs/redis.md, Persistence and failover).

// A primary acknowledges a park that its replica never receives, dies, and
// the replica is promoted: it has the deployment's epoch, and a {p}:seq
// below the park's version, which the replicas saw. A replica's check
// finds that and moves the deployment to a new epoch; every replica writes
// back the parks it knows, the lost park included, exactly one announces
// store.state_lost with the reason "failover", and the new epoch's
// versions are above every version the replicas saw. (Before, the park was
// gone for good with the epoch unchanged: no replica wrote it back, a
// replica that never knew it restarted its key, and the next transitions
// took versions the mirrors already held.)
func TestFailoverThatLostAParkMovesToANewEpoch(t *testing.T) {
	primary := redistest.Start(t, redistest.WithTCP())
	standby := redistest.Start(t, redistest.WithTCP(), redistest.WithReplicaOf(primary))
	ctx := context.Background()
	pc, sc := primary.Client(nil), standby.Client(nil)
	require.Eventually(t, func() bool {
		info, err := pc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "state=online")
	}, watchdog, 10*time.Millisecond, "the replica in sync")

	// The replicas reach whichever server addr names: the primary, then
	// the replica promoted.
	var addr atomic.Value
	addr.Store(primary.Addr())
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr.Load().(string))
	}
	prefix := newPrefix()
	rs := fleet(t, 3, crashloop.DefaultSupervisorConfig(), false, func(i int) *Store {
		c := redis.NewClient(BoundedOptions(&redis.Options{Addr: primary.Addr(), Dialer: dial}, time.Second))
		t.Cleanup(func() { _ = c.Close() })
		return New(c, Options{Prefix: prefix, Replica: fmt.Sprintf("replica-%d", i), Timeout: time.Second})
	})
	reconciled(t, rs[0].store, rs[1].store, rs[2].store)
	flaky := crashloop.RunResult{Err: errors.New("flaky")}
	for _, r := range rs[:2] {
		for _, key := range []string{"k", "j"} {
			require.Equal(t, crashloop.ActionRestart, r.sup.Decide(ctx, key, flaky).Action)
		}
	}
	rs[0].sup.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig}) // version 1, replicated
	require.Eventually(t, func() bool { return sc.Get(ctx, "{"+prefix+"}:seq").Val() == "1" }, watchdog, time.Millisecond,
		"the replica has park 1")
	parkedOn(t, rs[:2], "k")

	// The replica stops receiving writes: its link is dropped, and it
	// cannot log in again.
	require.NoError(t, sc.ConfigSet(ctx, "masteruser", "nobody").Err())
	require.NoError(t, sc.ConfigSet(ctx, "masterauth", "wrong").Err())
	require.NoError(t, pc.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err())
	require.Eventually(t, func() bool {
		info, err := sc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:down")
	}, watchdog, 10*time.Millisecond, "the replication link down")

	rs[1].sup.Decide(ctx, "j", crashloop.RunResult{Err: errBadConfig}) // version 2: the primary's alone
	parkedOn(t, rs[:2], "j", "k")
	old := serverEpoch(t, primary, rs[0].store)

	primary.Kill()
	require.NoError(t, sc.Do(ctx, "REPLICAOF", "NO", "ONE").Err())
	addr.Store(standby.Addr())
	promoted := time.Now()

	op := New(testClient(t, standby), Options{Prefix: prefix})
	require.Eventually(t, func() bool {
		ch, err := op.Lookup(ctx, "j")
		return err == nil && ch.Park != nil
	}, watchdog, 10*time.Millisecond, "the lost park written back")
	t.Logf("the lost park back %v after the promotion", time.Since(promoted))
	epoch := serverEpoch(t, standby, rs[0].store)
	require.NotEqual(t, old, epoch)
	require.True(t, strings.HasPrefix(epoch, failoverEpoch), epoch)
	announced(t, rs, crashloop.EventStoreStateLost, rs[0].store.keys.claimLost(epoch), standby, []int{0, 0, 0})
	ev := allOf(rs, crashloop.EventStoreStateLost)[0]
	require.Equal(t, share.ReasonFailover, ev.Reason)

	// Every version of the new epoch is above those the replicas saw (2).
	parks, err := op.Parked(ctx)
	require.NoError(t, err)
	require.Len(t, parks, 2)
	for _, pe := range parks {
		require.Greater(t, pe.Version, int64(2), "%s", pe.Key)
	}
	parkedOn(t, rs[:2], "j", "k")
	d := rs[2].sup.Decide(ctx, "j", flaky)
	require.ErrorIs(t, d.Err, crashloop.ErrParked, "a replica that never knew the park refuses the key")
	// A resume of the new epoch reaches every mirror.
	require.NoError(t, rs[0].sup.Resume(ctx, "j"))
	parkedOn(t, rs[:2], "k")
	require.Equal(t, 2, count(rs, crashloop.EventStartupExhausted), "the parks written back are not announced again")
}
