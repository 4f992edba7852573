//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonLines returns the JSON log lines of stderr, without their time.
func jsonLines(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(stderr) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		delete(m, "time")
		delete(m, "since")
		out = append(out, m)
	}
	return out
}

// stop: crashloop ends with the program's status (128+N for signal N),
// after one start, and says why.
func TestOnExitStopEndsWithTheProgramsStatus(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "starts")
	r := runCL(t, with("--key=s", "--log-format=json", "--on-exit=3=stop", "--", helper, "record="+f, "exit=3")...)
	assert.Equal(t, 3, r.code, r.stderr)
	assert.Len(t, lines(t, f), 1)
	assert.Equal(t, []map[string]any{{"level": "INFO", "msg": helper + " exited with status 3: an --on-exit stop rule ends supervision with its status 3",
		"key": "s", "exit_code": 3.0}}, jsonLines(t, r.stderr))

	r = runCL(t, with("--key=s", "--on-exit=SIGSEGV=stop", "--", "sh", "-c", "kill -SEGV $$")...)
	assert.Equal(t, 128+11, r.code, r.stderr)
	assert.Equal(t, "crashloop: sh killed by signal SEGV: an --on-exit stop rule ends supervision with its status 139\n", r.stderr)
}

// park: at once, reason permanent_error; the first rule that matches wins.
func TestOnExitParkAndTheFirstMatchWins(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "starts")
	r := runCL(t, with("--key=p", "--log-format=json", "--on-exit=3=stop", "--on-exit=1-5,78=park", "--", helper, "record="+f, "exit=4")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Len(t, lines(t, f), 1)
	got := jsonLines(t, r.stderr)
	require.Len(t, got, 2, r.stderr)
	assert.Equal(t, map[string]any{"level": "ERROR", "event": "agent.startup_exhausted", "key": "p", "reason": "permanent_error",
		"msg":   `key "p" parked (permanent_error); nothing records the park (no --state or --redis): it ends with this crashloop, and the next one starts the program`,
		"limit": 3.0, "window": "10s", "last_error": helper + " exited with status 4", "exit_code": 4.0}, got[0])
	assert.Equal(t, map[string]any{"level": "ERROR", "key": "p", "reason": "permanent_error", "attempts": 0.0, "starts": 1.0,
		"msg":        "giving up on p: permanent_error after 1 start; last exit: exited with status 4",
		"last_error": helper + " exited with status 4", "last_exit": "exited with status 4", "exit_code": 4.0}, got[1])

	r = runCL(t, with("--key=p", "--on-exit=3=stop", "--on-exit=1-5,78=park", "--", helper, "exit=3")...)
	assert.Equal(t, 3, r.code, "3 matches the first rule: %s", r.stderr)
	r = runCL(t, with("--key=p", "--on-exit=segv=park", "--", "sh", "-c", "kill -SEGV $$")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.True(t, strings.HasSuffix(r.stderr, "\ncrashloop: giving up on p: permanent_error after 1 start; last exit: killed by signal SEGV\n"), r.stderr)
}

// planned: a restart at once that spends no budget; --max-respawns=0
// would park on the first failure the budget judged.
func TestOnExitPlannedSpendsNoBudget(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "starts")
	script := helper + " record=" + f + "; [ $(wc -l < " + f + ") -ge 3 ] && exit 0; exit 75"
	r := runCL(t, with("--key=pl", "--log-format=json", "--max-respawns=0", "--on-exit=75=planned", "--", "sh", "-c", script)...)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Len(t, lines(t, f), 3)
	want := func(n float64) map[string]any {
		return map[string]any{"level": "WARN", "event": "agent.restart_scheduled", "key": "pl", "incarnation": "pl#1", "reason": "planned",
			"msg": fmt.Sprintf(`key "pl" asked for a restart; restart %v now`, n), "attempts": n, "backoff": "0s", "last_error": "sh exited with status 75", "exit_code": 75.0}
	}
	assert.Equal(t, []map[string]any{want(1), want(2)}, jsonLines(t, r.stderr))
}

// restart: the budget judges it, as it judges what no rule matches; a
// rule on exit statuses does not match a signal.
func TestOnExitRestartIsJudgedByTheBudget(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "starts")
	r := runCL(t, with("--key=r", "--max-respawns=1", "--on-exit=SIGKILL=restart", "--on-exit=1-255=park", "--", helper, "record="+f, "kill=KILL")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Len(t, lines(t, f), 2)
	assert.True(t, strings.HasSuffix(r.stderr, "\ncrashloop: giving up on r: respawn_budget_exhausted after 2 starts; last exit: killed by signal KILL\n"), r.stderr)
}

// A run that crashloop stopped (its health check failed) is not the
// program's own end: the rules do not judge it.
func TestOnExitDoesNotJudgeRunsCrashloopStopped(t *testing.T) {
	t.Parallel()
	r := runCL(t, with("--key=h", "--max-respawns=0", "--on-exit=SIGTERM=stop", "--health-cmd=exit 1", "--health-interval=5ms",
		"--health-retries=1", "--", helper, "hang")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Contains(t, r.stderr, "giving up on h: respawn_budget_exhausted after 1 start")
}

// --permanent-exit-codes X is --on-exit X=park, in the order given; the
// rules of --config are replaced by the flags' rules.
func TestPermanentExitCodesIsOnExitPark(t *testing.T) {
	config := func(args ...string) crashloop.SupervisorConfig {
		t.Helper()
		s := newSettings()
		require.NoError(t, s.fs.Parse(args))
		require.NoError(t, s.check())
		cfg, err := s.configuration()
		require.NoError(t, err)
		return cfg
	}
	short := config("--permanent-exit-codes=78, 125")
	assert.Equal(t, config("--on-exit=78,125=park"), short)
	assert.Equal(t, []crashloop.ExitRule{"78,125=park"}, short.ExitRules)
	assert.Equal(t, []crashloop.ExitRule{"78=stop", "78,3=park", "oom=planned"},
		config("--on-exit=78=stop", "--permanent-exit-codes=78,3", "--on-exit=oom=planned").ExitRules)

	file := writeFile(t, t.TempDir(), "rules.json", `{"exit_rules": ["3=stop", "SIGKILL=park"]}`)
	assert.Equal(t, []crashloop.ExitRule{"3=stop", "SIGKILL=park"}, config("--config="+file).ExitRules)
	assert.Equal(t, []crashloop.ExitRule{"4=park"}, config("--config="+file, "--permanent-exit-codes=4").ExitRules)

	// The same rules in a file, on real processes.
	t.Parallel()
	r := runCL(t, with("--config="+file, "--", helper, "exit=3")...)
	assert.Equal(t, 3, r.code, r.stderr)
	r = runCL(t, with("--config="+file, "--on-exit=3=park", "--", helper, "exit=3")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
}

func TestOnExitErrorsNameTheFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badRule := writeFile(t, dir, "bad-rule.json", `{"exit_rules": ["3=stop", "3=again"]}`)
	notList := writeFile(t, dir, "not-list.json", `{"exit_rules": "3=stop"}`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--on-exit=78", "--", "true"}, `--on-exit: "78" must be MATCH=ACTION, such as 78=park or SIGKILL=stop`},
		{[]string{"-on-exit", "0=park", "--", "true"}, `-on-exit: "0=park" must be a MATCH of exit statuses from 1 to 255 (3, 64-78, 1,2,5-9), a signal (SIGSEGV or SEGV) or oom`},
		{[]string{"--on-exit=1=retry", "--", "true"}, `--on-exit: "1=retry" must be an ACTION of restart, park, stop or planned`},
		{[]string{"--on-exit=SIGFOO=park", "--", "true"}, `--on-exit: "SIGFOO=park" must be a MATCH naming a POSIX signal such as SIGKILL, SIGSEGV or SEGV`},
		{[]string{"--on-exit=", "--", "true"}, `--on-exit: must not be empty`},
		{[]string{"--permanent-exit-codes=1,256", "--", "true"}, `--permanent-exit-codes: "256" is not an exit status from 1 to 255`},
		{[]string{"--config=" + badRule, "--", "true"}, badRule + `: exit_rules: must be an ACTION of restart, park, stop or planned (got 3=again)`},
		{[]string{"--config=" + notList, "--", "true"}, notList + `: exit_rules: must be a list of "MATCH=ACTION" strings such as ["78=park"] (got "3=stop")`},
	} {
		r := runCL(t, c.args...)
		assert.Equal(t, exitUsage, r.code, c.args)
		assert.Equal(t, "crashloop: "+c.want+"\n", r.stderr, c.args)
	}
}

// The rules decide the same on Redis: a stop ends with the program's
// status and leaves nothing parked; a park is the deployment's, with how
// the program ended.
func TestOnExitOnRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	r := runCL(t, with("--redis", srv.URL(), "--key=job", "--on-exit=3=stop", "--on-exit=78=park", "--", helper, "exit=3")...)
	assert.Equal(t, 3, r.code, r.stderr)
	r = runCL(t, "status", "--redis", srv.URL(), "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var st struct{ Parks []map[string]any }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	assert.Empty(t, st.Parks, "a stop parks nothing")

	r = runCL(t, with("--redis", srv.URL(), "--key=job", "--on-exit=3=stop", "--on-exit=78=park", "--", helper, "exit=78")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	r = runCL(t, "status", "--redis", srv.URL(), "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Len(t, st.Parks, 1, r.stdout)
	assert.Equal(t, map[string]any{"key": "job", "reason": "permanent_error", "since": st.Parks[0]["since"], "attempts": 0.0,
		"last_error": helper + " exited with status 78", "exit_code": 78.0}, st.Parks[0])
}
