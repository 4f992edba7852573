package replay

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"time"

	"github.com/crashloopguard/crashloop"
)

// A shared outage: one dependency of many keys is out, so that every start
// of each of them fails at once, with the same cause, until it is back.
// A crashloop policy judges the keys with one Supervisor, as one process
// supervising them all (or replicas sharing one ledger) does: its fleet
// breaker, its hold on a shared cause and each key's probe after a park
// all see every key. The simulation drives that Supervisor through
// DecideAt and ProceedAt in time order, key by key; it decides nothing
// itself. The policies of other systems judge each key alone.

// SharedOutage is a dependency shared by Keys keys and out for Outage
// from the keys' first starts. It is a plain value.
type SharedOutage struct {
	Outage time.Duration // > 0
	Keys   int           // >= 1
}

// String names the outage: "30s outage" or "30s outage over 10 keys".
func (o SharedOutage) String() string {
	if o.Keys > 1 {
		return fmt.Sprintf("%s outage over %d keys", Duration(o.Outage), o.Keys)
	}
	return Duration(o.Outage) + " outage"
}

// KeyOutcome is what a policy did with one key of a SharedOutage. It is a
// plain value.
type KeyOutcome struct {
	// Starts are the key's starts, from the first (0); the last is the
	// healthy one, if the key is Back. Under another system's policy,
	// every key's Starts are one slice (they are alike): read, do not
	// change it.
	Starts []time.Duration
	// Probes counts the starts that were probes: of the key's park
	// (probe_after), or of a hold on the shared cause (probe_every).
	Probes int
	// Held counts the restarts the fleet held (for the shared cause, or
	// by the breaker).
	Held int
	// Parked reports that the key was parked (any park; a probe may have
	// resumed it since); ParkedAt is when it first was.
	Parked   bool
	ParkedAt time.Duration
	// GaveUp reports that the key was parked with no probe to come: an
	// operator must resume it.
	GaveUp bool
	// Back reports that the key started after the outage's end, within
	// the horizon: BackAfter after that end. A key that is not back gave
	// up, or was still waiting at the horizon.
	Back      bool
	BackAfter time.Duration
}

// Restarts returns the starts of the key after its first, probes among them.
func (k KeyOutcome) Restarts() int { return max(len(k.Starts)-1, 0) }

// Outcome is what a policy did with a SharedOutage. It is a plain value.
type Outcome struct {
	Keys []KeyOutcome // in the keys' order
	// CauseHeld and CauseReleased are when the hold on the shared cause
	// first began and last ended; Tripped when the fleet breaker first
	// tripped. Each is negative if it did not.
	CauseHeld, CauseReleased, Tripped time.Duration
}

// GaveUp returns how many keys the policy gave up on, and when it gave
// up on the last of them (from the first start).
func (o Outcome) GaveUp() (n int, last time.Duration) {
	for _, k := range o.Keys {
		if k.GaveUp {
			n++
			last = max(last, k.ParkedAt)
		}
	}
	return n, last
}

// Parked returns how many keys were parked.
func (o Outcome) Parked() int {
	n := 0
	for _, k := range o.Keys {
		n += b2i(k.Parked)
	}
	return n
}

// Back returns how many keys are back, and the first and the last of
// them to be (after the outage's end).
func (o Outcome) Back() (n int, first, last time.Duration) {
	for _, k := range o.Keys {
		if !k.Back {
			continue
		}
		if n == 0 || k.BackAfter < first {
			first = k.BackAfter
		}
		last = max(last, k.BackAfter)
		n++
	}
	return n, first, last
}

// Totals returns the restarts (probes among them), probes and held
// restarts of every key together.
func (o Outcome) Totals() (restarts, probes, held int) {
	for _, k := range o.Keys {
		restarts += k.Restarts()
		probes += k.Probes
		held += k.Held
	}
	return restarts, probes, held
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// errDependency is the failure of every start during a shared outage:
// one text, so one cause, on every key.
var errDependency = errors.New("dial tcp 10.0.0.7:5432: connect: connection refused")

// SimulateOutage runs o under pol for horizon past the outage's end and
// returns what became of each key. It returns an error for an outage or
// a key count that is not > 0, or a horizon <= 0. It is safe for
// concurrent use.
func SimulateOutage(pol Policy, o SharedOutage, horizon time.Duration) (Outcome, error) {
	switch {
	case o.Outage <= 0:
		return Outcome{}, fmt.Errorf("replay: outage %v: must be > 0", o.Outage)
	case o.Keys < 1:
		return Outcome{}, fmt.Errorf("replay: keys %d: must be >= 1", o.Keys)
	case horizon <= 0:
		return Outcome{}, fmt.Errorf("replay: horizon %v: must be > 0", horizon)
	}
	if pol.config == nil { // another system's policy: each key alone, alike
		sim, err := Simulate(pol, Program{Outage: o.Outage}, o.Outage+horizon)
		if err != nil {
			return Outcome{}, err
		}
		k := KeyOutcome{Starts: sim.Starts, Back: sim.Recovered, BackAfter: sim.ExtraDelay, Parked: sim.GaveUp, ParkedAt: sim.GaveUpAt,
			GaveUp: sim.GaveUp}
		out := Outcome{Keys: make([]KeyOutcome, o.Keys), CauseHeld: -1, CauseReleased: -1, Tripped: -1}
		for i := range out.Keys {
			out.Keys[i] = k // every key alike: they share k.Starts
		}
		return out, nil
	}
	return simulateFleet(*pol.config, o, horizon, maxOutageSteps)
}

// maxOutageSteps bounds the decisions of one SimulateOutage of a
// crashloop policy (each keeps a start): about 40 MB of starts.
const maxOutageSteps = 5_000_000

// fleetKey is a key of a fleet simulation: what it does next, and when.
type fleetKey struct {
	name    string
	index   int
	out     KeyOutcome
	next    time.Duration // when it acts next
	proceed bool          // it asks ProceedAt then; else it starts
	parked  bool          // its last decision was a park
	cause   string        // the cause its restart is held for ("": none)
	done    bool          // back, or given up
}

// simulateFleet is SimulateOutage for a crashloop configuration: one
// Supervisor judges every key, in at most limit decisions.
func simulateFleet(cfg crashloop.SupervisorConfig, o SharedOutage, horizon time.Duration, limit int) (Outcome, error) {
	out := Outcome{CauseHeld: -1, CauseReleased: -1, Tripped: -1}
	base := time.Unix(1<<30, 0).UTC()
	held := map[string]bool{} // the causes held now
	var keys []*fleetKey
	byName := map[string]*fleetKey{}
	handle := func(ev crashloop.Event) {
		at := ev.Time.Sub(base)
		switch ev.Kind {
		case crashloop.EventFleetCauseHeld:
			held[ev.Cause] = true
			if out.CauseHeld < 0 {
				out.CauseHeld = at
			}
		case crashloop.EventFleetTripped:
			if out.Tripped < 0 {
				out.Tripped = at
			}
		case crashloop.EventFleetCauseReleased:
			delete(held, ev.Cause)
			out.CauseReleased = at
		case crashloop.EventRestartScheduled, crashloop.EventRespawnScheduled:
			if k := byName[ev.Key]; k != nil && ev.Held {
				k.cause = ev.Cause
			}
		}
	}
	s, err := crashloop.NewSupervisor(cfg, crashloop.WithEventHandler(crashloop.EventHandlerFunc(handle)))
	if err != nil {
		return out, err
	}
	q := make(fleetQueue, 0, o.Keys)
	for i := range o.Keys {
		k := &fleetKey{name: fmt.Sprintf("key-%02d", i+1), index: i}
		keys = append(keys, k)
		byName[k.name] = k
		q = append(q, k)
	}
	end := o.Outage + horizon
	// step lets k act at its next time.
	step := func(k *fleetKey) {
		t := k.next
		now := base.Add(t)
		if k.proceed {
			cause := k.cause
			d := s.ProceedAt(noWait, k.name, now)
			if d.Action != crashloop.ActionRestart {
				follow(k, d, t)
				return
			}
			// A restart that leaves a park, or a hold on a cause that
			// still holds, is a probe. It starts now.
			k.proceed, k.cause = false, ""
			if k.parked || (cause != "" && held[cause]) {
				k.out.Probes++
			}
			k.parked = false
			return
		}
		k.out.Starts = append(k.out.Starts, t)
		if t >= o.Outage {
			k.out.Back, k.out.BackAfter, k.done = true, t-o.Outage, true
			return
		}
		k.cause = ""
		d := s.DecideAt(noWait, k.name, crashloop.RunResult{Err: errDependency, Started: now}, now)
		if d.Action == crashloop.ActionHold {
			k.out.Held++
		}
		follow(k, d, t)
	}
	for steps := 0; len(q) > 0; {
		k := q[0] // the next to act: the earliest, the first key on a tie
		if k.done || k.next > end {
			heap.Pop(&q)
			continue
		}
		if steps++; steps > limit {
			return Outcome{}, fmt.Errorf("replay: %s takes more than %d decisions within the horizon: simulate fewer keys, a shorter outage or a shorter horizon", o, limit)
		}
		step(k)
		heap.Fix(&q, 0)
	}
	for _, k := range keys {
		out.Keys = append(out.Keys, k.out)
	}
	return out, nil
}

// fleetQueue orders the keys of a fleet simulation by when they act
// next, then by their order (container/heap).
type fleetQueue []*fleetKey

func (q fleetQueue) Len() int { return len(q) }
func (q fleetQueue) Less(i, j int) bool {
	return q[i].next < q[j].next || q[i].next == q[j].next && q[i].index < q[j].index
}
func (q fleetQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *fleetQueue) Push(x any)   { *q = append(*q, x.(*fleetKey)) }
func (q *fleetQueue) Pop() any {
	old := *q
	k := old[len(old)-1]
	*q = old[:len(old)-1]
	return k
}

// follow sets what k does after the decision d at t.
func follow(k *fleetKey, d crashloop.Decision, t time.Duration) {
	k.next = t + d.Wait
	switch d.Action {
	case crashloop.ActionRestart:
		k.proceed = false
	case crashloop.ActionHold:
		k.proceed = true
	default:
		var pe *crashloop.ParkedError
		if !errors.As(d.Err, &pe) || d.Wait <= 0 { // parked for good: an operator's
			if pe != nil && !k.out.Parked {
				k.out.Parked, k.out.ParkedAt = true, t
			}
			k.out.GaveUp, k.done = pe != nil, true
			return
		}
		if !k.out.Parked {
			k.out.Parked, k.out.ParkedAt = true, t
		}
		k.parked, k.proceed = true, true
	}
}

// probeMax is the cap of the interval between probes of c: ProbeMax, or
// by default 16 times ProbeAfter.
func probeMax(c crashloop.SupervisorConfig) time.Duration {
	if c.ProbeMax > 0 {
		return c.ProbeMax
	}
	return 16 * c.ProbeAfter
}

// sharedCause is the hold on a shared cause of c with its defaults; c's
// fleet holds one.
func sharedCause(c crashloop.SupervisorConfig) crashloop.SharedCauseConfig {
	sc := *c.Fleet.SharedCause
	sc.Keys = cmp.Or(sc.Keys, 3)
	sc.Window = cmp.Or(sc.Window, time.Minute)
	sc.ProbeEvery = cmp.Or(sc.ProbeEvery, 30*time.Second)
	return sc
}
