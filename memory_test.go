package crashloop_test

// Memory: the package promises that a key that is neither parked nor holds a
// respawn inside its window (for the detector: whose chain has ended and
// that is not marked) does not keep memory forever. These tests fill a
// RespawnBudget and a ChainDetector with a million such keys, let them go
// idle, keep the objects busy with a few other keys, and measure the heap
// after a GC: the idle keys' memory must be given back, and parked or
// escalated keys must be kept.

import (
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/crashloopguard/crashloop"
)

const (
	memKeptKeys  = 1000 // parked (budget) or escalated (detector)
	memTouchKeys = 4096 // the busy keys whose calls drive the amortized sweep
	memMaxRatio  = 0.10 // heap left by idle keys after reclaim / heap they took
)

// memIdleKeys is the number of idle keys: a million, or a fifth of that
// under the race detector, which makes each call several times slower (the
// reclaim shows just the same).
var memIdleKeys = func() int {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				return 200_000
			}
		}
	}
	return 1_000_000
}()

// memHeap returns the live heap after a full collection.
func memHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// memReclaim calls touch in rounds of a sixteenth of the idle keys until
// the heap is back within memMaxRatio of what the idle keys took, or eight
// calls per idle key were made; it returns the heap and the calls made.
func memReclaim(t *testing.T, base, loaded uint64, touch func(i int)) (uint64, int) {
	t.Helper()
	calls := 0
	heap := loaded
	for calls < 8*memIdleKeys {
		for range memIdleKeys / 16 {
			touch(calls)
			calls++
		}
		heap = memHeap()
		if heap < base || float64(heap-base) <= memMaxRatio*float64(loaded-base) {
			break
		}
	}
	return heap, calls
}

// memPerKey returns the heap over base per idle key. Loaded, it is all
// that a key costs here: its string, made by the test (about 16 bytes),
// and a thousandth of a kept key are counted with the map slot, the entry
// and the window; BenchmarkMemoryPerKey counts the library's share alone.
func memPerKey(heap, base uint64) float64 {
	if heap < base {
		return 0
	}
	return float64(heap-base) / float64(memIdleKeys)
}

func TestMemoryIdleBudgetKeysAreReclaimed(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a budget with a million keys")
	}
	start := time.Now()
	mock := clock.NewMock()
	now := mock.Now()
	cfg := crashloop.BudgetConfig{MaxRespawns: 3, Window: time.Minute, InitialBackoff: time.Second, MaxBackoff: 3 * time.Second}
	b, err := crashloop.NewRespawnBudget(cfg, crashloop.WithClock(mock))
	if err != nil {
		t.Fatal(err)
	}
	base := memHeap()
	for i := range memIdleKeys {
		if _, err := b.FailedAt("idle-"+strconv.Itoa(i), nil, now); err != nil {
			t.Fatal(err)
		}
	}
	for i := range memKeptKeys {
		key := "parked-" + strconv.Itoa(i)
		for range cfg.MaxRespawns + 1 {
			b.FailedAt(key, nil, now)
		}
	}
	loaded := memHeap()
	if b.RespawnsAt("idle-0", now) != 1 || len(b.Parked()) != memKeptKeys {
		t.Fatal("the budget did not take the keys")
	}

	// Past the window, the idle keys hold nothing. The busy keys fail once
	// and are forgotten, so that they never park and each call counts.
	later := now.Add(cfg.Window + 1)
	touchKeys := make([]string, memTouchKeys)
	for i := range touchKeys {
		touchKeys[i] = "touch-" + strconv.Itoa(i)
	}
	heap, calls := memReclaim(t, base, loaded, func(i int) {
		key := touchKeys[i%memTouchKeys]
		if _, err := b.FailedAt(key, nil, later); err != nil {
			t.Fatal(err)
		}
		b.Forget(key)
	})
	t.Logf("%d idle keys: %.1f bytes/key loaded (key strings included), %.1f bytes/key after %d calls on %d other keys (heap %d -> %d -> %d bytes) in %v",
		memIdleKeys, memPerKey(loaded, base), memPerKey(heap, base), calls, memTouchKeys, base, loaded, heap,
		time.Since(start).Round(time.Millisecond))
	if heap > base && float64(heap-base) > memMaxRatio*float64(loaded-base) {
		t.Errorf("idle keys not reclaimed after %d calls: heap %d bytes over the empty budget, %d when loaded", calls,
			heap-base, loaded-base)
	}
	if got := b.Parked(); len(got) != memKeptKeys || !b.IsParked("parked-0") || b.Spawn("parked-999") == nil {
		t.Errorf("parked keys were reclaimed: %d left", len(got))
	}
	if n := b.RespawnsAt("idle-0", later); n != 0 {
		t.Errorf("an idle key has %d respawns", n)
	}
}

func TestMemoryIdleChainKeysAreReclaimed(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a detector with a million keys")
	}
	start := time.Now()
	mock := clock.NewMock()
	now := mock.Now()
	cfg := crashloop.ChainConfig{MaxChain: 3, ResetGap: time.Minute}
	d, err := crashloop.NewChainDetector(cfg, crashloop.WithClock(mock))
	if err != nil {
		t.Fatal(err)
	}
	base := memHeap()
	for i := range memIdleKeys {
		if n, err := d.RescueAt("idle-"+strconv.Itoa(i), "i", true, now); n != 1 || err != nil {
			t.Fatal(n, err)
		}
	}
	for i := range memKeptKeys {
		key := "escalated-" + strconv.Itoa(i)
		for range cfg.MaxChain + 1 {
			d.RescueAt(key, "i", true, now)
		}
	}
	loaded := memHeap()
	if d.ChainAt("idle-0", "i", now) != 1 || len(d.NeedsHuman()) != memKeptKeys {
		t.Fatal("the detector did not take the keys")
	}

	// Past the reset gap every idle chain has ended. The busy keys are
	// planned rescues: they never escalate and are idle themselves.
	later := now.Add(cfg.ResetGap + 1)
	touchKeys := make([]string, memTouchKeys)
	for i := range touchKeys {
		touchKeys[i] = "touch-" + strconv.Itoa(i)
	}
	heap, calls := memReclaim(t, base, loaded, func(i int) {
		if n, err := d.RescueAt(touchKeys[i%memTouchKeys], "i", false, later); n != 0 || err != nil {
			t.Fatal(n, err)
		}
	})
	t.Logf("%d idle keys: %.1f bytes/key loaded (key strings included), %.1f bytes/key after %d calls on %d other keys (heap %d -> %d -> %d bytes) in %v",
		memIdleKeys, memPerKey(loaded, base), memPerKey(heap, base), calls, memTouchKeys, base, loaded, heap,
		time.Since(start).Round(time.Millisecond))
	if heap > base && float64(heap-base) > memMaxRatio*float64(loaded-base) {
		t.Errorf("idle keys not reclaimed after %d calls: heap %d bytes over the empty detector, %d when loaded", calls,
			heap-base, loaded-base)
	}
	if got := d.NeedsHuman(); len(got) != memKeptKeys || !slices.Contains(d.NeedsHuman(), "escalated-0") {
		t.Errorf("escalated keys were reclaimed: %d left", len(got))
	}
	if n := d.ChainAt("idle-0", "i", later); n != 0 {
		t.Errorf("an idle key has a chain of %d", n)
	}
}
