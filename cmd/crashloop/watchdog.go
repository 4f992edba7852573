//go:build unix

package main

import (
	"sync"
	"time"
)

// watchdog catches a run whose program hangs, as systemd's WatchdogSec=
// does: it trips when timeout passes after the start, or after the last
// WATCHDOG=1, without another WATCHDOG=1, or at once on WATCHDOG=trigger.
// It trips once, calling stop with the cause; a nil *watchdog (--watchdog
// off) does nothing.
type watchdog struct {
	timeout time.Duration
	stop    func(cause string)

	mu      sync.Mutex
	timer   *time.Timer
	last    time.Time // the start or the last WATCHDOG=1
	cause   string    // why it tripped; "" until then
	stopped bool      // the run is over
}

// startWatchdog arms a watchdog for a run that starts now.
func startWatchdog(timeout time.Duration, stop func(cause string)) *watchdog {
	w := &watchdog{timeout: timeout, stop: stop, last: time.Now()}
	w.mu.Lock() // expire waits until the timer is stored
	defer w.mu.Unlock()
	w.timer = time.AfterFunc(timeout, w.expire)
	return w
}

// kick records a WATCHDOG=1.
func (w *watchdog) kick() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cause == "" && !w.stopped {
		w.last = time.Now()
		w.timer.Reset(w.timeout)
	}
}

// expire runs when the timer fires; a WATCHDOG=1 that came while it fired
// has already re-armed the timer, and wins.
func (w *watchdog) expire() {
	w.mu.Lock()
	late := time.Since(w.last) >= w.timeout
	w.mu.Unlock()
	if late {
		w.trip("no WATCHDOG=1 for " + w.timeout.String())
	}
}

// trip stops the run with cause, unless it has tripped or ended already.
func (w *watchdog) trip(cause string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	if w.cause != "" || w.stopped {
		w.mu.Unlock()
		return
	}
	w.cause = cause
	w.timer.Stop()
	w.mu.Unlock()
	w.stop(cause)
}

// end disarms the watchdog at the end of the run and returns why it
// tripped, or "".
func (w *watchdog) end() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.timer.Stop()
	return w.cause
}
