package replay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestNomadRestartModes holds the nomad model to Nomad's RestartTracker
// (client/allocrunner/taskrunner/restarts, GetState) with attempts 2,
// interval 30m, delay 15s: the interval begins at the first start; each
// failure counts in its interval; the 3rd fails the task in mode "fail" and
// in mode "delay" waits for the interval's end; a failure after the end
// begins a new interval, and is its first.
func TestNomadRestartModes(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return time.Unix(1000, 0).Add(time.Duration(s) * time.Second) }
	type step struct {
		start, end int
		wait       time.Duration
		ok         bool
	}
	for _, c := range []struct {
		delay bool
		steps []step
	}{
		{false, []step{
			{0, 10, 15 * time.Second, true},  // 1st in the interval begun at 0
			{25, 35, 15 * time.Second, true}, // 2nd
			{50, 60, 0, false},               // 3rd: "Exceeded allowed attempts 2 in interval 30m0s and mode is \"fail\""
		}},
		{true, []step{
			{0, 10, 15 * time.Second, true},
			{25, 35, 15 * time.Second, true},
			{50, 60, 1740 * time.Second, true},     // 3rd: until the interval's end, 1800s
			{1800, 1810, 15 * time.Second, true},   // after the end: a new interval begun at 1810s, its 1st
			{1825, 1835, 15 * time.Second, true},   // 2nd
			{1850, 1860, 1750 * time.Second, true}, // 3rd: until 1810s+30m
		}},
	} {
		n := &nomad{delay: 15 * time.Second, attempts: 2, interval: 30 * time.Minute, delayMode: c.delay}
		for i, s := range c.steps {
			wait, ok := n.Failed(at(s.start), at(s.end))
			assert.Equal(t, s.ok, ok, "delay mode %v, failure %d", c.delay, i+1)
			assert.Equal(t, s.wait, wait, "delay mode %v, failure %d", c.delay, i+1)
		}
	}
}
