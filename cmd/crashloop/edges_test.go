//go:build unix

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEdgesOfTheValues: empty, padded, non-decimal, out-of-range and
// contradictory values are refused with exit status 2 and one line naming
// the flag or the field as typed; none is silently turned off or read in
// another base.
func TestEdgesOfTheValues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, content string) string { return writeFile(t, dir, name, content) }
	state := file("state.json", `{"version": 1, "marks": {"web": {"reason": "respawn_budget_exhausted", "starts": 4, "since": "2026-01-02T03:04:05Z"}}}`)
	dup := file("dup.json", `{"budget": {"window": "10s", "max_respawns": 2, "window": "20s"}}`)
	dupTop := file("duptop.json", `{"hourly_cap": 3, "hourly_cap": 4}`)
	other := file("other.json", `{}`)
	huge := file("huge.json", `{"budget": {"max_respawns": 99999999999999999999}}`)
	typed := file("typed.json", `{"version": 1, "marks": {"web": {"reason": 7}}}`)
	notObject := file("array-state.json", `[]`)
	tailFraction := file("tail-fraction.json", `{"stderr_tail": {"lines": 1.5}}`)
	tailString := file("tail-string.json", `{"stderr_tail": {"bytes": "4k"}}`)
	tailNumber := file("tail-number.json", `{"stderr_tail": 20}`)
	tailDup := file("tail-dup.json", `{"stderr_tail": {"lines": 1, "lines": 2}}`)
	tailNegative := file("tail-negative.json", `{"stderr_tail": {"lines": -1, "bytes": 100}}`)
	const keyHint = " (leave --key out for a key derived from the command line)"
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"octal", []string{"--max-respawns", "010", "--", "true"}, `--max-respawns: "010" is not a whole number such as 3 (decimal digits, no leading zero)`},
		{"hex", []string{"--max-respawns=0x2", "--", "true"}, `--max-respawns: "0x2" is not a whole number such as 3 (decimal digits, no leading zero)`},
		{"binary", []string{"--hourly-cap=0b11", "--", "true"}, `--hourly-cap: "0b11" is not a whole number such as 3 (decimal digits, no leading zero)`},
		{"underscores", []string{"--chain-max=1_0", "--", "true"}, `--chain-max: "1_0" is not a whole number such as 3 (decimal digits, no leading zero)`},
		{"huge number", []string{"--max-respawns=99999999999999999999", "--", "true"}, `--max-respawns: "99999999999999999999" is out of range`},
		{"huge duration", []string{"--window=99999999999h", "--", "true"}, `--window: "99999999999h" is out of range (at most 2562047h)`},
		{"padded number", []string{"--max-respawns= 3", "--", "true"}, `--max-respawns: " 3" has white space around it`},
		{"empty state", []string{"--state=", "--", "true"}, "--state: must not be empty"},
		{"empty redis", []string{"--redis", "", "--", "true"}, "--redis: must not be empty"},
		{"empty metrics address", []string{"--metrics-addr=", "--", "true"}, "--metrics-addr: must not be empty"},
		{"empty redis prefix", []string{"--redis-prefix=", "--", "true"}, "--redis-prefix: must not be empty"},
		{"padded state", []string{"--state", state + " ", "--", "true"}, `--state: "` + state + ` " has white space around it`},
		{"empty key", []string{"--key=", "--", "true"}, "--key: must not be empty" + keyHint},
		{"key with a newline", []string{"--key", "a\nb", "--", "true"}, `--key: "a\nb" has a control character (a newline, a tab...)` + keyHint},
		{"key with an escape", []string{"--key", "a\x1b[2Jb", "--", "true"}, `--key: "a\x1b[2Jb" has a control character (a newline, a tab...)` + keyHint},
		{"metrics address nonsense", []string{"--metrics-addr", "nonsense", "--", "true"}, `--metrics-addr: "nonsense" is not HOST:PORT or :PORT, such as 127.0.0.1:9464`},
		{"metrics port out of range", []string{"--metrics-addr", ":99999", "--", "true"}, `--metrics-addr: ":99999" has no port number from 0 to 65535`},
		{"redis-ca without redis", []string{"--redis-ca", state, "--", "true"}, "--redis-ca: only with --redis"},
		{"redis-prefix without redis", []string{"--redis-prefix", "web", "--", "true"}, "--redis-prefix: only with --redis"},
		{"config twice", []string{"--config", other, "--config", dup, "--", "true"}, `--config: given twice ("` + other + `", then "` + dup + `"): give it once`},
		{"duplicate key", []string{"--config", dup, "--", "true"}, dup + ": budget.window: appears twice (the second would silently win)"},
		{"duplicate top key", []string{"--config", dupTop, "--", "true"}, dupTop + ": hourly_cap: appears twice (the second would silently win)"},
		{"huge number in the file", []string{"--config", huge, "--", "true"}, huge + ": budget.max_respawns: 99999999999999999999 is out of range"},
		{"octal tail lines", []string{"--stderr-tail-lines=010", "--", "true"}, `--stderr-tail-lines: "010" is not a whole number such as 3 (decimal digits, no leading zero)`},
		{"hex tail bytes", []string{"--stderr-tail-bytes=0x100", "--", "true"}, `--stderr-tail-bytes: "0x100" is not a whole number such as 3 (decimal digits, no leading zero)`},
		{"empty tail bytes", []string{"--stderr-tail-bytes=", "--", "true"}, "--stderr-tail-bytes: must not be empty"},
		{"octal health retries", []string{"--health-retries=03", "--", "true"}, `--health-retries: "03" is not a whole number such as 3 (decimal digits, no leading zero)`},
		{"unitless health interval", []string{"--health-interval=5", "--", "true"}, `--health-interval: "5" is not a duration such as 60s or 500ms`},
		{"padded health timeout", []string{"--health-timeout= 1s", "--", "true"}, `--health-timeout: " 1s" has white space around it`},
		{"empty health start period", []string{"--health-start-period=", "--", "true"}, "--health-start-period: must not be empty"},
		{"huge hook timeout", []string{"--hook-timeout=99999999999h", "--", "true"}, `--hook-timeout: "99999999999h" is out of range (at most 2562047h)`},
		{"empty health command", []string{"--health-cmd=", "--", "true"}, "--health-cmd: must not be empty"},
		{"empty park hook", []string{"--on-park-exec", "", "--", "true"}, "--on-park-exec: must not be empty"},
		{"blank trip hook", []string{"--on-trip-exec=  ", "--", "true"}, `--on-trip-exec: "  " is blank`},
		{"fraction in the file's tail", []string{"--config", tailFraction, "--", "true"}, tailFraction + ": stderr_tail.lines: must be a whole number (got 1.5)"},
		{"string in the file's tail", []string{"--config", tailString, "--", "true"}, tailString + `: stderr_tail.bytes: must be a whole number (got "4k")`},
		{"file's tail no object", []string{"--config", tailNumber, "--", "true"}, tailNumber + `: stderr_tail: must be an object such as {"lines": 20, "bytes": 4096} (got 20)`},
		{"duplicate key in the file's tail", []string{"--config", tailDup, "--", "true"}, tailDup + ": stderr_tail.lines: appears twice (the second would silently win)"},
		{"file's tail checked under a flag", []string{"--stderr-tail-lines=3", "--config", tailNegative, "--", "true"}, tailNegative + ": stderr_tail.lines: must be >= 0 (0: off) (got -1)"},
		{"state field of the wrong type", []string{"status", "--state", typed}, "state file " + typed + " is malformed: marks.web.reason: must be a string, not a number"},
		{"state not an object", []string{"status", "--state", notObject}, "state file " + notObject + " is malformed: must be a JSON object, not an array"},
		{"status, empty state", []string{"status", "--state="}, "--state: must not be empty"},
		{"status, redis-ca without redis", []string{"status", "--state", state, "--redis-ca", state}, "--redis-ca: only with --redis"},
		{"resume, empty key", []string{"resume", "--state", state, ""}, "resume: KEY must not be empty (leave KEY out to resume the one parked key)"},
		{"resume, key with a newline", []string{"resume", "--state", state, "web\nx"}, `resume: KEY "web\nx" has a control character (a newline, a tab...) (leave KEY out to resume the one parked key)`},
		{"resume, empty redis", []string{"resume", "--redis=", "web"}, "--redis: must not be empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := runCL(t, c.args...)
			assert.Equal(t, exitUsage, r.code, r.stderr)
			assert.Equal(t, "crashloop: "+c.want+"\n", r.stderr)
			assert.Empty(t, r.stdout)
		})
	}
	r := runCL(t, "status", "--state", state)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "web", "the resume with an empty KEY resumed nothing")
}

// TestChainMaxZeroInTheFileIsOff: "max_chain": 0 in --config turns the
// chain off, as --chain-max 0 does, instead of being refused.
func TestChainMaxZeroInTheFileIsOff(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "cfg.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"chain": {"max_chain": 0, "reset_gap": "20m"}}`), 0o644))
	r := runCL(t, with("--config="+cfg, "--", "true")...)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stderr)

	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"chain": {"max_chain": 0, "reset_gap": "soon"}}`), 0o644))
	r = runCL(t, with("--config="+bad, "--", "true")...)
	assert.Equal(t, exitUsage, r.code, r.stderr)
	assert.Equal(t, "crashloop: "+bad+`: chain.reset_gap: must be a duration string such as "60s" or "500ms" (got soon)`+"\n", r.stderr,
		"the chain's other settings are checked all the same")
}

// TestBackoffFlagsOverrideTheFilesCurve: --initial-backoff and
// --max-backoff replace the waits of a "backoff" object of --config, as
// they replace the budget's: docs/cli.md's example file with
// --initial-backoff 10ms waits 10ms, 20ms, 20ms, not 1s, 2s, 4s.
func TestBackoffFlagsOverrideTheFilesCurve(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "cfg.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{
  "budget": {"max_respawns": 3, "window": "60s", "initial_backoff": "500ms", "max_backoff": "5s"},
  "backoff": {"kind": "exponential", "initial": "1s", "factor": 2, "max": "1m"},
  "chain": {"max_chain": 3, "reset_gap": "20m"}
}`), 0o644))
	r := runCL(t, "--config", cfg, "--initial-backoff", "10ms", "--max-backoff", "20ms", "--log-format=json", "--key=b", "--", helper, "exit=1")
	require.Equal(t, exitParked, r.code, r.stderr)
	var waits []string
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m["event"] == "agent.respawn_scheduled" {
			waits = append(waits, m["backoff"].(string))
		}
	}
	assert.Equal(t, []string{"10ms", "20ms", "20ms"}, waits, r.stderr)
}

// TestStatusRedisHintsAtAWrongPrefix: status --redis under a prefix that no
// crashloop uses says so, instead of only "nothing is parked"; the fleet
// line of a deployment no key has reported to says that, not "0 of 0 keys
// failing" under a parked key.
func TestStatusRedisHintsAtAWrongPrefix(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	r := runCL(t, with("--redis", srv.URL(), "--max-respawns=0", "--key=web", "--", helper, "exit=1")...)
	require.Equal(t, exitParked, r.code, r.stderr)
	r = runCL(t, "status", "--redis", srv.URL(), "--redis-prefix", "crashlop")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "nothing is parked in "+srv.URL()+" (prefix crashlop); no crashloop has reported under the prefix crashlop in the last hour: is --redis-prefix right?\n"+
		"fleet breaker: armed; 0 restarts in the last hour; no key has reported to it yet\n", r.stdout)
	r = runCL(t, "status", "--redis", srv.URL())
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "\nweb  respawn_budget_exhausted  ")
	assert.NotContains(t, r.stdout, "0 of 0 keys failing")
}

// TestRedisErrorsSayWhatWentWrong: status and resume against a Redis that
// cannot be reached say so, not which internal call failed
// ("redisstore: parked: epoch: ...").
func TestRedisErrorsSayWhatWentWrong(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"status", "--redis", "redis://127.0.0.1:1"}, {"resume", "--redis", "redis://127.0.0.1:1", "web"}} {
		r := runCL(t, args...)
		assert.Equal(t, exitError, r.code, r.stderr)
		assert.Equal(t, "crashloop: --redis redis://127.0.0.1:1: cannot reach it: dial tcp 127.0.0.1:1: connect: connection refused\n", r.stderr)
	}
}
