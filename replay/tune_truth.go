package replay

import "time"

// DefaultSoundRun is the length of a run without a failure that ends a
// key's failures, as Tune judges a history: TuneOptions.SoundRun's default.
const DefaultSoundRun = time.Hour

// episode is a key's failures between two sound runs: a run that lasted
// the sound run's length without failing, or that was still under way and
// ready at the end of the history.
type episode struct {
	key       int32
	first     time.Time // the first failure
	last      time.Time // the last failure
	failures  int
	recovered time.Time // when the sound run after it had lasted long enough, or proved ready; zero: never
}

// loop reports whether e is a real crash loop: failures that did not stop
// on their own within the horizon. An episode of one failure is none.
func (e *episode) loop(horizon time.Duration) bool {
	return e.failures >= 2 && (e.recovered.IsZero() || e.recovered.Sub(e.first) > horizon)
}

// truth is what the history shows of each key, whatever a policy does:
// its failure episodes, the real crash loops among them, and for each
// record that is a failure (an exit that failed, or a start while a run
// was under way, which a Replayer judges as a failure) the loop it is part
// of.
type truth struct {
	episodes  []episode
	loops     []int   // the episodes that are real crash loops, in order of their first failure
	loopOf    []int32 // per record: the index into loops of the loop its failure is part of; -1 for none
	recovered int     // episodes of two failures or more that stopped on their own within the horizon
}

// truthOf reads the episodes of h. A run is sound when it lasts sound
// without failing (it may end in a failure after that: the failure begins
// a new episode), or is under way at the end of the history and ready or
// that long.
func truthOf(h *History, horizon, sound time.Duration) *truth {
	type keyRun struct {
		open  bool
		start time.Time
		ready time.Time
		cur   int // the episode under way; -1 none
	}
	tr := &truth{loopOf: make([]int32, len(h.recs))}
	runs := make([]keyRun, len(h.keys))
	for i := range runs {
		runs[i].cur = -1
	}
	epOf := make([]int32, len(h.recs))
	soundEnd := func(k *keyRun, t time.Time) {
		if k.open && t.Sub(k.start) >= sound && k.cur >= 0 {
			tr.episodes[k.cur].recovered = k.start.Add(sound)
			k.cur = -1
		}
	}
	fail := func(k *keyRun, key int32, t time.Time) int32 {
		soundEnd(k, t)
		if k.cur < 0 {
			tr.episodes = append(tr.episodes, episode{key: key, first: t})
			k.cur = len(tr.episodes) - 1
		}
		e := &tr.episodes[k.cur]
		e.last = t
		e.failures++
		return int32(k.cur)
	}
	var end time.Time
	for i := range h.recs {
		r := &h.recs[i]
		t := time.Unix(r.sec, int64(r.nsec))
		end = t
		k := &runs[r.key]
		epOf[i] = -1
		switch Event(r.event) {
		case Start:
			if k.open {
				epOf[i] = fail(k, r.key, t)
			}
			k.open, k.start, k.ready = true, t, time.Time{}
		case Exit:
			if r.flags&recFailed != 0 {
				epOf[i] = fail(k, r.key, t)
			} else {
				soundEnd(k, t)
			}
			k.open = false
		case Stop:
			soundEnd(k, t)
			k.open = false
		case Ready:
			if k.open && k.ready.IsZero() {
				k.ready = t
			}
		}
	}
	for i := range runs {
		k := &runs[i]
		if !k.open || k.cur < 0 {
			continue
		}
		switch {
		case !k.ready.IsZero():
			tr.episodes[k.cur].recovered = k.ready
		case end.Sub(k.start) >= sound:
			tr.episodes[k.cur].recovered = k.start.Add(sound)
		}
	}
	loopIndex := make([]int32, len(tr.episodes))
	for i := range tr.episodes {
		e := &tr.episodes[i]
		loopIndex[i] = -1
		switch {
		case e.loop(horizon):
			loopIndex[i] = int32(len(tr.loops))
			tr.loops = append(tr.loops, i)
		case e.failures >= 2:
			tr.recovered++
		}
	}
	for i, ep := range epOf {
		tr.loopOf[i] = -1
		if ep >= 0 {
			tr.loopOf[i] = loopIndex[ep]
		}
	}
	return tr
}
