package crashloop

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"time"
)

// The language of the composed judgment (judge.go): what a Supervisor asks
// of it and what it answers, alone or through a shared layer.

// Ending is how a run ended, as a Supervisor's judgment tells them apart.
// Its zero value is not an ending; String returns the names below.
type Ending int

// The endings of a run.
const (
	// EndingClean: the run returned nil and supervision ends.
	EndingClean Ending = iota + 1
	// EndingPermanent: Permanent(err); the key parks at once.
	EndingPermanent
	// EndingFailedStart: a failure before the run was healthy; the budget
	// judges it.
	EndingFailedStart
	// EndingCrash: a failure after a healthy run; the chain judges it.
	EndingCrash
	// EndingPlanned: Restart(err), or a clean exit after a healthy run
	// with RestartOnCleanExit; no budget, and the chain ends.
	EndingPlanned
)

// String returns "clean", "permanent", "failed_start", "crash" or "planned".
func (e Ending) String() string {
	switch e {
	case EndingClean:
		return "clean"
	case EndingPermanent:
		return "permanent"
	case EndingFailedStart:
		return "failed_start"
	case EndingCrash:
		return "crash"
	case EndingPlanned:
		return "planned"
	}
	return "Ending(" + strconv.Itoa(int(e)) + ")"
}

// Judgment is what a Supervisor asks about the end of one run of a key:
// the part of its decision that the guards' state settles (see Guards). A
// shared layer takes it whole, in one atomic step. It is a plain value; its
// zero value is not a judgment a Supervisor makes (it has no key and no
// Ending).
type Judgment struct {
	Key         string
	Ending      Ending
	Healthy     bool      // the run was healthy: the respawn window is cleared first
	Incarnation string    // what ran under the key; the chain counts per incarnation
	Cause       string    // the failure's text, kept with a park
	Now         time.Time // the Supervisor's reading of its clock
	// Members and Failing count the fleet members and failing members,
	// leaving out the key judged: a park judges the failing fraction with
	// them and the parked key. A shared layer counts the deployment's.
	Members, Failing int
}

// Verdict is what a judgment decided and committed: everything the
// Supervisor needs to act on it and to announce it. It is a plain value;
// its zero value decides nothing (no park, no hold: a restart at once).
type Verdict struct {
	// Now is the time the step decided at: the Judgment's, or a shared
	// ledger's own clock when it reads its server's time.
	Now time.Time
	// Park is the key's park: made by this step when NewPark is set, else
	// found (the key was already parked, and nothing was recorded).
	Park    *ParkedError
	NewPark bool
	// Attempt is, for a failed start, the respawn's number in the budget's
	// window.
	Attempt int
	// Restarts is the key's count of restarts since it was first run or
	// last resumed, this one included.
	Restarts int
	// Held reports that the fleet breaker holds the restart; Wait is then
	// how long until the breaker re-arms, or (from Proceed) until the
	// restart's turn to leave. A Proceed verdict that is not Held
	// releases the restart.
	Held bool
	Wait time.Duration
	// Tripped and Rearmed are set when this step tripped or re-armed the
	// fleet breaker: exactly one step does each, whichever replica it
	// serves.
	Tripped *FleetChange
	Rearmed *FleetChange
}


// Guards is the four guards of a SupervisorConfig composed over the guard
// state of many keys: the judgment a Supervisor makes, without its records
// or its events. A Supervisor judges with the same code; package share's
// MemoryLedger keeps one for the replicas it serves, and redisstore's
// script is its second form. Its methods are not safe for concurrent use:
// the caller serializes them. Time never runs backwards for it.
type Guards struct {
	rules rules
	cfg   SupervisorConfig
	tb    timebase
	keys  map[string]*keyGuards
	book  fleetBook
}

// NewGuards returns empty Guards judging by cfg, or its *ConfigError.
func NewGuards(cfg SupervisorConfig) (*Guards, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.clone()
	return &Guards{rules: rulesOf(cfg), cfg: cfg, tb: timebase{base: time.Unix(0, 0), high: math.MinInt64},
		keys: map[string]*keyGuards{}}, nil
}

// at returns the time a step at now uses.
func (g *Guards) at(now time.Time) int64 { return g.tb.at(g.tb.off(now)) }

// rearm re-arms the fleet breaker if its cooldown has ended at t.
func (g *Guards) rearm(t int64) *FleetChange {
	return g.rules.rearm(&g.book, t, func(f func(*keyGuards)) {
		for _, k := range g.keys {
			f(k)
		}
	})
}

// Judge decides j at j.Now and commits it. A park it makes is the
// Verdict's Park, which the caller may number (ParkedError.Version).
func (g *Guards) Judge(j Judgment) Verdict {
	t := g.at(j.Now)
	rearmed := g.rearm(t)
	k := g.keys[j.Key]
	if k == nil {
		k = &keyGuards{}
		g.keys[j.Key] = k
	}
	v := g.rules.judge(k, &g.book, &j, t, j.Now)
	v.Rearmed = rearmed
	return v
}

// Proceed asks at now whether the held restart of key may go.
func (g *Guards) Proceed(key string, now time.Time) Verdict {
	t := g.at(now)
	rearmed := g.rearm(t)
	v := Verdict{Now: now}
	if k := g.keys[key]; k != nil {
		v = g.rules.proceed(k, &g.book, t, now)
	}
	v.Rearmed = rearmed
	return v
}

// Park returns the park of key, nil when it is not parked.
func (g *Guards) Park(key string) *ParkedError {
	if k := g.keys[key]; k != nil {
		return k.park
	}
	return nil
}

// SetPark parks key with pe, as written back, counting nothing.
func (g *Guards) SetPark(pe *ParkedError) {
	k := g.keys[pe.Key]
	if k == nil {
		k = &keyGuards{}
		g.keys[pe.Key] = k
	}
	k.park = pe
}

// Resume clears the park of key and everything its guards counted.
func (g *Guards) Resume(key string) {
	if k := g.keys[key]; k != nil {
		k.resume()
	}
}

// Forget drops every trace of key.
func (g *Guards) Forget(key string) { delete(g.keys, key) }

// Parked returns the park of every key, sorted by key.
func (g *Guards) Parked() []*ParkedError {
	var out []*ParkedError
	for _, k := range g.keys {
		if k.park != nil {
			out = append(out, k.park)
		}
	}
	slices.SortFunc(out, func(a, b *ParkedError) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// Fleet returns the status of the fleet breaker at now, with failing and
// total as its counts of keys. It changes nothing: a breaker due to
// re-arm reads as re-armed. With the fleet breaker off it is the zero
// FleetStatus.
func (g *Guards) Fleet(now time.Time, failing, total int) FleetStatus {
	if g.cfg.Fleet == nil {
		return FleetStatus{}
	}
	t := g.at(now)
	f := copyFleet(&g.book.f)
	g.cfg.Fleet.rearm(&f, t)
	fs := g.cfg.Fleet.status(&f, t, &g.tb)
	fs.TotalChannels, fs.FailingChannels = total, failing
	return fs
}
