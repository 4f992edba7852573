package ledgertest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/share"
)

// Configs are the configurations Differential runs under: Config ("suite"),
// a fleet breaker that trips on the failing fraction ("fraction"), one that
// trips on the rate with a cooldown that is not a whole microsecond
// ("rate"), a respawn budget and no other guard ("budget"), no guard at
// all and no respawn ("bare"), a cooldown of zero ("cooldown0"), a probe
// after a park ("probe": doubling from 2s, capped at 7s, a probe's run
// HealthyAfter 3s) and a hold on a shared cause of 2 keys within 5s, a
// probe every 3s, with the probe after a park and the rate breaker
// ("cause"). Their durations are not whole microseconds where a ledger on
// a server could round them.
func Configs() map[string]crashloop.SupervisorConfig {
	base := Config()
	frac := base
	frac.Fleet = &crashloop.FleetConfig{RestartsPerHour: 30, FailingFraction: 0.25, MinFailing: 1, Cooldown: 3 * time.Second}
	rate := base
	rate.Fleet = &crashloop.FleetConfig{RestartsPerHour: 3, FailingFraction: 1, MinFailing: 50, Cooldown: 2*time.Second + 500*time.Nanosecond}
	rate.Guard = &crashloop.GuardConfig{MaxRestarts: 3, Window: 3 * time.Second}
	alone := base
	alone.Chain, alone.Guard, alone.HourlyCap, alone.Fleet = nil, nil, 0, nil
	bare := alone
	bare.Budget.MaxRespawns = 0
	zero := base
	zero.Fleet = &crashloop.FleetConfig{RestartsPerHour: 2, FailingFraction: 0.5, MinFailing: 1, Cooldown: 0}
	probe := base
	probe.ProbeAfter, probe.ProbeMax, probe.HealthyAfter = 2*time.Second+500*time.Nanosecond, 7*time.Second, 3*time.Second
	cause := rate
	cause.ProbeAfter, cause.HealthyAfter = 4*time.Second, 2*time.Second+time.Nanosecond
	fc := *rate.Fleet
	fc.SharedCause = &crashloop.SharedCauseConfig{Keys: 2, Window: 5 * time.Second, ProbeEvery: 3*time.Second + 250*time.Nanosecond}
	cause.Fleet = &fc
	return map[string]crashloop.SupervisorConfig{"suite": base, "fraction": frac, "rate": rate, "budget": alone, "bare": bare,
		"cooldown0": zero, "probe": probe, "cause": cause}
}

// Differential drives n random sequences of 80 operations under each of
// Configs through three replicas of the candidate and of the reference,
// and requires the same answer at every step: what Sequences leaves out,
// with every replica taking steps, times that run backwards (a ledger
// keeps one latest time), small steps (a clean run between guarded
// restarts, planned restarts on a full chain), both trips of the fleet
// breaker, held restarts held again after their release was scheduled,
// Forget and Restore, probes of parks claimed at and before their time,
// and failures with a few shared causes (and none) whose holds begin, let
// probes go, fail them and end. With n of 60 or more it also fails when the
// sequences reached an outcome (each kind of park, a hold, a refusal,
// each trip, a re-arm, a released restart, a resume, a restore, a park's
// probe, a cause held, its probe, its release, a restart held for it)
// fewer than 10 times: a generator that stopped reaching one would pass
// quietly.
func Differential(t *testing.T, newLedger NewFunc, n int) {
	keys := []string{"a", "b", "c:{x}"}
	steps := []time.Duration{0, 0, time.Microsecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second,
		5 * time.Second, 10 * time.Second, time.Hour, -time.Second, -time.Microsecond}
	endings := []share.Ending{share.EndingClean, share.EndingPermanent, share.EndingFailedStart,
		share.EndingFailedStart, share.EndingCrash, share.EndingCrash, share.EndingCrash,
		share.EndingCrash, share.EndingCrash, share.EndingPlanned, share.EndingPlanned}
	total := map[string]int{}
	for name, cfg := range Configs() {
		t.Run(name, func(t *testing.T) {
			for seed := range n {
				rng := rand.New(rand.NewPCG(uint64(seed), 11))
				p := newPair(t, newLedger, 3, cfg)
				p.seen = total
				now := T0
				for range 80 {
					now = now.Add(steps[rng.IntN(len(steps))])
					key, i := keys[rng.IntN(len(keys))], rng.IntN(3)
					switch op := rng.IntN(20); {
					case op < 11:
						e := endings[rng.IntN(len(endings))]
						p.judge(i, share.Judgment{Key: key, Ending: e, Healthy: e == share.EndingCrash || rng.IntN(4) == 0,
							Incarnation: fmt.Sprintf("%s#%d", key, 1+rng.IntN(2)), Cause: []string{"", "boom", "dial: refused"}[rng.IntN(3)],
							Now: now, Members: rng.IntN(4), Failing: rng.IntN(3), Shared: []string{"", "db: refused", "db: refused", "disk N full"}[rng.IntN(4)]})
					case op < 14:
						p.proceed(i, key, now)
					case op < 16:
						p.member(i, key, rng.IntN(3) > 0)
					case op < 17:
						p.resume(i, key, now)
					case op < 18:
						p.forget(i, key)
					case op < 19:
						// as a Supervisor writes back its parks: a needs_human
						// park's LastError matches ErrNeedsHuman
						pe := &crashloop.ParkedError{Key: key, Reason: crashloop.ReasonBudgetExhausted, Attempts: 7,
							Since: now.Add(-time.Minute), LastError: errors.New("restored: boom")}
						if rng.IntN(2) == 0 {
							pe.Reason, pe.LastError = crashloop.ReasonNeedsHuman, fmt.Errorf("%w: restored", crashloop.ErrNeedsHuman)
						}
						// the version the parking replica knew: the key's
						// own (written back where not parked), or an older
						// one (refused: the key changed since)
						pe.Version = p.version(i, key)
						if pe.Version > 0 && rng.IntN(3) == 0 {
							pe.Version--
						}
						p.restore(i, []*crashloop.ParkedError{pe})
					default:
						p.state(i, now, keys)
					}
				}
				p.state(0, now, keys)
			}
		})
	}
	t.Logf("the sequences reached: %v", total)
	if t.Failed() || n < 60 {
		return
	}
	for _, what := range []string{"park respawn_budget_exhausted", "park permanent_error", "park needs_human", "park restart_loop_guard",
		"park hourly_restart_cap", "held", "refused", "trip fleet_restart_rate", "trip fleet_failing_fraction", "rearm", "proceed", "resume", "restore",
		"probe park", "cause held", "probe cause", "cause released", "held cause"} {
		if total[what] < 10 {
			t.Errorf("the sequences reached %q only %d times (reached: %v)", what, total[what], total)
		}
	}
}

// Scenarios runs scripted sequences for what random ones reach too
// rarely, each with the fleet breaker armed and tripped: a planned restart
// ends the chain, but not a full one; the chain counts per incarnation; a
// re-armed breaker releases its held restarts one gap apart, in the order
// they were held, across replicas.
func Scenarios(t *testing.T, newLedger NewFunc) {
	cfg := Config() // chain of 2 within 5s, guard 4 in 20s, fleet 8 an hour, cooldown 30s
	crash := func(now time.Time, inc string) share.Judgment {
		return share.Judgment{Key: "k", Ending: share.EndingCrash, Healthy: true, Incarnation: inc, Cause: "died", Now: now, Members: 1}
	}
	planned := func(now time.Time, inc string) share.Judgment {
		return share.Judgment{Key: "k", Ending: share.EndingPlanned, Incarnation: inc, Now: now, Members: 1}
	}
	sec := func(s int) time.Time { return T0.Add(time.Duration(s) * time.Second) }

	for _, tc := range []struct {
		name  string
		steps []share.Judgment // replica i%2 judges step i
		parks int              // needs_human parks
	}{
		{"a planned restart ends the chain", []share.Judgment{crash(sec(0), "i"), planned(sec(1), "i"), crash(sec(2), "i"), crash(sec(3), "i")}, 0},
		{"a full chain is not ended by a planned restart", []share.Judgment{crash(sec(0), "i"), crash(sec(1), "i"), planned(sec(2), "i"), crash(sec(3), "i")}, 1},
		{"the chain counts one incarnation", []share.Judgment{crash(sec(0), "i"), crash(sec(1), "j"), crash(sec(2), "j"), crash(sec(3), "j")}, 1},
	} {
		for _, tripped := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/tripped=%v", tc.name, tripped), func(t *testing.T) {
				p := newPair(t, newLedger, 2, cfg)
				if tripped {
					for i := range cfg.Fleet.RestartsPerHour {
						p.judge(i%2, share.Judgment{Key: fmt.Sprintf("o%d", i), Ending: share.EndingPlanned, Incarnation: "i", Now: sec(0)})
					}
				}
				for i, j := range tc.steps {
					p.judge(i%2, j)
				}
				p.state(0, sec(len(tc.steps)), []string{"k"})
				if got := p.seen["park needs_human"]; got != tc.parks {
					p.fail("%d needs_human parks, want %d", got, tc.parks)
				}
				if held := p.seen["held"] > len(tc.steps)-tc.parks; held != tripped {
					p.fail("%d restarts held, with the breaker tripped=%v", p.seen["held"], tripped)
				}
			})
		}
	}
	t.Run("a park's probe goes at its time, once across replicas", func(t *testing.T) {
		cfg := Configs()["probe"] // every 2s+500ns, doubling, capped at 7s; HealthyAfter 3s
		p := newPair(t, newLedger, 2, cfg)
		for i := range 3 { // the third failed start within 10s parks, at 2s
			p.judge(i%2, share.Judgment{Key: "k", Ending: share.EndingFailedStart, Incarnation: "i", Cause: "boom", Now: sec(i)})
		}
		for _, c := range []struct {
			at    time.Duration
			probe bool
		}{
			{4 * time.Second, false}, {4*time.Second + time.Microsecond, true}, // due at 4s+500ns
			{8*time.Second + time.Microsecond, false}, {8*time.Second + 2*time.Microsecond, true}, // then 4s+1µs
			{15*time.Second + time.Microsecond, false}, {15*time.Second + 2*time.Microsecond, true}, // then 7s, the cap
		} {
			for i := range 2 { // the second replica asks at the same time: refused
				if v := p.proceed(i, "k", T0.Add(c.at)); v.Probe != (c.probe && i == 0) {
					p.fail("r%d at %v: probe=%v", i, c.at, v.Probe)
				}
			}
		}
	})
	t.Run("a cause is held, probed and released", func(t *testing.T) {
		cfg := Configs()["cause"] // 2 keys within 5s; a probe every 3s+250ns; HealthyAfter 2s+1ns
		p := newPair(t, newLedger, 2, cfg)
		fail := func(i int, key string, at time.Duration, healthy bool) share.Verdict {
			return p.judge(i, share.Judgment{Key: key, Ending: share.EndingCrash, Healthy: healthy, Incarnation: "i", Cause: "refused",
				Shared: "db refused", Now: T0.Add(at)})
		}
		fail(0, "a", 0, true)
		if v := fail(1, "b", 5*time.Second, true); v.CauseHeld == nil || v.CauseHeld.Keys != 2 || v.Wait != cfg.Fleet.SharedCause.ProbeEvery {
			p.fail("a failure exactly a window after the first: the hold begins")
		}
		if v := p.proceed(1, "b", sec(8)); !v.Held || v.Wait != 250*time.Nanosecond {
			p.fail("the probe slot is 250ns away")
		}
		if v := p.proceed(0, "b", T0.Add(8*time.Second+time.Microsecond)); !v.Probe {
			p.fail("b goes as the probe")
		}
		if v := fail(0, "c", 10*time.Second+time.Microsecond, true); !v.Held || v.CauseHeld != nil || v.Wait != time.Nanosecond {
			p.fail("a held cause holds the next key, until the probe has run HealthyAfter (1ns)")
		}
		if v := p.proceed(1, "c", T0.Add(10*time.Second+2*time.Microsecond)); v.CauseReleased == nil || v.Held {
			p.fail("the probe went HealthyAfter ago: the cause is released, and c goes")
		}
	})
	t.Run("the fleet tracks 64 causes", func(t *testing.T) {
		p := newPair(t, newLedger, 2, Configs()["cause"]) // 2 keys within 5s
		fail := func(key, cause string, i int) share.Verdict {
			return p.judge(i%2, share.Judgment{Key: key, Ending: share.EndingFailedStart, Incarnation: "i", Shared: cause,
				Now: T0.Add(time.Duration(i) * time.Microsecond)})
		}
		fail("x", "c0", 0) // noted, not held: the oldest not held when the table is full
		fail("w", "c1", 1) // noted, not held
		for i := 2; i <= 64; i++ {
			fail(fmt.Sprintf("a%d", i), fmt.Sprintf("c%d", i), 2*i)
			if v := fail(fmt.Sprintf("b%d", i), fmt.Sprintf("c%d", i), 2*i+1); v.CauseHeld == nil {
				p.fail("c%d not held by its second key", i)
			}
		}
		if v := fail("v", "c1", 200); v.CauseHeld == nil {
			p.fail("c0 was dropped for c64, not c1: c1's second key holds it")
		}
		if v := fail("y", "c0", 201); v.Cause != "" || v.CauseHeld != nil {
			p.fail("64 causes held: c0, dropped, is not tracked again")
		}
	})
	t.Run("held restarts leave in order, one gap apart", func(t *testing.T) {
		p := newPair(t, newLedger, 3, cfg)
		for i := range cfg.Fleet.RestartsPerHour + 3 { // the 8th trips; it and 3 more are held
			p.judge(i%3, share.Judgment{Key: fmt.Sprintf("k%d", i), Ending: share.EndingPlanned, Incarnation: "i", Now: sec(i)})
		}
		if p.seen["held"] != 4 {
			p.fail("%d restarts held, want 4", p.seen["held"])
		}
		rearm := sec(7).Add(cfg.Fleet.Cooldown) // tripped at 7s
		gap := cfg.Fleet.Cooldown / 4
		// Asked in reverse order at the re-arm: only the first held, k7,
		// leaves; the others wait for their turn.
		for i, key := range []string{"k10", "k9", "k8", "k7"} {
			if v := p.proceed(i%3, key, rearm.Add(time.Duration(i)*time.Microsecond)); v.Held != (key != "k7") {
				p.fail("%s held=%v at the re-arm", key, v.Held)
			}
		}
		if p.seen["rearm"] != 1 {
			p.fail("%d re-arms, want 1", p.seen["rearm"])
		}
		for i := 1; i < 4; i++ {
			key := fmt.Sprintf("k%d", 7+i)
			if v := p.proceed(i%3, key, rearm.Add(time.Duration(i)*gap-time.Microsecond)); v.Wait != time.Microsecond {
				p.fail("%s waits %v a microsecond before its turn, want 1µs", key, v.Wait)
			}
			if v := p.proceed((i+1)%3, key, rearm.Add(time.Duration(i)*gap)); v.Held {
				p.fail("%s still held at its turn", key)
			}
		}
	})
}
