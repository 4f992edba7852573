package crashloop

// Benchmarks of the hot paths, measured against two baselines in the same
// run (a bare sync.Mutex, and a sync.Mutex around one clock read), so that
// the ratios hold on any machine:
//
//	go test -run '^$' -bench . -benchmem -count 10 ./... | tee new.txt
//	go run golang.org/x/perf/cmd/benchstat@latest old.txt new.txt
//
// Time comes from explicit ...At(now) calls with a now that advances by a
// step each call, so windows roll as they do in production: every call on a
// full window drops one old event and records a new one. The single-object
// benchmarks read their times from a table computed with the timer stopped
// (timeFeed), so that they time the call, not time.Time.Add; the parallel
// benchmarks and their serial twins compute each time the same way
// (goroutineClock), so that they compare like with like. Only Record and
// Supervisor.Status read a real clock, because they have no At form to
// benchmark.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// benchKeys is the number of keys (or guards, one per key) of the parallel
// benchmarks and of the Supervisor.Status benchmark.
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
	sinkTime     time.Time
)

// benchBudgetConfig is the budget of the keyed benchmarks: a window that
// holds up to 100 respawns, and failures spaced so that it never parks. A
// warm key stays in steady state: each failure drops the oldest respawn and
// records a new one. The backoffs (10ms linear to 500ms, 37.75s for the
// first 100) fit in the window, so the configuration is valid.
func benchBudgetConfig() BudgetConfig {
	return BudgetConfig{MaxRespawns: 100, Window: time.Minute, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}
}

// benchBudgetGap is the time between two failures of one key: a bit more
// than Window/MaxRespawns, so that the window holds 99 respawns before each
// failure and never parks.
const benchBudgetGap = 610 * time.Millisecond

// benchFleetConfig trips at 1,000 restarts in the hour; the fleet
// benchmarks note a restart every benchFleetGap, 973 an hour, so it never
// trips and each call drops one restart from a full hour.
func benchFleetConfig() FleetConfig {
	c := DefaultFleetConfig()
	c.RestartsPerHour = 1000
	return c
}

const benchFleetGap = 3700 * time.Millisecond

// share returns the half-open range of the n items that goroutine id of p
// works on, so that each key (or guard) is used by one goroutine, as one
// worker supervises one session or channel.
func share(id, p, n int) (lo, hi int) {
	id %= p
	return id * n / p, (id + 1) * n / p
}

// parallelShare hands each goroutine of b.RunParallel its own range of n.
type parallelShare struct {
	next atomic.Int32
	p    int
}

func newParallelShare() *parallelShare {
	// RunParallel starts GOMAXPROCS goroutines (b.SetParallelism is unused).
	return &parallelShare{p: runtime.GOMAXPROCS(0)}
}

func (s *parallelShare) take(n int) (lo, hi int) {
	return share(int(s.next.Add(1)-1), s.p, n)
}

// timeFeed hands out times that advance by step per call, read from a
// table filled ahead with the benchmark's timer stopped. The benchmark's own
// cost per call is then one load; computing each time (time.Time.Add, see
// BenchmarkBaselineTimeAdd) would cost about as much as the call measured.
type timeFeed struct {
	b    *testing.B
	buf  []time.Time
	i    int
	now  time.Time // the latest time in buf
	step time.Duration
}

// feedLen is the number of times a timeFeed computes at once (384 KiB).
const feedLen = 1 << 14

// newTimeFeed returns a feed whose first time is step after now.
func newTimeFeed(b *testing.B, now time.Time, step time.Duration) *timeFeed {
	return &timeFeed{b: b, buf: make([]time.Time, feedLen), i: feedLen, now: now, step: step}
}

// next returns the next time.
func (f *timeFeed) next() time.Time {
	if f.i == len(f.buf) {
		f.fill()
	}
	t := f.buf[f.i]
	f.i++
	return t
}

func (f *timeFeed) fill() {
	f.b.StopTimer()
	for i := range f.buf {
		f.now = f.now.Add(f.step)
		f.buf[i] = f.now
	}
	f.i = 0
	f.b.StartTimer()
}

// last returns the latest time next returned.
func (f *timeFeed) last() time.Time { return f.buf[f.i-1] }

// sharedClock is the time of the parallel benchmarks of a keyed object:
// offsets from base that the goroutines publish and catch up with (see
// goroutineClock).
type sharedClock struct {
	base   time.Time
	latest atomic.Int64
}

func newSharedClock() *sharedClock { return &sharedClock{base: time.Now()} }

// advance moves the shared time on by step and returns it (for the serial
// warm-up).
func (c *sharedClock) advance(step time.Duration) time.Time {
	return c.base.Add(time.Duration(c.latest.Add(int64(step))))
}

// goroutineClock stands in for time.Now() in the parallel benchmarks of a
// keyed object and in their serial twins: it advances its reading by step
// per call and, every few calls, publishes it to the shared clock and
// catches up with the latest reading published, as readings of one real
// clock would. (A private clock per goroutine would drift apart from the
// others, and the marks of shards shared by the goroutines would then stamp
// long runs of calls with one time; sharing every reading would add a
// contended atomic per call that time.Now() does not have.)
type goroutineClock struct {
	shared *sharedClock
	off    time.Duration
	step   time.Duration
	every  int // catch up every this many calls
	n      int
}

func newGoroutineClock(shared *sharedClock, step time.Duration, every int) *goroutineClock {
	return &goroutineClock{shared: shared, off: time.Duration(shared.latest.Load()), step: step, every: every}
}

func (c *goroutineClock) next() time.Time {
	if c.n++; c.n == c.every {
		c.n = 0
		for {
			l := c.shared.latest.Load()
			if l >= int64(c.off) {
				c.off = time.Duration(l)
				break
			}
			if c.shared.latest.CompareAndSwap(l, int64(c.off)) {
				break
			}
		}
	}
	c.off += c.step
	return c.shared.base.Add(c.off)
}

// Baselines.

// BenchmarkBaselineMutex is the floor of every locked call: lock and unlock
// an uncontended sync.Mutex.
func BenchmarkBaselineMutex(b *testing.B) {
	b.ReportAllocs()
	mutexLoop(b.N)
}

// BenchmarkBaselineMutexNow is the floor of a call that reads the clock:
// lock, clock.New().Now(), unlock.
func BenchmarkBaselineMutexNow(b *testing.B) {
	b.ReportAllocs()
	mutexNowLoop(b.N)
}

// BenchmarkBaselineTimeAdd is the part of every At benchmark that is not
// the call: advancing its now by a step (time.Time.Add). Subtract it from
// an At benchmark's time per op for the cost of the call alone.
func BenchmarkBaselineTimeAdd(b *testing.B) {
	b.ReportAllocs()
	now := time.Now()
	for i := 0; i < b.N; i++ {
		now = now.Add(time.Millisecond)
	}
	sinkTime = now
}

// mutexLoop is the loop of BenchmarkBaselineMutex.
func mutexLoop(n int) {
	var mu sync.Mutex
	c := 0
	for range n {
		mu.Lock()
		c++
		mu.Unlock()
	}
	sinkInt = c
}

// mutexNowLoop is the loop of BenchmarkBaselineMutexNow.
func mutexNowLoop(n int) {
	var mu sync.Mutex
	c := clock.New()
	var t time.Time
	for range n {
		mu.Lock()
		t = c.Now()
		mu.Unlock()
	}
	sinkTime = t
}

// Units of the ratios that reportVs reports.
const (
	xMutex    = "x-mutex"     // time per op / BaselineMutex's
	xMutexNow = "x-mutex+now" // time per op / BaselineMutexNow's
)

// reportVs reports the time per op measured so far as a multiple of the
// time per op of a baseline loop, timed at once for as many iterations
// (baseline is mutexLoop or mutexNowLoop). Both are timed within a second of
// each other, so the ratio holds even when the speed of a shared (virtual)
// machine drifts between benchmarks, as the separate Baseline benchmarks
// cannot promise. Call it right after the benchmark's loop.
func reportVs(b *testing.B, unit string, baseline func(n int)) {
	elapsed := b.Elapsed()
	b.StopTimer()
	n := min(b.N, 1<<24) // enough for a precise baseline, and quick
	start := time.Now()
	baseline(n)
	base := time.Since(start) * time.Duration(b.N) / time.Duration(n)
	if base > 0 && elapsed > 0 {
		b.ReportMetric(float64(elapsed)/float64(base), unit)
	}
	b.StartTimer()
}

// BenchmarkBaselineMutexParallel is the parallel floor: 1,000 mutexes, each
// goroutine locking its own share of them in turn.
func BenchmarkBaselineMutexParallel(b *testing.B) {
	b.ReportAllocs()
	type padded struct {
		mu sync.Mutex
		n  int
		_  [48]byte
	}
	mus := make([]padded, benchKeys)
	ps := newParallelShare()
	b.RunParallel(func(pb *testing.PB) {
		lo, hi := ps.take(benchKeys)
		k := lo
		for pb.Next() {
			m := &mus[k]
			m.mu.Lock()
			m.n++
			m.mu.Unlock()
			if k++; k == hi {
				k = lo
			}
		}
	})
}

// RestartLoopGuard.

// BenchmarkGuardRecordAt: a guard at the defaults (3 in 60s) under a tight
// storm, a restart every millisecond: the window stays full and each call
// replaces its oldest restart.
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
	feed := newTimeFeed(b, now, time.Millisecond)
	b.ResetTimer()
	tripped := false
	for i := 0; i < b.N; i++ {
		tripped = g.RecordAt(feed.next())
	}
	reportVs(b, xMutex, mutexLoop)
	sinkBool = tripped
}

// BenchmarkGuardRecordAtParallel: 1,000 guards (one per channel), each
// goroutine recording restarts on its own share of them.
func BenchmarkGuardRecordAtParallel(b *testing.B) {
	b.ReportAllocs()
	guards := make([]*RestartLoopGuard, benchKeys)
	base := time.Now()
	const warm = 10
	for i := range guards {
		g, err := NewRestartLoopGuard(3, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		for v := range warm {
			g.RecordAt(base.Add(time.Duration(v) * time.Millisecond))
		}
		guards[i] = g
	}
	ps := newParallelShare()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		lo, hi := ps.take(benchKeys)
		m := hi - lo
		i := 0
		tripped := false // a local sink: a shared one would be falsely shared
		for pb.Next() {
			// Each guard's own time advances a millisecond per restart of it.
			visit := warm + i/m
			g := guards[lo+i%m]
			tripped = g.RecordAt(base.Add(time.Duration(visit)*time.Millisecond)) || tripped
			i++
		}
		sinkBool = tripped
	})
	reportVs(b, xMutex, mutexLoop)
}

// BenchmarkGuardRecord: Record reads the real clock (the default, time.Now).
// Compare with BenchmarkBaselineMutexNow.
func BenchmarkGuardRecord(b *testing.B) {
	b.ReportAllocs()
	g, err := NewRestartLoopGuard(3, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	for range 10 {
		g.Record()
	}
	b.ResetTimer()
	tripped := false
	for i := 0; i < b.N; i++ {
		tripped = g.Record()
	}
	reportVs(b, xMutexNow, mutexNowLoop)
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
		for range 3 {
			g.Record()
		}
		guards[i] = g
	}
	ps := newParallelShare()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		lo, hi := ps.take(benchKeys)
		k := lo
		tripped := false
		for pb.Next() {
			tripped = guards[k].Record() || tripped
			if k++; k == hi {
				k = lo
			}
		}
		sinkBool = tripped
	})
	reportVs(b, xMutexNow, mutexNowLoop)
}

// BenchmarkGuardLimit compares a guard of limit 3 with one of limit 10,000,
// both in steady state with a full window: restarts come every
// Window/limit (plus a nanosecond), so each call drops exactly one expired
// restart and records one, and the window holds limit restarts. The cost
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
			if n := g.RestartsAt(now); n != limit {
				b.Fatalf("warm window holds %d restarts, want %d", n, limit)
			}
			feed := newTimeFeed(b, now, step)
			b.ResetTimer()
			tripped := false
			for i := 0; i < b.N; i++ {
				tripped = g.RecordAt(feed.next())
			}
			reportVs(b, xMutex, mutexLoop)
			b.StopTimer()
			if n := g.RestartsAt(feed.last()); !tripped || n != limit {
				b.Fatalf("window holds %d restarts (tripped %v), want a full window of %d", n, tripped, limit)
			}
		})
	}
}

// RespawnBudget.

// BenchmarkBudgetFailedAt: FailedAt on one warm key in steady state (see
// benchBudgetConfig): each call drops one respawn and records one.
func BenchmarkBudgetFailedAt(b *testing.B) {
	b.ReportAllocs()
	bud, err := NewRespawnBudget(benchBudgetConfig())
	if err != nil {
		b.Fatal(err)
	}
	const key = "session-0001"
	now := time.Now()
	for range 200 {
		now = now.Add(benchBudgetGap)
		if _, err := bud.FailedAt(key, errBench, now); err != nil {
			b.Fatal(err)
		}
	}
	feed := newTimeFeed(b, now, benchBudgetGap)
	b.ResetTimer()
	var d time.Duration
	parks := 0
	for i := 0; i < b.N; i++ {
		d, err = bud.FailedAt(key, errBench, feed.next())
		if err != nil { // never with these settings; keeps it working if they change
			parks++
			_ = bud.ResumeAt(key, feed.last())
		}
	}
	reportVs(b, xMutex, mutexLoop)
	sinkDuration = d
	if parks > 0 {
		b.Fatalf("parked %d times: the benchmark no longer measures the steady state", parks)
	}
}

// BenchmarkBudgetFailedAtKeys: FailedAt over 1,000 warm keys in turn, from
// one goroutine: the serial twin of BenchmarkBudgetFailedAtParallel, with
// the same working set (1,000 entries and windows, 16 keys a shard) and the
// same clock.
func BenchmarkBudgetFailedAtKeys(b *testing.B) {
	b.ReportAllocs()
	bud, err := NewRespawnBudget(benchBudgetConfig())
	if err != nil {
		b.Fatal(err)
	}
	step := benchBudgetGap/benchKeys + 1 // a key fails every benchKeys calls
	shared := newSharedClock()
	for range 100 {
		for _, key := range benchKeyNames {
			if _, err := bud.FailedAt(key, errBench, shared.advance(step)); err != nil {
				b.Fatal(err)
			}
		}
	}
	clk := newGoroutineClock(shared, step, 64)
	b.ResetTimer()
	var d time.Duration
	k := 0
	for i := 0; i < b.N; i++ {
		d, err = bud.FailedAt(benchKeyNames[k], errBench, clk.next())
		if err != nil {
			b.Fatal(err)
		}
		if k++; k == benchKeys {
			k = 0
		}
	}
	reportVs(b, xMutex, mutexLoop)
	sinkDuration = d
}

// BenchmarkBudgetFailedAtParallel: FailedAt over 1,000 warm keys of one
// budget, each goroutine failing its own share of the keys in turn.
func BenchmarkBudgetFailedAtParallel(b *testing.B) {
	b.ReportAllocs()
	bud, err := NewRespawnBudget(benchBudgetConfig())
	if err != nil {
		b.Fatal(err)
	}
	// A goroutine fails each of its m keys in turn. Its clock advances step
	// per call and catches up with the others at least every `every` calls,
	// so two failures of one key are at least (m-every)*step =
	// benchBudgetGap apart: the key never parks. They are about
	// benchKeys*step (1.4s at GOMAXPROCS=2) apart in practice, far inside
	// the window, so no warm key is ever reclaimed.
	m := benchKeys / runtime.GOMAXPROCS(0)
	every := min(64, max(m/4, 1))
	step := benchBudgetGap/time.Duration(max(m-every, 1)) + 1
	shared := newSharedClock()
	for range 100 {
		for _, key := range benchKeyNames {
			if _, err := bud.FailedAt(key, errBench, shared.advance(step)); err != nil {
				b.Fatal(err)
			}
		}
	}
	ps := newParallelShare()
	var parks atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		lo, hi := ps.take(benchKeys)
		k := lo
		var sum time.Duration
		clk := newGoroutineClock(shared, step, every)
		for pb.Next() {
			key := benchKeyNames[k]
			now := clk.next()
			d, err := bud.FailedAt(key, errBench, now)
			if err != nil {
				parks.Add(1)
				_ = bud.ResumeAt(key, now)
			}
			sum += d
			if k++; k == hi {
				k = lo
			}
		}
		sinkDuration = sum
	})
	reportVs(b, xMutex, mutexLoop)
	if n := parks.Load(); n > 0 {
		b.Fatalf("parked %d times: the benchmark no longer measures the steady state", n)
	}
}

// ChainDetector.

// benchIncarnations alternate every second rescue of a key, so its chain
// goes 1, 2, 1, 2 ... and never escalates, and the key is never idle (a
// planned rescue would leave it reclaimable, and a reclaimed key is not
// warm).
var benchIncarnations = [2]string{"incarnation-a", "incarnation-b"}

// BenchmarkChainRescueAt: RescueAt on one warm key, a reactive rescue every
// second.
func BenchmarkChainRescueAt(b *testing.B) {
	b.ReportAllocs()
	d, err := NewChainDetector(DefaultChainConfig())
	if err != nil {
		b.Fatal(err)
	}
	const key = "session-0001"
	now := time.Now()
	for v := range 4 {
		now = now.Add(time.Second)
		if _, err := d.RescueAt(key, benchIncarnations[(v/2)&1], true, now); err != nil {
			b.Fatal(err)
		}
	}
	feed := newTimeFeed(b, now, time.Second)
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		n, err = d.RescueAt(key, benchIncarnations[(i/2)&1], true, feed.next())
		if err != nil {
			b.Fatal(err)
		}
	}
	reportVs(b, xMutex, mutexLoop)
	sinkInt = n
}

// BenchmarkChainRescueAtKeys: RescueAt over 1,000 warm keys in turn, from
// one goroutine: the serial twin of BenchmarkChainRescueAtParallel.
func BenchmarkChainRescueAtKeys(b *testing.B) {
	b.ReportAllocs()
	d, err := NewChainDetector(DefaultChainConfig())
	if err != nil {
		b.Fatal(err)
	}
	shared := newSharedClock()
	for v := range 4 {
		for _, key := range benchKeyNames {
			if _, err := d.RescueAt(key, benchIncarnations[(v/2)&1], true, shared.advance(time.Millisecond)); err != nil {
				b.Fatal(err)
			}
		}
	}
	clk := newGoroutineClock(shared, time.Millisecond, 64)
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		n, err = d.RescueAt(benchKeyNames[i%benchKeys], benchIncarnations[(i/benchKeys/2)&1], true, clk.next())
		if err != nil {
			b.Fatal(err)
		}
	}
	reportVs(b, xMutex, mutexLoop)
	sinkInt = n
}

// BenchmarkChainRescueAtParallel: RescueAt over 1,000 warm keys of one
// detector, each goroutine rescuing its own share in turn.
func BenchmarkChainRescueAtParallel(b *testing.B) {
	b.ReportAllocs()
	d, err := NewChainDetector(DefaultChainConfig())
	if err != nil {
		b.Fatal(err)
	}
	const step = time.Millisecond // a key's rescues stay well within ResetGap
	shared := newSharedClock()
	for v := range 4 {
		for _, key := range benchKeyNames {
			if _, err := d.RescueAt(key, benchIncarnations[(v/2)&1], true, shared.advance(step)); err != nil {
				b.Fatal(err)
			}
		}
	}
	ps := newParallelShare()
	var fails atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		lo, hi := ps.take(benchKeys)
		m := hi - lo
		i, sum := 0, 0
		clk := newGoroutineClock(shared, step, 64)
		for pb.Next() {
			n, err := d.RescueAt(benchKeyNames[lo+i%m], benchIncarnations[(i/m/2)&1], true, clk.next())
			if err != nil {
				fails.Add(1)
			}
			sum += n
			i++
		}
		sinkInt = sum
	})
	reportVs(b, xMutex, mutexLoop)
	if n := fails.Load(); n > 0 {
		b.Fatalf("%d rescues escalated: the benchmark no longer measures the steady state", n)
	}
}

// FleetSupervisionPolicy.

// BenchmarkFleetNoteRestartAt: a fleet breaker with a full rolling hour that
// never trips (see benchFleetConfig).
func BenchmarkFleetNoteRestartAt(b *testing.B) {
	b.ReportAllocs()
	p, err := NewFleetSupervisionPolicy(benchFleetConfig())
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for range 2000 {
		now = now.Add(benchFleetGap)
		p.NoteRestartAt(now)
	}
	feed := newTimeFeed(b, now, benchFleetGap)
	b.ResetTimer()
	tripped := false
	for i := 0; i < b.N; i++ {
		tripped = p.NoteRestartAt(feed.next())
	}
	reportVs(b, xMutex, mutexLoop)
	b.StopTimer()
	if tripped {
		b.Fatal("the fleet breaker tripped: the benchmark no longer measures the steady state")
	}
}

// BenchmarkFleetNoteRestartAtParallel: 1,000 fleet breakers, each goroutine
// noting restarts on its own share of them.
func BenchmarkFleetNoteRestartAtParallel(b *testing.B) {
	b.ReportAllocs()
	fleets := make([]*FleetSupervisionPolicy, benchKeys)
	base := time.Now()
	const warm = 1000
	for i := range fleets {
		p, err := NewFleetSupervisionPolicy(benchFleetConfig())
		if err != nil {
			b.Fatal(err)
		}
		for v := range warm {
			p.NoteRestartAt(base.Add(time.Duration(v) * benchFleetGap))
		}
		fleets[i] = p
	}
	ps := newParallelShare()
	var trips atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		lo, hi := ps.take(benchKeys)
		m := hi - lo
		i := 0
		for pb.Next() {
			visit := warm + i/m
			if fleets[lo+i%m].NoteRestartAt(base.Add(time.Duration(visit) * benchFleetGap)) {
				trips.Add(1)
			}
			i++
		}
	})
	reportVs(b, xMutex, mutexLoop)
	if n := trips.Load(); n > 0 {
		b.Fatalf("tripped %d times: the benchmark no longer measures the steady state", n)
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
	if n := len(s.Status().Keys); n != benchKeys {
		b.Fatalf("Status holds %d keys, want %d", n, benchKeys)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sinkInt = len(s.Status().Keys)
	}
}

// Memory.

// BenchmarkMemoryPerKey tracks 1,000,000 keys at the default settings, each
// with a full window, and reports the heap they hold per key (B/key): in a
// RespawnBudget, 3 respawns each inside the window; in a ChainDetector, a
// chain of 3 reactive rescues each. The key strings belong to the caller and
// are allocated before the measurement; the entries only refer to them.
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
