package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/ledgertest"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/stretchr/testify/require"
)

// The differential test drives random operation sequences through Stores
// on a real redis-server and through the library's MemoryLedger, and
// requires the same answer at every step, as ledgertest does, with what
// that suite leaves out: several replicas on every step, times that run
// backwards (the deployment keeps one latest time), small steps (a clean
// run between guarded restarts, planned restarts on a full chain), fleet
// breakers that trip on the failing fraction and on the rate, held restarts
// held again after their release was scheduled, and Forget and Restore. It
// counts what the sequences reached, so that a generator that stopped
// reaching an outcome fails rather than passes quietly.

// configs are the configurations of the differential test.
func configs() map[string]crashloop.SupervisorConfig {
	base := ledgertest.Config()
	frac := base
	frac.Fleet = &crashloop.FleetConfig{RestartsPerHour: 30, FailingFraction: 0.25, MinFailing: 1, Cooldown: 3 * time.Second}
	rate := base
	rate.Fleet = &crashloop.FleetConfig{RestartsPerHour: 3, FailingFraction: 1, MinFailing: 50, Cooldown: 2*time.Second + 500*time.Nanosecond}
	rate.Guard = &crashloop.GuardConfig{MaxRestarts: 3, Window: 3 * time.Second}
	bare := base
	bare.Chain, bare.Guard, bare.HourlyCap, bare.Fleet = nil, nil, 0, nil
	bare.Budget.MaxRespawns = 0
	zero := base
	zero.Fleet = &crashloop.FleetConfig{RestartsPerHour: 2, FailingFraction: 0.5, MinFailing: 1, Cooldown: 0}
	return map[string]crashloop.SupervisorConfig{"suite": base, "fraction": frac, "rate": rate, "bare": bare, "cooldown0": zero}
}

type diff struct {
	t    *testing.T
	got  []crashloop.Ledger
	want []crashloop.Ledger
	log  []string
	seen map[string]int
}

func (d *diff) fail(format string, args ...any) {
	d.t.Helper()
	tail := d.log
	if len(tail) > 40 {
		tail = tail[len(tail)-40:]
	}
	d.t.Fatalf(format+"\nlast operations:\n  %s", append(args, strings.Join(tail, "\n  "))...)
}

func (d *diff) step(what, got, want string, gerr, werr error) {
	d.t.Helper()
	d.log = append(d.log, what+" = "+want)
	if gerr != nil && werr == nil {
		d.fail("%s: %v", what, gerr)
	}
	if got != want || (gerr == nil) != (werr == nil) {
		d.fail("%s\n got  %s (%v)\n want %s (%v)", what, got, gerr, want, werr)
	}
}

func rel(tm time.Time) string { return tm.Sub(ledgertest.T0).String() }

func parkString(pe *crashloop.ParkedError) string {
	if pe == nil {
		return "-"
	}
	last := "<nil>"
	if pe.LastError != nil {
		last = fmt.Sprintf("%q", pe.LastError.Error())
	}
	return fmt.Sprintf("%s{%s %d %s %s nh=%v}", pe.Key, pe.Reason, pe.Attempts, rel(pe.Since), last,
		errors.Is(pe, crashloop.ErrNeedsHuman))
}

func changeString(c *crashloop.FleetChange) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("{%s %d %d/%d}", c.Reason, c.Restarts, c.Failing, c.Total)
}

func verdictString(v crashloop.Verdict) string {
	return fmt.Sprintf("now=%s park=%s new=%v attempt=%d restarts=%d held=%v wait=%v tripped=%s rearmed=%s",
		rel(v.Now), parkString(v.Park), v.NewPark, v.Attempt, v.Restarts, v.Held, v.Wait, changeString(v.Tripped), changeString(v.Rearmed))
}

func fleetString(st crashloop.FleetStatus) string {
	rearm := "-"
	if st.RearmAt != nil {
		rearm = rel(*st.RearmAt)
	}
	return fmt.Sprintf("%v %d %d/%d %d %s", st.BreakerTripped, st.FleetRestartsPerHour, st.FailingChannels, st.TotalChannels, st.RestartsInHour, rearm)
}

func (d *diff) judge(i int, j crashloop.Judgment) {
	d.t.Helper()
	ctx := context.Background()
	got, gerr := d.got[i].Judge(ctx, j)
	want, werr := d.want[i].Judge(ctx, j)
	d.step(fmt.Sprintf("r%d Judge(%s %s healthy=%v inc=%s at %s m=%d f=%d)", i, j.Key, j.Ending, j.Healthy, j.Incarnation, rel(j.Now), j.Members, j.Failing),
		verdictString(got), verdictString(want), gerr, werr)
	d.count(want)
}

func (d *diff) count(v crashloop.Verdict) {
	switch {
	case v.NewPark:
		d.seen["park "+v.Park.Reason]++
	case v.Held:
		d.seen["held"]++
	case v.Park != nil:
		d.seen["refused"]++
	}
	if v.Tripped != nil {
		if strings.HasSuffix(v.Tripped.Reason, "failing") {
			d.seen["trip fraction"]++
		} else {
			d.seen["trip rate"]++
		}
	}
	if v.Rearmed != nil {
		d.seen["rearm"]++
	}
}

func (d *diff) proceed(i int, key string, now time.Time) crashloop.Verdict {
	d.t.Helper()
	ctx := context.Background()
	got, gerr := d.got[i].Proceed(ctx, key, now)
	want, werr := d.want[i].Proceed(ctx, key, now)
	d.step(fmt.Sprintf("r%d Proceed(%s at %s)", i, key, rel(now)), verdictString(got), verdictString(want), gerr, werr)
	d.count(want)
	if !want.Held && want.Park == nil && want.Restarts > 0 {
		d.seen["proceed"]++
	}
	if want.Held && want.Wait > 0 && (want.Rearmed != nil || strings.Contains(d.log[len(d.log)-2], "rearmed={")) {
		d.seen["release wait"]++
	}
	return got
}

func (d *diff) resume(i int, key string, now time.Time) {
	d.t.Helper()
	ctx := context.Background()
	got, gerr := d.got[i].Resume(ctx, key, now)
	want, werr := d.want[i].Resume(ctx, key, now)
	if werr == nil {
		d.seen["resume"]++
	}
	if gerr != nil && werr != nil && errors.Is(werr, crashloop.ErrNotParked) && !errors.Is(gerr, crashloop.ErrNotParked) {
		d.fail("r%d Resume(%s): %v, want ErrNotParked", i, key, gerr)
	}
	d.step(fmt.Sprintf("r%d Resume(%s)", i, key), parkString(got), parkString(want), gerr, werr)
}

func (d *diff) forget(i int, key string) {
	d.t.Helper()
	ctx := context.Background()
	gerr := d.got[i].Forget(ctx, key)
	werr := d.want[i].Forget(ctx, key)
	d.step(fmt.Sprintf("r%d Forget(%s)", i, key), "", "", gerr, werr)
}

func (d *diff) restore(i int, parks []*crashloop.ParkedError) {
	d.t.Helper()
	ctx := context.Background()
	got, gerr := d.got[i].Restore(ctx, parks)
	want, werr := d.want[i].Restore(ctx, parks)
	var keys []string
	for _, pe := range parks {
		keys = append(keys, parkString(pe))
	}
	if want > 0 {
		d.seen["restore"]++
	}
	d.step(fmt.Sprintf("r%d Restore(%s)", i, strings.Join(keys, " ")), fmt.Sprint(got), fmt.Sprint(want), gerr, werr)
}

func (d *diff) state(i int, now time.Time, keys []string) {
	d.t.Helper()
	ctx := context.Background()
	for _, key := range keys {
		got, gerr := d.got[i].Lookup(ctx, key)
		want, werr := d.want[i].Lookup(ctx, key)
		d.step(fmt.Sprintf("r%d Lookup(%s)", i, key), parkString(got), parkString(want), gerr, werr)
	}
	gp, gerr := d.got[i].Parked(ctx)
	wp, werr := d.want[i].Parked(ctx)
	var gs, ws []string
	for _, pe := range gp {
		gs = append(gs, parkString(pe))
	}
	for _, pe := range wp {
		ws = append(ws, parkString(pe))
	}
	d.step(fmt.Sprintf("r%d Parked()", i), strings.Join(gs, " "), strings.Join(ws, " "), gerr, werr)
	gf, gerr := d.got[i].Fleet(ctx, now)
	wf, werr := d.want[i].Fleet(ctx, now)
	d.step(fmt.Sprintf("r%d Fleet(%s)", i, rel(now)), fleetString(gf), fleetString(wf), gerr, werr)
}

func TestDifferential(t *testing.T) {
	s := redistest.Start(t)
	keys := []string{"a", "b", "c:{x}"}
	steps := []time.Duration{0, 0, time.Microsecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second,
		5 * time.Second, 10 * time.Second, time.Hour, -time.Second, -time.Microsecond}
	endings := []crashloop.Ending{crashloop.EndingClean, crashloop.EndingPermanent, crashloop.EndingFailedStart,
		crashloop.EndingFailedStart, crashloop.EndingCrash, crashloop.EndingCrash, crashloop.EndingCrash,
		crashloop.EndingCrash, crashloop.EndingCrash, crashloop.EndingPlanned, crashloop.EndingPlanned}
	total := map[string]int{}
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			for seed := range 60 {
				rng := rand.New(rand.NewPCG(uint64(seed), 11))
				d := newDiff(t, s, 3, cfg)
				d.seen = total
				now := ledgertest.T0
				for range 80 {
					now = now.Add(steps[rng.IntN(len(steps))])
					key, i := keys[rng.IntN(len(keys))], rng.IntN(3)
					switch op := rng.IntN(20); {
					case op < 12:
						e := endings[rng.IntN(len(endings))]
						d.judge(i, crashloop.Judgment{Key: key, Ending: e, Healthy: e == crashloop.EndingCrash || rng.IntN(4) == 0,
							Incarnation: fmt.Sprintf("%s#%d", key, 1+rng.IntN(2)), Cause: []string{"", "boom", "dial: refused"}[rng.IntN(3)],
							Now: now, Members: rng.IntN(4), Failing: rng.IntN(3)})
					case op < 16:
						d.proceed(i, key, now)
					case op < 17:
						d.resume(i, key, now)
					case op < 18:
						d.forget(i, key)
					case op < 19:
						// as a Supervisor writes back its parks: a needs_human
						// park's LastError matches ErrNeedsHuman
						pe := &crashloop.ParkedError{Key: key, Reason: crashloop.ReasonBudgetExhausted, Attempts: 7,
							Since: now.Add(-time.Minute), LastError: errors.New("restored: boom")}
						if rng.IntN(2) == 0 {
							pe.Reason, pe.LastError = crashloop.ReasonNeedsHuman, fmt.Errorf("%w: restored", crashloop.ErrNeedsHuman)
						}
						d.restore(i, []*crashloop.ParkedError{pe})
					default:
						d.state(i, now, keys)
					}
				}
				d.state(0, now, keys)
			}
		})
	}
	t.Logf("reached: %v", total)
	for _, what := range []string{"park respawn_budget_exhausted", "park permanent_error", "park needs_human", "park restart_loop_guard",
		"park hourly_restart_cap", "held", "refused", "trip rate", "trip fraction", "rearm", "proceed", "resume", "restore"} {
		require.GreaterOrEqual(t, total[what], 10, "the sequences reached %q only %d times", what, total[what])
	}
}

// newDiff returns a diff of n replicas opened with cfg.
func newDiff(t *testing.T, s *redistest.Server, n int, cfg crashloop.SupervisorConfig) *diff {
	d := &diff{t: t, seen: map[string]int{}}
	ref := crashloop.NewMemoryLedger()
	for i, st := range replicasOn(t, s, n, Options{ClientTime: true}) {
		var want crashloop.Ledger = ref
		if i > 0 {
			want = ref.Replica()
		}
		require.NoError(t, st.Open(cfg, nil))
		require.NoError(t, want.Open(cfg, nil))
		d.got, d.want = append(d.got, st), append(d.want, want)
	}
	return d
}

// Scripted sequences for what random ones reach too rarely: a planned
// restart ends the chain, but not a full one; the chain counts per
// incarnation; a re-armed breaker releases its held restarts one gap
// apart, in the order they were held, across replicas.
func TestDifferentialScenarios(t *testing.T) {
	s := redistest.Start(t)
	cfg := ledgertest.Config() // chain of 2 within 5s, guard 4 in 20s, fleet 8 an hour, cooldown 30s
	crash := func(now time.Time, inc string) crashloop.Judgment {
		return crashloop.Judgment{Key: "k", Ending: crashloop.EndingCrash, Healthy: true, Incarnation: inc, Cause: "died", Now: now, Members: 1}
	}
	planned := func(now time.Time, inc string) crashloop.Judgment {
		return crashloop.Judgment{Key: "k", Ending: crashloop.EndingPlanned, Incarnation: inc, Now: now, Members: 1}
	}
	at := func(s int) time.Time { return ledgertest.T0.Add(time.Duration(s) * time.Second) }

	for _, tc := range []struct {
		name  string
		steps []crashloop.Judgment // replica i%2 judges step i
		parks int                  // needs_human parks
	}{
		{"a planned restart ends the chain", []crashloop.Judgment{crash(at(0), "i"), planned(at(1), "i"), crash(at(2), "i"), crash(at(3), "i")}, 0},
		{"a full chain is not ended by a planned restart", []crashloop.Judgment{crash(at(0), "i"), crash(at(1), "i"), planned(at(2), "i"), crash(at(3), "i")}, 1},
		{"the chain counts one incarnation", []crashloop.Judgment{crash(at(0), "i"), crash(at(1), "j"), crash(at(2), "j"), crash(at(3), "j")}, 1},
	} {
		// Each with the breaker armed (the script's fast path decides the
		// restarts) and tripped (its general path holds them).
		for _, tripped := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/tripped=%v", tc.name, tripped), func(t *testing.T) {
				d := newDiff(t, s, 2, cfg)
				if tripped {
					for i := range cfg.Fleet.RestartsPerHour {
						d.judge(i%2, crashloop.Judgment{Key: fmt.Sprintf("o%d", i), Ending: crashloop.EndingPlanned, Incarnation: "i", Now: at(0)})
					}
				}
				for i, j := range tc.steps {
					d.judge(i%2, j)
				}
				d.state(0, at(len(tc.steps)), []string{"k"})
				require.Equal(t, tc.parks, d.seen["park needs_human"])
				require.Equal(t, tripped, d.seen["held"] > len(tc.steps)-tc.parks)
			})
		}
	}
	t.Run("held restarts leave in order, one gap apart", func(t *testing.T) {
		d := newDiff(t, s, 3, cfg)
		for i := range cfg.Fleet.RestartsPerHour + 3 { // the 8th trips; it and 3 more are held
			d.judge(i%3, crashloop.Judgment{Key: fmt.Sprintf("k%d", i), Ending: crashloop.EndingPlanned, Incarnation: "i", Now: at(i)})
		}
		require.Equal(t, 4, d.seen["held"])
		rearm := at(7).Add(cfg.Fleet.Cooldown) // tripped at 7s
		gap := cfg.Fleet.Cooldown / 4
		// Asked in reverse order at the re-arm: only the first held, k7,
		// leaves; the others wait for their turn.
		for i, key := range []string{"k10", "k9", "k8", "k7"} {
			v := d.proceed(i%3, key, rearm.Add(time.Duration(i)*time.Microsecond))
			require.Equal(t, key != "k7", v.Held, key)
		}
		require.Equal(t, 1, d.seen["rearm"])
		for i := 1; i < 4; i++ {
			key := fmt.Sprintf("k%d", 7+i)
			v := d.proceed(i%3, key, rearm.Add(time.Duration(i)*gap-time.Microsecond))
			require.Equal(t, time.Microsecond, v.Wait, key)
			v = d.proceed((i+1)%3, key, rearm.Add(time.Duration(i)*gap))
			require.False(t, v.Held, key)
		}
	})
}
