package crashloop

import (
	"math"
	"time"
)

// Clock is the source of time for every guard and the Supervisor.
//
// Clock is satisfied by clock.New() and *clock.Mock from
// github.com/benbjohnson/clock, and by most other clock packages. The zero
// value of an Option set, or WithClock(nil), means the real clock (time.Now
// and time.After). Implementations must be safe for concurrent use.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// realClock is the default Clock: time.Now and time.After.
type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// timebase turns the clock readings of one object into int64 nanosecond
// offsets from a base read from its clock at construction, and keeps the
// latest offset it handed out, so that time never runs backwards for the
// object: a reading earlier than one it already used is read as that later
// one. Nothing then expires twice or un-expires, an event is never younger
// than zero, and lazy pruning and reclaiming stay invisible to callers.
//
// base is read-only once made. high is guarded by the lock of the object
// that owns the timebase.
type timebase struct {
	base time.Time
	high int64 // latest offset used; math.MinInt64 before the first
}

func newTimebase(c Clock) timebase { return timebase{base: c.Now(), high: math.MinInt64} }

// off returns the offset of now on the base. time.Time.Sub uses the
// monotonic readings when both times carry one and saturates; it never
// overflows. It needs no lock.
func (tb *timebase) off(now time.Time) int64 { return int64(now.Sub(tb.base)) }

// at returns the offset the object uses for off (an offset from off): off,
// or the latest offset used if that is later. The owner's lock must be
// held.
func (tb *timebase) at(off int64) int64 {
	if off < tb.high {
		return tb.high
	}
	tb.high = off
	return off
}

// raise makes off the latest offset used if it is later (a restore).
func (tb *timebase) raise(off int64) { tb.high = max(tb.high, off) }

// wall returns the time of an offset.
func (tb *timebase) wall(off int64) time.Time { return tb.base.Add(time.Duration(off)) }

// age returns how long before now the offset t lies, at least zero, as an
// unsigned number so that offsets at the far ends of int64 never overflow.
func age(now, t int64) uint64 {
	if t >= now {
		return 0
	}
	return uint64(now) - uint64(t)
}

// within reports whether an event at t is inside a window of span at now:
// its age is at most span (an event exactly span old still counts).
func within(now, t int64, span time.Duration) bool {
	return age(now, t) <= uint64(span)
}
