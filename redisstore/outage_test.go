package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/crashloopguard/crashloop/share"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Supervisors whose Redis fails: each decision waits at most the Store's
// timeout (budget; asserted under slack times it), each replica announces
// the outage once, keeps guarding with its own guards, and writes back the
// parks it decided alone when the server answers again.

// boundedOn returns a newStore for fleet whose Stores reach the server
// through opts (a server, a proxy) with the bounded options and timeout
// of production, and decide in client time (the replicas' mock clocks
// pace their retries).
func boundedOn(t testing.TB, opts func(*redis.Options) *redis.Options) func(int) *Store {
	prefix := newPrefix()
	return func(i int) *Store {
		c := redis.NewClient(opts(BoundedOptions(nil, budget)))
		t.Cleanup(func() { _ = c.Close() })
		return New(c, Options{Prefix: prefix, Replica: fmt.Sprintf("replica-%d", i), Timeout: budget, ClientTime: true})
	}
}

// decide runs one decision and returns it with how long it took.
func decide(r *replica, key string, res crashloop.RunResult) (crashloop.Decision, time.Duration) {
	start := time.Now()
	d := r.sup.Decide(context.Background(), key, res)
	return d, time.Since(start)
}

// The server is killed while three replicas decide: every decision ends
// within the bound, each replica announces store.unavailable once and
// decides alone (a park it makes is its own; a Resume is refused). The
// server comes back empty (no persistence): the replica that parked a key
// alone writes it back and announces store.recovered, and the others
// refuse the key.
func TestOutageServerKilledMidRun(t *testing.T) {
	s := redistest.Start(t)
	cfg := crashloop.DefaultSupervisorConfig()
	rs := fleet(t, 3, cfg, true, boundedOn(t, s.Options))
	var slowest atomic.Int64
	var after [3]atomic.Int32 // decisions made since the kill
	var killed atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var made [3]atomic.Int32
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				// a new key each time: a failed start, granted by the budget
				d, took := decide(r, fmt.Sprintf("w%d-%d", i, n), crashloop.RunResult{Err: errors.New("exit 1")})
				took = beyondStalls(took)
				if d.Action == crashloop.ActionStop {
					t.Errorf("replica %d: %+v", i, d)
				}
				for took > time.Duration(slowest.Load()) {
					slowest.CompareAndSwap(slowest.Load(), int64(took))
				}
				made[i].Add(1)
				if killed.Load() {
					after[i].Add(1)
				}
			}
		}()
	}
	progress := func(c *[3]atomic.Int32, n int32) func() bool {
		return func() bool { return c[0].Load() >= n && c[1].Load() >= n && c[2].Load() >= n }
	}
	require.Eventually(t, progress(&made, 20), watchdog, time.Millisecond)
	// What each replica announced before the kill: nothing, unless the
	// load starved a call past its timeout (an outage of its own).
	var before, recBefore [3]int
	var downBefore [3]bool
	for i, r := range rs {
		before[i] = len(r.evs.of(crashloop.EventStoreUnavailable))
		recBefore[i] = len(r.evs.of(crashloop.EventStoreRecovered))
		downBefore[i] = before[i] > recBefore[i]
	}
	s.Kill()
	killed.Store(true)
	require.Eventually(t, progress(&after, 20), watchdog, time.Millisecond)
	close(stop)
	wg.Wait()
	require.Less(t, time.Duration(slowest.Load()), slack*budget, "the slowest decision, beyond this process's stalls")
	t.Logf("the slowest of %d decisions, beyond this process's stalls: %v", made[0].Load()+made[1].Load()+made[2].Load(), time.Duration(slowest.Load()))
	for i, r := range rs {
		evs := r.evs.of(crashloop.EventStoreUnavailable)
		if before[i] > 0 {
			t.Logf("replica %d: an outage before the kill (the machine's load): %v", i, evs[:before[i]])
		}
		evs = evs[before[i]:]
		if downBefore[i] {
			require.Empty(t, evs, "replica %d, down at the kill: the same outage, not announced again", i)
			continue
		}
		require.Len(t, evs, 1, "replica %d announces the outage once", i)
		require.NotErrorIs(t, evs[0].LastError, context.DeadlineExceeded, "a killed server is no timeout: %v", evs[0].LastError)
	}

	// Alone, replica 0 parks a key; nobody can resume it now.
	d, took := decide(rs[0], "solo", crashloop.RunResult{Err: crashloop.Permanent(errors.New("bad config"))})
	require.ErrorIs(t, d.Err, crashloop.ErrParked)
	require.Less(t, beyondStalls(took), budget)
	require.ErrorIs(t, rs[0].sup.Resume(context.Background(), "solo"), share.ErrUnavailable)

	s.Restart()
	// Each replica asks again once a second by its clock; go-redis may need
	// up to a second of its own before it dials again.
	require.Eventually(t, func() bool {
		rs[0].clock.Add(time.Second)
		return layerOf(rs[0].sup).Flush(context.Background()) == nil
	}, watchdog, 10*time.Millisecond)
	rec := rs[0].evs.of(crashloop.EventStoreRecovered)[recBefore[0]:]
	require.Len(t, rec, 1)
	require.Equal(t, 1, rec[0].Attempts, "one park written back")
	for i, r := range rs[1:] {
		i++
		require.Eventually(t, func() bool {
			r.clock.Add(time.Second)
			err := r.sup.Run(context.Background(), "solo", func(context.Context) error { return nil })
			return errors.Is(err, crashloop.ErrParked)
		}, watchdog, 10*time.Millisecond, "the others refuse the park written back")
		require.Len(t, r.evs.of(crashloop.EventStoreRecovered)[recBefore[i]:], 1)
		require.Len(t, r.evs.of(crashloop.EventStoreUnavailable), max(before[i], recBefore[i]+1), "still once")
	}
	require.NoError(t, rs[2].sup.Resume(context.Background(), "solo"), "a Resume goes through again")
	requireOneLoss(t, rs)
}

// requireOneLoss asserts what the replicas rs announced of an outage that
// ended with the server's state lost (docs/redis.md): the loss once in the
// deployment, by whichever replica claimed it, and one store.recovered by
// each replica that announced the outage, before or after the loss (the
// store may adopt the new epoch, and a write-back use it, before it tells
// its Supervisor of the loss).
func requireOneLoss(t *testing.T, rs []*replica) {
	t.Helper()
	lost := func() int {
		n := 0
		for _, r := range rs {
			n += len(r.evs.of(crashloop.EventStoreStateLost))
		}
		return n
	}
	require.Eventually(t, func() bool { return lost() > 0 }, watchdog, time.Millisecond, "store.state_lost")
	require.Equal(t, 1, lost(), "store.state_lost once in the deployment")
	for i, r := range rs {
		require.Len(t, r.evs.of(crashloop.EventStoreRecovered), len(r.evs.of(crashloop.EventStoreUnavailable)), "replica %d", i)
	}
}

// A Run whose program keeps running after a decision that found the server
// dead comes back on its own once the server answers again: no decision,
// Flush or Status brings it. The server is killed by the first run, whose
// failure is decided alone (store.unavailable); the second run keeps
// running; meanwhile a key is parked alone. The server restarts empty:
// while the run goes on, the Supervisor (real clock) finds it, writes the
// park back and announces store.recovered, once; the other replica then
// refuses the key.
func TestOutageRejoinWhileRunRuns(t *testing.T) {
	s := redistest.Start(t)
	rs := fleet(t, 2, crashloop.DefaultSupervisorConfig(), false, boundedOn(t, s.Options))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var runs atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- rs[0].sup.Run(ctx, "web", func(ctx context.Context) error {
			if runs.Add(1) == 1 {
				s.Kill()
				return errors.New("exit 1")
			}
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	require.Eventually(t, func() bool { return runs.Load() == 2 }, watchdog, time.Millisecond, "the restart, decided alone")
	require.Len(t, rs[0].evs.of(crashloop.EventStoreUnavailable), 1)
	d := rs[0].sup.Decide(t.Context(), "solo", crashloop.RunResult{Err: crashloop.Permanent(errors.New("bad config"))})
	require.ErrorIs(t, d.Err, crashloop.ErrParked)

	s.Restart()
	require.Eventually(t, func() bool { return len(rs[0].evs.of(crashloop.EventStoreRecovered)) > 0 }, watchdog, time.Millisecond,
		"store.recovered while the run goes on")
	rec := rs[0].evs.of(crashloop.EventStoreRecovered)
	require.Len(t, rec, 1)
	require.Equal(t, 1, rec[0].Attempts, "the park written back")
	require.Equal(t, int32(2), runs.Load(), "no run ended to bring it back")
	require.Eventually(t, func() bool {
		err := rs[1].sup.Run(t.Context(), "solo", func(context.Context) error { return nil })
		return errors.Is(err, crashloop.ErrParked)
	}, watchdog, 10*time.Millisecond, "the other replica refuses the park written back")

	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Len(t, rs[0].evs.of(crashloop.EventStoreRecovered), 1, "still once")
	require.Len(t, rs[0].evs.of(crashloop.EventStoreUnavailable), 1, "still once")
	requireOneLoss(t, rs)
}

// A refused connection and a black hole are different failures: a refusal
// is an answer, and comes at once; a black hole answers nothing, and each
// call runs into the bound, the read timeout on an open connection and the
// dial timeout on a new one. Either way the replica decides alone.
func TestOutageRefusedAndBlackHole(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []redistest.Option
		cut   func(s *redistest.Server)
		check func(t *testing.T, err error, took time.Duration)
	}{
		{"refused", nil, (*redistest.Server).Kill, func(t *testing.T, err error, took time.Duration) {
			require.ErrorIs(t, err, syscall.ECONNREFUSED)
			require.Less(t, beyondStalls(took), budget, "a refusal waits for no timeout")
		}},
		{"black hole", []redistest.Option{redistest.InNetns()}, (*redistest.Server).BlackHole, func(t *testing.T, err error, took time.Duration) {
			require.True(t, timedOut(err), "%v", err)
			require.NotErrorIs(t, err, syscall.ECONNREFUSED)
			require.GreaterOrEqual(t, took, budget, "it waited for the timeout")
			requireBounded(t, took)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t, tc.opts...)
			r := fleet(t, 1, crashloop.DefaultSupervisorConfig(), true, boundedOn(t, s.Options))[0]
			boom := crashloop.RunResult{Err: errors.New("exit 1")}
			d, _ := decide(r, "k", boom)
			require.Equal(t, crashloop.ActionRestart, d.Action)
			tc.cut(s)

			// An open connection: EOF or the read timeout. The replica decides
			// alone with its own budget, which has counted nothing yet.
			d, took := decide(r, "k", boom)
			require.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: 500 * time.Millisecond}, d)
			evs := r.evs.of(crashloop.EventStoreUnavailable)
			require.Len(t, evs, 1)
			t.Logf("%s, open connection: %v: %v", tc.name, took, evs[0].LastError)
			if tc.name == "black hole" {
				tc.check(t, evs[0].LastError, took)
			}

			d, took = decide(r, "k", boom) // asks the ledger again only a second later
			require.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: time.Second}, d)
			require.Less(t, took, budget)

			r.clock.Add(time.Second) // now it asks: a new connection
			start := time.Now()
			err := layerOf(r.sup).Flush(context.Background())
			took = time.Since(start)
			require.ErrorIs(t, err, share.ErrUnavailable)
			_, lerr := r.store.Lookup(context.Background(), "k")
			t.Logf("%s, new connection: %v: %v", tc.name, took, lerr)
			tc.check(t, lerr, took)
			require.Len(t, r.evs.of(crashloop.EventStoreUnavailable), 1, "announced once")
		})
	}
}

// A slow server (every reply held back) runs into the timeout, not a hang,
// and the replica decides alone until it answers in time again.
func TestOutageSlowServer(t *testing.T) {
	s := redistest.Start(t)
	p := redistest.NewSlowProxy(t, s, 0)
	r := fleet(t, 1, crashloop.DefaultSupervisorConfig(), true, boundedOn(t, p.Options))[0]
	boom := crashloop.RunResult{Err: errors.New("exit 1")}
	d, _ := decide(r, "k", boom)
	require.Equal(t, crashloop.ActionRestart, d.Action)

	p.SetDelay(time.Hour)
	d, took := decide(r, "k", boom)
	require.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: 500 * time.Millisecond}, d, "decided alone")
	require.GreaterOrEqual(t, took, budget)
	requireBounded(t, took)
	evs := r.evs.of(crashloop.EventStoreUnavailable)
	require.Len(t, evs, 1)
	require.True(t, timedOut(evs[0].LastError), "%v", evs[0].LastError)
	t.Logf("slow server: %v: %v", took, evs[0].LastError)

	p.SetDelay(0)
	r.clock.Add(time.Second)
	require.Eventually(t, func() bool {
		r.clock.Add(time.Second)
		return layerOf(r.sup).Flush(context.Background()) == nil
	}, watchdog, 10*time.Millisecond)
	require.Len(t, r.evs.of(crashloop.EventStoreRecovered), 1)
}
