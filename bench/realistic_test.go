package bench_test

// Does one lock per keyed object need sharding? BenchmarkKeyedParallel
// answers for saturation, which no restart loop reaches; this answers for a
// workload: 8 workers over 1,000 keys, each key failing twice a second
// (2,000 failures a second in all), paced by the real clock, with each
// call's time as its caller sees it.

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
)

const (
	workers = 8
	period  = 500 * time.Millisecond // between two failures of one key
)

// realisticBudget lets a key fail twice a second for ever: 300 respawns a
// minute, with backoffs short enough for the window to park.
func realisticBudget() crashloop.BudgetConfig {
	return crashloop.BudgetConfig{MaxRespawns: 300, Window: time.Minute, InitialBackoff: time.Millisecond, MaxBackoff: 100 * time.Millisecond}
}

// BenchmarkRealistic runs b.N failures of the 1,000 keys from 8 workers,
// worker w owning keys w, w+8, ...: "spread" spaces each worker's failures
// evenly (a key every 4ms), "burst" fails every key at once, every period
// (a shared dependency went down: 8 workers fail 125 keys each back to
// back). Each key's window is full before the run (120 failures in the
// last minute). The calls:
//
//   - one-lock: a RespawnBudget (one lock, one Go map);
//   - 16-shards: 16 RespawnBudgets picked by hash/maphash;
//   - supervisor: Supervisor.DecideAt of a failed start (one lock over
//     every key; no fleet breaker, which would rightly trip at once).
//
// ns/op is the mean time of one call as its caller sees it: time.Now, the
// call with that time, and time.Since; p50-ns, p99-ns and p99.9-ns are
// percentiles of the same. Contention on the one lock would show as a one-lock p99
// above 16-shards'. The mutex profile counts it directly (see
// docs/benchmarks.md).
func BenchmarkRealistic(b *testing.B) {
	for _, pattern := range []string{"spread", "burst"} {
		b.Run(pattern+"/one-lock", func(b *testing.B) {
			bud := newBudget(b, realisticBudget())
			paced(b, pattern, func(key string, now time.Time) bool {
				_, err := bud.FailedAt(key, errBench, now)
				return err == nil
			})
		})
		b.Run(pattern+"/16-shards", func(b *testing.B) {
			s := newShardedBudget(b, realisticBudget())
			paced(b, pattern, func(key string, now time.Time) bool {
				_, err := s.FailedAt(key, errBench, now)
				return err == nil
			})
		})
		b.Run(pattern+"/supervisor", func(b *testing.B) {
			cfg := crashloop.DefaultSupervisorConfig()
			cfg.Budget, cfg.Fleet = realisticBudget(), nil
			s, err := crashloop.NewSupervisor(cfg)
			if err != nil {
				b.Fatal(err)
			}
			res := crashloop.RunResult{Err: errBench}
			paced(b, pattern, func(key string, now time.Time) bool {
				return s.DecideAt(context.Background(), key, res, now).Action == crashloop.ActionRestart
			})
		})
	}
}

// paced warms every key's window with a minute of failures, then runs b.N
// calls of fail from the workers, paced by pattern, and reports the calls'
// times. fail reports false for a refusal, which fails the benchmark.
func paced(b *testing.B, pattern string, fail func(key string, now time.Time) bool) {
	start := time.Now()
	for i := range int(time.Minute / period) {
		at := start.Add(-time.Minute + time.Duration(i)*period)
		for _, key := range keys {
			if !fail(key, at) {
				b.Fatalf("%s refused while warming up", key)
			}
		}
	}
	lat := make([][]time.Duration, workers)
	for w := range lat {
		lat[w] = make([]time.Duration, 0, b.N/workers+1)
	}
	const perWorker = nKeys / workers
	var wg sync.WaitGroup
	b.ResetTimer()
	start = time.Now()
	for w := range workers {
		n := b.N/workers + min(1, max(0, b.N%workers-w)) // worker w's calls
		wg.Go(func() {
			for j := range n {
				// The time call j of worker w is due.
				at := time.Duration(j/perWorker) * period // burst
				if pattern == "spread" {
					at = time.Duration(j)*period/perWorker + time.Duration(w)*period/nKeys
				}
				if d := time.Until(start.Add(at)); d > 0 {
					time.Sleep(d)
				}
				key := keys[w+workers*(j%perWorker)]
				t0 := time.Now()
				ok := fail(key, t0)
				lat[w] = append(lat[w], time.Since(t0))
				if !ok {
					b.Errorf("%s refused: the benchmark left its steady state", key)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	if len(all) > 0 {
		b.ReportMetric(float64(sum)/float64(len(all)), "ns/op")
		b.ReportMetric(float64(all[len(all)/2]), "p50-ns")
		b.ReportMetric(float64(all[len(all)*99/100]), "p99-ns")
		b.ReportMetric(float64(all[len(all)*999/1000]), "p99.9-ns")
	}
}
