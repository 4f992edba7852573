package replay_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/replay"
)

// TestOutOfOrderInEveryLineFormat: in each line format, key b's start is
// listed after a's exit though it came 4s before it (put back in order),
// and b's exit is listed last with the clock stepped back 220s, after
// records more than the reorder window later were judged (it is judged at
// the latest time, and counted as late).
func TestOutOfOrderInEveryLineFormat(t *testing.T) {
	t.Parallel()
	type line struct {
		ev   string
		key  string
		d    time.Duration
		code int
	}
	lines := []line{{"start", "a", 0, 0}, {"exit", "a", 9 * time.Second, 1}, {"start", "b", 5 * time.Second, 0},
		{"start", "a", 11 * time.Second, 0}, {"exit", "a", 200 * time.Second, 2}, {"start", "a", 300 * time.Second, 0},
		{"exit", "b", 80 * time.Second, 3}}
	formats := map[replay.Format]func(l line) string{
		replay.FormatJournald: func(l line) string {
			if l.ev == "start" {
				return journal(started, l.key, l.d, "")
			}
			return journal(exited, l.key, l.d, fmt.Sprintf(`"EXIT_CODE":"exited","EXIT_STATUS":"%d"`, l.code))
		},
		replay.FormatDocker: func(l line) string {
			action, attrs := "start", ""
			if l.ev == "exit" {
				action, attrs = "die", fmt.Sprintf(`,"exitCode":"%d"`, l.code)
			}
			return fmt.Sprintf(`{"Type":"container","Action":"%s","Actor":{"Attributes":{"name":"%s"%s}},"timeNano":%d}`, action, l.key, attrs, at(l.d).UnixNano())
		},
		replay.FormatJSONLines: func(l line) string {
			code := ""
			if l.ev == "exit" {
				code = fmt.Sprintf(`,"code":%d`, l.code)
			}
			return fmt.Sprintf(`{"time":"%s","key":"%s","event":"%s"%s}`, at(l.d).Format(time.RFC3339Nano), l.key, l.ev, code)
		},
		replay.FormatCSV: func(l line) string {
			code := ""
			if l.ev == "exit" {
				code = fmt.Sprint(",", l.code)
			}
			return fmt.Sprintf("%d,%s,%s%s", at(l.d).Unix(), l.key, l.ev, code)
		},
	}
	for f, write := range formats {
		var b strings.Builder
		for _, l := range lines {
			b.WriteString(write(l) + "\n")
		}
		res, got := decisions(t, b.String(), []replay.Candidate{{Config: crashloop.DefaultSupervisorConfig()}}, replay.Options{})
		assert.Equal(t, f, res.Sources[0].Format)
		assert.Equal(t, []string{
			"a 9s restart 500ms agent.respawn_scheduled",
			"a 3m20s restart 500ms agent.restart_scheduled", // ran 189s: healthy, a crash
			"b 3m20s restart 500ms agent.restart_scheduled", // b's exit, late: at the latest time, so b ran 195s
		}, got[0], f.String())
		assert.Equal(t, 1, res.Reports[0].Late, f.String())
		assert.Equal(t, 7, res.Reports[0].Records, f.String())
	}
}
