package replay

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// genConfig describes a generated history of known truth: keys restarted
// as kubelet restarts a container (10s doubling to 5m, the back-off reset
// after 10 minutes of running).
type genConfig struct {
	Seed  uint64
	Start time.Time
	Span  time.Duration
	// Fast: real crash loops: each key runs healthy, then from a time on
	// every start fails within seconds, to the end of the history (one of
	// them an operator fixes after 30h and resumes).
	Fast int
	// Slow: slow loops: each key runs healthy, then from a time on every
	// run crashes (SIGSEGV) after 2 to 6 minutes, to the end. They never
	// tell they are ready.
	Slow int
	// Outage: keys that depend on a service that is down now and then
	// (2 to 20 minutes, at least 4 hours apart): every start fails while
	// it is down, and the key recovers by itself. Half tell they are
	// ready.
	Outage int
	// Steady: keys that crash about once a day, and run on after one
	// restart.
	Steady int
}

// genTruth is what a generated history's keys are.
type genTruth struct {
	Loops     []string // fast and slow loops: a good policy parks each
	Recovered []string // outages and steady keys: a good policy parks none
}

// genHistory writes the history of g as the plain CSV, in time order.
func genHistory(g genConfig) ([]byte, genTruth) {
	rng := rand.New(rand.NewPCG(g.Seed, 0x7475_6e65))
	end := g.Start.Add(g.Span)
	type rec struct {
		t     time.Time
		key   string
		event string
		code  int
	}
	var recs []rec
	var truth genTruth
	jitter := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }

	// The dependency's outages.
	var outages [][2]time.Time
	for t := g.Start.Add(jitter(time.Hour, 5*time.Hour)); t.Before(end); t = t.Add(jitter(4*time.Hour, 9*time.Hour)) {
		outages = append(outages, [2]time.Time{t, t.Add(jitter(2*time.Minute, 20*time.Minute))})
	}
	inOutage := func(t time.Time) (time.Time, bool) {
		for _, o := range outages {
			if !t.Before(o[0]) && t.Before(o[1]) {
				return o[1], true
			}
		}
		return time.Time{}, false
	}
	nextOutage := func(t time.Time) time.Time {
		for _, o := range outages {
			if o[0].After(t) {
				return o[0]
			}
		}
		return end
	}

	// run says how a run started at s goes: how long it lasts, whether it
	// fails (and with what status), whether it tells it is ready.
	type run struct {
		length time.Duration
		code   int // 0: it ran to the end of the history, or was fixed
		ready  bool
	}
	program := func(kind string, loopAt time.Time, ready bool) func(s time.Time) run {
		switch kind {
		case "fast":
			return func(s time.Time) run {
				if s.Before(loopAt) {
					return run{length: loopAt.Sub(s), code: 1, ready: true}
				}
				return run{length: jitter(time.Second, 4*time.Second), code: 1}
			}
		case "fixed":
			return func(s time.Time) run { return run{length: end.Sub(s), ready: true} }
		case "slow":
			return func(s time.Time) run {
				if s.Before(loopAt) {
					return run{length: loopAt.Sub(s), code: 139}
				}
				return run{length: jitter(2*time.Minute, 6*time.Minute), code: 139}
			}
		case "outage":
			return func(s time.Time) run {
				if _, down := inOutage(s); down {
					return run{length: jitter(time.Second, 3*time.Second), code: 3}
				}
				next := nextOutage(s)
				if !next.Before(end) {
					return run{length: end.Sub(s), ready: ready}
				}
				return run{length: next.Sub(s) + jitter(0, 2*time.Second), code: 3, ready: ready}
			}
		default: // steady
			return func(s time.Time) run {
				return run{length: jitter(18*time.Hour, 30*time.Hour), code: 1, ready: true}
			}
		}
	}
	key := func(kind string, i int, loopAt, fixAt time.Time, ready bool) {
		name := fmt.Sprintf("%s-%d", kind, i+1)
		prog := program(kind, loopAt, ready)
		backoff := 0
		for s := g.Start.Add(jitter(0, time.Minute)); s.Before(end); {
			recs = append(recs, rec{t: s, key: name, event: "start"})
			r := prog(s)
			if r.ready && r.length > 2*time.Second {
				recs = append(recs, rec{t: s.Add(2 * time.Second), key: name, event: "ready"})
			}
			e := s.Add(r.length)
			if r.code == 0 || !e.Before(end) {
				break
			}
			recs = append(recs, rec{t: e, key: name, event: "exit", code: r.code})
			if r.length >= 10*time.Minute {
				backoff = 0
			}
			s = e.Add(min(10*time.Second<<backoff, 5*time.Minute))
			backoff = min(backoff+1, 5)
			if !fixAt.IsZero() && !s.Before(fixAt) { // an operator fixed it, and resumed it
				recs = append(recs, rec{t: fixAt, key: name, event: "resume"})
				s, backoff, fixAt = fixAt.Add(time.Second), 0, time.Time{}
				prog = program("fixed", loopAt, ready)
			}
		}
	}
	for i := range g.Fast {
		loopAt := g.Start.Add(jitter(time.Hour, g.Span/2))
		var fixAt time.Time
		if i == 1 {
			fixAt = loopAt.Add(30 * time.Hour)
		}
		key("fast", i, loopAt, fixAt, true)
		truth.Loops = append(truth.Loops, fmt.Sprintf("fast-%d", i+1))
	}
	for i := range g.Slow {
		key("slow", i, g.Start.Add(jitter(time.Hour, g.Span/2)), time.Time{}, false)
		truth.Loops = append(truth.Loops, fmt.Sprintf("slow-%d", i+1))
	}
	for i := range g.Outage {
		key("outage", i, time.Time{}, time.Time{}, i%2 == 0)
		truth.Recovered = append(truth.Recovered, fmt.Sprintf("outage-%d", i+1))
	}
	for i := range g.Steady {
		key("steady", i, time.Time{}, time.Time{}, true)
		truth.Recovered = append(truth.Recovered, fmt.Sprintf("steady-%d", i+1))
	}
	slices.SortStableFunc(recs, func(a, b rec) int { return a.t.Compare(b.t) })
	var buf bytes.Buffer
	buf.WriteString("time,key,event,code\n")
	for _, r := range recs {
		ts := fmt.Sprintf("%d.%03d", r.t.Unix(), r.t.Nanosecond()/1e6)
		if r.event == "exit" {
			fmt.Fprintf(&buf, "%s,%s,exit,%d\n", ts, r.key, r.code)
		} else {
			fmt.Fprintf(&buf, "%s,%s,%s,\n", ts, r.key, r.event)
		}
	}
	return buf.Bytes(), truth
}
