package crashloop

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ErrStoreUnavailable is matched by the errors of a Supervisor that cannot
// reach its shared Ledger for an operation that must not be decided alone,
// such as a Resume: a resume that only this process knew of would not
// apply everywhere.
var ErrStoreUnavailable = errors.New("crashloop: shared store unavailable")

// ErrStoreMisconfigured is matched by a Ledger's errors that no retry
// fixes: the store refuses the credentials, lacks a permission, may evict
// the guard state, or is full. A Supervisor announces EventStoreMisconfigured
// (not EventStoreUnavailable) for such an error, once per cause, and decides
// alone until the ledger answers again, as during an outage. An error that
// matches it may also have a method StoreCause() string naming its cause
// (such as "noperm" or "eviction"); the Supervisor announces each distinct
// cause once, in Event.Reason, and otherwise uses the error's text.
var ErrStoreMisconfigured = errors.New("crashloop: shared store misconfigured")

// Ledger keeps the guard state of a Supervisor's keys and its fleet breaker
// where several Supervisors can share it: the replicas of one service. Each
// method is one atomic step, bounded in time, that returns as soon as its ctx
// ends; a Supervisor decides alone while its ledger fails. A ledger that
// finds its server lost its state returns a *StateLostError, having changed
// nothing. A Ledger is used by one Supervisor and must be safe for concurrent
// use. docs/ledger.md has the whole contract; package redisstore of this
// module has one on Redis.
type Ledger interface {
	// Open binds the ledger to the configuration of the Supervisor that
	// uses it, before any other call. notify, when the ledger can learn of
	// the changes other Supervisors make, is called with each park or
	// resume of a key (from any goroutine; it does not block). It may also
	// be called with changes this Supervisor made, and with changes told
	// before: a Supervisor takes only a change whose Version is newer than
	// the one it knows for the key. A ledger that finds, outside a call,
	// that its server lost its state tells it with a LedgerChange whose
	// StateLost is set.
	Open(cfg SupervisorConfig, notify func(LedgerChange)) error
	// Lookup returns key as it stands: its Version and its Park (nil when
	// it is not parked).
	Lookup(ctx context.Context, key string) (LedgerChange, error)
	// Judge decides j and commits the decision: see Verdict. A park it
	// makes takes the next version.
	Judge(ctx context.Context, j Judgment) (Verdict, error)
	// Proceed asks at now whether the held restart of key may go.
	Proceed(ctx context.Context, key string, now time.Time) (Verdict, error)
	// Resume clears the park of key whose Version is version, and
	// everything its guards counted, and returns the park it cleared and
	// the resume's own version. Any other park, and a key that is not
	// parked, it leaves as they are and returns a *ChangedError with the
	// key as it stands (matching ErrNotParked when it is not parked): a
	// resume names the park it clears, so that a resume delivered late
	// never clears a newer park.
	Resume(ctx context.Context, key string, version int64, now time.Time) (*ParkedError, int64, error)
	// Forget drops every trace of key if the key's version is version
	// (0 for a key with no transition), and returns the version of the
	// forget; else it changes nothing and returns a *ChangedError.
	Forget(ctx context.Context, key string, version int64) (int64, error)
	// Restore writes back parks a Supervisor decided alone while the ledger
	// could not be reached: each park is written, with the next version,
	// only if its key's version is still the park's Version (the version
	// the Supervisor knew when it parked the key), so a write-back never
	// re-parks a key resumed or parked since (nor over a park that
	// stands). It returns, for each park in order, whether it wrote it and
	// its key as it stands after the step. A Supervisor also calls it with
	// no parks to learn whether the ledger answers again: it must reach the
	// ledger all the same.
	Restore(ctx context.Context, parks []*ParkedError) ([]Restored, error)
	// Parked returns the parks of every key, sorted by key.
	Parked(ctx context.Context) ([]*ParkedError, error)
	// Claim reports whether this caller is the first to claim the
	// transition of the given version: of every caller, on every replica,
	// exactly one wins each version (a write-back's park is claimed by the
	// Restore that wrote it). The winner announces the transition, so each
	// is announced once, by whichever replica learns it first and claims.
	Claim(ctx context.Context, version int64) (bool, error)
	// Member tells the ledger that this Supervisor now counts key as a fleet
	// member (member true: it runs, waits for, holds or parks the key) or no
	// longer does. The Supervisor calls it with its own lock held: it returns at
	// once, doing no I/O and never failing. The fleet breaker's failing fraction
	// counts each key of the deployment once, whatever the number of replicas
	// that count it (docs/ledger.md).
	Member(key string, member bool)
	// Fleet returns the status of the fleet breaker at now. Its
	// FailingChannels and TotalChannels are the failing keys and the live
	// keys of the deployment (see Member), counted now: not the counts a
	// park last noted (which the trip's event carries).
	Fleet(ctx context.Context, now time.Time) (FleetStatus, error)
}

// LedgerChange is a transition of a key (a park, a resume, a forget), or
// the key as it stands, as a Ledger tells of it. Every transition of a key
// takes the next Version of the ledger, so of two changes of a key the one
// with the higher Version is the newer. It is a plain value.
type LedgerChange struct {
	Key     string
	Version int64        // the key's version: its last transition's, 0 for none
	Park    *ParkedError // the key's park; nil: it was resumed or forgotten
	// Forgotten tells a forget of a parked key from a resume, where the
	// ledger knows (a notice does; a lookup does not).
	Forgotten bool
	// StateLost, when set, tells no change of a key (Key is empty) but
	// that the ledger found, outside any call of the Supervisor, that its
	// server lost its state: the Supervisor writes back the parks it knows
	// at once, as when a call returns the *StateLostError.
	StateLost *StateLostError
}

// Restored is what Ledger.Restore did with one park: whether it wrote it,
// and its key as it stands after the step (the park written, with its new
// Version, or the state that kept it from being written). It is a plain
// value.
type Restored struct {
	LedgerChange
	Written bool
}

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
// the part of its decision that the guards' state settles. A Ledger takes
// it whole, in one atomic step. It is a plain value; its zero value is not
// a judgment a Supervisor makes (it has no key and no Ending).
type Judgment struct {
	Key         string
	Ending      Ending
	Healthy     bool      // the run was healthy: the respawn window is cleared first
	Incarnation string    // what ran under the key; the chain counts per incarnation
	Cause       string    // the failure's text, kept with a park
	Now         time.Time // the Supervisor's reading of its clock
	// Members and Failing count this Supervisor's fleet members and failing
	// members, leaving out the key judged: a park judges the failing
	// fraction with them and the parked key when the Supervisor decides
	// alone. A Ledger counts the deployment's keys instead (see
	// Ledger.Member) and does not use them.
	Members, Failing int
}

// Verdict is what a step of a Ledger decided and committed: everything the
// Supervisor needs to act on it and to announce it. It is a plain value;
// its zero value decides nothing (no park, no hold: a restart at once).
type Verdict struct {
	// Now is the time the step decided at: the Judgment's, or the ledger's
	// own clock for a shared ledger that reads its server's time.
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
	// fleet breaker: exactly one step does each, whichever Supervisor it
	// serves.
	Tripped *FleetChange
	Rearmed *FleetChange
}

// MemoryLedger is a Ledger in this process's memory: several Supervisors
// of one process share their guards through it (each with its own
// Replica), and it is the reference a ledger on a server is checked
// against. Its fleet breaker counts each key once, whatever the number of
// replicas that count it as a member (see Ledger.Member); a replica's
// members count until it is closed. It is safe for concurrent use. The
// zero value is not usable: create one with NewMemoryLedger.
type MemoryLedger struct {
	st      *memoryState
	replica string
	notify  func(LedgerChange)
	mine    map[string]struct{} // the keys this replica counts as members; st.mu guards it
	closed  bool                // Close was called; st.mu guards it
}

// memoryState is what the replicas of a MemoryLedger share.
type memoryState struct {
	mu       sync.Mutex
	opened   bool
	rules    rules
	cfg      SupervisorConfig
	tb       timebase
	keys     map[string]*keyGuards
	book     fleetBook
	live     map[string]int // per key, the open replicas that count it as a member
	liveN    int            // the keys of live
	failingN int            // the keys of live that are parked
	replicas []*MemoryLedger
	next     atomic.Int64
	seq      int64            // the last version given
	ver      map[string]int64 // each key's version: its last transition's
	claims   map[int64]string // the replica that claimed each version claimed (restored for a write-back's)
}

// NewMemoryLedger returns an empty MemoryLedger, reading time from the
// Judgment of each call.
func NewMemoryLedger() *MemoryLedger {
	st := &memoryState{keys: map[string]*keyGuards{}, live: map[string]int{}, ver: map[string]int64{},
		claims: map[int64]string{}}
	return st.replica()
}

func (st *memoryState) replica() *MemoryLedger {
	l := &MemoryLedger{st: st, replica: "r" + strconv.FormatInt(st.next.Add(1), 10), mine: map[string]struct{}{}}
	st.mu.Lock()
	st.replicas = append(st.replicas, l)
	st.mu.Unlock()
	return l
}

// Replica returns another handle on the same state, for another
// Supervisor: a replica.
func (l *MemoryLedger) Replica() *MemoryLedger { return l.st.replica() }

// Open binds the ledger to cfg. The replicas of one MemoryLedger must be
// opened with configurations whose guards are the same; the first one
// opened decides.
func (l *MemoryLedger) Open(cfg SupervisorConfig, notify func(LedgerChange)) error {
	st := l.st
	st.mu.Lock()
	defer st.mu.Unlock()
	l.notify = notify
	if !st.opened {
		st.opened, st.cfg, st.rules = true, cfg.clone(), rulesOf(cfg)
		st.tb = timebase{base: time.Unix(0, 0), high: minOffset}
	}
	return nil
}

const minOffset = -1 << 63

// at locks the state and returns the time the step uses for now.
func (st *memoryState) at(now time.Time) int64 {
	off := st.tb.off(now)
	st.mu.Lock()
	return st.tb.at(off)
}

// rearm re-arms the fleet breaker if its cooldown has ended at t, and
// returns the re-arm, if any. st.mu must be held.
func (st *memoryState) rearm(t int64) *FleetChange {
	return st.rules.rearm(&st.book, t, func(f func(*keyGuards)) {
		for _, g := range st.keys {
			f(g)
		}
	})
}

// tell passes a change of key to every replica but from.
func (st *memoryState) tell(from *MemoryLedger, ch LedgerChange) {
	st.mu.Lock()
	replicas := slices.Clone(st.replicas)
	st.mu.Unlock()
	for _, r := range replicas {
		if r != from && r.notify != nil {
			r.notify(ch)
		}
	}
}

// bump gives key the next version and returns it. st.mu must be held.
func (st *memoryState) bump(key string) int64 {
	st.seq++
	st.ver[key] = st.seq
	return st.seq
}

// stands returns key as it stands. st.mu must be held.
func (st *memoryState) stands(key string) LedgerChange {
	ch := LedgerChange{Key: key, Version: st.ver[key]}
	if g := st.keys[key]; g != nil {
		ch.Park = g.park
	}
	return ch
}

// changed is the refusal of a step on key that named another version.
// st.mu must be held.
func (st *memoryState) changed(key string) error {
	ch := st.stands(key)
	return &ChangedError{Key: key, Version: ch.Version, Park: ch.Park}
}

// Lookup returns key as it stands.
func (l *MemoryLedger) Lookup(_ context.Context, key string) (LedgerChange, error) {
	l.st.mu.Lock()
	defer l.st.mu.Unlock()
	return l.st.stands(key), nil
}

// Judge decides j at j.Now.
func (l *MemoryLedger) Judge(_ context.Context, j Judgment) (Verdict, error) {
	st := l.st
	t := st.at(j.Now)
	rearmed := st.rearm(t)
	g := st.keys[j.Key]
	if g == nil {
		g = &keyGuards{}
		st.keys[j.Key] = g
	}
	// the deployment's keys but the one judged: a park counts it, live and
	// failing, with them
	lb, fb := st.counts(j.Key)
	j.Members, j.Failing = st.liveN-b2i(lb), st.failingN-b2i(fb)
	v := st.rules.judge(g, &st.book, &j, t, j.Now)
	st.recount(j.Key, lb, fb)
	v.Rearmed = rearmed
	if v.NewPark {
		g.park.Version = st.bump(j.Key)
	}
	st.mu.Unlock()
	if v.NewPark {
		st.tell(l, LedgerChange{Key: j.Key, Version: v.Park.Version, Park: v.Park})
	}
	return v, nil
}

// counts reports whether key counts as a live key of the deployment (a
// member of an open replica) and as a failing one (live and parked). st.mu
// must be held.
func (st *memoryState) counts(key string) (live, failing bool) {
	live = st.live[key] > 0
	g := st.keys[key]
	return live, live && g != nil && g.park != nil
}

// recount moves the counts of live and failing keys from what key counted
// before a change (live, failing: see counts) to what it counts now. st.mu
// must be held.
func (st *memoryState) recount(key string, live, failing bool) {
	l, f := st.counts(key)
	st.liveN += b2i(l) - b2i(live)
	st.failingN += b2i(f) - b2i(failing)
}

// Member records whether this replica counts key as a fleet member. It
// does nothing after Close.
func (l *MemoryLedger) Member(key string, member bool) {
	st := l.st
	st.mu.Lock()
	defer st.mu.Unlock()
	_, had := l.mine[key]
	if l.closed || had == member {
		return
	}
	lb, fb := st.counts(key)
	if member {
		l.mine[key] = struct{}{}
		st.live[key]++
	} else {
		delete(l.mine, key)
		if st.live[key]--; st.live[key] == 0 {
			delete(st.live, key)
		}
	}
	st.recount(key, lb, fb)
}

// Close withdraws this replica's members from the fleet's count, as a
// replica on a server that closes or dies, and ignores its Member calls
// from then on. Its other methods still work. Close is idempotent and
// returns nil.
func (l *MemoryLedger) Close() error {
	st := l.st
	st.mu.Lock()
	defer st.mu.Unlock()
	l.closed = true
	for key := range l.mine {
		lb, fb := st.counts(key)
		if st.live[key]--; st.live[key] == 0 {
			delete(st.live, key)
		}
		st.recount(key, lb, fb)
	}
	clear(l.mine)
	return nil
}

// Proceed asks at now whether the held restart of key may go.
func (l *MemoryLedger) Proceed(_ context.Context, key string, now time.Time) (Verdict, error) {
	st := l.st
	t := st.at(now)
	defer st.mu.Unlock()
	rearmed := st.rearm(t)
	v := Verdict{Now: now}
	if g := st.keys[key]; g != nil {
		v = st.rules.proceed(g, &st.book, t, now)
	}
	v.Rearmed = rearmed
	return v, nil
}

// Resume clears the park of key whose Version is version.
func (l *MemoryLedger) Resume(_ context.Context, key string, version int64, _ time.Time) (*ParkedError, int64, error) {
	st := l.st
	st.mu.Lock()
	g := st.keys[key]
	if g == nil || g.park == nil || g.park.Version != version {
		err := st.changed(key)
		st.mu.Unlock()
		return nil, 0, err
	}
	pe := g.park
	lb, fb := st.counts(key)
	g.resume()
	st.recount(key, lb, fb)
	v := st.bump(key)
	st.mu.Unlock()
	st.tell(l, LedgerChange{Key: key, Version: v})
	return pe, v, nil
}

// Forget drops key if its version is version.
func (l *MemoryLedger) Forget(_ context.Context, key string, version int64) (int64, error) {
	st := l.st
	st.mu.Lock()
	if st.ver[key] != version {
		err := st.changed(key)
		st.mu.Unlock()
		return 0, err
	}
	g := st.keys[key]
	lb, fb := st.counts(key)
	delete(st.keys, key)
	st.recount(key, lb, fb)
	v := st.bump(key)
	st.mu.Unlock()
	if g != nil && g.park != nil {
		st.tell(l, LedgerChange{Key: key, Version: v, Forgotten: true})
	}
	return v, nil
}

// Restore writes back parks decided alone, each only if its key's version
// is still the park's.
func (l *MemoryLedger) Restore(_ context.Context, parks []*ParkedError) ([]Restored, error) {
	st := l.st
	var told []LedgerChange
	out := make([]Restored, 0, len(parks))
	st.mu.Lock()
	for _, pe := range parks {
		g := st.keys[pe.Key]
		if st.ver[pe.Key] != pe.Version || (g != nil && g.park != nil) {
			out = append(out, Restored{LedgerChange: st.stands(pe.Key)})
			continue
		}
		if g == nil {
			g = &keyGuards{}
			st.keys[pe.Key] = g
		}
		w := *pe
		w.Version = st.bump(pe.Key)
		st.claims[w.Version] = restored // its writer announced it when it parked the key alone: no claim wins
		lb, fb := st.counts(pe.Key)
		g.park = &w
		st.recount(pe.Key, lb, fb)
		ch := LedgerChange{Key: pe.Key, Version: w.Version, Park: &w}
		told = append(told, ch)
		out = append(out, Restored{LedgerChange: ch, Written: true})
	}
	st.mu.Unlock()
	for _, ch := range told {
		st.tell(l, ch)
	}
	return out, nil
}

// restored is the claim of a park Restore wrote: no replica's name, so
// every claim of it loses, its writer's included.
const restored = "-"

// Claim reports whether this caller is the first to claim version. A
// replica that claims again a version it won wins again, as a claim
// retried after its reply was lost must.
func (l *MemoryLedger) Claim(_ context.Context, version int64) (bool, error) {
	l.st.mu.Lock()
	defer l.st.mu.Unlock()
	holder, ok := l.st.claims[version]
	if !ok {
		holder = l.replica
		l.st.claims[version] = holder
	}
	return holder == l.replica, nil
}

// Parked returns the parks of every key, sorted by key.
func (l *MemoryLedger) Parked(context.Context) ([]*ParkedError, error) {
	l.st.mu.Lock()
	defer l.st.mu.Unlock()
	var out []*ParkedError
	for _, g := range l.st.keys {
		if g.park != nil {
			out = append(out, g.park)
		}
	}
	slices.SortFunc(out, func(a, b *ParkedError) int { return cmp.Compare(a.Key, b.Key) })
	return out, nil
}

// Fleet returns the status of the fleet breaker at now, with the live and
// failing keys of the deployment (see Ledger.Member). It changes nothing: a
// breaker due to re-arm reads as re-armed, and re-arms (with its event) at
// the next Judge or Proceed.
func (l *MemoryLedger) Fleet(_ context.Context, now time.Time) (FleetStatus, error) {
	st := l.st
	t := st.at(now)
	defer st.mu.Unlock()
	if st.cfg.Fleet == nil {
		return FleetStatus{}, nil
	}
	f := copyFleet(&st.book.f)
	st.cfg.Fleet.rearm(&f, t)
	fs := st.cfg.Fleet.status(&f, t, &st.tb)
	fs.TotalChannels, fs.FailingChannels = st.liveN, st.failingN
	return fs, nil
}
