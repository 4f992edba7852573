package crashloop

import (
	"sort"
	"sync"
	"time"
)

// shardCount is the number of independently locked parts of a keyed table.
// Calls on different keys rarely share a lock, so a fleet of workers does not
// queue behind one mutex. More shards also make it likelier that the keys
// one core works on sit in shards that no other core writes: with 1,000 keys
// over two cores, 64 shards left the parallel calls no faster than serial
// ones (each call moved its shard's cache line between the cores), 256
// make them faster. The shards cost 32 KiB per table.
const shardCount = 256

// shardShift turns a key's hash into its shard: the top bits pick the shard,
// the low bits the slot in the shard's table.
const shardShift = 64 - 8 // 1<<8 == shardCount

// keyed is the per-key state table of RespawnBudget and ChainDetector: a
// hash table split into shards, each with its own lock, its own time mark
// and a reclaimer that drops idle entries in amortized O(1) per call. A call
// hashes its key once, locks one shard and writes only that shard's memory.
type keyed[E any] struct {
	hash   hasher
	_      [cacheLine]byte // keeps the read-only fields above off shards[0]'s lines
	shards [shardCount]shard[E]
}

// A shard is 128 bytes: its 64 bytes of fields and 64 of padding, so that
// the fields of two shards, written by every call on them, are never within
// one 64-byte cache line of each other, however the table is aligned.
// Without it, calls on different shards from different cores would contend
// for shared lines (false sharing).
type shard[E any] struct {
	mu    sync.Mutex
	mark  mark // latest time seen by a call on the shard
	tab   table[E]
	calls int // calls since the last sweep
	_     [128 - 64]byte
}

// cacheLine is the size of a CPU cache line on common hardware.
const cacheLine = 64

func (k *keyed[E]) init() {
	k.hash = newHasher()
	for i := range k.shards {
		k.shards[i].mark = newMark()
	}
}

// place returns the shard of key under hash and the hash its slot stores.
func place(hash hasher, key string) (int, uint64) {
	h := hash.hash(key)
	return int(h >> shardShift), slotHash(h)
}

// lock locks the shard of key and returns it with the key's slot hash.
func (k *keyed[E]) lock(key string) (*shard[E], uint64) {
	i, h := place(k.hash, key)
	s := &k.shards[i]
	s.mu.Lock()
	return s, h
}

// lockAt is lock for a call that reads time: it converts now on tl before
// taking the lock, and returns the time the call uses, now read through the
// shard's mark (see mark).
func (k *keyed[E]) lockAt(tl *timeline, key string, now time.Time) (*shard[E], uint64, int64) {
	off := tl.off(now)
	s, h := k.lock(key)
	return s, h, s.mark.at(off)
}

// get returns the entry of key (hash h, from lock), or nil. The shard must
// be locked.
func (s *shard[E]) get(h uint64, key string) *E {
	if n := s.tab.find(h, key); n != nil {
		return &n.val
	}
	return nil
}

// getOrAdd returns the entry of key (hash h, from lock), creating a zero one if
// there is none. The shard must be locked.
func (s *shard[E]) getOrAdd(h uint64, key string) *E {
	n := s.tab.find(h, key)
	if n == nil {
		n = s.tab.add(h, key)
	}
	return &n.val
}

// sweepEvery is the fewest calls between two sweeps of a shard.
const sweepEvery = 64

// due counts a call and reports whether the shard should be swept now: once
// it has seen as many calls as it has entries (and at least sweepEvery).
// Each entry is then looked at once per len(entries) calls, so sweeping
// costs amortized O(1) per call. The shard must be locked.
func (s *shard[E]) due() bool {
	s.calls++
	if s.calls < sweepEvery || s.calls < s.tab.len() {
		return false
	}
	s.calls = 0
	return true
}

// sweep deletes every entry idle reports as reclaimable, and gives back the
// memory of a table that shrank to an eighth. The shard must be locked.
func (s *shard[E]) sweep(idle func(*E) bool) {
	for i := range s.tab.slots {
		if n := s.tab.slots[i].n; n != nil && idle(&n.val) {
			s.tab.removeAt(i)
		}
	}
	s.tab.shrink()
}

// each calls f with every key and entry of the shard. The shard must be
// locked, and f must not add or remove keys.
func (s *shard[E]) each(f func(key string, e *E)) {
	for _, sl := range s.tab.slots {
		if sl.n != nil {
			f(sl.n.key, &sl.n.val)
		}
	}
}

// collect returns the sorted keys whose entries match.
func (k *keyed[E]) collect(match func(*E) bool) []string {
	var out []string
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		s.each(func(key string, e *E) {
			if match(e) {
				out = append(out, key)
			}
		})
		s.mu.Unlock()
	}
	sort.Strings(out)
	return out
}
