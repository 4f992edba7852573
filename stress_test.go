package crashloop_test

// Concurrency: many goroutines on one RespawnBudget, one ChainDetector and
// one Supervisor at once (run it under -race), and event handlers that panic.
//
// The budget and the detector read time from explicit ...At calls on a
// shared, advancing offset from a clock.NewMock() base; the Supervisor runs
// on the real clock with backoffs of a few microseconds, so its waits are
// real but short. Nothing here asserts how long anything takes: the
// deadline only turns a deadlock into a clear failure instead of a hang.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/crashloopguard/crashloop"
)

const (
	stressWorkers = 8
	stressKeys    = 1000
	stressOps     = 14000 // per worker: 112,000 in all
)

// stressDeadline bounds a stress stage: past it the test fails with every
// goroutine's stack, as a deadlock.
const stressDeadline = 3 * time.Minute

// stressWait waits for wg, failing the test with all stacks if it does not
// finish before stressDeadline (or the test's own deadline).
func stressWait(t *testing.T, what string, wg *sync.WaitGroup) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stressDeadline)
	defer cancel()
	if d, ok := t.Deadline(); ok {
		var cancel2 context.CancelFunc
		ctx, cancel2 = context.WithDeadline(ctx, d.Add(-10*time.Second))
		defer cancel2()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		buf := make([]byte, 1<<22)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%s did not finish: deadlock?\n%s", what, buf)
	}
}

// stressCounts counts events per key and kind; safe for concurrent use.
type stressCounts struct {
	index map[string]int // read-only once built
	n     [crashloop.EventStoreRecovered + 1][]atomic.Int64
	other atomic.Int64 // events of unknown keys
}

func newStressCounts(keys []string) *stressCounts {
	c := &stressCounts{index: map[string]int{}}
	for i, k := range keys {
		c.index[k] = i
	}
	for kind := range c.n {
		c.n[kind] = make([]atomic.Int64, len(keys))
	}
	return c
}

func (c *stressCounts) HandleEvent(ev crashloop.Event) {
	i, ok := c.index[ev.Key]
	if !ok || ev.Kind <= 0 || int(ev.Kind) >= len(c.n) {
		c.other.Add(1)
		return
	}
	c.n[ev.Kind][i].Add(1)
}

func (c *stressCounts) get(kind crashloop.EventKind, i int) int64 { return c.n[kind][i].Load() }

func (c *stressCounts) reset() {
	for kind := range c.n {
		for i := range c.n[kind] {
			c.n[kind][i].Store(0)
		}
	}
}

// stressParks collects the distinct *ParkedError values seen per key: each
// park creates one, and a parked key keeps returning it.
type stressParks struct {
	mu   sync.Mutex
	seen []map[*crashloop.ParkedError]bool
}

func newStressParks(n int) *stressParks {
	p := &stressParks{seen: make([]map[*crashloop.ParkedError]bool, n)}
	for i := range p.seen {
		p.seen[i] = map[*crashloop.ParkedError]bool{}
	}
	return p
}

func (p *stressParks) add(i int, pe *crashloop.ParkedError) {
	p.mu.Lock()
	p.seen[i][pe] = true
	p.mu.Unlock()
}

func stressKeyNames(prefix string) []string {
	keys := make([]string, stressKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%04d", prefix, i)
	}
	return keys
}

var errStress = errors.New("stress: crashed")

func TestStressConcurrent(t *testing.T) {
	mock := clock.NewMock()
	base := mock.Now()
	var offset atomic.Int64 // the shared now of the budget and the detector: base + offset
	now := func() time.Time { return base.Add(time.Duration(offset.Load())) }

	budgetKeys, chainKeys, supKeys := stressKeyNames("b"), stressKeyNames("c"), stressKeyNames("s")
	budgetEvents, chainEvents, supEvents := newStressCounts(budgetKeys), newStressCounts(chainKeys), newStressCounts(supKeys)

	budgetCfg := crashloop.BudgetConfig{MaxRespawns: 3, Window: time.Minute, InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	budget, err := crashloop.NewRespawnBudget(budgetCfg, crashloop.WithClock(mock), crashloop.WithEventHandler(budgetEvents))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := crashloop.NewChainDetector(crashloop.ChainConfig{MaxChain: 3, ResetGap: time.Minute},
		crashloop.WithClock(mock), crashloop.WithEventHandler(chainEvents))
	if err != nil {
		t.Fatal(err)
	}
	supCfg := crashloop.SupervisorConfig{
		Budget: crashloop.BudgetConfig{MaxRespawns: 3, Window: time.Hour, InitialBackoff: time.Microsecond, MaxBackoff: 4 * time.Microsecond},
		Chain:  &crashloop.ChainConfig{MaxChain: 2, ResetGap: time.Hour},
		// On, but it never trips: its lock is exercised by every restart.
		Fleet: &crashloop.FleetConfig{RestartsPerHour: 1 << 40, FailingFraction: 1, MinFailing: 1 << 40, Cooldown: 0},
	}
	sup, err := crashloop.NewSupervisor(supCfg, crashloop.WithEventHandler(supEvents)) // the real clock
	if err != nil {
		t.Fatal(err)
	}

	// What the workers saw.
	var (
		ops                                   atomic.Int64
		budgetParks, supParks                 = newStressParks(stressKeys), newStressParks(stressKeys)
		budgetScheduled, budgetResumed        = make([]atomic.Int64, stressKeys), make([]atomic.Int64, stressKeys)
		supResumed, chainClears, chainRefused = make([]atomic.Int64, stressKeys), make([]atomic.Int64, stressKeys), make([]atomic.Int64, stressKeys)
		failures                              = make(chan string, 100)
	)
	fail := func(format string, args ...any) {
		select {
		case failures <- fmt.Sprintf(format, args...):
		default:
		}
	}

	budgetOp := func(rng *rand.Rand) {
		i := rng.IntN(stressKeys)
		key := budgetKeys[i]
		var pe *crashloop.ParkedError
		switch x := rng.IntN(100); {
		case x < 60:
			d, err := budget.FailedAt(key, errStress, now())
			switch {
			case err == nil:
				budgetScheduled[i].Add(1)
				if d < budgetCfg.InitialBackoff || d > budgetCfg.MaxBackoff {
					fail("FailedAt(%q) backoff %v", key, d)
				}
			case errors.As(err, &pe):
				budgetParks.add(i, pe)
			default:
				fail("FailedAt(%q) = %v", key, err)
			}
		case x < 75:
			if err := budget.Spawn(key); errors.As(err, &pe) {
				budgetParks.add(i, pe)
			} else if err != nil {
				fail("Spawn(%q) = %v", key, err)
			}
		case x < 90:
			if err := budget.Resume(key); err == nil {
				budgetResumed[i].Add(1)
			} else if !errors.Is(err, crashloop.ErrNotParked) {
				fail("Resume(%q) = %v", key, err)
			}
		case x < 95:
			budget.IsParked(key)
		case x < 99:
			if n := budget.RespawnsAt(key, now()); n < 0 || n > budgetCfg.MaxRespawns {
				fail("RespawnsAt(%q) = %d", key, n)
			}
		default:
			if rng.IntN(10) == 0 {
				budget.Parked()
			}
		}
		if pe != nil && (pe.Key != key || pe.Reason != "respawn_budget_exhausted" || pe.Attempts != budgetCfg.MaxRespawns ||
			!errors.Is(pe, crashloop.ErrParked)) {
			fail("ParkedError of %q: %+v", key, *pe)
		}
	}

	chainOp := func(rng *rand.Rand, clear bool) {
		i := rng.IntN(stressKeys)
		key := chainKeys[i]
		inc := fmt.Sprint("i", rng.IntN(2))
		switch x := rng.IntN(100); {
		case x < 70:
			n, err := chain.RescueAt(key, inc, rng.IntN(8) != 0, now())
			switch {
			case errors.Is(err, crashloop.ErrNeedsHuman):
				chainRefused[i].Add(1)
			case err != nil || n < 0 || n > 3:
				fail("RescueAt(%q) = %d, %v", key, n, err)
			}
		case x < 85:
			if n := chain.ChainAt(key, inc, now()); n < 0 || n > 3 {
				fail("ChainAt(%q) = %d", key, n)
			}
		case x < 95:
			_ = chain.NeedsHuman()
		default:
			if clear {
				chain.Clear(key)
				chainClears[i].Add(1)
			} else if rng.IntN(20) == 0 {
				chain.NeedsHuman()
			}
		}
	}

	supOp := func(rng *rand.Rand) {
		i := rng.IntN(stressKeys)
		key := supKeys[i]
		switch x := rng.IntN(100); {
		case x < 50:
			script := rng.IntN(5)
			calls := 0
			err := sup.Run(context.Background(), key, func(ctx context.Context) error {
				calls++
				switch script {
				case 0: // crashes at once, every time: the budget parks it
					return errStress
				case 1: // a permanent failure parks at once
					return crashloop.Permanent(errStress)
				case 2: // up, then crashes: the chain escalates
					crashloop.Ready(ctx)
					return errStress
				case 3: // a planned restart, then a clean exit
					if calls == 1 {
						return crashloop.Restart(nil)
					}
					return nil
				default: // one crash, then a clean exit
					if calls == 1 {
						return errStress
					}
					return nil
				}
			})
			var pe *crashloop.ParkedError
			switch {
			case err == nil, errors.Is(err, crashloop.ErrAlreadyRunning):
			case errors.As(err, &pe):
				supParks.add(i, pe)
				if pe.Key != key {
					fail("Run(%q) = %v", key, err)
				}
			default:
				fail("Run(%q) = %v", key, err)
			}
		case x < 95:
			if err := sup.Resume(context.Background(), key); err == nil {
				supResumed[i].Add(1)
			} else if !errors.Is(err, crashloop.ErrNotParked) {
				fail("Resume(%q) = %v", key, err)
			}
		case x < 99:
			sup.Parked()
		default:
			if rng.IntN(10) == 0 {
				sup.Status(context.Background())
			}
		}
	}

	// Stage 1: everything at once.
	var wg sync.WaitGroup
	for w := range stressWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(1, uint64(w)))
			for range stressOps {
				switch x := rng.IntN(100); {
				case x < 1:
					offset.Add(int64(rng.IntN(int(10 * time.Second))))
				case x < 45:
					budgetOp(rng)
				case x < 85:
					chainOp(rng, true)
				default:
					supOp(rng)
				}
				ops.Add(1)
			}
		}()
	}
	stressWait(t, "stage 1", &wg)
	close(failures)
	for f := range failures {
		t.Error(f)
	}

	// The budget: one EventStartupExhausted per park, one EventResumed per
	// successful Resume, one EventRespawnScheduled per granted respawn, and
	// the parks that were not resumed are exactly the parked keys.
	var wantParked []string
	for i, key := range budgetKeys {
		parks, resumes := int64(len(budgetParks.seen[i])), budgetResumed[i].Load()
		if got := budgetEvents.get(crashloop.EventStartupExhausted, i); got != parks {
			t.Errorf("budget %q: %d parks seen, %d EventStartupExhausted", key, parks, got)
		}
		if got := budgetEvents.get(crashloop.EventResumed, i); got != resumes {
			t.Errorf("budget %q: %d resumes, %d EventResumed", key, resumes, got)
		}
		if got := budgetEvents.get(crashloop.EventRespawnScheduled, i); got != budgetScheduled[i].Load() {
			t.Errorf("budget %q: %d respawns granted, %d EventRespawnScheduled", key, budgetScheduled[i].Load(), got)
		}
		if parked := budget.IsParked(key); parks-resumes != map[bool]int64{true: 1, false: 0}[parked] {
			t.Errorf("budget %q: %d parks, %d resumes, parked now: %v", key, parks, resumes, parked)
		} else if parked {
			wantParked = append(wantParked, key)
		}
	}
	if got := budget.Parked(); !slices.Equal(got, wantParked) {
		t.Errorf("budget.Parked() = %d keys, the parked keys are %d", len(got), len(wantParked))
	}

	// The detector, with Clear in the mix: an escalation needs a Clear
	// before the next one, and a key that needs a human was announced.
	for i, key := range chainKeys {
		esc := chainEvents.get(crashloop.EventChainEscalated, i)
		if esc > chainClears[i].Load()+1 {
			t.Errorf("chain %q: %d escalations announced with %d clears", key, esc, chainClears[i].Load())
		}
		if (slices.Contains(chain.NeedsHuman(), key) || chainRefused[i].Load() > 0) && esc == 0 {
			t.Errorf("chain %q: needs a human, never announced", key)
		}
	}

	// The Supervisor: each park was announced once, by whatever decided
	// it, and each resume likewise. Run returned every park but those a
	// Resume beat it to (the Resume wins: Run goes on).
	var supParked []string
	for i, key := range supKeys {
		returned, resumes := int64(len(supParks.seen[i])), supResumed[i].Load()
		parks := supEvents.get(crashloop.EventStartupExhausted, i) + supEvents.get(crashloop.EventChainEscalated, i)
		if returned > parks || parks-returned > resumes {
			t.Errorf("supervisor %q: %d parks returned by Run, %d announced (%d exhausted, %d escalated), %d resumes", key, returned,
				parks, supEvents.get(crashloop.EventStartupExhausted, i), supEvents.get(crashloop.EventChainEscalated, i), resumes)
		}
		if got := supEvents.get(crashloop.EventResumed, i); got != resumes {
			t.Errorf("supervisor %q: %d resumes, %d EventResumed", key, resumes, got)
		}
		switch parks - resumes {
		case 1:
			supParked = append(supParked, key)
		case 0:
		default:
			t.Errorf("supervisor %q: %d parks, %d resumes", key, parks, resumes)
		}
	}
	if got := sup.Parked(); !slices.Equal(got, supParked) {
		t.Errorf("supervisor.Parked() = %d keys, %d parks not resumed", len(got), len(supParked))
	}
	for _, c := range []*stressCounts{budgetEvents, chainEvents, supEvents} {
		if n := c.other.Load(); n != 0 {
			t.Errorf("%d events of unknown keys or kinds", n)
		}
	}

	// Stage 2: the detector alone, no Clear: each key escalates at most
	// once, announced exactly when it is marked.
	for _, key := range chainKeys {
		chain.Clear(key)
	}
	chainEvents.reset()
	for i := range chainRefused {
		chainRefused[i].Store(0)
	}
	failures = make(chan string, 100)
	for w := range stressWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(2, uint64(w)))
			for range stressOps / 4 {
				if rng.IntN(200) == 0 {
					offset.Add(int64(rng.IntN(int(10 * time.Second))))
				}
				chainOp(rng, false)
				ops.Add(1)
			}
		}()
	}
	stressWait(t, "stage 2", &wg)
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	var marked []string
	for i, key := range chainKeys {
		esc, needs := chainEvents.get(crashloop.EventChainEscalated, i), slices.Contains(chain.NeedsHuman(), key)
		if esc != map[bool]int64{true: 1, false: 0}[needs] || needs != (chainRefused[i].Load() > 0) {
			t.Errorf("chain %q: %d EventChainEscalated, needs a human: %v, refused %d times", key, esc, needs,
				chainRefused[i].Load())
		}
		if needs {
			marked = append(marked, key)
		}
	}
	sort.Strings(marked)
	if got := chain.NeedsHuman(); !slices.Equal(got, marked) {
		t.Errorf("NeedsHuman() = %d keys, %d marked", len(got), len(marked))
	}
	t.Logf("%d operations by %d goroutines over %d keys each of a budget, a detector and a supervisor; parked at the end: %d budget keys, %d supervisor keys; %d detector keys need a human",
		ops.Load(), stressWorkers, stressKeys, len(wantParked), len(supParked), len(marked))
}

// TestStressResumeWhileRunning: operators resume keys while their workers
// keep calling Run on them. Every park was announced once (here by
// EventChainEscalated: each run is healthy, then crashes), and Run returned
// it unless a Resume came first, in which case Run went on.
func TestStressResumeWhileRunning(t *testing.T) {
	const keys, parksPerKey, maxRounds = 4, 300, 60000
	names := []string{"r0", "r1", "r2", "r3"}
	events := newStressCounts(names)
	cfg := crashloop.SupervisorConfig{Budget: crashloop.BudgetConfig{MaxRespawns: 3, Window: time.Hour},
		Chain: &crashloop.ChainConfig{MaxChain: 1, ResetGap: time.Hour}}
	sup, err := crashloop.NewSupervisor(cfg, crashloop.WithEventHandler(events)) // no backoff: no waits
	if err != nil {
		t.Fatal(err)
	}
	parks := newStressParks(keys)
	var resumed [keys]atomic.Int64
	var runners, resumers sync.WaitGroup
	stop := make(chan struct{})
	for i, key := range names {
		runners.Add(1)
		go func() {
			defer runners.Done()
			seen := map[*crashloop.ParkedError]bool{}
			for round := 0; round < maxRounds && len(seen) < parksPerKey; round++ {
				err := sup.Run(context.Background(), key, func(ctx context.Context) error {
					crashloop.Ready(ctx)
					return errStress
				})
				var pe *crashloop.ParkedError
				if errors.As(err, &pe) {
					parks.add(i, pe)
					seen[pe] = true
				} else if err != nil {
					t.Errorf("Run(%q) = %v", key, err)
				}
			}
		}()
		resumers.Add(1)
		go func() {
			defer resumers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if sup.Resume(context.Background(), key) == nil {
					resumed[i].Add(1)
				}
			}
		}()
	}
	stressWait(t, "the runners", &runners)
	close(stop)
	stressWait(t, "the resumers", &resumers)
	total, won := 0, int64(0)
	for i, key := range names {
		returned := int64(len(parks.seen[i]))
		total += int(returned)
		announced := events.get(crashloop.EventChainEscalated, i) + events.get(crashloop.EventStartupExhausted, i)
		resumes := resumed[i].Load()
		if returned > announced || announced-returned > resumes {
			t.Errorf("%q: %d parks returned by Run, %d announced, %d resumes", key, returned, announced, resumes)
		}
		won += announced - returned
		if got := events.get(crashloop.EventResumed, i); got != resumes {
			t.Errorf("%q: %d resumes, %d EventResumed", key, resumes, got)
		}
	}
	t.Logf("%d parks of %d keys returned by Run while operators resumed them; %d more resumed before Run looked", total, keys, won)
}

// ---------------------------------------------------------------------------
// Panicking event handlers

// errStressPanic is what the handlers below panic with.
var errStressPanic = errors.New("stress: handler panicked")

// stressPanicky panics on events of the kinds in on, after counting them.
type stressPanicky struct {
	mu   sync.Mutex
	on   map[crashloop.EventKind]bool
	seen []crashloop.EventKind
}

func (h *stressPanicky) HandleEvent(ev crashloop.Event) {
	h.mu.Lock()
	h.seen = append(h.seen, ev.Kind)
	boom := h.on[ev.Kind]
	h.mu.Unlock()
	if boom {
		panic(errStressPanic)
	}
}

func (h *stressPanicky) kinds() []crashloop.EventKind {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen)
}

// stressCall runs f and returns what it panicked with. A call that does not
// return (a lock left held by an earlier panic) fails the test after
// stressDeadline instead of hanging it.
func stressCall(t *testing.T, what string, f func()) (panicked any) {
	t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		f()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), stressDeadline)
	defer cancel()
	select {
	case p := <-done:
		return p
	case <-ctx.Done():
		t.Fatalf("%s did not return: a lock left held?", what)
		return nil
	}
}

// stressLog captures what slog.Default logs during a test: the package logs
// there the panics of event handlers it recovered.
type stressLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *stressLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// panics returns how many recovered handler panics were logged.
func (l *stressLog) panics() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), "crashloop: event handler panicked; the decision stands")
}

func stressCaptureLog(t *testing.T) *stressLog {
	l := &stressLog{}
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(l, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	return l
}

// stressMustRecover runs f, which must return normally although the
// handler panicked on want of the events it caused: each panic recovered
// and logged, none escaping to the caller.
func stressMustRecover(t *testing.T, l *stressLog, what string, want int, f func()) {
	t.Helper()
	before := l.panics()
	if p := stressCall(t, what, f); p != nil {
		t.Fatalf("%s: the handler's panic escaped: %v", what, p)
	}
	if got := l.panics() - before; got != want {
		t.Fatalf("%s: %d handler panics logged, want %d", what, got, want)
	}
}

func TestPanickingHandlerBudget(t *testing.T) {
	l := stressCaptureLog(t)
	mock := clock.NewMock()
	h := &stressPanicky{on: map[crashloop.EventKind]bool{crashloop.EventRespawnScheduled: true,
		crashloop.EventStartupExhausted: true, crashloop.EventResumed: true}}
	b, err := crashloop.NewRespawnBudget(crashloop.BudgetConfig{MaxRespawns: 2, Window: time.Minute,
		InitialBackoff: time.Second, MaxBackoff: 5 * time.Second}, crashloop.WithClock(mock), crashloop.WithEventHandler(h))
	if err != nil {
		t.Fatal(err)
	}
	now := mock.Now()
	for i := 1; i <= 2; i++ {
		stressMustRecover(t, l, "FailedAt", 1, func() { b.FailedAt("k", errStress, now) })
		if n := b.RespawnsAt("k", now); n != i {
			t.Fatalf("after the handler panicked on respawn %d: RespawnsAt = %d", i, n)
		}
	}
	stressMustRecover(t, l, "FailedAt that parks", 1, func() { b.FailedAt("k", errStress, now) })
	var pe *crashloop.ParkedError
	if err := b.Spawn("k"); !errors.As(err, &pe) || pe.Attempts != 2 || !b.IsParked("k") || !slices.Equal(b.Parked(), []string{"k"}) {
		t.Fatalf("after the handler panicked on the park: Spawn = %v, IsParked = %v, Parked = %q", err, b.IsParked("k"), b.Parked())
	}
	stressMustRecover(t, l, "FailedAt while parked", 0, func() {
		if _, err := b.FailedAt("k", errStress, now); err != pe {
			t.Errorf("FailedAt while parked = %v, want the same *ParkedError", err)
		}
	})
	stressMustRecover(t, l, "Resume", 1, func() { b.Resume("k") })
	if b.IsParked("k") || b.RespawnsAt("k", now) != 0 {
		t.Fatalf("after the handler panicked on the resume: parked %v, respawns %d", b.IsParked("k"), b.RespawnsAt("k", now))
	}
	if err := b.Resume("k"); !errors.Is(err, crashloop.ErrNotParked) {
		t.Fatalf("second Resume = %v, want ErrNotParked", err)
	}
	want := []crashloop.EventKind{crashloop.EventRespawnScheduled, crashloop.EventRespawnScheduled,
		crashloop.EventStartupExhausted, crashloop.EventResumed}
	if got := h.kinds(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

func TestPanickingHandlerChain(t *testing.T) {
	l := stressCaptureLog(t)
	mock := clock.NewMock()
	h := &stressPanicky{on: map[crashloop.EventKind]bool{crashloop.EventChainEscalated: true}}
	d, err := crashloop.NewChainDetector(crashloop.ChainConfig{MaxChain: 1, ResetGap: time.Minute},
		crashloop.WithClock(mock), crashloop.WithEventHandler(h))
	if err != nil {
		t.Fatal(err)
	}
	now := mock.Now()
	if n, err := d.RescueAt("k", "i", true, now); n != 1 || err != nil {
		t.Fatalf("RescueAt = %d, %v", n, err)
	}
	stressMustRecover(t, l, "RescueAt that escalates", 1, func() { d.RescueAt("k", "i", true, now) })
	if !slices.Equal(d.NeedsHuman(), []string{"k"}) {
		t.Fatalf("after the handler panicked on the escalation: NeedsHuman = %v", d.NeedsHuman())
	}
	stressMustRecover(t, l, "RescueAt while escalated", 0, func() {
		if _, err := d.RescueAt("k", "i", true, now); !errors.Is(err, crashloop.ErrNeedsHuman) {
			t.Errorf("RescueAt while escalated = %v", err)
		}
	})
	d.Clear("k")
	if n, err := d.RescueAt("k", "i", true, now); n != 1 || err != nil || len(d.NeedsHuman()) != 0 {
		t.Fatalf("after Clear: RescueAt = %d, %v", n, err)
	}
	if got := h.kinds(); !slices.Equal(got, []crashloop.EventKind{crashloop.EventChainEscalated, crashloop.EventResumed}) {
		t.Fatalf("events %v", got)
	}
}

func TestPanickingHandlerGuard(t *testing.T) {
	l := stressCaptureLog(t)
	mock := clock.NewMock()
	h := &stressPanicky{on: map[crashloop.EventKind]bool{crashloop.EventGuardTripped: true}}
	g, err := crashloop.NewRestartLoopGuard(2, time.Minute, crashloop.WithClock(mock), crashloop.WithEventHandler(h))
	if err != nil {
		t.Fatal(err)
	}
	now := mock.Now()
	if g.RecordAt(now) {
		t.Fatal("tripped on the first restart")
	}
	stressMustRecover(t, l, "RecordAt that trips", 1, func() { g.RecordAt(now) })
	if !g.TrippedAt(now) || g.RestartsAt(now) != 2 {
		t.Fatalf("after the handler panicked on the trip: tripped %v, restarts %d", g.TrippedAt(now), g.RestartsAt(now))
	}
	stressMustRecover(t, l, "RecordAt while tripped", 0, func() {
		if !g.RecordAt(now) {
			t.Error("RecordAt while tripped = false")
		}
	})
	g.Reset()
	if g.TrippedAt(now) || g.RestartsAt(now) != 0 {
		t.Fatal("Reset after a panic did not clear the guard")
	}
	if got := h.kinds(); !slices.Equal(got, []crashloop.EventKind{crashloop.EventGuardTripped}) {
		t.Fatalf("events %v", got)
	}
}

func TestPanickingHandlerFleet(t *testing.T) {
	l := stressCaptureLog(t)
	mock := clock.NewMock()
	h := &stressPanicky{on: map[crashloop.EventKind]bool{crashloop.EventFleetTripped: true, crashloop.EventFleetRearmed: true}}
	p, err := crashloop.NewFleetSupervisionPolicy(crashloop.FleetConfig{RestartsPerHour: 2, FailingFraction: 0.5,
		MinFailing: 2, Cooldown: time.Minute}, crashloop.WithClock(mock), crashloop.WithEventHandler(h))
	if err != nil {
		t.Fatal(err)
	}
	now := mock.Now()
	if p.NoteRestartAt(now) {
		t.Fatal("tripped on the first restart")
	}
	stressMustRecover(t, l, "NoteRestartAt that trips", 1, func() { p.NoteRestartAt(now) })
	if st := p.StatusAt(now); !st.BreakerTripped || st.RestartsInHour != 2 {
		t.Fatalf("after the handler panicked on the trip: %+v", st)
	}
	stressMustRecover(t, l, "NoteRestartAt while tripped", 0, func() {
		if !p.NoteRestartAt(now) {
			t.Error("NoteRestartAt while tripped = false")
		}
	})
	later := now.Add(time.Minute)
	stressMustRecover(t, l, "TrippedAt that re-arms", 1, func() { p.TrippedAt(later) })
	if st := p.StatusAt(later); st.BreakerTripped || st.RestartsInHour != 0 {
		t.Fatalf("after the handler panicked on the re-arm: %+v", st)
	}
	stressMustRecover(t, l, "NoteFleetStateAt that trips", 1, func() { p.NoteFleetStateAt(2, 4, later) })
	if st := p.StatusAt(later); !st.BreakerTripped || st.FailingKeys != 2 || st.Keys != 4 {
		t.Fatalf("after the handler panicked on a fraction trip: %+v", st)
	}
	p.Reset()
	if p.TrippedAt(later) {
		t.Fatal("Reset after a panic did not clear the breaker")
	}
	want := []crashloop.EventKind{crashloop.EventFleetTripped, crashloop.EventFleetRearmed, crashloop.EventFleetTripped}
	if got := h.kinds(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// TestPanickingHandlerSupervisor: a handler panic never masks a decision:
// Run still returns its *ParkedError and Resume its nil, the state is
// committed, the fleet hears of the park and the resume, the key is no
// longer running, and the next calls work.
func TestPanickingHandlerSupervisor(t *testing.T) {
	l := stressCaptureLog(t)
	mock := clock.NewMock()
	h := &stressPanicky{on: map[crashloop.EventKind]bool{crashloop.EventRespawnScheduled: true,
		crashloop.EventStartupExhausted: true, crashloop.EventResumed: true}}
	cfg := crashloop.SupervisorConfig{Budget: crashloop.BudgetConfig{MaxRespawns: 1, Window: time.Minute}, HealthyAfter: time.Second,
		Fleet: &crashloop.FleetConfig{RestartsPerHour: 1000, FailingFraction: 1, MinFailing: 2, Cooldown: time.Minute}}
	s, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(mock), crashloop.WithEventHandler(h))
	if err != nil {
		t.Fatal(err)
	}
	crash := func(context.Context) error { return errStress }
	var pe *crashloop.ParkedError
	stressMustRecover(t, l, "Run whose respawn and park are announced", 2, func() {
		if err := s.Run(context.Background(), "k", crash); !errors.As(err, &pe) || pe.Reason != crashloop.ReasonBudgetExhausted {
			t.Errorf("Run = %v, want the *ParkedError of the budget", err)
		}
	})
	stressMustRecover(t, l, "Run of a parked key", 0, func() {
		if err := s.Run(context.Background(), "k", crash); !errors.Is(err, pe) {
			t.Errorf("Run of a parked key = %v, want the same *ParkedError", err)
		}
	})
	if !slices.Equal(s.Parked(), []string{"k"}) || s.Status(context.Background()).Keys["k"].State != crashloop.StateParked {
		t.Fatalf("after the handler panicked on the park: Parked = %q, %+v", s.Parked(), s.Status(context.Background()).Keys["k"])
	}
	if st := s.Status(context.Background()).Fleet; st.FailingKeys != 1 || st.Keys != 1 {
		t.Errorf("after the handler panicked on the park: the fleet noted %d/%d failing, want 1/1", st.FailingKeys, st.Keys)
	}
	stressMustRecover(t, l, "Resume", 1, func() {
		if err := s.Resume(context.Background(), "k"); err != nil {
			t.Errorf("Resume = %v", err)
		}
	})
	if got := s.Parked(); len(got) != 0 {
		t.Fatalf("after the handler panicked on the resume: Parked = %q", got)
	}
	if st := s.Status(context.Background()).Keys["k"]; st.State != crashloop.StateExited || !st.CanRestart {
		t.Errorf("after the handler panicked on the resume: %+v, want state exited", st)
	}
	if st := s.Status(context.Background()).Fleet; st.FailingKeys != 0 || st.Keys != 0 {
		t.Errorf("after the handler panicked on the resume: the fleet noted %d/%d failing, want 0/0", st.FailingKeys, st.Keys)
	}
	stressMustRecover(t, l, "Run after the resume", 0, func() {
		if err := s.Run(context.Background(), "k", func(context.Context) error { return nil }); err != nil {
			t.Errorf("Run after the resume = %v", err)
		}
	})
	want := []crashloop.EventKind{crashloop.EventRespawnScheduled, crashloop.EventStartupExhausted, crashloop.EventResumed}
	if got := h.kinds(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}
