package crashloop

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/crashloopguard/crashloop/internal/rolling"
	"github.com/crashloopguard/crashloop/internal/stamp"
)

// record is everything a Supervisor knows of one key, changed under the
// Supervisor's lock: what it is doing with the key, the incarnation and the
// last error, and the state its guards judge by (the windows, the restart
// count, the park). With WithSharing, the guards' part is a mirror of what
// the shared state decided.
type record struct {
	keyGuards
	key         string
	state       KeyState
	since       time.Time // time of the last state change
	running     bool      // a Run, Wrap or Process is running the key
	runs        uint64    // numbers the key's default incarnations
	incarnation string
	lastErr     error
	prev        time.Duration // the curve's last wait, for curves that depend on it
	local       int           // restarts this Supervisor scheduled since the first run or the last resume (KeyStatus.LocalRestarts)
	probing     *ParkedError  // the park the key's run probes (see probing.go); nil if it is no probe
	probed      bool          // a healthy probe is resuming the key: its EventResumed says so
	nextProbe   time.Time     // while parked: when its next probe is due, as the last verdict said
}

// record returns the record of key, creating an exited one if there is
// none. s.mu must be held.
func (s *Supervisor) record(key string, now time.Time) *record {
	r := s.keys[key]
	if r == nil {
		r = &record{key: key, state: StateExited, since: now}
		s.keys[key] = r
		s.peak = max(s.peak, len(s.keys))
	}
	return r
}

// newIncarnation gives the key a fresh default incarnation.
func (r *record) newIncarnation(key string) {
	r.runs++
	r.incarnation = incarnationOf(key, r.runs)
}

// incarnationOf is the nth default incarnation of key: "KEY#N".
func incarnationOf(key string, n uint64) string { return key + "#" + strconv.FormatUint(n, 10) }

// resume clears the park and everything the guards counted, and the
// curve's last wait.
func (r *record) resume() {
	r.keyGuards.resume()
	r.prev, r.local, r.nextProbe, r.probing = 0, 0, time.Time{}, nil
}

// member reports whether a key in state st counts as a member of the fleet:
// a key that runs, waits to run again or is parked. A key that exited (a
// clean exit, an ended context) is no longer one.
func member(st KeyState) bool { return st != StateExited && st != "" }

// failing reports whether a key in state st counts as a failing member.
func failing(st KeyState) bool { return st == StateParked || st == StateNeedsHuman }

// setState moves r to st at now, keeping the counts of fleet members and
// failing members, which the fleet breaker shows as its noted state; the
// empty state removes r from them (Forget). Only a park judges the counts
// (see park): a count that changes otherwise never trips the breaker. A
// shared ledger is told when the key becomes a member or stops being one
// (Ledger.Member). s.mu must be held.
func (s *Supervisor) setState(r *record, st KeyState, now time.Time) {
	if st == r.state {
		return
	}
	if d := b2i(member(st)) - b2i(member(r.state)); d != 0 {
		s.members += d
		if s.share != nil {
			s.share.Member(r.key, d > 0)
		}
	}
	s.failing += b2i(failing(st)) - b2i(failing(r.state))
	r.state, r.since = st, now
	if s.cfg.Fleet != nil {
		s.book.f.failing, s.book.f.total = s.failing, s.members
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The snapshot document of a Supervisor (see docs/snapshot.md): the parts
// of its guards, each the document its standalone guard writes, and per key
// the record's own fields.

type supervisorDoc struct {
	Version int               `json:"version"`
	Kind    string            `json:"kind"`
	Budget  *budgetDoc        `json:"budget"`
	Chain   *chainDoc         `json:"chain,omitempty"`
	Fleet   *fleetDoc         `json:"fleet,omitempty"`
	Keys    map[string]keyDoc `json:"keys"`
}

type keyDoc struct {
	State       KeyState  `json:"state"`
	Incarnation string    `json:"incarnation,omitempty"`
	Runs        uint64    `json:"runs,omitempty"`
	Restarts    int       `json:"restarts,omitempty"`
	LastError   *string   `json:"last_error,omitempty"`
	Since       string    `json:"since"`
	Guard       *guardDoc `json:"guard,omitempty"`
	Hourly      *guardDoc `json:"hourly,omitempty"`
	NextProbe   string    `json:"next_probe,omitempty"` // a parked key's next probe (it may lie ahead)
	Probes      int       `json:"probes,omitempty"`     // probes let go since the park
}

// Snapshot returns the whole state of the Supervisor as a JSON document of
// kind "supervisor" (see SnapshotVersion for the format): per key its
// state, incarnation, restarts, last error, time of the last state change,
// respawn window, chain, per-key guard and hourly windows and park, and the
// fleet breaker. It is taken at one instant, under the lock every decision
// takes, so it is consistent across keys and guards; it is formatted after
// the lock is released. It changes nothing and fails only for a time that
// cannot be written and read back. It is safe for concurrent use.
func (s *Supervisor) Snapshot() ([]byte, error) {
	type entry struct {
		key string
		r   record
	}
	type state struct {
		entries []entry
		fleet   *fleetState
	}
	return takeSnapshot(&s.mu, &s.tb, func() state {
		st := state{entries: make([]entry, 0, len(s.keys))}
		for key, r := range s.keys {
			c := *r
			c.respawns, c.guard, c.hourly = rolling.Copy(&r.respawns), rolling.Copy(&r.guard), rolling.Copy(&r.hourly)
			st.entries = append(st.entries, entry{key, c})
		}
		if s.cfg.Fleet != nil {
			f := copyFleet(&s.book.f)
			st.fleet = &f
		}
		return st
	}, func(w *writer, st state) any {
		doc := &supervisorDoc{Version: SnapshotVersion, Kind: kindSupervisor, Keys: make(map[string]keyDoc, len(st.entries)),
			Budget: &budgetDoc{Version: SnapshotVersion, Kind: kindBudget, Keys: map[string]budgetKeyDoc{}}}
		if s.cfg.Chain != nil {
			doc.Chain = &chainDoc{Version: SnapshotVersion, Kind: kindChain, Keys: map[string]chainKeyDoc{}}
		}
		for _, e := range st.entries {
			r := &e.r
			kd := keyDoc{State: r.state, Incarnation: r.incarnation, Runs: r.runs, Restarts: r.restarts,
				LastError: errorText(r.lastErr), Since: w.wall(r.since)}
			if s.cfg.Guard != nil {
				kd.Guard = w.guard(&r.guard, s.cfg.Guard.MaxRestarts)
			}
			if s.cfg.HourlyCap > 0 {
				kd.Hourly = w.guard(&r.hourly, s.cfg.HourlyCap)
			}
			if r.park != nil && r.probe != 0 {
				kd.NextProbe, kd.Probes = w.wall(w.tb.Wall(r.probe)), r.probes
			}
			doc.Keys[e.key] = kd
			if r.respawns.Len() > 0 || r.prev != 0 || r.park != nil {
				bk := budgetKeyDoc{Respawns: w.times(&r.respawns), Parked: w.park(r.park)}
				if r.prev != 0 {
					bk.PrevBackoff = r.prev.String()
				}
				doc.Budget.Keys[e.key] = bk
			}
			if doc.Chain != nil && r.chain.inc != "" {
				doc.Chain.Keys[e.key] = w.chain(&r.chain, r.park != nil && r.park.Reason == ReasonNeedsHuman)
			}
		}
		doc.Budget.Latest = w.latest()
		if doc.Chain != nil {
			doc.Chain.Latest = w.latest()
		}
		if st.fleet != nil {
			doc.Fleet = w.fleet(st.fleet)
		}
		return doc
	})
}

// Restore is shorthand for RestoreAt(data, clock.Now()).
func (s *Supervisor) Restore(data []byte) error { return s.RestoreAt(data, s.o.clock.Now()) }

// RestoreAt replaces the whole state of the Supervisor with the snapshot in
// data (a document of kind "supervisor", see SnapshotVersion), read at now:
// parked and needs_human keys stay parked (Run refuses them with their
// *ParkedError until Resume), and windows, chains and the fleet breaker age
// from the times they hold. Parts for guards that this Supervisor has off
// are checked and ignored; guards it has on that the snapshot lacks start
// empty. A key that was running, in backoff or held is restored as exited
// (since now). A document it cannot restore returns an error matching
// ErrBadSnapshot and leaves the Supervisor unchanged; so does a Restore
// while a Run is in progress (an error matching ErrAlreadyRunning). It
// publishes no event and saves nothing. NewSupervisor calls it with the
// document of WithStore.
func (s *Supervisor) RestoreAt(data []byte, now time.Time) error {
	return restoreSnapshot(data, kindSupervisor, now, &s.mu, &s.tb, s.read, s.install)
}

// supervisorState is the state a Supervisor document holds.
type supervisorState struct {
	keys  map[string]*record
	fleet *fleetState
}

// install puts the state of a document in place, unless a key runs. s.mu
// must be held.
func (s *Supervisor) install(st *supervisorState) error {
	for _, key := range slices.Sorted(maps.Keys(s.keys)) {
		if s.keys[key].running {
			return fmt.Errorf("%w: %q: a Supervisor cannot be restored while it runs a key", ErrAlreadyRunning, key)
		}
	}
	old := s.keys
	s.keys, s.peak = st.keys, len(st.keys)
	if st.fleet != nil {
		s.book = fleetBook{f: *st.fleet}
	}
	s.members, s.failing = 0, 0
	for _, r := range s.keys {
		s.members += b2i(member(r.state))
		s.failing += b2i(failing(r.state))
	}
	if s.share != nil { // the layer learns the members that changed
		for key, r := range old {
			if n := s.keys[key]; member(r.state) && (n == nil || !member(n.state)) {
				s.share.Member(key, false)
			}
		}
		for key, r := range s.keys {
			if o := old[key]; member(r.state) && (o == nil || !member(o.state)) {
				s.share.Member(key, true)
			}
		}
	}
	return nil
}

// read checks every part of a Supervisor document against the
// Supervisor's configuration and returns the state to install and its
// latest time, read on tb.
func (s *Supervisor) read(doc *supervisorDoc, tb *timebase, now time.Time) (*supervisorState, int64, error) {
	const path = kindSupervisor
	st, latest := &supervisorState{keys: make(map[string]*record)}, tb.High
	if doc.Budget == nil {
		return nil, 0, badSnapshot("%s.budget: missing", path)
	}
	get := func(key string) *record {
		r := st.keys[key]
		if r == nil {
			r = &record{key: key, state: StateExited, since: now}
			st.keys[key] = r
		}
		return r
	}
	raise := func(off int64) { latest = max(latest, off) }

	// The keys' own fields first: the parts below may add keys a document
	// lists only there.
	r0, err := newReader(tb, now, "", path)
	if err != nil {
		return nil, 0, err
	}
	for _, key := range slices.Sorted(maps.Keys(doc.Keys)) {
		kd, kp := doc.Keys[key], fmt.Sprintf("%s.keys[%q]", path, key)
		r := get(key)
		if err := s.readKey(r, &kd, r0, tb, now, kp, raise); err != nil {
			return nil, 0, err
		}
	}

	bp := path + ".budget"
	if err := checkHeader(doc.Budget.Version, doc.Budget.Kind, kindBudget, bp); err != nil {
		return nil, 0, err
	}
	rb, err := newReader(tb, now, doc.Budget.Latest, bp)
	if err != nil {
		return nil, 0, err
	}
	raise(rb.latestOff)
	for _, key := range slices.Sorted(maps.Keys(doc.Budget.Keys)) {
		kd, kp := doc.Budget.Keys[key], fmt.Sprintf("%s.keys[%q]", bp, key)
		r := get(key)
		if r.respawns, r.prev, err = readBudgetKey(rb, kd, s.cfg.Budget.MaxRespawns, kp); err != nil {
			return nil, 0, err
		}
		if r.park, err = rb.park(key, kd.Parked, kp+".parked"); err != nil {
			return nil, 0, err
		}
	}

	if doc.Chain != nil {
		cp := path + ".chain"
		if err := checkHeader(doc.Chain.Version, doc.Chain.Kind, kindChain, cp); err != nil {
			return nil, 0, err
		}
		ctb, maxChain := tb, math.MaxInt
		if s.cfg.Chain == nil {
			ctb = nil // off here: check only
		} else {
			maxChain = s.cfg.Chain.MaxChain
		}
		rc, err := newReader(ctb, now, doc.Chain.Latest, cp)
		if err != nil {
			return nil, 0, err
		}
		for _, key := range slices.Sorted(maps.Keys(doc.Chain.Keys)) {
			cs, err := readChainKey(rc, doc.Chain.Keys[key], maxChain, fmt.Sprintf("%s.keys[%q]", cp, key))
			if err != nil {
				return nil, 0, err
			}
			if ctb != nil {
				get(key).chain = cs
				raise(rc.latestOff)
			}
		}
	}

	if s.cfg.Fleet != nil {
		st.fleet = &fleetState{}
	}
	if doc.Fleet != nil {
		ftb, limit := tb, math.MaxInt
		if s.cfg.Fleet == nil {
			ftb = nil
		} else {
			limit = s.cfg.Fleet.RestartsPerHour
		}
		f, latest, err := readFleet(doc.Fleet, ftb, limit, now, path+".fleet")
		if err != nil {
			return nil, 0, err
		}
		if ftb != nil {
			st.fleet = &f
			raise(latest)
		}
	}

	for key, r := range st.keys { // a park decides the state, whatever the document said
		switch {
		case r.park != nil && r.park.Reason == ReasonNeedsHuman:
			r.state = StateNeedsHuman
		case r.park != nil:
			r.state = StateParked
		case failing(r.state):
			return nil, 0, badSnapshot("%s.keys[%q].state: %q, but the key is not parked", path, key, r.state)
		}
		if err := s.readProbe(r, doc.Keys[key], tb, fmt.Sprintf("%s.keys[%q]", path, key)); err != nil {
			return nil, 0, err
		}
	}
	return st, latest, nil
}

// readKey reads the record's own fields of one key and its per-key guard
// windows.
func (s *Supervisor) readKey(r *record, kd *keyDoc, r0 *reader, tb *timebase, now time.Time, kp string, raise func(int64)) error {
	var err error
	if r.since, err = r0.time(kd.Since, kp+".since"); err != nil {
		return err
	}
	switch kd.State {
	case StateParked, StateNeedsHuman, StateExited:
		r.state = kd.State
	case StateRunning, StateBackoff, StateHeld: // nothing runs after a restore
		r.state, r.since = StateExited, now
	default:
		return badSnapshot("%s.state: unknown state %q", kp, kd.State)
	}
	if err := count(kd.Restarts, kp+".restarts"); err != nil {
		return err
	}
	r.incarnation, r.runs, r.restarts = kd.Incarnation, kd.Runs, kd.Restarts
	reason := ""
	if kd.State == StateNeedsHuman {
		reason = ReasonNeedsHuman
	}
	r.lastErr = restoreError(kd.LastError, reason)
	for _, g := range []struct {
		doc   *guardDoc
		limit int
		win   *window
		name  string
	}{{kd.Guard, guardLimit(s.cfg.Guard), &r.guard, ".guard"}, {kd.Hourly, s.cfg.HourlyCap, &r.hourly, ".hourly"}} {
		if g.doc == nil {
			continue
		}
		gtb, limit := tb, g.limit
		if limit == 0 { // off here: check only
			gtb, limit = nil, math.MaxInt
		}
		win, latest, err := readGuard(g.doc, gtb, limit, now, kp+g.name)
		if err != nil {
			return err
		}
		if gtb != nil {
			*g.win = win
			raise(latest)
		}
	}
	return nil
}

func guardLimit(g *GuardConfig) int {
	if g == nil {
		return 0
	}
	return g.MaxRestarts
}

// readProbe reads the probe schedule of a parked key: the document's, or,
// for a document without one (written with probes off), a first probe
// ProbeAfter after the park. With probes off it is checked and ignored.
func (s *Supervisor) readProbe(r *record, kd keyDoc, tb *timebase, kp string) error {
	var next time.Time
	if kd.NextProbe != "" {
		t, err := stamp.Parse(kd.NextProbe)
		if err != nil {
			return badSnapshot("%s.next_probe: %v", kp, err)
		}
		next = t
	}
	if kd.Probes < 0 {
		return badSnapshot("%s.probes: %d, below 0", kp, kd.Probes)
	}
	if r.park == nil || s.cfg.ProbeAfter <= 0 || !probed(r.park.Reason) {
		return nil
	}
	if next.IsZero() {
		next = r.park.Since.Add(s.cfg.ProbeAfter)
	}
	r.probe, r.probes, r.nextProbe = cmp.Or(tb.Off(next), 1), kd.Probes, next // 0 is "no probe"
	return nil
}
