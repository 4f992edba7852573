package crashloop

import (
	"hash/maphash"
	"sort"
	"sync"
)

// shardCount is the number of independently locked parts of a keyed table.
// Calls on different keys rarely share a lock, so a fleet of workers does not
// queue behind one mutex.
const shardCount = 64

// keyed is the per-key state table of RespawnBudget and ChainDetector: a map
// split into shards, each with its own lock, and a reclaimer that drops idle
// entries in amortized O(1) per call.
type keyed[E any] struct {
	seed   maphash.Seed
	_      [cacheLine]byte // keeps the read-only fields above off shards[0]'s lines
	shards [shardCount]shard[E]
}

// A shard is 128 bytes: its 32 bytes of fields and 96 of padding, so that
// the fields of two shards, written by every call on them, are never within
// one 64-byte cache line of each other, however the table is aligned.
// Without it, calls on different shards from different cores would contend
// for shared lines (false sharing).
type shard[E any] struct {
	mu    sync.Mutex
	m     map[string]*E
	calls int // calls since the last sweep
	peak  int // largest size since the map was last rebuilt
	_     [128 - 32]byte
}

// cacheLine is the size of a CPU cache line on common hardware.
const cacheLine = 64

func (k *keyed[E]) init() {
	k.seed = maphash.MakeSeed()
	for i := range k.shards {
		k.shards[i].m = make(map[string]*E)
	}
}

// lock locks and returns the shard of key.
func (k *keyed[E]) lock(key string) *shard[E] {
	s := &k.shards[maphash.String(k.seed, key)&(shardCount-1)]
	s.mu.Lock()
	return s
}

// entry returns the entry of key, creating it when create is set (nil
// otherwise). The shard must be locked.
func (s *shard[E]) entry(key string, create bool) *E {
	e := s.m[key]
	if e == nil && create {
		e = new(E)
		s.m[key] = e
		if len(s.m) > s.peak {
			s.peak = len(s.m)
		}
	}
	return e
}

// sweepEvery is the fewest calls between two sweeps of a shard.
const sweepEvery = 64

// due counts a call and reports whether the shard should be swept now: once
// it has seen as many calls as it has entries (and at least sweepEvery).
// Each entry is then looked at once per len(map) calls, so sweeping costs
// amortized O(1) per call. The shard must be locked.
func (s *shard[E]) due() bool {
	s.calls++
	if s.calls < sweepEvery || s.calls < len(s.m) {
		return false
	}
	s.calls = 0
	return true
}

// sweep deletes every entry idle reports as reclaimable. When the map has
// shrunk to a quarter of its peak it is rebuilt, because Go maps never give
// back their tables. The shard must be locked.
func (s *shard[E]) sweep(idle func(*E) bool) {
	for key, e := range s.m {
		if idle(e) {
			delete(s.m, key)
		}
	}
	if s.peak >= 4*sweepEvery && len(s.m) <= s.peak/4 {
		m := make(map[string]*E, len(s.m))
		for key, e := range s.m {
			m[key] = e
		}
		s.m, s.peak = m, len(m)
	}
}

// collect returns the sorted keys whose entries match.
func (k *keyed[E]) collect(match func(*E) bool) []string {
	var out []string
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		for key, e := range s.m {
			if match(e) {
				out = append(out, key)
			}
		}
		s.mu.Unlock()
	}
	sort.Strings(out)
	return out
}
