package replay

import (
	"cmp"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crashloopguard/crashloop"
)

// TuneOptions tunes Tune. The zero value is the defaults.
type TuneOptions struct {
	// Horizon is how long after a park a healthy run makes it false, and
	// how soon after its first failure a key must run sound again for its
	// failures to count as recovered by themselves, not as a real crash
	// loop. Default (0): 24h; < 0 is an error.
	Horizon time.Duration
	// SoundRun is how long a run must last without failing to end a key's
	// failures. Default (0): DefaultSoundRun (1h); < 0 is an error.
	SoundRun time.Duration
	// MaxFalseParks is the most false parks a recommended policy may
	// make. Default 0; < 0 is an error.
	MaxFalseParks int
	// PermanentCodes are exit statuses that park at once, for every
	// candidate (Options.PermanentCodes).
	PermanentCodes []int
	// Compare are configurations to judge beside the defaults and compare
	// the recommended policy with (a --config file each, say).
	Compare []Candidate
	// Workers is how many candidates are judged at once. Default (0):
	// runtime.GOMAXPROCS(0).
	Workers int
	// Progress, when set, is called after each batch of candidates with
	// how many were judged and how many there are to judge so far (the
	// second search's are added when the first ends). Calls do not
	// overlap; done grows with each.
	Progress func(done, total int)
}

// Verdict is what one candidate would have done over a history, in the
// three measures Tune weighs, and the replay's totals. It is a plain
// value.
type Verdict struct {
	Name   string
	Config crashloop.SupervisorConfig
	// Spent counts the restarts the candidate allowed on the real crash
	// loops: restarts spent on keys that end parked anyway. A loop it did
	// not park counts all of its restarts.
	Spent int
	// LoopsParked counts the real crash loops it parked (or found parked).
	LoopsParked int
	// ToParkMean and ToParkMax are the mean and the longest time from a
	// real crash loop's first failure to its park; a loop it did not park
	// counts until its last failure.
	ToParkMean, ToParkMax time.Duration
	// FalseParks counts the parks after which the key ran healthy again
	// within the horizon with no resume (Measures.FalseParks).
	FalseParks int
	// Totals are the replay's measures of the candidate.
	Totals Measures
}

// dominates reports whether v is at least as good as w in every measure
// Tune weighs and better in one.
func (v *Verdict) dominates(w *Verdict) bool {
	le := v.Spent <= w.Spent && v.ToParkMean <= w.ToParkMean && v.FalseParks <= w.FalseParks
	return le && (v.Spent < w.Spent || v.ToParkMean < w.ToParkMean || v.FalseParks < w.FalseParks)
}

// SettingEffect is what one setting of the recommended policy buys on the
// history: the recommended policy with that setting at its default. It is
// a plain value.
type SettingEffect struct {
	Setting string // the config key, e.g. "healthy_after", "budget.window"
	Value   string // the recommended value, as a config file holds it
	Default string // the default value
	// Without is the recommended policy with the setting at its default;
	// zero if that is not a valid configuration (Invalid says why).
	Without Verdict
	Invalid string
}

// Tuned is the result of Tune. It is a plain value.
type Tuned struct {
	// Sources says what was read from each source (History.Sources).
	Sources       []SourceResult
	Records, Keys int
	First, Last   time.Time
	// Loops counts the real crash loops in the history (a key's failures,
	// two or more, with no sound run within the horizon of the first),
	// LoopKeys the keys they are of, and Recovered the keys' failures,
	// two or more, that stopped on their own within the horizon.
	Loops, LoopKeys, Recovered int
	// LoopFailures counts the failures of the real crash loops: what a
	// policy that never parks spends on them.
	LoopFailures int
	// NeverPark is what a policy that never parks does: it spends every
	// failure of the real crash loops on a restart, and parks none.
	NeverPark Verdict
	// Searched counts the candidates judged in the search; Invalid the
	// combinations of the grid that are no valid configuration (a window
	// too short for the respawns and the curve), not judged.
	Searched, Invalid int
	// Front is the Pareto front of the search: no candidate judged is
	// better in one measure and as good in the others. Ordered by false
	// parks, restarts spent, mean time to park.
	Front []Verdict
	// Recommended is the policy Tune recommends, one of Front: of those
	// with at most MaxFalseParks false parks (or, if none has, with the
	// fewest), the one that parks the most real crash loops, then spends
	// the fewest restarts on them, then parks them soonest, then parks
	// falsely the least, then differs from the defaults in the fewest
	// settings and values nearest theirs.
	Recommended Verdict
	// Feasible reports that the recommended policy parks falsely at most
	// MaxFalseParks times.
	Feasible bool
	// Compared holds the defaults, then each TuneOptions.Compare, then,
	// unless it has one, the recommended policy with a probe after a park
	// (probe_after TuneProbeAfter).
	Compared []Verdict
	// Effects says, for each setting in which the recommended policy
	// differs from the defaults, what it buys.
	Effects       []SettingEffect
	Horizon       time.Duration
	SoundRun      time.Duration
	MaxFalseParks int
}

// Tune searches the policies the library offers for those on the Pareto
// front of three measures on the history h: restarts spent on real crash
// loops, the time from a loop's first failure to its park, and false
// parks. Each candidate is judged as History.Replay judges it (a
// Supervisor at the recorded times), without the fleet breaker, as one
// crashloop supervising one key runs. Candidates are judged in parallel;
// the result depends on h and opts alone. Tune is safe for concurrent
// use.
//
// The search is in two steps. The first crosses healthy_after, the
// budget's max_respawns and window, and the chain. The second crosses the
// best four of the first with the per-key guard, the hourly cap and the
// backoff curve. The policies searched are without the probe after a
// park: the recommended policy is judged once more with probe_after
// TuneProbeAfter, and compared (the last of Tuned.Compared), so that the
// probe's cost and worth on the history are shown beside it.
func Tune(h *History, opts TuneOptions) (*Tuned, error) {
	switch {
	case opts.Horizon < 0:
		return nil, fmt.Errorf("replay: horizon %v: must be >= 0", opts.Horizon)
	case opts.SoundRun < 0:
		return nil, fmt.Errorf("replay: sound run %v: must be >= 0", opts.SoundRun)
	case opts.MaxFalseParks < 0:
		return nil, fmt.Errorf("replay: max false parks %d: must be >= 0", opts.MaxFalseParks)
	case len(h.recs) == 0:
		return nil, ErrNoHistory
	}
	if opts.Horizon == 0 {
		opts.Horizon = 24 * time.Hour
	}
	if opts.SoundRun == 0 {
		opts.SoundRun = DefaultSoundRun
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	tr := truthOf(h, opts.Horizon, opts.SoundRun)
	j := &judge{h: h, tr: tr, opts: opts}
	res := &Tuned{Sources: h.Sources, Records: len(h.recs), Keys: len(h.keys), Loops: len(tr.loops), Recovered: tr.recovered,
		Horizon: opts.Horizon, SoundRun: opts.SoundRun, MaxFalseParks: opts.MaxFalseParks}
	res.First, res.Last = h.record(0).Time, h.record(len(h.recs)-1).Time
	loopKeys := map[int32]bool{}
	var span time.Duration
	res.NeverPark.Name = "never parks"
	for _, e := range tr.loops {
		ep := &tr.episodes[e]
		loopKeys[ep.key] = true
		res.LoopFailures += ep.failures
		span += ep.last.Sub(ep.first)
		res.NeverPark.ToParkMax = max(res.NeverPark.ToParkMax, ep.last.Sub(ep.first))
	}
	res.LoopKeys = len(loopKeys)
	res.NeverPark.Spent = res.LoopFailures
	if len(tr.loops) > 0 {
		res.NeverPark.ToParkMean = (span / time.Duration(len(tr.loops))).Round(time.Second)
	}

	compare := append([]Candidate{{Name: "defaults", Config: tuneDefaults()}}, opts.Compare...)
	first, invalid := firstGrid()
	j.total.Store(int64(len(first) + len(compare)))
	cmpd, err := j.judgeAll(compare)
	if err != nil {
		return nil, err
	}
	res.Compared = cmpd
	judged, err := j.judgeAll(first)
	if err != nil {
		return nil, err
	}
	best := slices.Clone(judged)
	j.rank(best)
	var seeds []crashloop.SupervisorConfig
	for _, v := range best[:min(4, len(best))] {
		seeds = append(seeds, v.Config)
	}
	second, inv2 := secondGrid(seeds)
	j.total.Add(int64(len(second)))
	more, err := j.judgeAll(second)
	if err != nil {
		return nil, err
	}
	judged = append(judged, more...)
	res.Searched, res.Invalid = len(judged), invalid+inv2

	j.rank(judged)
	res.Front = front(judged)
	res.Recommended = res.Front[0]
	res.Recommended.Name = "tuned"
	res.Feasible = res.Recommended.FalseParks <= opts.MaxFalseParks
	slices.SortStableFunc(res.Front, func(a, b Verdict) int {
		return cmp.Or(cmp.Compare(a.FalseParks, b.FalseParks), cmp.Compare(a.Spent, b.Spent), cmp.Compare(a.ToParkMean, b.ToParkMean))
	})
	for i := range res.Front {
		res.Front[i].Name = fmt.Sprintf("front %d", i+1)
		if sameConfig(res.Front[i].Config, res.Recommended.Config) {
			res.Front[i].Name = "tuned"
		}
	}
	res.Effects, err = j.effects(res.Recommended.Config)
	if err != nil {
		return nil, err
	}
	if cfg := res.Recommended.Config; cfg.ProbeAfter == 0 {
		cfg.ProbeAfter = TuneProbeAfter
		j.total.Add(1)
		probed, err := j.judgeAll([]Candidate{{Name: "tuned + probe_after " + Duration(TuneProbeAfter), Config: cfg}})
		if err != nil {
			return nil, err
		}
		res.Compared = append(res.Compared, probed...)
	}
	return res, nil
}

// TuneProbeAfter is the probe_after of the recommended policy that Tune
// compares with it.
const TuneProbeAfter = 30 * time.Second

// judge judges candidates over a history.
type judge struct {
	h     *History
	tr    *truth
	opts  TuneOptions
	done  atomic.Int64
	total atomic.Int64
	mu    sync.Mutex // serializes Progress
}

// batchOf returns how many candidates one Replayer judges at once (the
// records are read once for them all): 16, fewer for a history of more
// than 4,096 keys, so that a batch keeps state for at most 65,536 keys
// and candidates (about 2 KB each), down to one candidate.
func batchOf(keys int) int { return max(1, min(16, 65536/max(keys, 1))) }

// judgeAll judges the candidates, in parallel, and returns their verdicts
// in their order.
func (j *judge) judgeAll(cands []Candidate) ([]Verdict, error) {
	batch := batchOf(len(j.h.keys))
	out := make([]Verdict, len(cands))
	batches := (len(cands) + batch - 1) / batch
	var next atomic.Int64
	errs := make([]error, batches)
	var wg sync.WaitGroup
	for range min(j.opts.Workers, batches) {
		wg.Go(func() {
			for {
				b := int(next.Add(1)) - 1
				if b >= batches {
					return
				}
				lo, hi := b*batch, min((b+1)*batch, len(cands))
				errs[b] = j.judgeBatch(cands[lo:hi], out[lo:hi])
				j.mu.Lock() // done counted and told in one step: told in order
				done := j.done.Add(int64(hi - lo))
				if j.opts.Progress != nil {
					j.opts.Progress(int(done), int(j.total.Load()))
				}
				j.mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// loopTally is what one candidate did with one real crash loop.
type loopTally struct {
	allowed int
	decided bool
	parkAt  time.Time
}

// judgeBatch judges cands over the history into out.
func (j *judge) judgeBatch(cands []Candidate, out []Verdict) error {
	loops := len(j.tr.loops)
	tally := make([]loopTally, len(cands)*loops)
	cur := int32(-1)
	opts := Options{Horizon: j.opts.Horizon, PermanentCodes: j.opts.PermanentCodes, totalsOnly: true, OnDecision: func(d Decided) {
		if cur < 0 {
			return
		}
		t := &tally[d.Candidate*loops+int(cur)]
		t.decided = true
		if d.Probe { // a probe's start is a restart spent on the loop
			t.allowed++
		}
		switch d.Decision.Action {
		case crashloop.ActionRestart, crashloop.ActionHold:
			t.allowed++
		case crashloop.ActionStop:
			var pe *crashloop.ParkedError
			if t.parkAt.IsZero() && errors.As(d.Decision.Err, &pe) {
				t.parkAt = d.Time
			}
		}
	}}
	p, err := NewReplayer(cands, opts)
	if err != nil {
		return err
	}
	for i := range j.h.recs {
		cur = j.tr.loopOf[i]
		p.Feed(j.h.record(i))
	}
	reports := p.Finish()
	for c, rep := range reports {
		v := Verdict{Name: rep.Name, Config: rep.Config, FalseParks: rep.Totals.FalseParks, Totals: rep.Totals}
		var sum time.Duration
		for l, e := range j.tr.loops {
			ep := &j.tr.episodes[e]
			t := &tally[c*loops+l]
			v.Spent += t.allowed
			d := ep.last.Sub(ep.first) // not parked: until its last failure
			switch {
			case !t.decided: // parked before its first failure, and not resumed
				d = 0
				v.LoopsParked++
			case !t.parkAt.IsZero():
				d = t.parkAt.Sub(ep.first)
				v.LoopsParked++
			}
			sum += d
			v.ToParkMax = max(v.ToParkMax, d)
		}
		if loops > 0 {
			v.ToParkMean = (sum / time.Duration(loops)).Round(time.Second)
		}
		out[c] = v
	}
	return nil
}

// rank orders verdicts best first, as Tune recommends.
func (j *judge) rank(vs []Verdict) {
	maxFalse := j.opts.MaxFalseParks
	slices.SortStableFunc(vs, func(a, b Verdict) int {
		fa, fb := a.FalseParks <= maxFalse, b.FalseParks <= maxFalse
		if fa != fb {
			if fa {
				return -1
			}
			return 1
		}
		if !fa { // none within the bound: the fewest false parks first
			if c := cmp.Compare(a.FalseParks, b.FalseParks); c != 0 {
				return c
			}
		}
		return cmp.Or(cmp.Compare(b.LoopsParked, a.LoopsParked), cmp.Compare(a.Spent, b.Spent), cmp.Compare(a.ToParkMean, b.ToParkMean),
			cmp.Compare(a.FalseParks, b.FalseParks), cmp.Compare(len(changed(a.Config)), len(changed(b.Config))))
	})
}

// front returns the verdicts no other verdict dominates, in their order;
// of verdicts equal in the three measures, the first.
func front(vs []Verdict) []Verdict {
	var out []Verdict
	for i := range vs {
		keep := true
		for k := range vs {
			if vs[k].dominates(&vs[i]) {
				keep = false
				break
			}
		}
		for k := range out {
			if out[k].Spent == vs[i].Spent && out[k].ToParkMean == vs[i].ToParkMean && out[k].FalseParks == vs[i].FalseParks {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, vs[i])
		}
	}
	return out
}
