package redisstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Properties of the kernels that only Redis has: key layout, expiry, number
// precision, the script cache, the server's clock.

func TestNewKeyspace(t *testing.T) {
	ks, err := newKeyspace("prod")
	require.NoError(t, err)
	require.Equal(t, "{prod}:b:w{1}", ks.budget("w{1}"))
	require.Equal(t, "{prod}:c:w", ks.chain("w"))
	require.Equal(t, "{prod}:g:tg", ks.guard("tg"))
	require.Equal(t, "{prod}:f:fleet", ks.fleet("fleet"))
	for _, bad := range []string{"", "{a}", "a}", "{"} {
		_, err := newKeyspace(bad)
		require.Error(t, err, "%q", bad)
	}
}

func TestTimesOutOfRange(t *testing.T) {
	k := &kernel{}
	for _, bad := range []time.Time{time.UnixMicro(-1), time.UnixMicro(maxMicros)} {
		_, err := k.nowArg(bad)
		require.ErrorContains(t, err, "out of the range 1970 to 2286")
	}
	at, err := k.nowArg(time.UnixMicro(maxMicros - 1))
	require.NoError(t, err)
	require.Equal(t, int64(maxMicros-1), at)
}

func TestDurationsInMicroseconds(t *testing.T) {
	require.Equal(t, int64(1), ttlMillis(0))
	require.Equal(t, int64(1), ttlMillis(time.Millisecond))
	require.Equal(t, int64(2), ttlMillis(time.Millisecond+1))
	require.Equal(t, int64(1000), micros(time.Millisecond))
	require.Equal(t, int64(1000), micros(time.Millisecond+999))
	require.Equal(t, int64(1000), microsUp(time.Millisecond))
	require.Equal(t, int64(1001), microsUp(time.Millisecond+1))
	require.Equal(t, int64(0), microsUp(0))
}

func TestCauseRoundTrip(t *testing.T) {
	require.Equal(t, "", encodeCause(nil))
	require.NoError(t, decodeCause(""))
	require.Equal(t, "e", encodeCause(errors.New("")))
	require.EqualError(t, decodeCause("e"), "")
	require.EqualError(t, decodeCause(encodeCause(errors.New("exit 1"))), "exit 1")
}

// All the keys of a deployment hash to one slot: a Redis Cluster node, which
// refuses any script whose keys span slots (CROSSSLOT), runs every call, and
// would run a script on several guards of a deployment together; user keys
// with braces of their own do not change the slot.
func TestKernelsOnRedisCluster(t *testing.T) {
	s := redistest.Start(t, redistest.WithCluster())
	k := testKernel(t, s, false)
	ctx := context.Background()
	bcfg, ccfg, gcfg, fcfg := crashloop.DefaultBudgetConfig(), crashloop.DefaultChainConfig(), crashloop.DefaultGuardConfig(), crashloop.DefaultFleetConfig()
	for _, key := range []string{"w1", "{w2}", "a{b}c"} {
		_, err := k.budgetFailed(ctx, bcfg, key, nil, t0)
		require.NoError(t, err)
		_, err = k.chainRescue(ctx, ccfg, key, "i", true, t0)
		require.NoError(t, err)
		_, err = k.guardRecord(ctx, gcfg, key, t0)
		require.NoError(t, err)
	}
	_, err := k.fleetState(ctx, fcfg, "fleet", "", 1, 2, 0, t0)
	require.NoError(t, err)

	rdb := s.Client(nil)
	keys, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 3*3+1) // the budget, chain and guard of each key; the fleet
	slot := rdb.ClusterKeySlot(ctx, keys[0]).Val()
	for _, key := range keys {
		require.True(t, strings.HasPrefix(key, k.keys.tag), key)
		require.Equal(t, slot, rdb.ClusterKeySlot(ctx, key).Val(), key)
	}

	both := "return redis.call('EXISTS', KEYS[1], KEYS[2])"
	n, err := rdb.Eval(ctx, both, []string{k.keys.budget("w1"), k.keys.fleet("fleet")}).Int()
	require.NoError(t, err)
	require.Equal(t, 2, n)
	// Without the tag, the same script is refused.
	err = rdb.Eval(ctx, both, []string{"b:w1", "f:fleet"}).Err()
	require.ErrorContains(t, err, "CROSSSLOT")
}

// Times are kept to the microsecond: no Lua formatting with 14 digits.
func TestTimesAreExactInRedis(t *testing.T) {
	s := redistest.Start(t)
	k := testKernel(t, s, false)
	ctx := context.Background()
	now := time.UnixMicro(1_800_000_000_123_457)
	d, err := k.budgetFailed(ctx, crashloop.DefaultBudgetConfig(), "k", nil, now)
	require.NoError(t, err)
	require.True(t, d.now.Equal(now))
	rdb := s.Client(nil)
	key := k.keys.budget("k")
	require.Equal(t, "1800000000123457"+"1800000000123457", rdb.Get(ctx, key).Val(), "the latest time, then the window")
	// A time between two microseconds is read as the earlier one.
	d, err = k.budgetFailed(ctx, crashloop.DefaultBudgetConfig(), "k", nil, now.Add(999))
	require.NoError(t, err)
	require.True(t, d.now.Equal(now))
	require.Equal(t, 2, d.attempt)
}

// ttlOf returns the PTTL of key: -1 for no expiry, -2 for no key.
func ttlOf(t *testing.T, rdb *redis.Client, key string) time.Duration {
	d, err := rdb.PTTL(context.Background(), key).Result()
	require.NoError(t, err)
	return d
}

// requireTTL checks that key expires within span+grace, give or take the
// time the test took since the call (under a second).
func requireTTL(t *testing.T, rdb *redis.Client, key string, want time.Duration) {
	t.Helper()
	d := ttlOf(t, rdb, key)
	require.LessOrEqual(t, d, want, key)
	require.Greater(t, d, want-time.Second, key)
}

func TestTTLs(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(nil)
	k := testKernel(t, s, false)
	k.grace = time.Second
	ctx := context.Background()

	t.Run("budget: expires a window after the last call, never while parked", func(t *testing.T) {
		cfg := crashloop.BudgetConfig{MaxRespawns: 1, Window: time.Minute}
		key := k.keys.budget("k")
		_, err := k.budgetFailed(ctx, cfg, "k", nil, t0)
		require.NoError(t, err)
		requireTTL(t, rdb, key, 61*time.Second)
		d, err := k.budgetFailed(ctx, cfg, "k", nil, t0)
		require.NoError(t, err)
		require.True(t, d.parkedNow)
		require.Equal(t, time.Duration(-1), ttlOf(t, rdb, key), "a park never expires")
		require.Equal(t, []string{"k"}, rdb.SMembers(ctx, k.keys.parked()).Val())
		require.Equal(t, time.Duration(-1), ttlOf(t, rdb, k.keys.parked()), "nor does the list of parks")
		_, err = k.budgetFailed(ctx, cfg, "k", nil, t0.Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, time.Duration(-1), ttlOf(t, rdb, key), "still parked")
		_, ok, err := k.budgetResume(ctx, cfg, "k", t0)
		require.NoError(t, err)
		require.True(t, ok)
		requireTTL(t, rdb, key, 61*time.Second)
		require.Equal(t, "1800003600000000", rdb.Get(ctx, key).Val(), "the window is gone; the latest time (t0+1h) stays")
		require.Equal(t, time.Duration(-2), ttlOf(t, rdb, k.keys.parked()), "the emptied list is gone")
	})

	t.Run("chain: expires a reset gap after the last rescue, never while marked", func(t *testing.T) {
		cfg := crashloop.ChainConfig{MaxChain: 1, ResetGap: 20 * time.Minute}
		key := k.keys.chain("k")
		_, err := k.chainRescue(ctx, cfg, "k", "i", true, t0)
		require.NoError(t, err)
		requireTTL(t, rdb, key, 20*time.Minute+time.Second)
		d, err := k.chainRescue(ctx, cfg, "k", "i", true, t0)
		require.NoError(t, err)
		require.True(t, d.markedNow)
		require.Equal(t, time.Duration(-1), ttlOf(t, rdb, key))
		require.NoError(t, k.chainClear(ctx, cfg, "k"))
		requireTTL(t, rdb, key, 20*time.Minute+time.Second)
	})

	t.Run("guard: expires a window after the last restart", func(t *testing.T) {
		cfg := crashloop.GuardConfig{MaxRestarts: 1, Window: 10 * time.Second}
		_, err := k.guardRecord(ctx, cfg, "g", t0)
		require.NoError(t, err)
		requireTTL(t, rdb, k.keys.guard("g"), 11*time.Second)
	})

	t.Run("fleet: expires an hour after the last call, never while tripped", func(t *testing.T) {
		cfg := crashloop.FleetConfig{RestartsPerHour: 2, FailingFraction: 1, MinFailing: 1, Cooldown: time.Minute}
		key := k.keys.fleet("f")
		_, err := k.fleetRestart(ctx, cfg, "f", t0)
		require.NoError(t, err)
		requireTTL(t, rdb, key, time.Hour+time.Second)
		d, err := k.fleetRestart(ctx, cfg, "f", t0)
		require.NoError(t, err)
		require.True(t, d.trippedNow)
		require.Equal(t, time.Duration(-1), ttlOf(t, rdb, key), "its re-arm must be seen")
		d, err = k.fleetTripped(ctx, cfg, "f", t0.Add(time.Minute))
		require.NoError(t, err)
		require.True(t, d.rearmed)
		requireTTL(t, rdb, key, time.Hour+time.Second)
	})
}

// Idle keys disappear on their own; the server's clock decides when.
func TestIdleKeysExpire(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(nil)
	k := testKernel(t, s, true)
	k.grace = 0
	ctx := context.Background()
	cfg := crashloop.BudgetConfig{MaxRespawns: 2, Window: 5 * time.Millisecond}
	_, err := k.budgetFailed(ctx, cfg, "idle", nil, time.Time{})
	require.NoError(t, err)
	c0 := crashloop.BudgetConfig{MaxRespawns: 0, Window: 5 * time.Millisecond}
	_, err = k.budgetFailed(ctx, c0, "parked", nil, time.Time{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return rdb.Exists(ctx, k.keys.budget("idle")).Val() == 0
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, int64(1), rdb.Exists(ctx, k.keys.budget("parked")).Val(), "a park stays")
	pe, err := k.budgetSpawn(ctx, "parked")
	require.NoError(t, err)
	require.Equal(t, crashloop.ReasonBudgetExhausted, pe.Reason)
}

// A server that lost its script cache (SCRIPT FLUSH, a restart, a failover)
// is sent the script again: EVALSHA answers NOSCRIPT, EVAL loads it.
func TestScriptCacheLoss(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(nil)
	k := testKernel(t, s, false)
	ctx := context.Background()
	cfg := crashloop.DefaultGuardConfig()
	calls := func(cmd string) int64 {
		info := rdb.Info(ctx, "commandstats").Val()
		for _, line := range strings.Split(info, "\r\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
				var n int64
				for _, c := range rest {
					if c < '0' || c > '9' {
						break
					}
					n = n*10 + int64(c-'0')
				}
				return n
			}
		}
		return 0
	}
	_, err := k.guardRecord(ctx, cfg, "g", t0)
	require.NoError(t, err)
	require.Equal(t, int64(1), calls("eval"), "the first call loads the script")
	_, err = k.guardRecord(ctx, cfg, "g", t0)
	require.NoError(t, err)
	require.Equal(t, int64(2), calls("evalsha"))
	require.Equal(t, int64(1), calls("eval"), "then EVALSHA alone")

	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	d, err := k.guardRecord(ctx, cfg, "g", t0)
	require.NoError(t, err)
	require.Equal(t, 3, d.restarts)
	require.Equal(t, int64(2), calls("eval"))

	s.Restart() // no persistence: an empty server
	d, err = k.guardRecord(ctx, cfg, "g", t0)
	require.NoError(t, err)
	require.Equal(t, 1, d.restarts)
}

// In server-time mode the kernels read the server's clock (TIME), and the
// caller's time is not sent at all.
func TestServerTime(t *testing.T) {
	s := redistest.Start(t)
	k := testKernel(t, s, true)
	ctx := context.Background()
	before := time.Now().Truncate(time.Microsecond)
	d, err := k.budgetFailed(ctx, crashloop.BudgetConfig{MaxRespawns: 0, Window: time.Minute}, "k", nil, t0)
	after := time.Now()
	require.NoError(t, err)
	require.True(t, d.parkedNow)
	require.False(t, d.now.Before(before), "%v before %v", d.now, before)
	require.False(t, d.now.After(after), "%v after %v", d.now, after)
	require.True(t, d.park.Since.Equal(d.now))
	at, err := k.nowArg(t0)
	require.NoError(t, err)
	require.Equal(t, "", at)
}

// Replicas racing on one key: each decision is one atomic step, so exactly
// MaxRespawns respawns are granted and exactly one call parks the key (and
// announces it), however the calls interleave. The same holds for a fleet
// trip and its re-arm.
func TestExactlyOnceAcrossReplicas(t *testing.T) {
	s := redistest.Start(t)
	ks, err := newKeyspace("race")
	require.NoError(t, err)
	const replicas, workers, calls = 3, 8, 20
	cfg := crashloop.DefaultBudgetConfig()
	fcfg := crashloop.FleetConfig{RestartsPerHour: 10, FailingFraction: 1, MinFailing: 1, Cooldown: 0}
	type tally struct{ granted, parks, trips, rearms int }
	results := make(chan tally, replicas*workers)
	var wg sync.WaitGroup
	for range replicas {
		k := &kernel{rdb: s.Client(nil), keys: ks, serverTime: true, grace: time.Minute, timeout: 10 * time.Second}
		for range workers {
			wg.Go(func() {
				var n tally
				for range calls {
					d, err := k.budgetFailed(context.Background(), cfg, "shared", errors.New("boom"), time.Time{})
					if err != nil {
						t.Error(err)
						return
					}
					if d.park == nil {
						n.granted++
					}
					if d.parkedNow {
						n.parks++
					}
					f, err := k.fleetRestart(context.Background(), fcfg, "fleet", time.Time{})
					if err != nil {
						t.Error(err)
						return
					}
					if f.trippedNow {
						n.trips++
					}
					if f.rearmed {
						n.rearms++
					}
				}
				results <- n
			})
		}
	}
	wg.Wait()
	close(results)
	var sum tally
	for n := range results {
		sum.granted += n.granted
		sum.parks += n.parks
		sum.trips += n.trips
		sum.rearms += n.rearms
	}
	require.Equal(t, cfg.MaxRespawns, sum.granted)
	require.Equal(t, 1, sum.parks)
	// Cooldown 0: every call after a trip re-arms it, so trips and re-arms
	// alternate; 480 restarts, 10 to a trip, the re-arm call recording the
	// first restart of the next hour.
	require.Equal(t, replicas*workers*calls/fcfg.RestartsPerHour, sum.trips)
	require.Equal(t, sum.trips-1, sum.rearms)
}

// A park decided outside the budget (the Supervisor's permanent errors,
// guard trips, escalated chains) and the window cleared by a healthy run:
// the library's unexported RespawnBudget.parkAt and settle, whose rules
// (first park wins; a parked key keeps its window) are pinned here.
func TestBudgetParkAndSettle(t *testing.T) {
	s := redistest.Start(t)
	k := testKernel(t, s, false)
	ctx := context.Background()
	cfg := crashloop.DefaultBudgetConfig()
	for range 2 {
		_, err := k.budgetFailed(ctx, cfg, "k", nil, t0)
		require.NoError(t, err)
	}
	d, err := k.budgetPark(ctx, cfg, "k", "permanent_error", errors.New("exit 78"), t0.Add(time.Second))
	require.NoError(t, err)
	require.True(t, d.parkedNow)
	require.Equal(t, "key=\"k\" reason=\"permanent_error\" cause=error: exit 78 attempts=2 since=1800000001000000", parkText(d.park))
	require.Equal(t, []crashloop.EventKind{crashloop.EventStartupExhausted}, kinds(d.events("k", cfg, nil, 0)))
	_, err = k.budgetPark(ctx, cfg, "other", "two\nlines", nil, t0)
	require.ErrorContains(t, err, "must be one line")

	d, err = k.budgetPark(ctx, cfg, "k", "restart_loop_guard", nil, t0.Add(2*time.Second))
	require.NoError(t, err)
	require.False(t, d.parkedNow)
	require.Equal(t, "permanent_error", d.park.Reason, "the first park stands")
	require.Empty(t, d.events("k", cfg, nil, 0))

	require.NoError(t, k.budgetSettle(ctx, "k"))
	n, pe, err := k.budgetView(ctx, cfg, "k", t0.Add(2*time.Second))
	require.NoError(t, err)
	require.Equal(t, 2, n, "a parked key keeps its window")
	require.NotNil(t, pe)

	_, ok, err := k.budgetResume(ctx, cfg, "k", t0.Add(3*time.Second))
	require.NoError(t, err)
	require.True(t, ok)
	_, err = k.budgetFailed(ctx, cfg, "k", nil, t0.Add(3*time.Second))
	require.NoError(t, err)
	require.NoError(t, k.budgetSettle(ctx, "k"))
	n, pe, err = k.budgetView(ctx, cfg, "k", t0.Add(3*time.Second))
	require.NoError(t, err)
	require.Equal(t, 0, n, "a healthy run clears the window")
	require.Nil(t, pe)
}

// The fleet state is the sum of every replica's report; a report counts
// while its age is at most its lifetime (exactly the lifetime still counts),
// and a replica that stopped reporting stops counting.
func TestFleetSumsReplicaReports(t *testing.T) {
	s := redistest.Start(t)
	k := testKernel(t, s, false)
	rdb := s.Client(nil)
	ctx := context.Background()
	cfg := crashloop.FleetConfig{RestartsPerHour: 40, FailingFraction: 0.5, MinFailing: 2, Cooldown: 2 * time.Minute}
	life := 30 * time.Second
	note := func(fleet, replica string, failing, total int, at time.Duration) fleetDecision {
		t.Helper()
		d, err := k.fleetState(ctx, cfg, fleet, replica, failing, total, life, t0.Add(at))
		require.NoError(t, err)
		return d
	}

	d := note("f1", "a", 1, 1, 0)
	require.False(t, d.tripped, "one failing member never trips on the fraction")
	d = note("f1", "b", 1, 1, life) // a's report is exactly its lifetime old: it counts
	require.True(t, d.trippedNow)
	evs := d.events("f1", cfg)
	require.Len(t, evs, 1)
	require.Equal(t, 2, evs[0].Failing)
	require.Equal(t, 2, evs[0].Total)
	require.Equal(t, "channel crash-loop: 2/2 channels failing", evs[0].Reason)

	note("f2", "a", 1, 1, 0)
	d = note("f2", "b", 1, 1, life+time.Microsecond) // a's report has expired
	require.False(t, d.tripped)
	require.False(t, rdb.HExists(ctx, k.keys.fleet("f2"), "r:a").Val(), "the expired report is dropped")
	st, _, err := k.fleetStatus(ctx, cfg, "f2", t0.Add(life+time.Microsecond))
	require.NoError(t, err)
	require.Equal(t, 1, st.FailingChannels)
	require.Equal(t, 1, st.TotalChannels)

	note("f3", "a", 1, 4, 0)
	note("f3", "b", 0, 4, 0)
	d = note("f3", "a", 3, 4, 0) // a's new report replaces its old one: 3/8
	require.False(t, d.tripped)
	d = note("f3", "b", 1, 4, 0) // 4/8
	require.True(t, d.trippedNow)
	require.Equal(t, 4, d.tripFailing)
	require.Equal(t, 8, d.tripTotal)
	require.NoError(t, k.fleetReset(ctx, cfg, "f3"))
	d = note("f3", "a", 1, 4, 0)
	require.False(t, d.tripped, "Reset dropped every report")
	require.Equal(t, 1, d.tripFailing)
	require.Equal(t, 4, d.tripTotal)
}
