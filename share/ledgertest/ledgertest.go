// Package ledgertest checks that an implementation of share.Ledger
// decides as the in-memory reference, share.MemoryLedger, does: the
// same operations with the same explicit times must give the same
// verdicts, boundaries included, and a change made through one replica
// must be announced exactly once.
//
// A ledger on a server keeps times in microseconds: the times the checks
// use are whole microseconds. The candidate must decide at the time of
// each call (the Judgment's, Proceed's and Fleet's): read it from the call
// (a client-time mode), or from a server clock that the NewFunc's ledgers
// set to it before each call (a server-time mode; redisstore runs the
// checks both ways). The times of the calls sometimes run backwards, as a
// server's clock stepped back would: a ledger keeps one latest time, and
// reads an earlier time as that one, whichever clock gave it.
//
// The checks tell replicas which keys they count as fleet members
// (share.Ledger.Member) and expect every replica's next step to count
// them: a candidate that writes them later (redisstore's Store, within a
// round trip) is given to the checks wrapped so that Member writes at once.
// A candidate's replicas must be io.Closers whose Close withdraws their
// members, as MemoryLedger's does.
package ledgertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/share"
)

// NewFunc returns n fresh replicas of one empty shared ledger, not yet
// opened. Conform calls it once per check.
type NewFunc func(t *testing.T, n int) []share.Ledger

// T0 is the time the checks start from, a whole number of microseconds.
var T0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Config is the Supervisor configuration of the checks: every guard on,
// with small limits so that sequences reach every boundary.
func Config() crashloop.SupervisorConfig {
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Budget = crashloop.BudgetConfig{MaxRespawns: 2, Window: 10 * time.Second, InitialBackoff: 0, MaxBackoff: 0}
	cfg.Chain = &crashloop.ChainConfig{MaxChain: 2, ResetGap: 5 * time.Second}
	cfg.Guard = &crashloop.GuardConfig{MaxRestarts: 4, Window: 20 * time.Second}
	cfg.HourlyCap = 6
	cfg.Fleet = &crashloop.FleetConfig{RestartsPerHour: 8, FailingFraction: 0.5, MinFailing: 2, Cooldown: 30 * time.Second}
	return cfg
}

// Conform runs every check against ledgers from newLedger.
func Conform(t *testing.T, newLedger NewFunc) {
	t.Run("Boundaries", func(t *testing.T) { Boundaries(t, newLedger) })
	t.Run("Sequences", func(t *testing.T) { Sequences(t, newLedger, 150) })
	t.Run("Replicas", func(t *testing.T) { Replicas(t, newLedger) })
	t.Run("ExactlyOnce", func(t *testing.T) { ExactlyOnce(t, newLedger) })
	t.Run("Keys", func(t *testing.T) { Keys(t, newLedger) })
	t.Run("Differential", func(t *testing.T) { Differential(t, newLedger, 60) })
	t.Run("Scenarios", func(t *testing.T) { Scenarios(t, newLedger) })
}

// Boundaries checks the rules at their edges: an event exactly a window
// old still counts, a chain gap of exactly the reset gap keeps the chain,
// the fleet re-arms exactly at trip + cooldown, thresholds are >=, and a
// time earlier than the ledger's latest is read as the latest.
func Boundaries(t *testing.T, newLedger NewFunc) {
	cfg := Config()
	j := func(key string, e share.Ending, now time.Time) share.Judgment {
		return share.Judgment{Key: key, Ending: e, Incarnation: key + "#1", Cause: "boom", Now: now, Members: 1, Failing: 1}
	}
	// The budget's window with every guard, and alone (Configs' "budget").
	alone := Configs()["budget"]
	for name, cfg := range map[string]crashloop.SupervisorConfig{"budget window": cfg, "budget window alone": alone} {
		t.Run(name, func(t *testing.T) {
			p := newPair(t, newLedger, 1, cfg)
			p.judge(0, j("k", share.EndingFailedStart, T0))
			p.judge(0, j("k", share.EndingFailedStart, T0.Add(time.Second)))
			// Exactly a window after the first respawn it still counts: park.
			v := p.judge(0, j("k", share.EndingFailedStart, T0.Add(cfg.Budget.Window)))
			if !v.NewPark {
				p.fail("a respawn exactly Window old must still count")
			}
			q := newPair(t, newLedger, 1, cfg)
			q.judge(0, j("k", share.EndingFailedStart, T0))
			q.judge(0, j("k", share.EndingFailedStart, T0.Add(time.Second)))
			if v := q.judge(0, j("k", share.EndingFailedStart, T0.Add(cfg.Budget.Window+time.Microsecond))); v.NewPark {
				q.fail("a respawn older than Window must not count")
			}
			if v := q.judge(0, j("k", share.EndingFailedStart, T0.Add(cfg.Budget.Window+time.Second))); !v.NewPark {
				q.fail("two respawns within Window must spend a budget of 2")
			}
		})
	}
	// A ledger keeps one latest time: a key judged at a time earlier than
	// another key's is judged at the later one, by its windows too.
	for name, cfg := range map[string]crashloop.SupervisorConfig{"one latest time": cfg, "one latest time alone": alone} {
		t.Run(name, func(t *testing.T) {
			p := newPair(t, newLedger, 2, cfg)
			p.judge(0, j("b", share.EndingFailedStart, T0))
			p.judge(1, j("a", share.EndingFailedStart, T0.Add(cfg.Budget.Window+time.Second)))
			// At the latest time the respawn of T0 is older than the window.
			if v := p.judge(0, j("b", share.EndingFailedStart, T0.Add(time.Second))); v.Attempt != 1 {
				p.fail("attempt %d, want 1: the step read its own time, not the ledger's latest", v.Attempt)
			}
		})
	}
	t.Run("chain gap", func(t *testing.T) {
		for _, gap := range []time.Duration{cfg.Chain.ResetGap, cfg.Chain.ResetGap + time.Microsecond} {
			p := newPair(t, newLedger, 1, cfg)
			now := T0
			for range 3 {
				p.judge(0, share.Judgment{Key: "k", Ending: share.EndingCrash, Healthy: true, Incarnation: "i", Cause: "died", Now: now, Members: 1, Failing: 1})
				now = now.Add(gap)
			}
		}
	})
	t.Run("fleet re-arm", func(t *testing.T) {
		p := newPair(t, newLedger, 1, cfg)
		for i := range cfg.Fleet.RestartsPerHour {
			p.judge(0, share.Judgment{Key: fmt.Sprintf("k%d", i), Ending: share.EndingPlanned, Incarnation: "i", Now: T0})
		}
		p.state(0, T0, nil)
		p.proceed(0, "k7", T0.Add(cfg.Fleet.Cooldown-time.Microsecond))
		p.state(0, T0.Add(cfg.Fleet.Cooldown-time.Microsecond), nil)
		p.proceed(0, "k7", T0.Add(cfg.Fleet.Cooldown))
		p.state(0, T0.Add(cfg.Fleet.Cooldown), nil)
	})
	t.Run("guard and hourly cap", func(t *testing.T) {
		p := newPair(t, newLedger, 1, cfg)
		now := T0
		for range cfg.HourlyCap + 1 {
			p.judge(0, share.Judgment{Key: "k", Ending: share.EndingPlanned, Incarnation: "i", Now: now, Members: 1, Failing: 1})
			now = now.Add(cfg.Guard.Window)
		}
		p.state(0, now, []string{"k"})
	})
}

// Sequences drives n random sequences of operations, with explicit times
// that land on the boundaries often, through one replica of the candidate
// and of the reference, and requires the same verdict at every step.
func Sequences(t *testing.T, newLedger NewFunc, n int) {
	keys := []string{"a", "b", "c"}
	steps := []time.Duration{0, time.Microsecond, time.Second, 5 * time.Second, 10 * time.Second, 20 * time.Second, 30 * time.Second, time.Hour}
	endings := []share.Ending{share.EndingClean, share.EndingPermanent, share.EndingFailedStart,
		share.EndingFailedStart, share.EndingCrash, share.EndingCrash, share.EndingPlanned}
	for seed := range n {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		p := newPair(t, newLedger, 1, Config())
		now := T0
		for range 40 {
			now = now.Add(steps[rng.IntN(len(steps))])
			key := keys[rng.IntN(len(keys))]
			switch op := rng.IntN(10); {
			case op < 6:
				e := endings[rng.IntN(len(endings))]
				p.judge(0, share.Judgment{Key: key, Ending: e, Healthy: e == share.EndingCrash || rng.IntN(4) == 0,
					Incarnation: fmt.Sprintf("%s#%d", key, 1+rng.IntN(2)), Cause: "boom", Now: now,
					Members: 1 + rng.IntN(4), Failing: rng.IntN(3)})
			case op < 7:
				p.member(0, key, rng.IntN(3) > 0)
			case op < 8:
				p.proceed(0, key, now)
			case op < 9:
				p.resume(0, key, now)
			default:
				p.state(0, now, keys)
			}
		}
		p.state(0, now, keys)
		if t.Failed() {
			return
		}
	}
}

// Replicas checks that replicas share one state: a park made through one
// is refused through another, a Resume through any applies to all, and the
// fleet breaker counts the restarts of every replica.
func Replicas(t *testing.T, newLedger NewFunc) {
	p := newPair(t, newLedger, 3, Config())
	now := T0
	for i := range 3 { // the key fails on each replica in turn: one budget
		p.judge(i, share.Judgment{Key: "k", Ending: share.EndingFailedStart, Incarnation: "k#1", Cause: "boom", Now: now, Members: 1, Failing: 1})
		now = now.Add(time.Second)
	}
	p.state(0, now, []string{"k"})
	p.judge(1, share.Judgment{Key: "k", Ending: share.EndingFailedStart, Incarnation: "k#1", Cause: "boom", Now: now, Members: 1, Failing: 1})
	p.resume(2, "k", now)
	p.resume(0, "k", now)
	p.state(0, now, []string{"k"})
	for i := range Config().Fleet.RestartsPerHour {
		p.judge(i%3, share.Judgment{Key: fmt.Sprintf("f%d", i), Ending: share.EndingPlanned, Incarnation: "i", Now: now})
	}
	p.state(0, now, nil)
}

// ExactlyOnce checks that replicas racing on one key make one park, and
// one trip of the fleet breaker, between them.
func ExactlyOnce(t *testing.T, newLedger NewFunc) {
	ledgers := newLedger(t, 3)
	cfg := Config()
	for _, l := range ledgers {
		if err := l.Open(cfg, nil); err != nil {
			t.Fatalf("Open: %v", err)
		}
		l.Member("k", true)
		l.Member("p", true)
	}
	// p parked: k's park makes 2 failing keys of 2, and trips the breaker
	if v, err := ledgers[0].Judge(context.Background(), share.Judgment{Key: "p", Ending: share.EndingPermanent,
		Incarnation: "p#1", Cause: "bad", Now: T0}); err != nil || !v.NewPark || v.Tripped != nil {
		t.Fatalf("the park of p: %+v, %v", v, err)
	}
	var mu sync.Mutex
	parks, trips := 0, 0
	var wg sync.WaitGroup
	for i, l := range ledgers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 10 {
				v, err := l.Judge(context.Background(), share.Judgment{Key: "k", Ending: share.EndingFailedStart,
					Incarnation: "k#1", Cause: fmt.Sprintf("r%d failure %d", i, n), Now: T0, Members: 4, Failing: 3})
				if err != nil {
					t.Errorf("Judge: %v", err)
					return
				}
				mu.Lock()
				if v.NewPark {
					parks++
				}
				if v.Tripped != nil {
					trips++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if parks != 1 || trips != 1 {
		t.Errorf("3 replicas failing one key 30 times: %d parks and %d trips, want 1 and 1", parks, trips)
	}
}

// Keys checks the fleet breaker's failing fraction: the failing keys over
// the live keys of the deployment, each counted once whatever the number
// of replicas that count it as a member (Member), a parked key failing
// whatever its reason; a replica that closes stops counting.
func Keys(t *testing.T, newLedger NewFunc) {
	cfg := Config() // trips at half the keys failing, at least 2
	fatal := func(key string, now time.Time) share.Judgment {
		return share.Judgment{Key: key, Ending: share.EndingPermanent, Incarnation: key + "#1", Cause: "bad config", Now: now}
	}
	counts := func(p *pair, i int, now time.Time, failing, total int) {
		p.t.Helper()
		if f := p.fleet(i, now); f.FailingKeys != failing || f.Keys != total {
			p.fail("r%d: %d of %d keys failing, want %d of %d", i, f.FailingKeys, f.Keys, failing, total)
		}
	}
	trip := func(p *pair, v share.Verdict, failing, total int) {
		p.t.Helper()
		if failing == 0 {
			if v.Tripped != nil {
				p.fail("tripped at %d of %d", v.Tripped.Failing, v.Tripped.Total)
			}
			return
		}
		if v.Tripped == nil || v.Tripped.Failing != failing || v.Tripped.Total != total {
			p.fail("trip %s, want one at %d of %d", change(v.Tripped), failing, total)
		}
	}
	t.Run("replicas on the same keys", func(t *testing.T) {
		p := newPair(t, newLedger, 3, cfg)
		for i := range 3 {
			for _, key := range []string{"a", "b", "c", "d"} {
				p.member(i, key, true)
			}
		}
		counts(p, 0, T0, 0, 4)
		trip(p, p.judge(0, fatal("a", T0)), 0, 0) // 1 of 4
		counts(p, 1, T0, 1, 4)
		for i := range 3 { // each replica counts the parked key, as its Supervisor learns of it
			p.member(i, "a", true)
		}
		trip(p, p.judge(1, fatal("b", T0)), 2, 4) // 2 of 4, not 2 of 12
		counts(p, 2, T0, 2, 4)
	})
	t.Run("one replica's parks are not the deployment's fraction", func(t *testing.T) {
		p := newPair(t, newLedger, 2, cfg)
		p.member(0, "a", true)
		p.member(0, "b", true)
		for _, key := range []string{"c", "d", "e", "f", "a"} {
			p.member(1, key, true)
		}
		trip(p, p.judge(0, fatal("a", T0)), 0, 0)
		trip(p, p.judge(0, fatal("b", T0)), 0, 0) // 2 of 6; replica 0 alone has 2 of 2
		counts(p, 1, T0, 2, 6)
		p.member(1, "c", false) // c exited on replica 1: no replica counts it
		p.member(1, "a", false) // a still counts: replica 0 holds it parked
		counts(p, 0, T0, 2, 5)
	})
	t.Run("a needs_human park fails", func(t *testing.T) {
		p := newPair(t, newLedger, 2, cfg)
		p.member(0, "a", true)
		p.member(1, "b", true)
		p.restore(1, []*crashloop.ParkedError{{Key: "b", Reason: crashloop.ReasonNeedsHuman, Since: T0,
			LastError: fmt.Errorf("%w: restored", crashloop.ErrNeedsHuman)}})
		counts(p, 0, T0, 1, 2)
		p.resume(0, "b", T0)
		counts(p, 0, T0, 0, 2)
	})
	t.Run("a replica that closes stops counting", func(t *testing.T) {
		p := newPair(t, newLedger, 2, cfg)
		for _, key := range []string{"a", "b", "c"} {
			p.member(0, key, true)
		}
		for _, key := range []string{"c", "d"} {
			p.member(1, key, true)
		}
		trip(p, p.judge(1, fatal("d", T0)), 0, 0) // 1 of 4
		counts(p, 0, T0, 1, 4)
		p.close(1)
		counts(p, 0, T0, 0, 3) // d, parked, no longer counts; c does: replica 0 runs it
		p.member(1, "e", true) // a closed replica counts nothing
		counts(p, 0, T0, 0, 3)
		p.member(0, "d", true)
		trip(p, p.judge(0, fatal("c", T0)), 2, 4)
	})
}
