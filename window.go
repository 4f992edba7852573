package crashloop

import "time"

// window is the rolling window of event times shared by RespawnBudget,
// RestartLoopGuard, FleetSupervisionPolicy and the Supervisor's records: a
// ring of int64 offsets (see timebase) holding at most limit events, oldest
// first.
//
// Recording is O(1); pruning is amortized O(1) (each event is dropped once).
// Storage grows on demand up to limit, so a huge limit costs nothing until it
// is used. The zero value is an empty window. It is not safe for concurrent
// use: its owner's lock guards it.
type window struct {
	buf  []int64
	head int32 // index of the oldest event
	n    int32 // events held
}

// prune drops the events older than span at now.
func (w *window) prune(now int64, span time.Duration) {
	for w.n > 0 && !within(now, w.buf[w.head], span) {
		w.head++
		if int(w.head) == len(w.buf) {
			w.head = 0
		}
		w.n--
	}
	if w.n == 0 {
		w.head = 0
	}
}

// push records an event at t. When the window already holds limit events the
// oldest is dropped to make room. limit must be at least 1. t must not be
// earlier than the newest event, so that the window stays ordered and
// pruning from the oldest end stays exact: every owner reads its times
// through its timebase under the lock that guards the window, and a
// restored window ends no later than the latest time the owner used.
func (w *window) push(t int64, limit int) {
	if int(w.n) == len(w.buf) && len(w.buf) < limit {
		w.grow(limit)
	}
	if int(w.n) == len(w.buf) { // full at limit: overwrite the oldest
		w.buf[w.head] = t
		w.head++
		if int(w.head) == len(w.buf) {
			w.head = 0
		}
		return
	}
	i := int(w.head) + int(w.n)
	if i >= len(w.buf) {
		i -= len(w.buf)
	}
	w.buf[i] = t
	w.n++
}

// grow doubles the storage (at least 3 slots, at most limit) and lays the
// events out from index 0.
func (w *window) grow(limit int) {
	size := 2 * len(w.buf)
	if size < 3 {
		size = 3
	}
	if size > limit || size < 0 {
		size = limit
	}
	if size > maxWindowSlots {
		size = maxWindowSlots
	}
	w.buf, w.head = w.appendTo(make([]int64, 0, size))[:size], 0
}

// appendTo appends the events, oldest first, to dst and returns the result.
func (w *window) appendTo(dst []int64) []int64 {
	for i := 0; i < int(w.n); i++ {
		j := int(w.head) + i
		if j >= len(w.buf) {
			j -= len(w.buf)
		}
		dst = append(dst, w.buf[j])
	}
	return dst
}

// copyWindow returns a copy of win that shares no memory with it.
func copyWindow(win *window) window { return window{buf: win.appendTo(nil), n: win.n} }

// maxWindowSlots bounds the storage of one window. A limit above it behaves
// as an unbounded count for any realistic event rate; it keeps the int32
// indexes valid and a window's memory under 8 GiB whatever the limit.
const maxWindowSlots = 1 << 30

// newest returns the time of the newest event; the window must not be
// empty.
func (w *window) newest() int64 {
	i := int(w.head) + int(w.n) - 1
	if i >= len(w.buf) {
		i -= len(w.buf)
	}
	return w.buf[i]
}

// len returns the number of events held.
func (w *window) len() int { return int(w.n) }

// clear empties the window; it keeps the storage for the next events.
func (w *window) clear() { w.head, w.n = 0, 0 }
