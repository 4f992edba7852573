package crashloop

import (
	"time"

	"github.com/crashloopguard/crashloop/internal/rolling"
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

// timebase is the object's time (see rolling.Timebase).
type timebase = rolling.Timebase

func newTimebase(c Clock) timebase { return rolling.NewTimebase(c.Now()) }
