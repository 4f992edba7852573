package crashloop

// table is the hash table of one shard of a keyed table: string keys to
// entries, with open addressing and linear probing. Its caller hashes each
// key once (see keyed.lock) and uses the high bits to pick the shard and
// the table uses the low bits to pick the slot, so a call hashes its key
// once, where a Go map inside a shard would hash it a second time.
//
// A slot is 16 bytes: the key's hash and a pointer to its node, which holds
// the key and the entry (a node never moves, so a pointer to its entry
// stays valid under the shard's lock). A removed key leaves a tombstone
// that later probes step over and inserts reuse; the slots are rebuilt when
// keys and tombstones fill three quarters of them, or when the keys shrink
// to an eighth. Every operation is amortized O(1). The zero value is an
// empty table. It is not safe for concurrent use: the shard's lock guards
// it.
type table[E any] struct {
	slots []slot[E] // a power of two in length, or nil
	live  int       // keys held
	used  int       // slots that are not empty: keys and tombstones
}

type slot[E any] struct {
	hash uint64 // slotEmpty, slotDeleted, or the key's hash (see slotHash)
	n    *node[E]
}

type node[E any] struct {
	key string
	val E
}

const (
	slotEmpty   = 0
	slotDeleted = 1
	minSlots    = 8
)

// slotHash turns a key's hash into the hash a slot stores: never one of the
// two marks.
func slotHash(h uint64) uint64 {
	if h <= slotDeleted {
		h += slotDeleted + 1
	}
	return h
}

// find returns the node of key, whose slotHash is h, or nil.
func (t *table[E]) find(h uint64, key string) *node[E] {
	if t.live == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.hash == h && s.n.key == key {
			return s.n
		}
		if s.hash == slotEmpty { // a table always has an empty slot: the probe ends
			return nil
		}
	}
}

// add inserts key, whose slotHash is h and which must not be in the table,
// and returns its new node.
func (t *table[E]) add(h uint64, key string) *node[E] {
	if 4*(t.used+1) > 3*len(t.slots) {
		t.rebuild(t.live + 1)
	}
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.slots[i].hash > slotDeleted { // the first free slot: key is not further on
		i = (i + 1) & mask
	}
	if t.slots[i].hash == slotEmpty {
		t.used++
	}
	n := &node[E]{key: key}
	t.slots[i] = slot[E]{hash: h, n: n}
	t.live++
	return n
}

// remove deletes key, whose slotHash is h, if it is in the table.
func (t *table[E]) remove(h uint64, key string) {
	if t.live == 0 {
		return
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.hash == h && s.n.key == key {
			t.removeAt(int(i))
			return
		}
		if s.hash == slotEmpty {
			return
		}
	}
}

// removeAt deletes the key of slot i. When the next slot is empty no probe
// passes through slot i, so it becomes empty too, and so do the tombstones
// right before it; otherwise it becomes a tombstone. Only slots at or
// before i change, so a forward scan may remove as it goes.
func (t *table[E]) removeAt(i int) {
	mask := len(t.slots) - 1
	t.live--
	if t.slots[(i+1)&mask].hash != slotEmpty {
		t.slots[i] = slot[E]{hash: slotDeleted}
		return
	}
	t.slots[i] = slot[E]{}
	t.used--
	for j := (i - 1) & mask; j != i && t.slots[j].hash == slotDeleted; j = (j - 1) & mask {
		t.slots[j].hash = slotEmpty
		t.used--
	}
}

// shrink rebuilds the slots when the keys fill at most an eighth of them,
// and drops them when there are no keys (Go maps never give back their
// tables; this one does).
func (t *table[E]) shrink() {
	if t.live == 0 && t.slots != nil || len(t.slots) > minSlots && 8*t.live <= len(t.slots) {
		t.rebuild(t.live)
	}
}

// rebuild lays the keys out afresh, without tombstones, in the fewest slots
// (at least minSlots, a power of two) that leave room for need keys at half
// load, or in none when need is 0.
func (t *table[E]) rebuild(need int) {
	if need == 0 {
		t.slots, t.used = nil, 0 // nothing to keep: an empty table holds no memory
		return
	}
	size := minSlots
	for size < 2*need {
		size *= 2
	}
	old := t.slots
	t.slots, t.used = make([]slot[E], size), t.live
	mask := uint64(size - 1)
	for _, s := range old {
		if s.n == nil {
			continue
		}
		i := s.hash & mask
		for t.slots[i].hash != slotEmpty {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

// len returns the number of keys held.
func (t *table[E]) len() int { return t.live }
