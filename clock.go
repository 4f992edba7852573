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

// Option configures a guard, a fleet policy or a Supervisor at construction.
// Options are shared by every constructor of the package; the zero set of
// options means the real clock, no event handler and an empty name. A nil
// Option is ignored.
type Option func(*options)

type options struct {
	clock   Clock
	handler EventHandler
	name    string

	// Supervisor only (store.go).
	store     Store
	saveEvery time.Duration
	saveErr   func(error)
}

// WithClock makes the object read time from c. The default, also used when c
// is nil, is the real clock. Pass a *clock.Mock from
// github.com/benbjohnson/clock to test code that uses this package.
func WithClock(c Clock) Option {
	return func(o *options) { o.clock = c }
}

// WithEventHandler makes the object announce its state changes to h. The
// default, also used when h is nil, is no handler: nothing is announced.
// Handlers run synchronously on the goroutine that caused the change, after
// the change is committed and with no lock of this package held.
func WithEventHandler(h EventHandler) Option {
	return func(o *options) { o.handler = h }
}

// WithName labels the events of a RestartLoopGuard or a
// FleetSupervisionPolicy (Event.Key). The default is the empty string. A
// Supervisor gives the name to its fleet breaker (default "fleet"); its
// per-key events, and those of RespawnBudget and ChainDetector, carry the
// key of each call instead.
func WithName(name string) Option {
	return func(o *options) { o.name = name }
}

func buildOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.clock == nil {
		o.clock = realClock{}
	}
	return o
}

// emit delivers ev to h when there is a handler and ev is an event (a zero
// Event means nothing happened). Callers must hold no lock.
func emit(h EventHandler, ev Event) {
	if h != nil && ev.Kind != 0 {
		h.HandleEvent(ev)
	}
}

// timeline turns wall or monotonic readings into int64 nanosecond offsets
// from a base taken at construction. It is read-only once made, so it is
// safe for concurrent use without a lock.
type timeline struct {
	base time.Time
}

func newTimeline(c Clock) timeline { return timeline{base: c.Now()} }

// off returns the offset of now. time.Time.Sub uses the monotonic readings
// when both times carry one and saturates; it never overflows.
func (tl *timeline) off(now time.Time) int64 { return int64(now.Sub(tl.base)) }

// mark is the latest offset seen by the calls that one lock serializes: the
// whole of a RestartLoopGuard or FleetSupervisionPolicy, one shard of a
// keyed table. An offset earlier than the mark is read as the mark, so time
// under one lock never runs backwards: nothing expires twice, nothing
// un-expires, an event is never younger than zero, and lazy pruning and
// background reclaiming stay invisible to callers. Being guarded by the
// lock it needs no atomic operation, and calls on different shards share
// no written memory. It must start at newMark; the lock must be held.
type mark struct {
	high int64
}

func newMark() mark { return mark{high: math.MinInt64} }

// at returns t, or the mark if that is later, and makes it the mark.
func (m *mark) at(t int64) int64 {
	if t < m.high {
		return m.high
	}
	m.high = t
	return t
}

// raise makes t the mark if it is later.
func (m *mark) raise(t int64) { m.high = max(m.high, t) }

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
