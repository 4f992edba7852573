package crashloop

import (
	"slices"
	"sync"
	"time"
)

// keyed is the per-key state of RespawnBudget and ChainDetector: a Go map
// of entries under one lock, with the object's timebase, and a reclaimer
// that drops idle entries in amortized O(1) per call without a goroutine.
//
// One lock per object, not shards: a restart is rare next to the ~30 ns a
// call holds the lock, so calls on different keys do not queue in practice,
// and time stays simple to state (it never runs backwards for the object).
type keyed[E any] struct {
	mu    sync.Mutex
	tb    timebase
	m     map[string]*E
	peak  int // the most entries m held since it was made
	calls int // calls since the last sweep
}

func (k *keyed[E]) init(c Clock) {
	k.tb = newTimebase(c)
	k.m = make(map[string]*E)
}

// lockAt locks the object and returns the time the call uses for now (see
// timebase.at). The conversion runs before the lock is taken.
func (k *keyed[E]) lockAt(now time.Time) int64 {
	off := k.tb.off(now)
	k.mu.Lock()
	return k.tb.at(off)
}

// getOrAdd returns the entry of key, creating a zero one if there is none.
// The lock must be held.
func (k *keyed[E]) getOrAdd(key string) *E {
	e := k.m[key]
	if e == nil {
		e = new(E)
		k.m[key] = e
		k.peak = max(k.peak, len(k.m))
	}
	return e
}

// sweepEvery is the fewest calls between two sweeps.
const sweepEvery = 64

// sweep counts a call and, once the object has seen as many calls as it
// has entries (and at least sweepEvery), deletes every entry idle reports as
// reclaimable. Each entry is then looked at once per len(entries) calls, so
// sweeping costs amortized O(1) per call. A map that shrank to a quarter of
// its peak is made anew, since a Go map never gives back its buckets. The
// lock must be held.
func (k *keyed[E]) sweep(idle func(*E) bool) {
	k.calls++
	if k.calls < sweepEvery || k.calls < len(k.m) {
		return
	}
	k.calls = 0
	for key, e := range k.m {
		if idle(e) {
			delete(k.m, key)
		}
	}
	k.shrink()
}

// remove deletes key. The lock must be held.
func (k *keyed[E]) remove(key string) {
	delete(k.m, key)
	k.shrink()
}

// shrink makes the map anew when it holds a quarter of its peak or less,
// so that memory follows the keys that are left.
func (k *keyed[E]) shrink() {
	if k.peak >= 4*sweepEvery && len(k.m) <= k.peak/4 {
		k.m = shrunk(k.m)
		k.peak = len(k.m)
	}
}

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
	for key, e := range k.m {
		if match(e) {
			out = append(out, key)
		}
	}
	k.mu.Unlock()
	slices.Sort(out)
	return out
}

// base returns a copy of the timebase, read under the lock: a restore reads
// a document against it.
func (k *keyed[E]) base() timebase {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.tb
}

// replace installs m as the whole state of the object (a restore) and
// raises the latest time used to latest.
func (k *keyed[E]) replace(m map[string]*E, latest int64) {
	k.mu.Lock()
	k.m, k.peak, k.calls = m, len(m), 0
	k.tb.raise(latest)
	k.mu.Unlock()
}
