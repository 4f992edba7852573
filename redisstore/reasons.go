package redisstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/crashloopguard/crashloop"
)

// The reasons of the events the chain detector, the restart-loop guard and
// the fleet breaker announce, as the library words them. The library keeps
// its own formatters unexported; these copies are held to them by the
// conformance tests (which compare whole events) until the library's seam
// builds the events itself.

// chainReason is the library's chainReason.
func chainReason(n int) string {
	return fmt.Sprintf("crash-loop: gave up after %d reactive rescues", n)
}

// guardReason is the library's guardReason.
func guardReason(c crashloop.GuardConfig) string {
	return fmt.Sprintf("crash-loop breaker tripped (>= %d restarts in %s)", c.MaxRestarts, formatDuration(c.Window))
}

// fleetReason is the library's fleetReason.
func fleetReason(failing, total int) string {
	if total == 0 {
		return "channel crash-loop"
	}
	return fmt.Sprintf("channel crash-loop: %d/%d channels failing", failing, total)
}

// formatDuration is the library's formatDuration: "500ms", "60s", "20m",
// "1h", else time.Duration.String.
func formatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0 && d >= 10*time.Minute:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d%time.Millisecond == 0 && d < time.Second:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	}
	return d.String()
}
