package crashloop

import (
	"cmp"
	"slices"
	"time"

	"github.com/crashloopguard/crashloop/internal/rolling"
	"github.com/crashloopguard/crashloop/internal/seam"
	"github.com/crashloopguard/crashloop/internal/settings"
)

// SharedCauseConfig configures the hold on a shared cause: once Keys
// distinct keys fail with one cause within Window, the fleet holds the
// restarts failing with it, spending no budget and parking nothing. Every
// ProbeEvery one held key goes as a probe; a healthy probe releases them
// all, spread over one ProbeEvery. A cause is the failure's text with
// numbers and ids normalized (for a program: its exit and last stderr
// line). Its zero value takes the defaults.
type SharedCauseConfig struct {
	Keys       int           // distinct keys failing with one cause that start a hold ("keys"); default 3, 2 to 1000
	Window     time.Duration // how recent their failures are ("window"); default 1m, > 0
	ProbeEvery time.Duration // how often a held key goes as a probe ("probe_every"); default 30s, > HealthyAfter
}

// defaultSharedCause returns SharedCauseConfig's defaults.
func defaultSharedCause() SharedCauseConfig {
	return SharedCauseConfig{Keys: 3, Window: time.Minute, ProbeEvery: 30 * time.Second}
}

func (c *SharedCauseConfig) settings() []settings.Setting {
	return []settings.Setting{
		settings.Int("keys", &c.Keys, func() string { return settings.Must(c.Keys >= 2 && c.Keys <= maxCauseKeys, ">= 2 and <= 1000") }),
		settings.Duration("window", &c.Window, func() string { return settings.Must(c.Window > 0, "> 0") }),
		settings.Duration("probe_every", &c.ProbeEvery, func() string { return settings.Must(c.ProbeEvery > 0, "> 0") }),
	}
}

// withDefaults returns c with its zero fields set to their defaults.
func (c SharedCauseConfig) withDefaults() SharedCauseConfig {
	d := defaultSharedCause()
	c.Keys = cmp.Or(c.Keys, d.Keys)
	c.Window = cmp.Or(c.Window, d.Window)
	c.ProbeEvery = cmp.Or(c.ProbeEvery, d.ProbeEvery)
	return c
}

const (
	maxCauseKeys = 1000 // SharedCauseConfig.Keys at most
	maxCauses    = 64   // causes a fleet tracks at once; the oldest not held is dropped
)

// causeState is what the fleet knows of one cause.
type causeState struct {
	cause  string
	recent []causeNote // the latest failure of each distinct key, oldest first
	held   bool
	probe  int64  // while held: when the next probe may go
	prober string // while held: the key let go as the last probe, until it fails
	probed int64  // when the prober went
	last   int64  // the latest failure noted
}

// causeNote is a key's latest failure with a cause.
type causeNote struct {
	key string
	t   int64
}

// causeBook is the causes a fleet tracks, at most maxCauses.
type causeBook struct{ list []*causeState }

// find returns the state of cause, nil if it is not tracked.
func (b *causeBook) find(cause string) *causeState {
	for _, c := range b.list {
		if c.cause == cause {
			return c
		}
	}
	return nil
}

// note records key's failure with cause at t, and returns the cause's
// state; nil when the book is full of held causes.
func (b *causeBook) note(sc *SharedCauseConfig, cause, key string, t int64) *causeState {
	c := b.find(cause)
	if c == nil {
		if len(b.list) >= maxCauses {
			i := -1
			for j, o := range b.list {
				if !o.held && (i < 0 || o.last < b.list[i].last) {
					i = j
				}
			}
			if i < 0 {
				return nil
			}
			b.list = slices.Delete(b.list, i, i+1)
		}
		c = &causeState{cause: cause}
		b.list = append(b.list, c)
	}
	c.last = t
	c.recent = slices.DeleteFunc(c.recent, func(n causeNote) bool { return n.key == key || rolling.Age(t, n.t) > uint64(sc.Window) })
	if len(c.recent) >= sc.Keys {
		c.recent = slices.Delete(c.recent, 0, len(c.recent)-sc.Keys+1)
	}
	c.recent = append(c.recent, causeNote{key, t})
	return c
}

// heldCauses returns the causes held, sorted; nil if none.
func (b *causeBook) heldCauses() []string {
	var held []string
	for _, c := range b.list {
		if c.held {
			held = append(held, c.cause)
		}
	}
	slices.Sort(held)
	return held
}

// holdCause judges a failure of the key of g with the shared cause of j at
// t: it reports whether the fleet holds its restart, and then commits the
// hold in g and in v (with the start of the cause's hold, if this failure
// began it). Nothing else is counted for a held restart.
func (ru *rules) holdCause(g *keyGuards, fb *fleetBook, j *seam.Judgment, t int64, v *verdict) bool {
	sc := ru.cause
	if sc == nil || j.Shared == "" || (j.Ending != seam.EndingFailedStart && j.Ending != seam.EndingCrash) {
		return false
	}
	c := fb.causes.note(sc, j.Shared, j.Key, t)
	if c == nil || (!c.held && len(c.recent) < sc.Keys) {
		return false
	}
	if !c.held {
		c.held, c.probe, c.prober = true, t+int64(sc.ProbeEvery), ""
		v.CauseHeld = &seam.CauseChange{Cause: c.cause, Keys: len(c.recent)}
	}
	fb.holds++
	g.held, g.release, g.cause = fb.holds, 0, c.cause
	v.Held, v.Cause, v.Wait = true, c.cause, ru.untilProbe(c, t)
	return true
}

// proceedCause asks whether the restart of g, held for its cause, may go at
// t: once the cause is released it leaves as the fleet breaker's held
// restarts do; while it is held, one key goes as a probe each ProbeEvery.
// It reports false when the cause no longer holds g.
func (ru *rules) proceedCause(g *keyGuards, fb *fleetBook, key string, t int64, v *verdict) bool {
	c := fb.causes.find(g.cause)
	if c == nil || !c.held {
		g.cause = ""
		return false
	}
	if t < c.probe {
		v.Held, v.Cause, v.Wait = true, c.cause, ru.untilProbe(c, t)
		return true
	}
	c.probe, c.prober, c.probed = t+int64(ru.cause.ProbeEvery), key, t
	g.held, g.release, g.cause = 0, 0, ""
	v.Probe = true
	return true
}

// releaseCause ends, at t, the hold on the first cause whose probe is
// healthy: its prober's run was judged healthy (healthy names the key of
// such a run, else ""), or it went HealthyAfter ago and has not failed
// since. Every key held for the cause is released, in the order it was
// held, spread evenly over one ProbeEvery from t, and the cause starts
// afresh. each must call its argument with the guard state of every key.
// It returns the release, or nil.
func (ru *rules) releaseCause(fb *fleetBook, healthy string, t int64, each func(func(*keyGuards))) *seam.CauseChange {
	if ru.cause == nil {
		return nil
	}
	var c *causeState
	for _, o := range fb.causes.list {
		if o.held && o.prober != "" && (o.prober == healthy || healthy == "" && ru.probe.healthy > 0 && rolling.Age(t, o.probed) >= uint64(ru.probe.healthy)) {
			c = o
			break
		}
	}
	if c == nil {
		return nil
	}
	var held []*keyGuards
	each(func(g *keyGuards) {
		if g.held != 0 && g.cause == c.cause {
			held = append(held, g)
		}
	})
	slices.SortFunc(held, func(a, b *keyGuards) int { return cmp.Compare(a.held, b.held) })
	gap := ru.cause.ProbeEvery / time.Duration(max(len(held), 1))
	for i, g := range held {
		g.cause, g.release = "", t+int64(time.Duration(i)*gap)
	}
	c.held, c.recent, c.prober, c.probe, c.probed = false, nil, "", 0, 0
	return &seam.CauseChange{Cause: c.cause, Keys: len(held)}
}

// probeFailed notes that a run of key ended before it was healthy: if it
// was a cause's probe, that probe failed.
func (ru *rules) probeFailed(fb *fleetBook, key string) {
	for _, c := range fb.causes.list {
		if c.prober == key {
			c.prober = ""
		}
	}
}

// untilProbe is how long a restart held for c waits at t before it asks
// again: until the next probe may go, or until the probe under way has
// run HealthyAfter (at least 1ns, so that a hold always waits).
func (ru *rules) untilProbe(c *causeState, t int64) time.Duration {
	next := c.probe
	if c.prober != "" && ru.probe.healthy > 0 {
		next = min(next, c.probed+int64(ru.probe.healthy))
	}
	return time.Duration(max(next-t, 1))
}
