// Package rolling holds the mechanisms under crashloop's guards: a
// Timebase that turns clock readings into int64 offsets that never run
// backwards, and the rolling Window of event offsets every guard counts.
package rolling

import (
	"math"
	"time"
)

// Timebase turns the clock readings of one object into int64 nanosecond
// offsets from a base read from its clock at construction, and keeps the
// latest offset it handed out, so that time never runs backwards for the
// object: a reading earlier than one it already used is read as that later
// one. Nothing then expires twice or un-expires, an event is never younger
// than zero, and lazy pruning and reclaiming stay invisible to callers.
//
// Base is read-only once made. High is guarded by the lock of the object
// that owns the Timebase.
type Timebase struct {
	Base time.Time
	High int64 // latest offset used; math.MinInt64 before the first
}

// NewTimebase returns a Timebase on base that has used no offset yet.
func NewTimebase(base time.Time) Timebase { return Timebase{Base: base, High: math.MinInt64} }

// Off returns the offset of now on the base. time.Time.Sub uses the
// monotonic readings when both times carry one and saturates; it never
// overflows. It needs no lock.
func (tb *Timebase) Off(now time.Time) int64 { return int64(now.Sub(tb.Base)) }

// At returns the offset the object uses for off (an offset from off): off,
// or the latest offset used if that is later. The owner's lock must be
// held.
func (tb *Timebase) At(off int64) int64 {
	if off < tb.High {
		return tb.High
	}
	tb.High = off
	return off
}

// Raise makes off the latest offset used if it is later (a restore).
func (tb *Timebase) Raise(off int64) { tb.High = max(tb.High, off) }

// Wall returns the time of an offset.
func (tb *Timebase) Wall(off int64) time.Time { return tb.Base.Add(time.Duration(off)) }

// Age returns how long before now the offset t lies, at least zero, as an
// unsigned number so that offsets at the far ends of int64 never overflow.
func Age(now, t int64) uint64 {
	if t >= now {
		return 0
	}
	return uint64(now) - uint64(t)
}

// Within reports whether an event at t is inside a window of span at now:
// its age is at most span (an event exactly span old still counts).
func Within(now, t int64, span time.Duration) bool {
	return Age(now, t) <= uint64(span)
}

// Window is the rolling window of event times shared by RespawnBudget,
// RestartLoopGuard, FleetSupervisionPolicy and the Supervisor's records: a
// ring of int64 offsets (see Timebase) holding at most limit events, oldest
// first.
//
// Recording is O(1); pruning is amortized O(1) (each event is dropped once).
// Storage grows on demand up to limit, so a huge limit costs nothing until it
// is used. The zero value is an empty window. It is not safe for concurrent
// use: its owner's lock guards it.
type Window struct {
	buf  []int64
	head int32 // index of the oldest event
	n    int32 // events held
}

// Prune drops the events older than span at now.
func (w *Window) Prune(now int64, span time.Duration) {
	for w.n > 0 && !Within(now, w.buf[w.head], span) {
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

// Push records an event at t. When the Window already holds limit events the
// oldest is dropped to make room. limit must be at least 1. t must not be
// earlier than the newest event, so that the Window stays ordered and
// pruning from the oldest end stays exact: every owner reads its times
// through its Timebase under the lock that guards the Window, and a
// restored Window ends no later than the latest time the owner used.
func (w *Window) Push(t int64, limit int) {
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
func (w *Window) grow(limit int) {
	size := 2 * len(w.buf)
	if size < 3 {
		size = 3
	}
	if size > limit || size < 0 {
		size = limit
	}
	if size > MaxSlots {
		size = MaxSlots
	}
	w.buf, w.head = w.AppendTo(make([]int64, 0, size))[:size], 0
}

// AppendTo appends the events, oldest first, to dst and returns the result.
func (w *Window) AppendTo(dst []int64) []int64 {
	for i := 0; i < int(w.n); i++ {
		j := int(w.head) + i
		if j >= len(w.buf) {
			j -= len(w.buf)
		}
		dst = append(dst, w.buf[j])
	}
	return dst
}

// Copy returns a copy of win that shares no memory with it.
func Copy(win *Window) Window { return Window{buf: win.AppendTo(nil), n: win.n} }

// MaxSlots bounds the storage of one window. A limit above it behaves
// as an unbounded count for any realistic event rate; it keeps the int32
// indexes valid and a window's memory under 8 GiB whatever the limit.
const MaxSlots = 1 << 30

// Newest returns the time of the newest event; the window must not be
// empty.
func (w *Window) Newest() int64 {
	i := int(w.head) + int(w.n) - 1
	if i >= len(w.buf) {
		i -= len(w.buf)
	}
	return w.buf[i]
}

// Len returns the number of events held.
func (w *Window) Len() int { return int(w.n) }

// Clear empties the window; it keeps the storage for the next events.
func (w *Window) Clear() { w.head, w.n = 0, 0 }

// Of returns a window holding times, oldest first; it keeps times.
func Of(times []int64) Window { return Window{buf: times, n: int32(len(times))} }
