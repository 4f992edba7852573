// Package ledgertest checks that an implementation of crashloop.Ledger
// decides as the in-memory reference, crashloop.MemoryLedger, does: the
// same operations with the same explicit times must give the same
// verdicts, boundaries included, and a change made through one replica
// must be announced exactly once.
//
// A ledger on a server keeps times in microseconds: the times the checks
// use are whole microseconds, and the candidate must read the time of each
// Judgment and Proceed from the call (its client-time mode).
package ledgertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
)

// NewFunc returns n fresh replicas of one empty shared ledger, not yet
// opened. Conform calls it once per check.
type NewFunc func(t *testing.T, n int) []crashloop.Ledger

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
}

// pair is a candidate and the reference, driven alike.
type pair struct {
	t    *testing.T
	got  []crashloop.Ledger
	want []crashloop.Ledger
	log  []string
}

func newPair(t *testing.T, newLedger NewFunc, replicas int) *pair {
	t.Helper()
	p := &pair{t: t, got: newLedger(t, replicas)}
	if len(p.got) != replicas {
		t.Fatalf("NewFunc gave %d replicas, want %d", len(p.got), replicas)
	}
	ref := crashloop.NewMemoryLedger()
	p.want = []crashloop.Ledger{ref}
	for range replicas - 1 {
		p.want = append(p.want, ref.Replica())
	}
	cfg := Config()
	for i := range replicas {
		if err := p.got[i].Open(cfg, nil); err != nil {
			t.Fatalf("Open: %v", err)
		}
		if err := p.want[i].Open(cfg, nil); err != nil {
			t.Fatalf("reference Open: %v", err)
		}
	}
	return p
}

func (p *pair) fail(format string, args ...any) {
	p.t.Helper()
	p.t.Fatalf(format+"\noperations:\n  %s", append(args, strings.Join(p.log, "\n  "))...)
}

// judge runs j on replica i of both and compares the verdicts.
func (p *pair) judge(i int, j crashloop.Judgment) crashloop.Verdict {
	p.t.Helper()
	ctx := context.Background()
	got, err := p.got[i].Judge(ctx, j)
	if err != nil {
		p.fail("Judge(%s): %v", describe(j), err)
	}
	want, _ := p.want[i].Judge(ctx, j)
	p.log = append(p.log, fmt.Sprintf("r%d Judge(%s) = %s", i, describe(j), verdict(want)))
	if verdict(got) != verdict(want) {
		p.fail("r%d Judge(%s)\n got  %s\n want %s", i, describe(j), verdict(got), verdict(want))
	}
	return got
}

// proceed runs Proceed on replica i of both and compares the verdicts.
func (p *pair) proceed(i int, key string, now time.Time) {
	p.t.Helper()
	ctx := context.Background()
	got, err := p.got[i].Proceed(ctx, key, now)
	if err != nil {
		p.fail("Proceed(%q): %v", key, err)
	}
	want, _ := p.want[i].Proceed(ctx, key, now)
	p.log = append(p.log, fmt.Sprintf("r%d Proceed(%q, %s) = %s", i, key, at(now), verdict(want)))
	if verdict(got) != verdict(want) {
		p.fail("r%d Proceed(%q, %s)\n got  %s\n want %s", i, key, at(now), verdict(got), verdict(want))
	}
}

// resume runs Resume on replica i of both and compares.
func (p *pair) resume(i int, key string, now time.Time) {
	p.t.Helper()
	ctx := context.Background()
	got, gerr := p.got[i].Resume(ctx, key, now)
	want, werr := p.want[i].Resume(ctx, key, now)
	p.log = append(p.log, fmt.Sprintf("r%d Resume(%q) = %s, %v", i, key, park(want), werr))
	if park(got) != park(want) || (gerr == nil) != (werr == nil) {
		p.fail("r%d Resume(%q) = %s, %v; want %s, %v", i, key, park(got), gerr, park(want), werr)
	}
}

// state compares what both say of every key and of the fleet at now.
func (p *pair) state(now time.Time, keys []string) {
	p.t.Helper()
	ctx := context.Background()
	for _, key := range keys {
		got, err := p.got[0].Lookup(ctx, key)
		if err != nil {
			p.fail("Lookup(%q): %v", key, err)
		}
		want, _ := p.want[0].Lookup(ctx, key)
		if park(got) != park(want) {
			p.fail("Lookup(%q) = %s, want %s", key, park(got), park(want))
		}
	}
	gotParked, err := p.got[0].Parked(ctx)
	if err != nil {
		p.fail("Parked: %v", err)
	}
	wantParked, _ := p.want[0].Parked(ctx)
	if parks(gotParked) != parks(wantParked) {
		p.fail("Parked() = %s, want %s", parks(gotParked), parks(wantParked))
	}
	gotFleet, err := p.got[0].Fleet(ctx, now)
	if err != nil {
		p.fail("Fleet: %v", err)
	}
	wantFleet, _ := p.want[0].Fleet(ctx, now)
	if fleet(gotFleet) != fleet(wantFleet) {
		p.fail("Fleet(%s) = %s, want %s", at(now), fleet(gotFleet), fleet(wantFleet))
	}
}

// Boundaries checks the rules at their edges: an event exactly a window
// old still counts, a chain gap of exactly the reset gap keeps the chain,
// the fleet re-arms exactly at trip + cooldown, thresholds are >=.
func Boundaries(t *testing.T, newLedger NewFunc) {
	cfg := Config()
	j := func(key string, e crashloop.Ending, now time.Time) crashloop.Judgment {
		return crashloop.Judgment{Key: key, Ending: e, Incarnation: key + "#1", Cause: "boom", Now: now, Members: 1, Failing: 1}
	}
	t.Run("budget window", func(t *testing.T) {
		p := newPair(t, newLedger, 1)
		p.judge(0, j("k", crashloop.EndingFailedStart, T0))
		p.judge(0, j("k", crashloop.EndingFailedStart, T0.Add(time.Second)))
		// Exactly a window after the first respawn it still counts: park.
		v := p.judge(0, j("k", crashloop.EndingFailedStart, T0.Add(cfg.Budget.Window)))
		if !v.NewPark {
			p.fail("a respawn exactly Window old must still count")
		}
		q := newPair(t, newLedger, 1)
		q.judge(0, j("k", crashloop.EndingFailedStart, T0))
		q.judge(0, j("k", crashloop.EndingFailedStart, T0.Add(time.Second)))
		if v := q.judge(0, j("k", crashloop.EndingFailedStart, T0.Add(cfg.Budget.Window+time.Microsecond))); v.NewPark {
			q.fail("a respawn older than Window must not count")
		}
	})
	t.Run("chain gap", func(t *testing.T) {
		for _, gap := range []time.Duration{cfg.Chain.ResetGap, cfg.Chain.ResetGap + time.Microsecond} {
			p := newPair(t, newLedger, 1)
			now := T0
			for range 3 {
				p.judge(0, crashloop.Judgment{Key: "k", Ending: crashloop.EndingCrash, Healthy: true, Incarnation: "i", Cause: "died", Now: now, Members: 1, Failing: 1})
				now = now.Add(gap)
			}
		}
	})
	t.Run("fleet re-arm", func(t *testing.T) {
		p := newPair(t, newLedger, 1)
		for i := range cfg.Fleet.RestartsPerHour {
			p.judge(0, crashloop.Judgment{Key: fmt.Sprintf("k%d", i), Ending: crashloop.EndingPlanned, Incarnation: "i", Now: T0})
		}
		p.state(T0, nil)
		p.proceed(0, "k7", T0.Add(cfg.Fleet.Cooldown-time.Microsecond))
		p.state(T0.Add(cfg.Fleet.Cooldown-time.Microsecond), nil)
		p.proceed(0, "k7", T0.Add(cfg.Fleet.Cooldown))
		p.state(T0.Add(cfg.Fleet.Cooldown), nil)
	})
	t.Run("guard and hourly cap", func(t *testing.T) {
		p := newPair(t, newLedger, 1)
		now := T0
		for range cfg.HourlyCap + 1 {
			p.judge(0, crashloop.Judgment{Key: "k", Ending: crashloop.EndingPlanned, Incarnation: "i", Now: now, Members: 1, Failing: 1})
			now = now.Add(cfg.Guard.Window)
		}
		p.state(now, []string{"k"})
	})
}

// Sequences drives n random sequences of operations, with explicit times
// that land on the boundaries often, through one replica of the candidate
// and of the reference, and requires the same verdict at every step.
func Sequences(t *testing.T, newLedger NewFunc, n int) {
	keys := []string{"a", "b", "c"}
	steps := []time.Duration{0, time.Microsecond, time.Second, 5 * time.Second, 10 * time.Second, 20 * time.Second, 30 * time.Second, time.Hour}
	endings := []crashloop.Ending{crashloop.EndingClean, crashloop.EndingPermanent, crashloop.EndingFailedStart,
		crashloop.EndingFailedStart, crashloop.EndingCrash, crashloop.EndingCrash, crashloop.EndingPlanned}
	for seed := range n {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		p := newPair(t, newLedger, 1)
		now := T0
		for range 40 {
			now = now.Add(steps[rng.IntN(len(steps))])
			key := keys[rng.IntN(len(keys))]
			switch op := rng.IntN(10); {
			case op < 6:
				e := endings[rng.IntN(len(endings))]
				p.judge(0, crashloop.Judgment{Key: key, Ending: e, Healthy: e == crashloop.EndingCrash || rng.IntN(4) == 0,
					Incarnation: fmt.Sprintf("%s#%d", key, 1+rng.IntN(2)), Cause: "boom", Now: now,
					Members: 1 + rng.IntN(4), Failing: rng.IntN(3)})
			case op < 8:
				p.proceed(0, key, now)
			case op < 9:
				p.resume(0, key, now)
			default:
				p.state(now, keys)
			}
		}
		p.state(now, keys)
		if t.Failed() {
			return
		}
	}
}

// Replicas checks that replicas share one state: a park made through one
// is refused through another, a Resume through any applies to all, and the
// fleet breaker counts the restarts of every replica.
func Replicas(t *testing.T, newLedger NewFunc) {
	p := newPair(t, newLedger, 3)
	now := T0
	for i := range 3 { // the key fails on each replica in turn: one budget
		p.judge(i, crashloop.Judgment{Key: "k", Ending: crashloop.EndingFailedStart, Incarnation: "k#1", Cause: "boom", Now: now, Members: 1, Failing: 1})
		now = now.Add(time.Second)
	}
	p.state(now, []string{"k"})
	p.judge(1, crashloop.Judgment{Key: "k", Ending: crashloop.EndingFailedStart, Incarnation: "k#1", Cause: "boom", Now: now, Members: 1, Failing: 1})
	p.resume(2, "k", now)
	p.resume(0, "k", now)
	p.state(now, []string{"k"})
	for i := range Config().Fleet.RestartsPerHour {
		p.judge(i%3, crashloop.Judgment{Key: fmt.Sprintf("f%d", i), Ending: crashloop.EndingPlanned, Incarnation: "i", Now: now})
	}
	p.state(now, nil)
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
	}
	var mu sync.Mutex
	parks, trips := 0, 0
	var wg sync.WaitGroup
	for i, l := range ledgers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 10 {
				v, err := l.Judge(context.Background(), crashloop.Judgment{Key: "k", Ending: crashloop.EndingFailedStart,
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

func at(t time.Time) string { return "T0+" + t.Sub(T0).String() }

func describe(j crashloop.Judgment) string {
	return fmt.Sprintf("%q %s healthy=%v inc=%q at %s members=%d failing=%d", j.Key, j.Ending, j.Healthy, j.Incarnation, at(j.Now), j.Members, j.Failing)
}

func park(pe *crashloop.ParkedError) string {
	if pe == nil {
		return "-"
	}
	last := ""
	if pe.LastError != nil {
		last = pe.LastError.Error()
	}
	return fmt.Sprintf("%s{%s %d since %s %q}", pe.Key, pe.Reason, pe.Attempts, at(pe.Since), last)
}

func parks(pes []*crashloop.ParkedError) string {
	var out []string
	for _, pe := range pes {
		out = append(out, park(pe))
	}
	return "[" + strings.Join(out, " ") + "]"
}

func change(c *crashloop.FleetChange) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("{%s restarts=%d %d/%d}", c.Reason, c.Restarts, c.Failing, c.Total)
}

func verdict(v crashloop.Verdict) string {
	return fmt.Sprintf("now=%s park=%s new=%v attempt=%d restarts=%d held=%v wait=%v tripped=%s rearmed=%s",
		at(v.Now), park(v.Park), v.NewPark, v.Attempt, v.Restarts, v.Held, v.Wait, change(v.Tripped), change(v.Rearmed))
}

func fleet(st crashloop.FleetStatus) string {
	rearm := "-"
	if st.RearmAt != nil {
		rearm = at(*st.RearmAt)
	}
	return fmt.Sprintf("{tripped=%v limit=%d %d/%d hour=%d rearm=%s}", st.BreakerTripped, st.FleetRestartsPerHour,
		st.FailingChannels, st.TotalChannels, st.RestartsInHour, rearm)
}
