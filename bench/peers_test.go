package bench_test

// crashloop against golang.org/x/time/rate, the limiter Go programs reach
// for first. The two do not mean the same thing (a rolling window that
// parks, a token bucket that refills), so each pair is set to the same
// rate and driven by the same times, and each side's steady state is
// checked: docs/benchmarks.md states the ratios of one run.

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/benchtest"
)

// rateKeyed is the hand-written peer of a RespawnBudget: a sync.Mutex
// around a map of one rate.Limiter per key, as a per-client limiter is
// usually written. The limiter's own lock is taken after the map's is
// released. It allows a key as many events in the budget's window as the
// budget does (a bucket of MaxRespawns, refilled at MaxRespawns/Window).
type rateKeyed struct {
	mu    sync.Mutex
	m     map[string]*rate.Limiter
	limit rate.Limit
	burst int
}

func newRateKeyed(c crashloop.BudgetConfig) *rateKeyed {
	return &rateKeyed{m: make(map[string]*rate.Limiter),
		limit: rate.Limit(float64(c.MaxRespawns) / c.Window.Seconds()), burst: c.MaxRespawns}
}

// allow reports whether key may fail once more at now.
func (r *rateKeyed) allow(key string, now time.Time) bool {
	r.mu.Lock()
	l := r.m[key]
	if l == nil {
		l = rate.NewLimiter(r.limit, r.burst)
		r.m[key] = l
	}
	r.mu.Unlock()
	return l.AllowN(now, 1)
}

// shardedBudget spreads the keys over 16 budgets by hash/maphash, each with
// its own lock: the sharding the library does not do, built from outside
// to measure what it would gain and cost.
type shardedBudget struct {
	seed   maphash.Seed
	shards [16]*crashloop.RespawnBudget
}

func newShardedBudget(b *testing.B, cfg crashloop.BudgetConfig) *shardedBudget {
	s := &shardedBudget{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i] = newBudget(b, cfg)
	}
	return s
}

func (s *shardedBudget) FailedAt(key string, cause error, now time.Time) (time.Duration, error) {
	return s.shards[maphash.String(s.seed, key)%uint64(len(s.shards))].FailedAt(key, cause, now)
}

func newBudget(b *testing.B, cfg crashloop.BudgetConfig) *crashloop.RespawnBudget {
	bud, err := crashloop.NewRespawnBudget(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return bud
}

// warm fails every key `passes` times, gap apart, and returns the time of
// the last failure.
func warm(b *testing.B, fail func(key string, now time.Time) bool, gap time.Duration, passes int) time.Time {
	now := time.Now()
	for range passes {
		now = now.Add(gap)
		for _, key := range keys {
			if !fail(key, now) {
				b.Fatalf("%s refused while warming up", key)
			}
		}
	}
	return now
}

// sides are the three sides of a keyed benchmark. Each makes a fresh
// object of cfg and returns a function that fails a key at a time and
// reports whether it was allowed: a RespawnBudget, the keys spread over 16
// budgets, and the mutex+map+rate.Limiter peer.
var sides = []struct {
	name string
	make func(b *testing.B, cfg crashloop.BudgetConfig) func(key string, now time.Time) bool
}{
	{"crashloop.FailedAt", func(b *testing.B, cfg crashloop.BudgetConfig) func(string, time.Time) bool {
		bud := newBudget(b, cfg)
		return func(key string, now time.Time) bool { _, err := bud.FailedAt(key, errBench, now); return err == nil }
	}},
	{"crashloop.FailedAt/16-budgets-by-maphash", func(b *testing.B, cfg crashloop.BudgetConfig) func(string, time.Time) bool {
		bud := newShardedBudget(b, cfg)
		return func(key string, now time.Time) bool { _, err := bud.FailedAt(key, errBench, now); return err == nil }
	}},
	{"mutex+map+rate.AllowN", func(_ *testing.B, cfg crashloop.BudgetConfig) func(string, time.Time) bool {
		return newRateKeyed(cfg).allow
	}},
}

// BenchmarkKeyed: one failure of each of 1,000 keys in turn from one
// goroutine, a pass over the keys every gap, for the three sides. In "default" the budget is the one that ships (3 respawns in
// 60s) and a key fails every 21s, so each failure drops one respawn of 3
// and records one; in "full" it is the root benchmarks' (100 a minute, a
// failure every 610ms: windows of 99 respawns). The peer's bucket never
// runs dry in either.
func BenchmarkKeyed(b *testing.B) {
	for _, w := range []struct {
		name   string
		cfg    crashloop.BudgetConfig
		gap    time.Duration
		passes int
	}{{"default", crashloop.DefaultBudgetConfig(), 21 * time.Second, 3}, {"full", budgetConfig(), budgetGap, budgetFull}} {
		for _, side := range sides {
			b.Run(w.name+"/"+side.name, func(b *testing.B) {
				b.ReportAllocs()
				fail := side.make(b, w.cfg)
				now := warm(b, fail, w.gap, w.passes)
				b.ResetTimer()
				k := 0
				for ts := range benchtest.Times(b, now, w.gap, nKeys) {
					for _, t := range ts {
						if !fail(keys[k], t) {
							b.Fatalf("%s refused: the benchmark left its steady state", keys[k])
						}
						if k++; k == nKeys {
							k = 0
						}
					}
				}
			})
		}
	}
}

// BenchmarkKeyedParallel: the three sides, "full" workload, from
// b.RunParallel's goroutines (GOMAXPROCS of them), each going over all
// 1,000 keys in turn from its own first key as fast as it can. (With a
// share of the keys each, a goroutine that the OS stops for a while would
// leave its keys idle in the budget's time, and the budget would reclaim
// them.) Passes are 2*budgetGap apart, so that a window holds about 49
// respawns and the passes in flight on up to 50 cores never fill it. This
// is saturation, which no restart loop reaches: BenchmarkRealistic is a
// workload.
func BenchmarkKeyedParallel(b *testing.B) {
	for _, side := range sides {
		b.Run(side.name, func(b *testing.B) {
			b.ReportAllocs()
			fail := side.make(b, budgetConfig())
			now := warm(b, fail, budgetGap, budgetFull)
			clk, first := benchtest.NewPassClock(now, 2*budgetGap), benchtest.Starts(nKeys)
			var refused atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				k0 := first()
				k, now := k0, clk.Next()
				for pb.Next() {
					if !fail(keys[k], now) {
						refused.Add(1)
					}
					if k++; k == nKeys {
						k = 0
					}
					if k == k0 {
						now = clk.Next()
					}
				}
			})
			if n := refused.Load(); n > 0 {
				b.Fatalf("%d failures refused: the benchmark left its steady state", n)
			}
		})
	}
}

// BenchmarkSingle: one RestartLoopGuard at the defaults (3 in 60s) against
// one rate.Limiter of the same rate (one every 20s, a burst of 3). In the
// storm a restart comes every millisecond: the guard is tripped and the
// limiter refuses (but for the one token it regains every 20 seconds). In
// the calm one comes every 31 seconds: the guard holds 2 restarts and the
// limiter allows each.
func BenchmarkSingle(b *testing.B) {
	for _, w := range []struct {
		name  string
		step  time.Duration
		storm bool
	}{{"storm", time.Millisecond, true}, {"calm", 31 * time.Second, false}} {
		// check fails the benchmark if the share of calls that tripped (or
		// were refused) is not the steady state's: all in the storm (but
		// for one in 20,000 for the limiter), none in the calm.
		check := func(b *testing.B, stopped int) {
			if w.storm && stopped < b.N-b.N/20000-1 || !w.storm && stopped > 0 {
				b.Fatalf("%d of %d calls stopped: the benchmark left its steady state", stopped, b.N)
			}
		}
		b.Run(w.name+"/crashloop.RecordAt", func(b *testing.B) {
			b.ReportAllocs()
			g, err := crashloop.NewRestartLoopGuard(3, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			for range 10 {
				now = now.Add(w.step)
				g.RecordAt(now)
			}
			b.ResetTimer()
			tripped := 0
			for ts := range benchtest.Times(b, now, w.step, 1) {
				for _, t := range ts {
					if g.RecordAt(t) {
						tripped++
					}
				}
			}
			check(b, tripped)
		})
		b.Run(w.name+"/rate.AllowN", func(b *testing.B) {
			b.ReportAllocs()
			l := rate.NewLimiter(rate.Every(20*time.Second), 3)
			now := time.Now()
			for range 10 {
				now = now.Add(w.step)
				l.AllowN(now, 1)
			}
			b.ResetTimer()
			refused := 0
			for ts := range benchtest.Times(b, now, w.step, 1) {
				for _, t := range ts {
					if !l.AllowN(t, 1) {
						refused++
					}
				}
			}
			check(b, refused)
		})
	}
}
