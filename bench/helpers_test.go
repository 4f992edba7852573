package bench_test

import (
	"errors"
	"fmt"
	"iter"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
)

// nKeys is the number of keys of the keyed benchmarks.
const nKeys = 1000

var keys = func() []string {
	ks := make([]string, nKeys)
	for i := range ks {
		ks[i] = fmt.Sprintf("session-%04d", i)
	}
	return ks
}()

var errBench = errors.New("bench: exit status 1")

// budgetConfig is the budget of the root package's benchmarks: 100
// respawns a minute. A key that fails every budgetGap never parks, and
// each failure drops one respawn from a full window (budgetFull respawns)
// and records one.
func budgetConfig() crashloop.BudgetConfig {
	return crashloop.BudgetConfig{MaxRespawns: 100, Window: time.Minute, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}
}

const (
	budgetGap  = 610 * time.Millisecond
	budgetFull = 99
)

// times yields b.N times in chunks: after start, moving on by step every
// `every` times. Each chunk is computed with the timer stopped, so a
// benchmark's loop times its call and not time.Time.Add.
func times(b *testing.B, start time.Time, step time.Duration, every int) iter.Seq[[]time.Time] {
	return func(yield func([]time.Time) bool) {
		b.StopTimer()
		buf := make([]time.Time, min(b.N, 1<<14))
		b.StartTimer()
		for done := 0; done < b.N; done += len(buf) {
			b.StopTimer()
			buf = buf[:min(len(buf), b.N-done)]
			for i := range buf {
				if (done+i)%every == 0 {
					start = start.Add(step)
				}
				buf[i] = start
			}
			b.StartTimer()
			if !yield(buf) {
				return
			}
		}
	}
}

// passClock is the time of a parallel benchmark: each goroutine reads it
// once per pass over its own keys, and each reading moves it on by step.
// Readings come from one counter, so they are ordered as a real clock's
// are, and two passes of one goroutine are at least step apart.
type passClock struct {
	base time.Time
	off  atomic.Int64
	step time.Duration
}

func newPassClock(start time.Time, step time.Duration) *passClock {
	return &passClock{base: start, step: step}
}

func (c *passClock) next() time.Time { return c.base.Add(time.Duration(c.off.Add(int64(c.step)))) }

// starts hands each goroutine of b.RunParallel its own first key of n,
// spread evenly, for benchmarks in which every goroutine goes over all the
// keys.
func starts(n int) func() int {
	var next atomic.Int64
	p := runtime.GOMAXPROCS(0) // the goroutines RunParallel starts
	return func() int { return int(next.Add(1)-1) % p * n / p }
}
