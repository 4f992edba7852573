package redisstore

import (
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A call bounded by a timeout ends at the timeout plus the time it takes to
// return after it: within slack times the budget on an idle machine. On a
// loaded one this process may not run for a while at all, and nothing it
// does can end a call then. So a bounded call is held to the bound plus the
// longest stall this process suffered while the call ran, as the fault
// run's checker excuses a decision by its process's logged stall. The
// stall meter is a goroutine that sleeps a millisecond at a time and keeps
// how late it woke.

// stall is one late wake of the meter: when it woke, and how late.
type stall struct {
	woke time.Time
	late time.Duration
}

// stallMeter keeps the stalls of the last stallKept wakes that were late by
// more than stallMin.
type stallMeter struct {
	mu     sync.Mutex
	stalls []stall
	next   int
}

const (
	stallTick = time.Millisecond
	stallMin  = 2 * time.Millisecond
	stallKept = 4096
)

var meter = &stallMeter{stalls: make([]stall, 0, stallKept)}

// run measures stalls until the process ends (TestMain starts it).
func (m *stallMeter) run() {
	for {
		before := time.Now()
		time.Sleep(stallTick)
		woke := time.Now()
		if late := woke.Sub(before) - stallTick; late > stallMin {
			m.mu.Lock()
			if len(m.stalls) < stallKept {
				m.stalls = append(m.stalls, stall{woke, late})
			} else {
				m.stalls[m.next] = stall{woke, late}
				m.next = (m.next + 1) % stallKept
			}
			m.mu.Unlock()
		}
	}
}

// during returns the longest stall that overlapped the time from from to
// to.
func (m *stallMeter) during(from, to time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var longest time.Duration
	for _, s := range m.stalls {
		if s.woke.After(from) && s.woke.Add(-s.late-stallTick).Before(to) {
			longest = max(longest, s.late)
		}
	}
	return longest
}

// beyondStalls returns took, of a call that ended just now, less the
// longest stall of this process while it ran.
func beyondStalls(took time.Duration) time.Duration {
	now := time.Now()
	return took - meter.during(now.Add(-took), now)
}

// requireBounded asserts that a call that ended just now, after took, ended
// within slack times the budget, beyond the stalls of this process.
func requireBounded(t testing.TB, took time.Duration, msgAndArgs ...any) {
	t.Helper()
	require.Less(t, beyondStalls(took), slack*budget, msgAndArgs...)
}

// A stall of this process (stopped by another process for 300ms, as a
// loaded machine may not run it) is found by the meter, and no stall is
// found in a time that has not come.
func TestStallMeter(t *testing.T) {
	begin := time.Now()
	pid := strconv.Itoa(os.Getpid())
	out, err := exec.Command("sh", "-c", "kill -STOP "+pid+"; sleep 0.3; kill -CONT "+pid).CombinedOutput()
	require.NoError(t, err, "%s", out)
	end := time.Now()
	require.Eventually(t, func() bool { return meter.during(begin, time.Now()) >= 250*time.Millisecond }, watchdog, time.Millisecond,
		"the stop of the process found: %v", meter.during(begin, time.Now()))
	require.GreaterOrEqual(t, end.Sub(begin), 300*time.Millisecond)
	require.Zero(t, meter.during(time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)))
}
