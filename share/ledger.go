package share

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crashloopguard/crashloop"
)

// Ledger keeps the guard state of a Supervisor's keys and its fleet breaker
// where several Supervisors can share it: the replicas of one service. Each
// method is one atomic step, bounded in time, that returns as soon as its ctx
// ends; a Supervisor decides alone while its ledger fails. A ledger that
// finds its server lost its state returns a *StateLostError, having changed
// nothing. A Ledger is used by one Supervisor and must be safe for concurrent
// use. docs/ledger.md has the whole contract; package redisstore of this
// module has one on Redis, and MemoryLedger is the reference.
type Ledger interface {
	// Open binds the ledger to the configuration of the Supervisor that
	// uses it, before any other call. notify, when the ledger can learn of
	// the changes other Supervisors make, is called with each park or
	// resume of a key (from any goroutine; it does not block). It may also
	// be called with changes this Supervisor made, and with changes told
	// before: a Supervisor takes only a change whose Version is newer than
	// the one it knows for the key. A ledger that finds, outside a call,
	// that its server lost its state tells it with a Change whose
	// StateLost is set.
	Open(cfg crashloop.SupervisorConfig, notify func(Change)) error
	// Lookup returns key as it stands: its Version and its Park (nil when
	// it is not parked).
	Lookup(ctx context.Context, key string) (Change, error)
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
	Resume(ctx context.Context, key string, version int64, now time.Time) (*crashloop.ParkedError, int64, error)
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
	Restore(ctx context.Context, parks []*crashloop.ParkedError) ([]Restored, error)
	// Parked returns the parks of every key, sorted by key.
	Parked(ctx context.Context) ([]*crashloop.ParkedError, error)
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
	// FailingKeys and Keys are the failing keys and the live keys of the
	// deployment (see Member), counted now: not the counts a park last
	// noted (which the trip's event carries).
	Fleet(ctx context.Context, now time.Time) (crashloop.FleetStatus, error)
}

// Change is a transition of a key (a park, a resume, a forget), or the key
// as it stands, as a Ledger tells of it. Every transition of a key takes
// the next Version of the ledger, so of two changes of a key the one with
// the higher Version is the newer. It is a plain value.
type Change struct {
	Key     string
	Version int64                  // the key's version: its last transition's, 0 for none
	Park    *crashloop.ParkedError // the key's park; nil: it was resumed or forgotten
	// Forgotten tells a forget of a parked key from a resume, where the
	// ledger knows (a notice does; a lookup does not).
	Forgotten bool
	// StateLost, when set, tells no change of a key (Key is empty) but
	// that the ledger found, outside any call, that its server lost its
	// state: the layer writes back the parks it knows at once, as when a
	// call returns the *StateLostError.
	StateLost *StateLostError
}

// Restored is what Ledger.Restore did with one park: whether it wrote it,
// and its key as it stands after the step (the park written, with its new
// Version, or the state that kept it from being written). It is a plain
// value.
type Restored struct {
	Change
	Written bool
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
	notify  func(Change)
	mine    map[string]struct{} // the keys this replica counts as members; st.mu guards it
	closed  bool                // Close was called; st.mu guards it
}

// memoryState is what the replicas of a MemoryLedger share.
type memoryState struct {
	mu       sync.Mutex
	g        guards
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
	st := &memoryState{live: map[string]int{}, ver: map[string]int64{}, claims: map[int64]string{}}
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
func (l *MemoryLedger) Open(cfg crashloop.SupervisorConfig, notify func(Change)) error {
	st := l.st
	st.mu.Lock()
	defer st.mu.Unlock()
	l.notify = notify
	if st.g == nil {
		g, err := newGuards(cfg)
		if err != nil {
			return err
		}
		st.g = g
	}
	return nil
}

// tell passes a change of key to every replica but from.
func (st *memoryState) tell(from *MemoryLedger, ch Change) {
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
func (st *memoryState) stands(key string) Change {
	return Change{Key: key, Version: st.ver[key], Park: st.g.Park(key)}
}

// changed is the refusal of a step on key that named another version.
// st.mu must be held.
func (st *memoryState) changed(key string) error {
	ch := st.stands(key)
	return &ChangedError{Key: key, Version: ch.Version, Park: ch.Park}
}

// Lookup returns key as it stands.
func (l *MemoryLedger) Lookup(_ context.Context, key string) (Change, error) {
	l.st.mu.Lock()
	defer l.st.mu.Unlock()
	return l.st.stands(key), nil
}

// Judge decides j at j.Now.
func (l *MemoryLedger) Judge(_ context.Context, j Judgment) (Verdict, error) {
	st := l.st
	st.mu.Lock()
	// the deployment's keys but the one judged: a park counts it, live and
	// failing, with them
	lb, fb := st.counts(j.Key)
	j.Members, j.Failing = st.liveN-b2i(lb), st.failingN-b2i(fb)
	v := st.g.Judge(j)
	st.recount(j.Key, lb, fb)
	if v.NewPark {
		v.Park.Version = st.bump(j.Key)
	}
	st.mu.Unlock()
	if v.NewPark {
		st.tell(l, Change{Key: j.Key, Version: v.Park.Version, Park: v.Park})
	}
	return v, nil
}

// counts reports whether key counts as a live key of the deployment (a
// member of an open replica) and as a failing one (live and parked). st.mu
// must be held.
func (st *memoryState) counts(key string) (live, failing bool) {
	live = st.live[key] > 0
	return live, live && st.g.Park(key) != nil
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
	l.st.mu.Lock()
	defer l.st.mu.Unlock()
	return l.st.g.Proceed(key, now), nil
}

// Resume clears the park of key whose Version is version.
func (l *MemoryLedger) Resume(_ context.Context, key string, version int64, _ time.Time) (*crashloop.ParkedError, int64, error) {
	st := l.st
	st.mu.Lock()
	pe := st.g.Park(key)
	if pe == nil || pe.Version != version {
		err := st.changed(key)
		st.mu.Unlock()
		return nil, 0, err
	}
	lb, fb := st.counts(key)
	st.g.Forget(key) // a resume clears everything the guards counted
	st.recount(key, lb, fb)
	v := st.bump(key)
	st.mu.Unlock()
	st.tell(l, Change{Key: key, Version: v})
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
	parked := st.g.Park(key) != nil
	lb, fb := st.counts(key)
	st.g.Forget(key)
	st.recount(key, lb, fb)
	v := st.bump(key)
	st.mu.Unlock()
	if parked {
		st.tell(l, Change{Key: key, Version: v, Forgotten: true})
	}
	return v, nil
}

// Restore writes back parks decided alone, each only if its key's version
// is still the park's.
func (l *MemoryLedger) Restore(_ context.Context, parks []*crashloop.ParkedError) ([]Restored, error) {
	st := l.st
	var told []Change
	out := make([]Restored, 0, len(parks))
	st.mu.Lock()
	for _, pe := range parks {
		if st.ver[pe.Key] != pe.Version || st.g.Park(pe.Key) != nil {
			out = append(out, Restored{Change: st.stands(pe.Key)})
			continue
		}
		w := *pe
		w.Version = st.bump(pe.Key)
		st.claims[w.Version] = restored // its writer announced it when it parked the key alone: no claim wins
		lb, fb := st.counts(pe.Key)
		st.g.SetPark(&w)
		st.recount(pe.Key, lb, fb)
		ch := Change{Key: pe.Key, Version: w.Version, Park: &w}
		told = append(told, ch)
		out = append(out, Restored{Change: ch, Written: true})
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
func (l *MemoryLedger) Parked(context.Context) ([]*crashloop.ParkedError, error) {
	l.st.mu.Lock()
	defer l.st.mu.Unlock()
	var out []*crashloop.ParkedError
	for _, key := range slices.Sorted(maps.Keys(l.st.ver)) {
		if pe := l.st.g.Park(key); pe != nil {
			out = append(out, pe)
		}
	}
	return out, nil
}

// Fleet returns the status of the fleet breaker at now, with the live and
// failing keys of the deployment (see Ledger.Member). It changes nothing: a
// breaker due to re-arm reads as re-armed, and re-arms (with its event) at
// the next Judge or Proceed.
func (l *MemoryLedger) Fleet(_ context.Context, now time.Time) (crashloop.FleetStatus, error) {
	st := l.st
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.g.Fleet(now, st.failingN, st.liveN), nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
