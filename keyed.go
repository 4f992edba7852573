package crashloop

import (
	"slices"
	"sync"
	"time"
)

// keyed is the per-key state of RespawnBudget and ChainDetector: a Go map
// of entries under one lock, with the object's timebase, and a reclaimer
// that drops idle entries without a goroutine and without a pause.
//
// One lock per object, not shards: a restart is rare next to the tens of
// nanoseconds a call holds the lock, so calls on different keys do not
// queue in practice (docs/benchmarks.md measures it), and time stays simple
// to state: it never runs backwards for the object.
//
// The entries are also kept in a slice, in no particular order, which the
// reclaimer walks with a cursor: each call looks at one entry, so every
// entry is looked at once per len(entries) calls, and no call does more
// than one entry's work (a sweep of the whole map would hold the lock for
// as long as the map is large).
type keyed[E any] struct {
	mu     sync.Mutex
	tb     timebase
	m      map[string]*node[E]
	order  []*node[E] // every node, each at its index
	cursor int        // the next node the reclaimer looks at
	peak   int        // the most entries m held since it was made
}

// node is an entry with its key and its place in order.
type node[E any] struct {
	val E
	key string
	at  int
}

func (k *keyed[E]) init(c Clock) {
	k.tb = newTimebase(c)
	k.m = make(map[string]*node[E])
}

// lockAt locks the object and returns the time the call uses for now (see
// rolling.Timebase.At). The conversion runs before the lock is taken.
func (k *keyed[E]) lockAt(now time.Time) int64 {
	off := k.tb.Off(now)
	k.mu.Lock()
	return k.tb.At(off)
}

// get returns the entry of key, or nil. The lock must be held.
func (k *keyed[E]) get(key string) *E {
	if n := k.m[key]; n != nil {
		return &n.val
	}
	return nil
}

// getOrAdd returns the entry of key, creating a zero one if there is none.
// The lock must be held.
func (k *keyed[E]) getOrAdd(key string) *E {
	n := k.m[key]
	if n == nil {
		n = &node[E]{key: key, at: len(k.order)}
		k.m[key] = n
		k.order = append(k.order, n)
		k.peak = max(k.peak, len(k.m))
	}
	return &n.val
}

// reclaim looks at the entry under the cursor, deletes it if idle reports
// it holds nothing worth keeping, and moves the cursor on. It costs O(1),
// and each entry is looked at within two walks of len(entries) calls (a
// deletion moves the last entry under the cursor, behind it: it waits for
// the next walk, so that new keys, which go last, cannot hold the cursor
// in place). A table of reclaimFloor entries or fewer keeps them all: so
// few cost nothing worth the work. The lock must be held.
func (k *keyed[E]) reclaim(idle func(*E) bool) {
	if len(k.order) <= reclaimFloor {
		return
	}
	if k.cursor >= len(k.order) {
		k.cursor = 0
	}
	if n := k.order[k.cursor]; idle(&n.val) {
		k.remove(n.key)
	}
	k.cursor++
}

// remove deletes key. The lock must be held.
func (k *keyed[E]) remove(key string) {
	n := k.m[key]
	if n == nil {
		return
	}
	delete(k.m, key)
	last := len(k.order) - 1
	k.order[n.at] = k.order[last]
	k.order[n.at].at = n.at
	k.order[last] = nil
	k.order = k.order[:last]
	k.shrink()
}

// shrink makes the map and the slice anew when they hold a quarter of their
// peak or less, so that memory follows the keys that are left (a Go map
// never gives back its buckets).
func (k *keyed[E]) shrink() {
	if k.peak >= shrinkLeast && len(k.m) <= k.peak/4 {
		k.m = shrunk(k.m)
		k.order = slices.Clip(slices.Clone(k.order))
		k.peak = len(k.m)
	}
}

// reclaimFloor is the most entries a table keeps without reclaiming any.
const reclaimFloor = 64

// shrinkLeast is the smallest peak worth making a map anew for.
const shrinkLeast = 256

// shrunk returns a new map holding the entries of m.
func shrunk[V any](m map[string]V) map[string]V {
	n := make(map[string]V, len(m))
	for key, v := range m {
		n[key] = v
	}
	return n
}

// collect returns the sorted keys whose entries match.
func (k *keyed[E]) collect(match func(*E) bool) []string {
	var out []string
	k.mu.Lock()
	for key, n := range k.m {
		if match(&n.val) {
			out = append(out, key)
		}
	}
	k.mu.Unlock()
	slices.Sort(out)
	return out
}

// each calls f with every key and entry. The lock must be held, and f must
// not add or remove keys.
func (k *keyed[E]) each(f func(key string, e *E)) {
	for _, n := range k.order {
		f(n.key, &n.val)
	}
}

// install puts entries in place as the whole state of the object: the
// install of a restore (see restoreSnapshot), which never fails. The lock
// must be held.
func (k *keyed[E]) install(entries map[string]E) error {
	k.m = make(map[string]*node[E], len(entries))
	k.order = make([]*node[E], 0, len(entries))
	for key, e := range entries {
		n := &node[E]{val: e, key: key, at: len(k.order)}
		k.m[key] = n
		k.order = append(k.order, n)
	}
	k.cursor, k.peak = 0, len(k.m)
	return nil
}
