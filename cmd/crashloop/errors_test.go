//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBadInputIsOneLineAndExit2: bad flags, configs and state files end
// crashloop with exit status 2 and one line that names the flag as it is
// typed, or the file (with line and column for a JSON syntax error), and
// never prints the file.
func TestBadInputIsOneLineAndExit2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, content string) string { return writeFile(t, dir, name, content) }
	trailing := file("trailing.json", `{"budget": {"max_respawns": 2,}}`)
	multiline := file("multiline.json", "{\n  \"budget\": {\n    \"window\": 60s\n  }\n}\n")
	truncated := file("truncated.json", "{\"budget\": {\n")
	badValue := file("bad.json", `{"budget": {"window": "soon"}}`)
	negative := file("negative.json", `{"budget": {"window": "-1s"}}`)
	unknown := file("unknown.json", `{"guard": {"windw": "1s"}}`)
	array := file("array.json", `[1, 2]`)
	long := file("long.json", `{"budget": {"window": "`+strings.Repeat("x", 100)+`"}}`)
	backwards := file("backwards.json", `{"budget": {"initial_backoff": "2s", "max_backoff": "1s"}}`)
	fleet := file("fleet.json", `{"fleet": {"cooldown": "-1s"}}`)
	badState := file("state.json", "{not json")
	tailLines := file("tail-lines.json", `{"stderr_tail": {"lines": -1}}`)
	tailBytes := file("tail-bytes.json", `{"stderr_tail": {"bytes": 1048577}}`)
	tailKey := file("tail-key.json", `{"stderr_tail": {"line": 3}}`)
	probeMax := file("probe-max.json", `{"probe_after": "1m", "probe_max": "30s"}`)
	causeKeys := file("cause-keys.json", `{"fleet": {"shared_cause": {"keys": 1}}}`)
	causeEvery := file("cause-every.json", `{"fleet": {"shared_cause": {"probe_every": "soon"}}}`)
	causeKey := file("cause-key.json", `{"fleet": {"shared_cause": {"key": 3}}}`)
	missing := filepath.Join(dir, "nope.json")

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--frobnicate", "--", "true"}, "unknown flag --frobnicate (see crashloop --help)"},
		{"unknown flag, one dash", []string{"-z", "--", "true"}, "unknown flag -z (see crashloop --help)"},
		{"unknown flag, two dashes", []string{"--zz", "--", "true"}, "unknown flag --zz (see crashloop --help)"},
		{"unknown flag after a value", []string{"--window", "5s", "-zz=1", "--", "true"}, "unknown flag -zz (see crashloop --help)"},
		{"no value, one dash", []string{"-window"}, "-window needs a value"},
		{"bad duration, one dash", []string{"-window=soon", "--", "true"}, `-window: "soon" is not a duration such as 60s or 500ms`},
		{"empty key", []string{"--key=", "--", "true"}, "--key: must not be empty (leave --key out for a key derived from the command line)"},
		{"blank key", []string{"--key", " \t", "--", "true"}, `--key: " \t" is blank (leave --key out for a key derived from the command line)`},
		{"max below initial", []string{"--initial-backoff=2s", "--max-backoff=1s", "--", "true"}, "--max-backoff: must be >= --initial-backoff (2s)"},
		{"max below the default initial", []string{"--max-backoff=100ms", "--", "true"}, "--max-backoff: must be >= --initial-backoff (500ms)"},
		{"decorrelated needs exponential", []string{"--jitter=decorrelated", "--", "true"}, `--jitter: must be "decorrelated" only with --backoff=exponential`},
		{"config keeps config keys", []string{"--config=" + backwards, "--", "true"}, backwards + ": budget.max_backoff: must be >= initial_backoff (2s) (got 1s)"},
		{"missing --", []string{"--key=a", "sh", "-c", "exit 1"}, "missing -- before the program (usage: crashloop [flags] -- PROGRAM [ARGS...])"},
		{"argument before --", []string{"--key=a", "sh", "--", "true"}, `unexpected argument "sh" before -- (usage: crashloop [flags] -- PROGRAM [ARGS...])`},
		{"no program", []string{"--"}, "no program after -- (usage: crashloop [flags] -- PROGRAM [ARGS...])"},
		{"no value", []string{"--window", "--", "true"}, "--window needs a value"},
		{"bad duration", []string{"--window=soon", "--", "true"}, `--window: "soon" is not a duration such as 60s or 500ms`},
		{"bad number", []string{"--max-respawns=x", "--", "true"}, `--max-respawns: "x" is not a whole number such as 3 (decimal digits, no leading zero)`},
		{"bad boolean", []string{"--version=maybe"}, `--version: "maybe" is not true or false`},
		{"rejected by the library", []string{"--window=-1s", "--", "true"}, "--window: must be > 0"},
		{"negative respawns", []string{"--max-respawns=-1", "--", "true"}, "--max-respawns: must be >= 0"},
		{"chain off is 0", []string{"--chain-max=-1", "--", "true"}, "--chain-max: must be >= 0 (0: off)"},
		{"never parks", []string{"--initial-backoff=10s", "--max-backoff=10s", "--window=20s", "--", "true"},
			"--window: must be >= the sum of the first 3 backoffs (30s), or a crash loop never parks"},
		{"never parks, default window", []string{"--initial-backoff=30s", "--max-backoff=30s", "--", "true"},
			"--window (default 1m0s): must be >= the sum of the first 3 backoffs (1m30s), or a crash loop never parks"},
		{"bad guard", []string{"--guard=often", "--", "true"}, `--guard: "often" is not off, on or N/DURATION such as 3/60s`},
		{"guard count", []string{"--guard=0/1s", "--", "true"}, "--guard: N must be >= 1"},
		{"bad backoff", []string{"--backoff=cubic", "--", "true"}, `--backoff: "cubic" is not linear or exponential`},
		{"bad jitter", []string{"--jitter=lots", "--", "true"}, `--jitter: "lots" is not none, full, equal or decorrelated`},
		{"bad restart", []string{"--restart=never", "--", "true"}, `--restart: "never" is not on-failure or always`},
		{"bad log format", []string{"--log-format=xml", "--", "true"}, `--log-format: "xml" is not text or json`},
		{"bad exit codes", []string{"--permanent-exit-codes=1,x", "--", "true"}, `--permanent-exit-codes: "x" is not an exit status from 1 to 255`},
		{"bad env", []string{"--env=FOO", "--", "true"}, `--env: "FOO" is not KEY=VALUE`},
		{"env crashloop sets", []string{"--env=NOTIFY_SOCKET=/x", "--", "true"}, `--env: "NOTIFY_SOCKET=/x" is not allowed: crashloop sets NOTIFY_SOCKET itself`},
		{"bad chdir", []string{"--chdir=" + missing, "--", "true"}, "--chdir " + missing + ": not a folder"},
		{"bad grace", []string{"--grace=-1s", "--", "true"}, "--grace: must be >= 0"},
		{"bad watchdog", []string{"--watchdog=1us", "--", "true"}, "--watchdog: must be 0 (off) or at least 1ms"},
		{"bad health interval", []string{"--health-interval=0s", "--", "true"}, "--health-interval: must be at least 1ms"},
		{"bad health timeout", []string{"--health-timeout=1us", "--", "true"}, "--health-timeout: must be at least 1ms"},
		{"bad health retries", []string{"--health-retries=0", "--", "true"}, "--health-retries: must be >= 1"},
		{"bad health start period", []string{"--health-start-period=-1s", "--", "true"}, "--health-start-period: must be >= 0"},
		{"bad hook timeout", []string{"--hook-timeout=0s", "--", "true"}, "--hook-timeout: must be > 0"},
		{"bad tail lines", []string{"--stderr-tail-lines=-1", "--", "true"}, "--stderr-tail-lines: must be >= 0 (0: off)"},
		{"bad tail bytes", []string{"--stderr-tail-bytes=1048577", "--", "true"}, "--stderr-tail-bytes: must be from 0 (off) to 1048576"},
		{"config tail lines", []string{"--config=" + tailLines, "--", "true"}, tailLines + ": stderr_tail.lines: must be >= 0 (0: off) (got -1)"},
		{"config tail bytes", []string{"--config=" + tailBytes, "--", "true"}, tailBytes + ": stderr_tail.bytes: must be from 0 (off) to 1048576 (got 1048577)"},
		{"config tail key", []string{"--config=" + tailKey, "--", "true"}, tailKey + ": stderr_tail.line: unknown setting (stderr_tail has lines and bytes)"},
		{"config syntax", []string{"--config=" + trailing, "--", "true"}, trailing + ":1:31: invalid character '}' looking for beginning of object key string"},
		{"config syntax, line 3", []string{"--config=" + multiline, "--", "true"}, multiline + ":3:17: invalid character 's' after object key:value pair"},
		{"config truncated", []string{"--config=" + truncated, "--", "true"}, truncated + ":2:1: unexpected end of JSON input"},
		{"config value", []string{"--config=" + badValue, "--", "true"}, badValue + `: budget.window: must be a duration string such as "60s" or "500ms" (got soon)`},
		{"config rule", []string{"--config=" + negative, "--", "true"}, negative + ": budget.window: must be > 0 (got -1s)"},
		{"config unknown key", []string{"--config=" + unknown, "--", "true"}, unknown + `: guard.windw: must be a known setting (unknown key) (got "1s")`},
		{"config not an object", []string{"--config=" + array, "--", "true"}, array + ": must be a JSON object"},
		{"config long value", []string{"--config=" + long, "--", "true"}, long + `: budget.window: must be a duration string such as "60s" or "500ms"`},
		{"config without a flag", []string{"--config=" + fleet, "--", "true"}, fleet + ": fleet.cooldown: must be >= 0 (got -1s)"},
		{"missing config", []string{"--config=" + missing, "--", "true"}, "--config " + missing + ": no such file or directory"},
		{"negative probe", []string{"--probe-after=-1s", "--", "true"}, "--probe-after: must be >= 0 (0: off)"},
		{"bad probe, one dash", []string{"-probe-after=soon", "--", "true"}, `-probe-after: "soon" is not a duration such as 60s or 500ms`},
		{"probe max below", []string{"--probe-after=1m", "--probe-max=30s", "--", "true"}, "--probe-max: must be >= --probe-after (0: 16 x --probe-after)"},
		{"probe max alone", []string{"--probe-max=30s", "--", "true"}, "--probe-max: needs --probe-after (or probe_after in --config): probes are off"},
		{"config probe max", []string{"--config=" + probeMax, "--", "true"}, probeMax + ": probe_max: must be >= probe_after (0: 16 x probe_after) (got 30s)"},
		{"config probe max, the flag's", []string{"--config=" + probeMax, "--probe-max=10s", "--", "true"}, "--probe-max: must be >= --probe-after (0: 16 x --probe-after)"},
		{"config cause keys", []string{"--config=" + causeKeys, "--", "true"}, causeKeys + ": fleet.shared_cause.keys: must be >= 2 and <= 1000 (got 1)"},
		{"config cause probe_every", []string{"--config=" + causeEvery, "--", "true"},
			causeEvery + `: fleet.shared_cause.probe_every: must be a duration string such as "60s" or "500ms" (got soon)`},
		{"config cause unknown key", []string{"--config=" + causeKey, "--", "true"}, causeKey + ": fleet.shared_cause.key: must be a known setting (unknown key) (got 3)"},
		{"malformed state", []string{"--state=" + badState, "--", "true"}, "state file " + badState + " is malformed: invalid character 'n' looking for beginning of object key string"},
		{"resume without state", []string{"resume", "web"}, "resume needs --state FILE or --redis URL"},
		{"resume malformed state", []string{"resume", "--state", badState, "web"}, "state file " + badState + " is malformed: invalid character 'n' looking for beginning of object key string"},
		{"status without state", []string{"status"}, "status needs --state FILE or --redis URL"},
		{"status unknown flag", []string{"status", "--state", badState, "--all"}, "unknown flag --all (see crashloop --help)"},
		{"status unknown flag, one dash", []string{"status", "-state", badState, "-a"}, "unknown flag -a (see crashloop --help)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := runCL(t, c.args...)
			assert.Equal(t, exitUsage, r.code)
			assert.Equal(t, "crashloop: "+c.want+"\n", r.stderr)
			assert.Empty(t, r.stdout)
		})
	}
	data, err := os.ReadFile(badState)
	require.NoError(t, err)
	assert.Equal(t, "{not json", string(data), "a malformed state file is never overwritten")
}

// TestFlagOverridesTheConfigFile: a setting the file gets wrong but a flag
// sets is no error.
func TestFlagOverridesTheConfigFile(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "cfg.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"budget": {"window": "-1s"}}`), 0o644))
	r := runCL(t, with("--config="+cfg, "--window=30s", "--", "true")...)
	assert.Equal(t, 0, r.code, r.stderr)
}

// writeFile writes content to the file name in dir, and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}
