package replay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestPM2StopsUnstableRuns: max_restarts unstable exits (runs under
// min_uptime, within min_uptime x max_restarts of the app's creation) stop
// the app; a stable run does not reset their count; a run past the window
// is not unstable. With max_restarts 3 and min_uptime 1s (a window of 3s).
func TestPM2StopsUnstableRuns(t *testing.T) {
	t.Parallel()
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	p := &pm2{first: 100 * time.Millisecond, max: 15 * time.Second, reset: 30 * time.Second, minUptime: time.Second, maxRestarts: 3}
	w, ok := p.Failed(at(0), at(.1)) // unstable 1
	assert.Equal(t, 100*time.Millisecond, w)
	assert.True(t, ok)
	w, ok = p.Failed(at(.2), at(1.5)) // stable: a run of 1.3s; the count stays
	assert.Equal(t, 150*time.Millisecond, w)
	assert.True(t, ok)
	w, ok = p.Failed(at(1.65), at(1.7)) // unstable 2
	assert.Equal(t, 225*time.Millisecond, w)
	assert.True(t, ok)
	_, ok = p.Failed(at(1.925), at(2)) // unstable 3: stopped
	assert.False(t, ok)

	p = &pm2{first: 100 * time.Millisecond, max: 15 * time.Second, reset: 30 * time.Second, minUptime: time.Second, maxRestarts: 3}
	p.Failed(at(0), at(.1))
	p.Failed(at(.2), at(.3))
	_, ok = p.Failed(at(2.9), at(3.1)) // past the 3s window: not unstable
	assert.True(t, ok)
	w, ok = p.Failed(at(3.2), at(34)) // up more than 30s: the delay is back to the first
	assert.Equal(t, 100*time.Millisecond, w)
	assert.True(t, ok)
}

// TestPM2DelayCurve: PM2 7.0.3's handleExit (lib/God.js) sets the first
// delay to exp_backoff_restart_delay and each next to
// Math.floor(Math.min(15000, prev * 1.5)) milliseconds; its Worker sets it
// back to 0 once the app has been up more than EXP_BACKOFF_RESET_TIMER
// (30000ms), so the run after a stable one waits the first delay again.
// Stable runs (2s, past min_uptime) keep the app from being stopped.
func TestPM2DelayCurve(t *testing.T) {
	t.Parallel()
	p := &pm2{first: 100 * time.Millisecond, max: 15 * time.Second, reset: 30 * time.Second, minUptime: time.Second, maxRestarts: 16}
	at := time.Unix(1000, 0)
	var got []int64
	for range 15 {
		w, ok := p.Failed(at, at.Add(2*time.Second))
		assert.True(t, ok)
		got = append(got, w.Milliseconds())
		at = at.Add(2*time.Second + w)
	}
	assert.Equal(t, []int64{100, 150, 225, 337, 505, 757, 1135, 1702, 2553, 3829, 5743, 8614, 12921, 15000, 15000}, got)
	w, _ := p.Failed(at, at.Add(30*time.Second)) // up 30s: not more than 30s
	assert.Equal(t, 15*time.Second, w)
	at = at.Add(30*time.Second + w)
	w, _ = p.Failed(at, at.Add(30*time.Second+time.Millisecond)) // up more than 30s: reset
	assert.Equal(t, 100*time.Millisecond, w)
}
