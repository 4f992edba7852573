//go:build unix

package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// postResume posts /resume to addr with the bearer token, and returns the
// status.
func postResume(t *testing.T, addr, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/resume", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestOnParkExecGetsThePark: the hook runs once for the park, with the
// park in its environment; its output and status are logged, and
// crashloop waits for it before it exits.
func TestOnParkExecGetsThePark(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	got := filepath.Join(dir, "hook")
	hook := `env | grep '^CRASHLOOP_' | sort > ` + got + `; echo hook says hi; exit 4`
	r := runCL(t, with("--key=web", "--max-respawns=1", "--on-park-exec="+hook, "--", "sh", "-c", `echo "fatal: missing setting db_url" >&2; exit 3`)...)
	require.Equal(t, exitParked, r.code, r.stderr)
	data, err := os.ReadFile(got)
	require.NoError(t, err)
	env := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	require.Len(t, env, 9, string(data))
	since, ok := strings.CutPrefix(env[7], "CRASHLOOP_SINCE=")
	require.True(t, ok, env[7])
	_, err = time.Parse(time.RFC3339, since)
	require.NoError(t, err)
	env[7] = "CRASHLOOP_SINCE=*"
	assert.Equal(t, []string{
		"CRASHLOOP_ATTEMPTS=1",
		"CRASHLOOP_EVENT=agent.startup_exhausted",
		"CRASHLOOP_EXIT_CODE=3",
		"CRASHLOOP_KEY=web",
		"CRASHLOOP_LAST_ERROR=sh exited with status 3",
		"CRASHLOOP_REASON=respawn_budget_exhausted",
		"CRASHLOOP_SIGNAL=",
		"CRASHLOOP_SINCE=*",
		"CRASHLOOP_STDERR_TAIL=fatal: missing setting db_url", // its newline is a line grep drops
	}, env)
	assert.Equal(t, 1, strings.Count(r.stderr, "--on-park-exec"), r.stderr)
	assert.Regexp(t, `level=WARN msg="--on-park-exec exited with status 4" key=web event=agent.startup_exhausted took=\d+ms output="hook says hi\\n" exit_code=4\n`, r.stderr)
}

// TestOnParkExecTimeout: a hook that hangs is stopped after --hook-timeout,
// with its process group, and crashloop exits then.
func TestOnParkExecTimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := recordFile(t, dir)
	hook := helper + " record=" + rec + " spawn=record=" + rec + "+hang hang"
	start := time.Now()
	r := runCL(t, with("--key=slow", "--max-respawns=0", "--hook-timeout=300ms", "--on-park-exec="+hook, "--", "sh", "-c", "exit 1")...)
	require.Equal(t, exitParked, r.code, r.stderr)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Contains(t, r.stderr, `level=WARN msg="--on-park-exec did not finish within --hook-timeout 300ms; stopped it" key=slow event=agent.startup_exhausted`)
	_, pgids := records(t, rec)
	require.Len(t, pgids, 2, "the hook and the process it started")
	require.Equal(t, pgids[0], pgids[1], "one process group")
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Empty(c, alive(c, pgids[0])) }, patience, tick, "the hook's group to end")
}

// TestOnParkExecNeverBlocksAResume: under --on-park wait, a resume over
// HTTP starts the program again while the hook of the park still runs.
func TestOnParkExecNeverBlocksAResume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec, hookRan, token := recordFile(t, dir), filepath.Join(dir, "hook-ran"), filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(token, []byte("s3cret\n"), 0o600))
	hook := helper + " touch=" + hookRan + " wait=" + hookRan + ".gate"
	c := startCL(t, with("--log-format=json", "--key=w", "--max-respawns=0", "--on-park=wait", "--metrics-addr=127.0.0.1:0", "--admin-token-file="+token,
		"--hook-timeout=1h", "--on-park-exec="+hook, "--", helper, "record="+rec, "exit=1")...)
	addr := metricsAddr(t, c)
	require.Eventually(t, func() bool { return exists(hookRan) }, patience, tick, "the hook")
	require.Eventually(t, func() bool { return postResume(t, addr, "s3cret") == 200 }, patience, tick, "the resume")
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.Len(ct, lines(ct, rec), 2) }, patience, tick, "the start after the resume, the hook still running")
	require.Eventually(t, func() bool { return strings.Count(c.stderr.String(), `"msg":"giving up on w`) == 2 }, patience, tick, "the second park")
	assert.NotContains(t, c.stderr.String(), "--on-park-exec", "the first hook still runs")
	touch(t, hookRan+".gate") // the hooks of both parks end
	c.signal(t, 15)
	assert.Equal(t, 0, c.wait(t), "stopped while parked")
	assert.Equal(t, 2, strings.Count(c.stderr.String(), `"msg":"--on-park-exec exited with status 0"`), c.stderr.String())
}

// TestOnParkExecRunsOnceAcrossReplicas: two crashloops of one key on one
// redis-server, both running when the key parks: the hook runs once, by
// the replica that announces the park, with the program's exit status and
// stderr tail, whichever replica's run made it.
func TestOnParkExecRunsOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	starts, gate, got := filepath.Join(dir, "starts"), filepath.Join(dir, "gate"), filepath.Join(dir, "hook")
	hook := `printf '%s|%s|%s|%s\n' "$CRASHLOOP_KEY" "$CRASHLOOP_REASON" "$CRASHLOOP_EXIT_CODE" "$CRASHLOOP_STDERR_TAIL" >> ` + got
	args := with("--redis="+srv.URL(), "--key=web", "--max-respawns=1", "--on-park-exec="+hook,
		"--", "sh", "-c", helper+" record="+starts+" wait="+gate+"; echo 'fatal: no db' >&2; exit 3")
	cls := []*bg{startCL(t, args...), startCL(t, args...)}
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Len(c, lines(c, starts), 2) }, patience, tick, "both first starts")
	touch(t, gate)
	for _, c := range cls {
		require.Equal(t, exitParked, c.wait(t), c.stderr.String())
	}
	assert.Equal(t, []string{"web|respawn_budget_exhausted|3|fatal: no db", ""}, lines(t, got), "one run of the hook (the tail ends in a newline)")

	r := runCL(t, "status", "--redis", srv.URL(), "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var st redisStatus
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.NotNil(t, st.Parked["web"].ExitCode)
	assert.Equal(t, 3, *st.Parked["web"].ExitCode)
	assert.Equal(t, "fatal: no db\n", st.Parked["web"].StderrTail)
}

// TestOnTripExecRunsOnTheTrip: the fleet breaker's trip runs
// --on-trip-exec once, with the trip in its environment.
func TestOnTripExecRunsOnTheTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec, ready, got := recordFile(t, dir), filepath.Join(dir, "ready"), filepath.Join(dir, "hook")
	config := filepath.Join(dir, "config.json")
	require.NoError(t, os.WriteFile(config, []byte(`{"fleet": {"restarts_per_hour": 5, "failing_fraction": 1, "min_failing": 1, "cooldown": "1h"}}`), 0o644))
	hook := `echo "$CRASHLOOP_KEY $CRASHLOOP_REASON $CRASHLOOP_ATTEMPTS $CRASHLOOP_EVENT" >> ` + got
	c := startCL(t, with("--key=solo", "--chain-max=0", "--healthy-after=0", "--config="+config, "--on-trip-exec="+hook, "--on-park-exec=touch "+got+".park",
		"--", "sh", "-c", crashAfterReady(rec, ready, 51, false))...)
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Len(c, lines(c, got), 1) }, patience, tick, "the hook of the trip")
	c.signal(t, 15)
	c.wait(t)
	assert.Equal(t, []string{"fleet fleet_restart_rate 5 fleet.breaker_tripped"}, lines(t, got))
	assert.NoFileExists(t, got+".park", "a trip is no park")
}
