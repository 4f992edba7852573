package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/seam"
	"github.com/crashloopguard/crashloop/share"
)

// pair is a candidate and the reference, replica for replica, driven alike:
// every step runs on both and must give the same answer and the same
// failure (an error from one, none from the other, fails the check). seen
// counts what the reference's answers reached, so that a generator that
// stops reaching an outcome can fail rather than pass quietly.
type pair struct {
	t    *testing.T
	got  []share.Ledger
	want []share.Ledger
	log  []string
	seen map[string]int
}

// newPair opens replicas of a fresh candidate from newLedger, and as many
// replicas of a fresh reference, with cfg.
func newPair(t *testing.T, newLedger NewFunc, replicas int, cfg crashloop.SupervisorConfig) *pair {
	t.Helper()
	p := &pair{t: t, got: newLedger(t, replicas), seen: map[string]int{}}
	if len(p.got) != replicas {
		t.Fatalf("NewFunc gave %d replicas, want %d", len(p.got), replicas)
	}
	ref := share.NewMemoryLedger()
	p.want = []share.Ledger{ref}
	for range replicas - 1 {
		p.want = append(p.want, ref.Replica())
	}
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

// fail ends the check with the last 40 operations.
func (p *pair) fail(format string, args ...any) {
	p.t.Helper()
	tail := p.log
	if len(tail) > 40 {
		tail = tail[len(tail)-40:]
	}
	p.t.Fatalf(format+"\nlast operations:\n  %s", append(args, strings.Join(tail, "\n  "))...)
}

// step logs what was done and compares both answers.
func (p *pair) step(what, got, want string, gerr, werr error) {
	p.t.Helper()
	p.log = append(p.log, what+" = "+want)
	if gerr != nil && werr == nil {
		p.fail("%s: %v", what, gerr)
	}
	if got != want || (gerr == nil) != (werr == nil) {
		p.fail("%s\n got  %s (%v)\n want %s (%v)", what, got, gerr, want, werr)
	}
}

// judge runs j on replica i of both and returns the candidate's verdict.
func (p *pair) judge(i int, j share.Judgment) share.Verdict {
	p.t.Helper()
	ctx := context.Background()
	got, gerr := p.got[i].Judge(ctx, j)
	want, werr := p.want[i].Judge(ctx, j)
	p.step(fmt.Sprintf("r%d Judge(%s)", i, describe(j)), verdict(got), verdict(want), gerr, werr)
	p.count(want)
	if want.NewPark && len(p.want) > 1 {
		// a new park is claimed once, by the first replica to claim it
		p.claim((i+1)%len(p.want), want.Park.Version, true)
		p.claim(i, want.Park.Version, false)
		// its winner claiming again (a claim whose reply was lost, retried) wins again
		p.claim((i+1)%len(p.want), want.Park.Version, true)
	}
	return got
}

// count notes the outcome of a verdict in seen.
func (p *pair) count(v share.Verdict) {
	switch {
	case v.NewPark:
		p.seen["park "+v.Park.Reason]++
	case v.Held:
		p.seen["held"]++
	case v.Park != nil:
		p.seen["refused"]++
	}
	if v.Tripped != nil {
		p.seen["trip "+v.Tripped.Reason]++
	}
	if v.Rearmed != nil {
		p.seen["rearm"]++
	}
	switch {
	case v.Probe && v.Park != nil:
		p.seen["probe park"]++
	case v.Probe:
		p.seen["probe cause"]++
	case v.Held && v.Cause != "":
		p.seen["held cause"]++
	}
	if v.CauseHeld != nil {
		p.seen["cause held"]++
	}
	if v.CauseReleased != nil {
		p.seen["cause released"]++
	}
}

// proceed runs Proceed on replica i of both and returns the candidate's
// verdict.
func (p *pair) proceed(i int, key string, now time.Time) share.Verdict {
	p.t.Helper()
	ctx := context.Background()
	got, gerr := p.got[i].Proceed(ctx, key, now)
	want, werr := p.want[i].Proceed(ctx, key, now)
	p.step(fmt.Sprintf("r%d Proceed(%q, %s)", i, key, at(now)), verdict(got), verdict(want), gerr, werr)
	p.count(want)
	if !want.Held && want.Park == nil && want.Restarts > 0 {
		p.seen["proceed"]++
	}
	return got
}

// version returns the version of key as replica i of both reports it,
// comparing their lookups.
func (p *pair) version(i int, key string) int64 {
	p.t.Helper()
	ctx := context.Background()
	got, gerr := p.got[i].Lookup(ctx, key)
	want, werr := p.want[i].Lookup(ctx, key)
	p.step(fmt.Sprintf("r%d Lookup(%q)", i, key), stands(got), stands(want), gerr, werr)
	return want.Version
}

// resume runs Resume on replica i of both: first naming a version that is
// not the key's park's (both must refuse it with the same
// *share.ChangedError and change nothing), then the park's own (or 0
// for a key that is not parked). A refusal must match crashloop.ErrNotParked
// where the reference's does.
func (p *pair) resume(i int, key string, now time.Time) {
	p.t.Helper()
	ctx := context.Background()
	v := p.version(i, key)
	for _, named := range []int64{v + 1, v} {
		got, gv, gerr := p.got[i].Resume(ctx, key, named, now)
		want, wv, werr := p.want[i].Resume(ctx, key, named, now)
		if werr == nil {
			p.seen["resume"]++
		}
		if gerr != nil && werr != nil && errors.Is(werr, crashloop.ErrNotParked) && !errors.Is(gerr, crashloop.ErrNotParked) {
			p.fail("r%d Resume(%q, %d): %v, want ErrNotParked", i, key, named, gerr)
		}
		p.step(fmt.Sprintf("r%d Resume(%q, %d)", i, key, named), fmt.Sprintf("%s v%d %s", park(got), gv, changed(gerr)),
			fmt.Sprintf("%s v%d %s", park(want), wv, changed(werr)), gerr, werr)
		if named == v+1 && werr == nil {
			p.fail("r%d Resume(%q, %d): the reference resumed a park of version %d", i, key, named, v)
		}
		if werr == nil {
			// the resume is claimed once: by the first replica to claim it
			p.claim(i, wv, true)
			p.claim(i, wv, true) // again: a claim retried after its reply was lost wins again
			if len(p.want) > 1 {
				p.claim((i+1)%len(p.want), wv, false)
			}
		}
	}
}

// claim runs Claim of version on replica i of both, which must answer won.
func (p *pair) claim(i int, version int64, won bool) {
	p.t.Helper()
	ctx := context.Background()
	got, gerr := p.got[i].Claim(ctx, version)
	want, werr := p.want[i].Claim(ctx, version)
	p.step(fmt.Sprintf("r%d Claim(%d)", i, version), fmt.Sprint(got), fmt.Sprint(want), gerr, werr)
	if want != won {
		p.fail("r%d Claim(%d): the reference answered %v", i, version, want)
	}
}

// forget runs Forget on replica i of both: first naming a version that is
// not the key's (refused alike), then its own.
func (p *pair) forget(i int, key string) {
	p.t.Helper()
	ctx := context.Background()
	v := p.version(i, key)
	for _, named := range []int64{v + 1, v} {
		gv, gerr := p.got[i].Forget(ctx, key, named)
		wv, werr := p.want[i].Forget(ctx, key, named)
		p.step(fmt.Sprintf("r%d Forget(%q, %d)", i, key, named), fmt.Sprintf("v%d %s", gv, changed(gerr)),
			fmt.Sprintf("v%d %s", wv, changed(werr)), gerr, werr)
		if (named == v) != (werr == nil) {
			p.fail("r%d Forget(%q, %d): %v from the reference, at version %d", i, key, named, werr, v)
		}
	}
}

// restore runs Restore of parks on replica i of both.
func (p *pair) restore(i int, pes []*crashloop.ParkedError) {
	p.t.Helper()
	ctx := context.Background()
	got, gerr := p.got[i].Restore(ctx, pes)
	want, werr := p.want[i].Restore(ctx, pes)
	p.step(fmt.Sprintf("r%d Restore(%s)", i, parks(pes)), restored(got), restored(want), gerr, werr)
	for _, r := range want {
		if r.Written {
			p.seen["restore"]++
			// claimed by the step that wrote it: every claim loses, its writer's included
			p.claim(i, r.Version, false)
			p.claim((i+1)%len(p.want), r.Version, false)
		}
	}
}

// member tells replica i of both whether it counts key as a fleet member.
func (p *pair) member(i int, key string, member bool) {
	p.t.Helper()
	p.got[i].Member(key, member)
	p.want[i].Member(key, member)
	p.log = append(p.log, fmt.Sprintf("r%d Member(%q, %v)", i, key, member))
}

// close closes replica i of both, withdrawing its members; a candidate
// that is no io.Closer fails the check.
func (p *pair) close(i int) {
	p.t.Helper()
	gc, ok := p.got[i].(io.Closer)
	if !ok {
		p.fail("r%d: %T has no Close: a replica's members must be withdrawn when it closes", i, p.got[i])
	}
	gerr, werr := gc.Close(), p.want[i].(io.Closer).Close()
	p.step(fmt.Sprintf("r%d Close()", i), fmt.Sprint(gerr), fmt.Sprint(werr), gerr, werr)
}

// fleet returns the fleet status replica i of both gives at now,
// comparing them.
func (p *pair) fleet(i int, now time.Time) crashloop.FleetStatus {
	p.t.Helper()
	ctx := context.Background()
	gf, gerr := p.got[i].Fleet(ctx, now)
	wf, werr := p.want[i].Fleet(ctx, now)
	p.step(fmt.Sprintf("r%d Fleet(%s)", i, at(now)), fleet(gf), fleet(wf), gerr, werr)
	return wf
}

// stands writes a key as it stands: its version and its park.
func stands(ch share.Change) string {
	return fmt.Sprintf("%s@v%d %s", ch.Key, ch.Version, park(ch.Park))
}

// changed writes the key a *share.ChangedError tells of, or "-".
func changed(err error) string {
	var ce *share.ChangedError
	if !errors.As(err, &ce) {
		return "-"
	}
	return "changed:" + stands(share.Change{Key: ce.Key, Version: ce.Version, Park: ce.Park})
}

func restored(rs []share.Restored) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("written=%v %s", r.Written, stands(r.Change)))
	}
	return "[" + strings.Join(out, " ") + "]"
}

// state compares what replica i of both says of every key, of the parks
// and of the fleet at now.
func (p *pair) state(i int, now time.Time, keys []string) {
	p.t.Helper()
	ctx := context.Background()
	for _, key := range keys {
		got, gerr := p.got[i].Lookup(ctx, key)
		want, werr := p.want[i].Lookup(ctx, key)
		p.step(fmt.Sprintf("r%d Lookup(%q)", i, key), stands(got), stands(want), gerr, werr)
	}
	gp, gerr := p.got[i].Parked(ctx)
	wp, werr := p.want[i].Parked(ctx)
	p.step(fmt.Sprintf("r%d Parked()", i), parks(gp), parks(wp), gerr, werr)
	p.fleet(i, now)
}

func at(t time.Time) string { return "T0+" + t.Sub(T0).String() }

func describe(j share.Judgment) string {
	return fmt.Sprintf("%q %s healthy=%v inc=%q cause=%q shared=%q at %s members=%d failing=%d", j.Key, j.Ending, j.Healthy,
		j.Incarnation, j.Cause, j.Shared, at(j.Now), j.Members, j.Failing)
}

// park writes a park with all a replica can tell of it: its LastError's
// text (nil apart from an empty text) and whether it matches
// crashloop.ErrNeedsHuman.
func park(pe *crashloop.ParkedError) string {
	if pe == nil {
		return "-"
	}
	last := "<nil>"
	if pe.LastError != nil {
		last = fmt.Sprintf("%q", pe.LastError.Error())
	}
	return fmt.Sprintf("%s{%s %d since %s %s nh=%v v%d}", pe.Key, pe.Reason, pe.Attempts, at(pe.Since), last,
		errors.Is(pe, crashloop.ErrNeedsHuman), pe.Version)
}

func parks(pes []*crashloop.ParkedError) string {
	var out []string
	for _, pe := range pes {
		out = append(out, park(pe))
	}
	return "[" + strings.Join(out, " ") + "]"
}

func change(c *share.FleetChange) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("{%s restarts=%d %d/%d}", c.Reason, c.Restarts, c.Failing, c.Total)
}

// verdict writes every field of v.
func verdict(v share.Verdict) string {
	probeAt := "-"
	if !v.ProbeAt.IsZero() {
		probeAt = at(v.ProbeAt)
	}
	return fmt.Sprintf("now=%s park=%s new=%v attempt=%d restarts=%d held=%v wait=%v tripped=%s rearmed=%s "+
		"cause=%q cause_held=%s cause_released=%s probe=%v probe_at=%s",
		at(v.Now), park(v.Park), v.NewPark, v.Attempt, v.Restarts, v.Held, v.Wait, change(v.Tripped), change(v.Rearmed),
		v.Cause, causeChange(v.CauseHeld), causeChange(v.CauseReleased), v.Probe, probeAt)
}

func causeChange(c *seam.CauseChange) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("{%q keys=%d}", c.Cause, c.Keys)
}

func fleet(st crashloop.FleetStatus) string {
	rearm := "-"
	if st.RearmAt != nil {
		rearm = at(*st.RearmAt)
	}
	return fmt.Sprintf("{tripped=%v limit=%d %d/%d hour=%d rearm=%s held_causes=%q}", st.BreakerTripped,
		st.FleetRestartsPerHour, st.FailingKeys, st.Keys, st.RestartsInHour, rearm, st.HeldCauses)
}
