package crashloop

import (
	"time"

	"github.com/crashloopguard/crashloop/internal/rolling"
	"github.com/crashloopguard/crashloop/internal/seam"
)

// The composed judgment's language (package internal/seam; exported by
// package share): a seam.Judgment in, how a run ended, and a verdict out.

// verdict is what the composed judgment decided and committed.
type verdict = seam.Verdict[*ParkedError, *fleetChange]

// fleetChange is a trip or a re-arm of the fleet breaker (share.FleetChange).
type fleetChange = seam.FleetChange

func init() {
	seam.NewGuards = func(cfg any) (any, error) { return newGuards(cfg.(SupervisorConfig)) }
}

// guards is the four guards of a SupervisorConfig composed over the guard
// state of many keys: the judgment a Supervisor makes (rules.judge),
// without its records or its events. Package share's MemoryLedger keeps
// one for the replicas it serves (through seam.NewGuards), and
// redisstore's script is its second form. Its methods are not safe for
// concurrent use: the caller serializes them. Time never runs backwards
// for it.
type guards struct {
	rules rules
	cfg   SupervisorConfig
	tb    timebase
	keys  map[string]*keyGuards
	book  fleetBook
}

// newGuards returns empty guards judging by cfg, or its *ConfigError.
func newGuards(cfg SupervisorConfig) (*guards, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.clone()
	return &guards{rules: rulesOf(cfg), cfg: cfg, tb: rolling.NewTimebase(time.Unix(0, 0)),
		keys: map[string]*keyGuards{}}, nil
}

// at returns the time a step at now uses.
func (g *guards) at(now time.Time) int64 { return g.tb.At(g.tb.Off(now)) }

// each calls f with the guard state of every key.
func (g *guards) each(f func(*keyGuards)) {
	for _, k := range g.keys {
		f(k)
	}
}

// rearm re-arms the fleet breaker if its cooldown has ended at t, then
// releases a shared cause whose probe is healthy (see rules.release); j is
// the run the step judges, or nil.
func (g *guards) rearm(j *seam.Judgment, t int64, v *verdict) {
	v.Rearmed = g.rules.rearm(&g.book, t, g.each)
	v.CauseReleased = g.rules.release(&g.book, j, t, g.each)
}

// Judge decides j at j.Now and commits it. A park it makes is the
// Verdict's Park, which the caller may number (ParkedError.Version).
func (g *guards) Judge(j seam.Judgment) verdict {
	t := g.at(j.Now)
	var pre verdict
	g.rearm(&j, t, &pre)
	k := g.keys[j.Key]
	if k == nil {
		k = &keyGuards{}
		g.keys[j.Key] = k
	}
	v := g.rules.judge(k, &g.book, &j, t, j.Now)
	v.Rearmed, v.CauseReleased = pre.Rearmed, pre.CauseReleased
	return v
}

// Proceed asks at now whether the held restart of key may go.
func (g *guards) Proceed(key string, now time.Time) verdict {
	t := g.at(now)
	var pre verdict
	g.rearm(nil, t, &pre)
	v := verdict{Now: now}
	if k := g.keys[key]; k != nil {
		v = g.rules.proceed(k, &g.book, key, t, now)
	}
	v.Rearmed, v.CauseReleased = pre.Rearmed, pre.CauseReleased
	return v
}

// Park returns the park of key, nil when it is not parked.
func (g *guards) Park(key string) *ParkedError {
	if k := g.keys[key]; k != nil {
		return k.park
	}
	return nil
}

// SetPark parks key with pe, as written back, counting nothing.
func (g *guards) SetPark(pe *ParkedError) {
	k := g.keys[pe.Key]
	if k == nil {
		k = &keyGuards{}
		g.keys[pe.Key] = k
	}
	k.park = pe
}

// Forget drops every trace of key, as a resume does.
func (g *guards) Forget(key string) { delete(g.keys, key) }

// Fleet returns the status of the fleet breaker at now, with failing and
// total as its counts of keys. It changes nothing: a breaker due to
// re-arm reads as re-armed. With the fleet breaker off it is the zero
// FleetStatus.
func (g *guards) Fleet(now time.Time, failing, total int) FleetStatus {
	if g.cfg.Fleet == nil {
		return FleetStatus{}
	}
	t := g.at(now)
	f := copyFleet(&g.book.f)
	g.cfg.Fleet.rearm(&f, t)
	fs := g.cfg.Fleet.status(&f, t, &g.tb)
	fs.Keys, fs.FailingKeys = total, failing
	fs.HeldCauses = g.book.causes.heldCauses()
	return fs
}
