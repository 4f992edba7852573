// Package benchtest is the harness shared by the benchmarks of the
// library's package and of the nested module bench/: times computed ahead
// of a benchmark's loop, a clock for parallel benchmarks, and the keys each
// goroutine of b.RunParallel takes. It imports nothing of the library, so
// the library's own (internal) benchmarks can use it.
package benchtest

import (
	"iter"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// Times yields b.N times in chunks: after start, moving on by step every
// `every` times. Each chunk is computed with the timer stopped, so a
// benchmark's loop times its call and not time.Time.Add.
func Times(b *testing.B, start time.Time, step time.Duration, every int) iter.Seq[[]time.Time] {
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

// PassClock is the time of a parallel benchmark: each goroutine reads it
// once per pass over its own keys, and each reading moves it on by step.
// Readings come from one counter, so they are ordered as a real clock's
// are, and two passes of one goroutine are at least step apart. It is safe
// for concurrent use; get one from NewPassClock.
type PassClock struct {
	base time.Time
	off  atomic.Int64
	step time.Duration
}

// NewPassClock returns a PassClock whose first reading is start + step.
func NewPassClock(start time.Time, step time.Duration) *PassClock {
	return &PassClock{base: start, step: step}
}

// Next returns the next reading.
func (c *PassClock) Next() time.Time { return c.base.Add(time.Duration(c.off.Add(int64(c.step)))) }

// Shares hands each goroutine of b.RunParallel its own range of n keys.
func Shares(n int) func() (lo, hi int) {
	var next atomic.Int64
	p := runtime.GOMAXPROCS(0) // the goroutines RunParallel starts
	return func() (int, int) {
		id := int(next.Add(1)-1) % p
		return id * n / p, (id + 1) * n / p
	}
}

// Starts hands each goroutine of b.RunParallel its own first key of n,
// spread evenly, for benchmarks in which every goroutine goes over all the
// keys.
func Starts(n int) func() int {
	lo := Shares(n)
	return func() int { k, _ := lo(); return k }
}
