package crashloop

// Benchmarks of the hot paths (docs/benchmarks.md says how to run them and
// what each measures; the comparisons with golang.org/x/time/rate live in
// the nested module ./bench):
//
//	go test -run '^$' -bench . -benchmem -count 6 ./bench/... .
//
// A benchmark of one object passes explicit times that advance each call,
// so windows roll as they do in production; the times are computed ahead
// with the timer stopped (benchtest.Times), so the loop times the call and not
// time.Time.Add. The benchmarks over 1,000 keys move time on once per pass
// over the keys. Each benchmark fails if it leaves its steady state.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/crashloopguard/crashloop/internal/benchtest"
)

// benchKeys is the number of keys (or guards, one per key) of the
// benchmarks over many keys.
const benchKeys = 1000

var benchKeyNames = func() []string {
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("session-%04d", i)
	}
	return keys
}()

var errBench = errors.New("bench: exit status 1")

// Sinks keep the compiler from dropping the benchmarked calls.
var (
	sinkBool     bool
	sinkInt      int
	sinkDuration time.Duration
)

// benchBudgetConfig allows 100 respawns a minute. A key that fails every
// benchBudgetGap (a bit more than Window/MaxRespawns) never parks, and each
// failure drops one respawn from a full window (benchBudgetFull respawns)
// and records one.
func benchBudgetConfig() BudgetConfig {
	return BudgetConfig{MaxRespawns: 100, Window: time.Minute, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}
}

const (
	benchBudgetGap  = 610 * time.Millisecond
	benchBudgetFull = 99
)

// benchFleetConfig trips at 1,000 restarts an hour; a restart every
// benchFleetGap (973 an hour) never trips it, and each drops one restart
// from a full hour and records one.
func benchFleetConfig() FleetConfig {
	c := DefaultFleetConfig()
	c.RestartsPerHour = 1000
	return c
}

const benchFleetGap = 3700 * time.Millisecond

// benchIncarnations alternate every second rescue of a key, so its chain
// goes 1, 2, 1, 2 ... and never escalates (nor goes idle and reclaimed).
var benchIncarnations = [2]string{"incarnation-a", "incarnation-b"}

// RestartLoopGuard.

// BenchmarkGuardRecordAt: a guard at the defaults (3 in 60s) under a
// restart every millisecond: the window stays full and each call replaces
// its oldest restart.
func BenchmarkGuardRecordAt(b *testing.B) {
	b.ReportAllocs()
	g, err := NewRestartLoopGuard(3, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for range 10 {
		now = now.Add(time.Millisecond)
		g.RecordAt(now)
	}
	b.ResetTimer()
	tripped := false
	for ts := range benchtest.Times(b, now, time.Millisecond, 1) {
		for _, t := range ts {
			tripped = g.RecordAt(t)
		}
	}
	sinkBool = tripped
}

// BenchmarkGuardRecordAtParallel: 1,000 guards at the defaults (one per
// channel), each goroutine recording restarts on its own share of them.
func BenchmarkGuardRecordAtParallel(b *testing.B) {
	b.ReportAllocs()
	guards := make([]*RestartLoopGuard, benchKeys)
	now := time.Now()
	for i := range guards {
		g, err := NewRestartLoopGuard(3, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		for range 3 {
			g.RecordAt(now)
		}
		guards[i] = g
	}
	clk, share := benchtest.NewPassClock(now, time.Millisecond), benchtest.Shares(benchKeys)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		lo, hi := share()
		tripped, k, now := false, lo, clk.Next()
		for pb.Next() {
			tripped = guards[k].RecordAt(now) || tripped
			if k++; k == hi {
				k, now = lo, clk.Next()
			}
		}
		sinkBool = tripped
	})
}

// BenchmarkGuardRecord: Record reads the real clock (time.Now).
func BenchmarkGuardRecord(b *testing.B) {
	b.ReportAllocs()
	g, err := NewRestartLoopGuard(3, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	tripped := false
	for i := 0; i < b.N; i++ {
		tripped = g.Record()
	}
	sinkBool = tripped
}

// BenchmarkGuardRecordParallel: Record on 1,000 guards in parallel.
func BenchmarkGuardRecordParallel(b *testing.B) {
	b.ReportAllocs()
	guards := make([]*RestartLoopGuard, benchKeys)
	for i := range guards {
		g, err := NewRestartLoopGuard(3, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		guards[i] = g
	}
	share := benchtest.Shares(benchKeys)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		lo, hi := share()
		tripped, k := false, lo
		for pb.Next() {
			tripped = guards[k].Record() || tripped
			if k++; k == hi {
				k = lo
			}
		}
		sinkBool = tripped
	})
}

// BenchmarkGuardLimit: a guard of limit 3 and one of limit 10,000, each
// with a full window that rolls: restarts come every Window/limit (plus a
// nanosecond), so each call drops one restart and records one. The cost
// must not depend on the limit.
func BenchmarkGuardLimit(b *testing.B) {
	for _, limit := range []int{3, 10000} {
		b.Run(fmt.Sprintf("max=%d", limit), func(b *testing.B) {
			b.ReportAllocs()
			g, err := NewRestartLoopGuard(limit, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			step := time.Minute/time.Duration(limit) + 1
			now := time.Now()
			for range 2*limit + 10 {
				now = now.Add(step)
				g.RecordAt(now)
			}
			b.ResetTimer()
			tripped := false
			for ts := range benchtest.Times(b, now, step, 1) {
				for _, t := range ts {
					tripped = g.RecordAt(t)
				}
				now = ts[len(ts)-1]
			}
			b.StopTimer()
			if n := g.RestartsAt(now); !tripped || n != limit {
				b.Fatalf("window holds %d restarts (tripped %v), want a full window of %d", n, tripped, limit)
			}
		})
	}
}

// RespawnBudget.

// warmBudget returns a budget of benchBudgetConfig whose keys have full
// windows, and the time of their last failure.
func warmBudget(b *testing.B, keys []string) (*RespawnBudget, time.Time) {
	bud, err := NewRespawnBudget(benchBudgetConfig())
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for range benchBudgetFull {
		now = now.Add(benchBudgetGap)
		for _, key := range keys {
			if _, err := bud.FailedAt(key, errBench, now); err != nil {
				b.Fatal(err)
			}
		}
	}
	return bud, now
}

// BenchmarkBudgetFailedAt: FailedAt on one warm key, a failure every
// benchBudgetGap.
func BenchmarkBudgetFailedAt(b *testing.B) {
	b.ReportAllocs()
	const key = "session-0001"
	bud, now := warmBudget(b, []string{key})
	b.ResetTimer()
	var d time.Duration
	var err error
	for ts := range benchtest.Times(b, now, benchBudgetGap, 1) {
		for _, t := range ts {
			if d, err = bud.FailedAt(key, errBench, t); err != nil {
				b.Fatal(err)
			}
		}
	}
	sinkDuration = d
}

// BenchmarkBudgetFailedAtKeys: FailedAt over 1,000 warm keys in turn from
// one goroutine, each key failing every benchBudgetGap: the serial twin of
// BenchmarkBudgetFailedAtParallel.
func BenchmarkBudgetFailedAtKeys(b *testing.B) {
	b.ReportAllocs()
	bud, now := warmBudget(b, benchKeyNames)
	b.ResetTimer()
	var d time.Duration
	var err error
	k := 0
	for ts := range benchtest.Times(b, now, benchBudgetGap, benchKeys) {
		for _, t := range ts {
			if d, err = bud.FailedAt(benchKeyNames[k], errBench, t); err != nil {
				b.Fatal(err)
			}
			if k++; k == benchKeys {
				k = 0
			}
		}
	}
	sinkDuration = d
}

// BenchmarkBudgetFailedAtParallel: FailedAt over 1,000 warm keys of one
// budget from every goroutine, each going over all the keys in turn from
// its own first key. (With a share of the keys each, a goroutine that the
// OS stops for a while would leave its keys idle in the budget's time,
// which the others move on, and the budget would reclaim them.) Passes
// are 2*benchBudgetGap apart, so that a window holds about 49 respawns
// and the passes in flight on up to 50 cores never fill it.
func BenchmarkBudgetFailedAtParallel(b *testing.B) {
	b.ReportAllocs()
	bud, now := warmBudget(b, benchKeyNames)
	clk, first := benchtest.NewPassClock(now, 2*benchBudgetGap), benchtest.Starts(benchKeys)
	var parks atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var sum time.Duration
		k0 := first()
		k, now := k0, clk.Next()
		for pb.Next() {
			d, err := bud.FailedAt(benchKeyNames[k], errBench, now)
			if err != nil {
				parks.Add(1)
			}
			sum += d
			if k++; k == benchKeys {
				k = 0
			}
			if k == k0 {
				now = clk.Next()
			}
		}
		sinkDuration = sum
	})
	if n := parks.Load(); n > 0 {
		b.Fatalf("parked %d times: the benchmark left its steady state", n)
	}
}

// ChainDetector.

// warmChain returns a detector at the defaults whose keys have a chain of
// 2, rescued a millisecond apart, and the time of the last rescue.
func warmChain(b *testing.B, keys []string) (*ChainDetector, time.Time) {
	d, err := NewChainDetector(DefaultChainConfig())
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for v := range 4 {
		now = now.Add(time.Millisecond)
		for _, key := range keys {
			if _, err := d.RescueAt(key, benchIncarnations[(v/2)&1], true, now); err != nil {
				b.Fatal(err)
			}
		}
	}
	return d, now
}

// BenchmarkChainRescueAt: RescueAt on one warm key, a reactive rescue every
// second.
func BenchmarkChainRescueAt(b *testing.B) {
	b.ReportAllocs()
	const key = "session-0001"
	d, now := warmChain(b, []string{key})
	b.ResetTimer()
	n, i := 0, 0
	var err error
	for ts := range benchtest.Times(b, now, time.Second, 1) {
		for _, t := range ts {
			if n, err = d.RescueAt(key, benchIncarnations[(i/2)&1], true, t); err != nil {
				b.Fatal(err)
			}
			i++
		}
	}
	sinkInt = n
}

// BenchmarkChainRescueAtKeys: RescueAt over 1,000 warm keys in turn from
// one goroutine: the serial twin of BenchmarkChainRescueAtParallel.
func BenchmarkChainRescueAtKeys(b *testing.B) {
	b.ReportAllocs()
	d, now := warmChain(b, benchKeyNames)
	b.ResetTimer()
	n, k, pass := 0, 0, 0
	var err error
	for ts := range benchtest.Times(b, now, time.Millisecond, benchKeys) {
		for _, t := range ts {
			if n, err = d.RescueAt(benchKeyNames[k], benchIncarnations[(pass/2)&1], true, t); err != nil {
				b.Fatal(err)
			}
			if k++; k == benchKeys {
				k, pass = 0, pass+1
			}
		}
	}
	sinkInt = n
}

// BenchmarkChainRescueAtParallel: RescueAt over 1,000 warm keys of one
// detector, each goroutine rescuing its own share in turn.
func BenchmarkChainRescueAtParallel(b *testing.B) {
	b.ReportAllocs()
	d, now := warmChain(b, benchKeyNames)
	clk, share := benchtest.NewPassClock(now, time.Millisecond), benchtest.Shares(benchKeys)
	var escalations atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		lo, hi := share()
		sum, pass := 0, 0
		k, now := lo, clk.Next()
		for pb.Next() {
			n, err := d.RescueAt(benchKeyNames[k], benchIncarnations[(pass/2)&1], true, now)
			if err != nil {
				escalations.Add(1)
			}
			sum += n
			if k++; k == hi {
				k, now, pass = lo, clk.Next(), pass+1
			}
		}
		sinkInt = sum
	})
	if n := escalations.Load(); n > 0 {
		b.Fatalf("%d rescues escalated: the benchmark left its steady state", n)
	}
}

// FleetSupervisionPolicy.

// warmFleet returns a fleet breaker of benchFleetConfig with a full rolling
// hour, and the time of its last restart.
func warmFleet(b *testing.B, now time.Time) (*FleetSupervisionPolicy, time.Time) {
	p, err := NewFleetSupervisionPolicy(benchFleetConfig())
	if err != nil {
		b.Fatal(err)
	}
	for range 1000 {
		now = now.Add(benchFleetGap)
		p.NoteRestartAt(now)
	}
	return p, now
}

// BenchmarkFleetNoteRestartAt: a fleet breaker with a full rolling hour
// that never trips.
func BenchmarkFleetNoteRestartAt(b *testing.B) {
	b.ReportAllocs()
	p, now := warmFleet(b, time.Now())
	b.ResetTimer()
	tripped := false
	for ts := range benchtest.Times(b, now, benchFleetGap, 1) {
		for _, t := range ts {
			tripped = p.NoteRestartAt(t) || tripped
		}
	}
	if tripped {
		b.Fatal("the fleet breaker tripped: the benchmark left its steady state")
	}
}

// BenchmarkFleetNoteRestartAtParallel: 1,000 fleet breakers, each goroutine
// noting restarts on its own share of them.
func BenchmarkFleetNoteRestartAtParallel(b *testing.B) {
	b.ReportAllocs()
	fleets := make([]*FleetSupervisionPolicy, benchKeys)
	start := time.Now()
	var now time.Time
	for i := range fleets {
		fleets[i], now = warmFleet(b, start)
	}
	clk, share := benchtest.NewPassClock(now, benchFleetGap), benchtest.Shares(benchKeys)
	var trips atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		lo, hi := share()
		k, now := lo, clk.Next()
		for pb.Next() {
			if fleets[k].NoteRestartAt(now) {
				trips.Add(1)
			}
			if k++; k == hi {
				k, now = lo, clk.Next()
			}
		}
	})
	if n := trips.Load(); n > 0 {
		b.Fatalf("tripped %d times: the benchmark left its steady state", n)
	}
}

// Supervisor.

// BenchmarkSupervisorStatus: a snapshot of a Supervisor that knows 1,000
// keys, each of which ran once and exited cleanly.
func BenchmarkSupervisorStatus(b *testing.B) {
	b.ReportAllocs()
	s, err := NewSupervisor(DefaultSupervisorConfig())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, key := range benchKeyNames {
		if err := s.Run(ctx, key, func(context.Context) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	if n := len(s.Status(context.Background()).Keys); n != benchKeys {
		b.Fatalf("Status holds %d keys, want %d", n, benchKeys)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sinkInt = len(s.Status(context.Background()).Keys)
	}
}

// Memory.

// BenchmarkMemoryPerKey tracks 1,000,000 keys at the default settings and
// reports the heap they hold per key (B/key): in a RespawnBudget, 3
// respawns inside the window each; in a ChainDetector, a chain of 3
// reactive rescues each. The key strings are the caller's, made before the
// measurement: the map refers to them and does not copy them.
func BenchmarkMemoryPerKey(b *testing.B) {
	const n = 1_000_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("session-%07d", i)
	}
	measure := func(b *testing.B, fill func(now time.Time) any) {
		b.ReportAllocs()
		var perKey float64
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			b.StartTimer()
			obj := fill(time.Now())
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(obj)
			perKey = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
			b.StartTimer()
		}
		b.ReportMetric(perKey, "B/key")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/key")
	}
	b.Run("budget", func(b *testing.B) {
		measure(b, func(now time.Time) any {
			bud, err := NewRespawnBudget(DefaultBudgetConfig())
			if err != nil {
				b.Fatal(err)
			}
			for r := range 3 { // 3 respawns per key, 10s apart: all inside the 60s window
				at := now.Add(time.Duration(r) * 10 * time.Second)
				for _, key := range keys {
					if _, err := bud.FailedAt(key, errBench, at); err != nil {
						b.Fatal(err)
					}
				}
			}
			if got := bud.RespawnsAt(keys[n-1], now.Add(20*time.Second)); got != 3 {
				b.Fatalf("a key holds %d respawns, want 3", got)
			}
			return bud
		})
	})
	b.Run("chain", func(b *testing.B) {
		measure(b, func(now time.Time) any {
			d, err := NewChainDetector(DefaultChainConfig())
			if err != nil {
				b.Fatal(err)
			}
			for r := range 3 { // a chain of 3 reactive rescues, 5m apart: within the 20m gap
				at := now.Add(time.Duration(r) * 5 * time.Minute)
				for _, key := range keys {
					if _, err := d.RescueAt(key, "incarnation-1", true, at); err != nil {
						b.Fatal(err)
					}
				}
			}
			if got := d.ChainAt(keys[n-1], "incarnation-1", now.Add(10*time.Minute)); got != 3 {
				b.Fatalf("a key holds a chain of %d, want 3", got)
			}
			return d
		})
	})
}

// TestHotPathsDoNotAllocate pins the zero-allocation property of the hot
// paths on existing keys, so that plain `go test` catches a regression, not
// only the benchmarks. The race detector changes allocation counts, so the
// test is skipped under -race.
func TestHotPathsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector distorts allocation counts")
	}
	const runs = 1000
	check := func(t *testing.T, f func()) {
		t.Helper()
		if got := testing.AllocsPerRun(runs, f); got != 0 {
			t.Fatalf("%v allocations per call, want 0", got)
		}
	}
	t.Run("RecordAt", func(t *testing.T) {
		g, err := NewRestartLoopGuard(3, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		check(t, func() {
			now = now.Add(time.Millisecond)
			g.RecordAt(now)
		})
		if !g.TrippedAt(now) {
			t.Fatal("the guard did not trip: the storm was not recorded")
		}
	})
	t.Run("RecordAt/limit=10000", func(t *testing.T) {
		g, err := NewRestartLoopGuard(10000, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		for range 10000 { // grow the window to its limit first
			now = now.Add(time.Millisecond)
			g.RecordAt(now)
		}
		check(t, func() {
			now = now.Add(time.Millisecond)
			g.RecordAt(now)
		})
		if n := g.RestartsAt(now); n != 10000 {
			t.Fatalf("window holds %d restarts, want 10000", n)
		}
	})
	for _, limit := range []int{3, 10000} {
		// Restarts every Window/limit (plus a nanosecond): each call drops
		// one expired restart and trips the guard again.
		t.Run(fmt.Sprintf("RecordAt/rolling/limit=%d", limit), func(t *testing.T) {
			g, err := NewRestartLoopGuard(limit, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			step := time.Minute/time.Duration(limit) + 1
			now := time.Now()
			for range limit + 1 {
				now = now.Add(step)
				g.RecordAt(now)
			}
			check(t, func() {
				now = now.Add(step)
				g.RecordAt(now)
			})
			if n := g.RestartsAt(now); n != limit {
				t.Fatalf("window holds %d restarts, want %d", n, limit)
			}
		})
	}
	t.Run("Record", func(t *testing.T) {
		g, err := NewRestartLoopGuard(3, time.Minute, WithClock(clock.New()))
		if err != nil {
			t.Fatal(err)
		}
		check(t, func() { g.Record() })
		if n := g.Restarts(); n != 3 {
			t.Fatalf("window holds %d restarts, want 3", n)
		}
	})
	t.Run("FailedAt", func(t *testing.T) {
		bud, err := NewRespawnBudget(benchBudgetConfig())
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		for range 200 { // a warm key with a full, rolling window
			now = now.Add(benchBudgetGap)
			if _, err := bud.FailedAt("k", errBench, now); err != nil {
				t.Fatal(err)
			}
		}
		var failErr error
		check(t, func() {
			now = now.Add(benchBudgetGap)
			if _, err := bud.FailedAt("k", errBench, now); err != nil {
				failErr = err
			}
		})
		if failErr != nil {
			t.Fatal(failErr)
		}
		if n := bud.RespawnsAt("k", now); n != 99 {
			t.Fatalf("window holds %d respawns, want 99", n)
		}
	})
	t.Run("FailedAt/with handler", func(t *testing.T) {
		events := 0
		bud, err := NewRespawnBudget(benchBudgetConfig(), WithEventHandler(EventHandlerFunc(func(ev Event) {
			if ev.Kind == EventRespawnScheduled && ev.LastError == errBench {
				events++
			}
		})))
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		for range 200 {
			now = now.Add(benchBudgetGap)
			if _, err := bud.FailedAt("k", errBench, now); err != nil {
				t.Fatal(err)
			}
		}
		check(t, func() {
			now = now.Add(benchBudgetGap)
			_, _ = bud.FailedAt("k", errBench, now)
		})
		if want := 200 + runs + 1; events != want { // AllocsPerRun calls once more to warm up
			t.Fatalf("%d respawns announced, want %d", events, want)
		}
	})
	t.Run("RescueAt", func(t *testing.T) {
		d, err := NewChainDetector(DefaultChainConfig())
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if _, err := d.RescueAt("k", benchIncarnations[0], true, now); err != nil {
			t.Fatal(err)
		}
		i := 0
		var rescueErr error
		check(t, func() {
			now = now.Add(time.Second)
			i++
			if _, err := d.RescueAt("k", benchIncarnations[(i/2)&1], true, now); err != nil {
				rescueErr = err
			}
		})
		if rescueErr != nil {
			t.Fatal(rescueErr)
		}
		if n := d.ChainAt("k", benchIncarnations[(i/2)&1], now); n < 1 || n > 2 {
			t.Fatalf("chain is %d, want 1 or 2", n)
		}
	})
	t.Run("DecideAt", func(t *testing.T) {
		cfg := DefaultSupervisorConfig()
		cfg.Budget = benchBudgetConfig()
		fleet := benchFleetConfig()
		fleet.RestartsPerHour = 1 << 20 // counting every restart, never tripping
		cfg.Fleet = &fleet
		sup, err := NewSupervisor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		res := RunResult{Err: errBench}
		ctx, cancel := context.WithCancel(context.Background()) // a live context a caller can cancel, as Run's
		defer cancel()
		var d Decision
		for range 200 { // a warm key with a full, rolling respawn window
			now = now.Add(benchBudgetGap)
			d = sup.DecideAt(ctx, "k", res, now)
		}
		check(t, func() {
			now = now.Add(benchBudgetGap)
			d = sup.DecideAt(ctx, "k", res, now)
		})
		if d.Action != ActionRestart || d.Wait != cfg.Budget.MaxBackoff {
			t.Fatalf("decision %+v, want a restart after %v", d, cfg.Budget.MaxBackoff)
		}
	})
	t.Run("NoteRestartAt", func(t *testing.T) {
		p, err := NewFleetSupervisionPolicy(benchFleetConfig())
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		for range 2000 { // a full, rolling hour
			now = now.Add(benchFleetGap)
			p.NoteRestartAt(now)
		}
		tripped := false
		check(t, func() {
			now = now.Add(benchFleetGap)
			tripped = tripped || p.NoteRestartAt(now)
		})
		if tripped {
			t.Fatal("the fleet breaker tripped")
		}
		if st := p.StatusAt(now); st.RestartsInHour != 973 {
			t.Fatalf("the hour holds %d restarts, want 973", st.RestartsInHour)
		}
	})
}
