package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/ledgertest"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

var prefixSeq atomic.Int64

// newPrefix returns a prefix no other test of this process uses.
func newPrefix() string { return fmt.Sprintf("t%d", prefixSeq.Add(1)) }

// testClient is a client of s as a Store uses one: bounded, with a timeout
// generous enough for a loaded machine under -race.
func testClient(t testing.TB, s *redistest.Server) *redis.Client {
	return s.Client(BoundedOptions(nil, 5*time.Second))
}

// replicasOn returns n Stores of one fresh deployment on s, each with its
// own client and Replica, closed when the test ends.
func replicasOn(t testing.TB, s *redistest.Server, n int, o Options) []*Store {
	if o.Prefix == "" {
		o.Prefix = newPrefix()
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	var out []*Store
	for i := range n {
		o := o
		o.Replica = fmt.Sprintf("replica-%d", i)
		st := New(testClient(t, s), o)
		t.Cleanup(func() { _ = st.Close() })
		out = append(out, st)
	}
	return out
}

// The ledger conformance suite of the library, against a real redis-server:
// every verdict, lookup, park list and fleet status equals the in-memory
// reference's, boundaries included, with explicit times (client-time
// mode), for one replica and for three.
func TestConformance(t *testing.T) {
	ledgertest.Conform(t, ledgersOn(redistest.Start(t)))
}

// ledgersOn returns the NewFunc of ledgertest for Stores on s, in
// client-time mode (the suite's times are explicit).
func ledgersOn(s *redistest.Server) ledgertest.NewFunc {
	return func(t *testing.T, n int) []crashloop.Ledger {
		var out []crashloop.Ledger
		for _, st := range replicasOn(t, s, n, Options{ClientTime: true}) {
			out = append(out, st)
		}
		return out
	}
}

// The suite holds on Redis Cluster too: every step's keys share the hash
// tag, so the node runs them (it refuses a script whose keys span slots
// with CROSSSLOT).
func TestConformanceOnCluster(t *testing.T) {
	ledgertest.Conform(t, ledgersOn(redistest.Start(t, redistest.WithCluster())))
}

// By default the time of a step is the server's: the Judgment's time is
// not sent, the verdict and the park carry the server's clock, and a
// window counts by it.
func TestServerTime(t *testing.T) {
	s := redistest.Start(t)
	st := replicasOn(t, s, 1, Options{})[0]
	cfg := ledgertest.Config()
	require.NoError(t, st.Open(cfg, nil))
	ctx := context.Background()
	long := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC) // far from the server's clock
	before := time.Now()
	var v crashloop.Verdict
	for i := range cfg.Budget.MaxRespawns + 1 {
		var err error
		v, err = st.Judge(ctx, crashloop.Judgment{Key: "k", Ending: crashloop.EndingFailedStart, Incarnation: "k#1",
			Cause: "boom", Now: long.Add(time.Duration(i) * time.Hour), Members: 1, Failing: 1})
		require.NoError(t, err)
	}
	after := time.Now()
	// The Judgments were hours apart: by their times the window would have
	// emptied each time. By the server's, they came within milliseconds.
	require.True(t, v.NewPark, "the budget counted at the server's time: %+v", v)
	require.Equal(t, cfg.Budget.MaxRespawns, v.Park.Attempts)
	for _, tm := range []time.Time{v.Now, v.Park.Since} {
		require.False(t, tm.Before(before.Truncate(time.Microsecond)), "%v before %v", tm, before)
		require.False(t, tm.After(after), "%v after %v", tm, after)
	}
	pe, err := st.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, v.Park.Since, pe.Since)

	st2 := replicasOn(t, s, 1, Options{})[0]
	require.NoError(t, st2.Open(cfg, nil))
	f, err := st2.Fleet(ctx, long)
	require.NoError(t, err)
	require.Equal(t, crashloop.FleetStatus{FleetRestartsPerHour: cfg.Fleet.RestartsPerHour}, f)
}

// A budget alone is decided at the server's time by the budget step (see
// store.lua), which keeps time per key: a step is never dated before the
// newest respawn its key's window holds, and it neither reads nor writes
// the deployment's latest time. A step it hands to the judge (a park)
// keeps the key's time too. Client-time steps stand in for a server whose
// clock stepped back: they date a respawn an hour ahead of it.
func TestServerTimeBudgetStep(t *testing.T) {
	s := redistest.Start(t)
	rdb := testClient(t, s)
	ctx := context.Background()
	prefix := newPrefix()
	cfg := ledgertest.Configs()["budget"]
	cfg.Budget.MaxRespawns = 3
	client := replicasOn(t, s, 1, Options{Prefix: prefix, ClientTime: true})[0]
	server := replicasOn(t, s, 1, Options{Prefix: prefix})[0]
	require.NoError(t, firstErr(client.Open(cfg, nil), server.Open(cfg, nil)))
	judge := func(st *Store, key string, e crashloop.Ending, now time.Time) crashloop.Verdict {
		t.Helper()
		v, err := st.Judge(ctx, crashloop.Judgment{Key: key, Ending: e, Incarnation: key + "#1", Cause: "boom", Now: now})
		require.NoError(t, err)
		return v
	}
	get := func(key string) string {
		t.Helper()
		v, err := rdb.Get(ctx, key).Result()
		require.NoError(t, err)
		return v
	}
	ahead := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	aheadDigits := micros16(ahead.UnixMicro())

	require.Equal(t, 1, judge(client, "k", crashloop.EndingFailedStart, ahead).Attempt)
	require.NoError(t, rdb.Del(ctx, server.keys.fleet()).Err())
	before := time.Now().Truncate(time.Microsecond)
	v := judge(server, "k", crashloop.EndingFailedStart, time.Time{})
	after := time.Now()
	require.Equal(t, 2, v.Attempt)
	require.False(t, v.Now.Before(before) || v.Now.After(after), "the verdict carries the server's clock: %v", v.Now)
	require.Equal(t, 2, strings.Count(get(server.keys.record("k")), aheadDigits),
		"the respawn is dated at the key's newest, not at the server's earlier clock")
	require.Zero(t, rdb.Exists(ctx, server.keys.fleet()).Val(), "a server-time budget step writes no deployment time")

	// The deployment's latest time (a client step on another key) does
	// not date a server-time step.
	judge(client, "z", crashloop.EndingFailedStart, ahead)
	judge(server, "other", crashloop.EndingFailedStart, time.Time{})
	rec := get(server.keys.record("other"))
	at := time.UnixMicro(mustInt(t, rec[len(rec)-16:]))
	require.False(t, at.Before(before) || at.After(time.Now()), "dated %v, want the server's clock", at)

	// A permanent failure goes to the judge, which parks at the key's time.
	require.NoError(t, rdb.Del(ctx, server.keys.fleet()).Err())
	v = judge(server, "k", crashloop.EndingPermanent, time.Time{})
	require.True(t, v.NewPark)
	require.Equal(t, crashloop.ReasonPermanent, v.Park.Reason)
	require.Equal(t, 2, v.Park.Attempts)
	require.Equal(t, aheadDigits, get(server.keys.fleet())[:16], "the judge's time was the key's newest respawn")

	// So does the judge's fast path, on a deployment whose configuration
	// changed from a budget alone to every guard.
	judge(client, "m", crashloop.EndingFailedStart, ahead)
	require.NoError(t, rdb.Del(ctx, server.keys.fleet()).Err())
	full := replicasOn(t, s, 1, Options{Prefix: prefix})[0]
	require.NoError(t, full.Open(ledgertest.Config(), nil))
	require.Equal(t, 2, judge(full, "m", crashloop.EndingFailedStart, time.Time{}).Attempt)
	require.Equal(t, 4, strings.Count(get(server.keys.record("m")), aheadDigits),
		"the budget's two respawns, the guard's and the hourly cap's restart, all at the key's newest")
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return n
}
