//go:build unix

package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// statusDoc is what the health tests read of /status: the health of the
// run under way.
type statusDoc struct {
	Health *struct {
		Status        string    `json:"status"`
		FailingStreak int       `json:"failing_streak"`
		LastCheck     time.Time `json:"last_check"`
		LastOutput    string    `json:"last_output"`
	} `json:"health"`
}

func readStatus(t tb, addr string) statusDoc {
	t.Helper()
	var st statusDoc
	code, doc := get(t, http.MethodGet, "http://"+addr+"/status")
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, json.Unmarshal([]byte(doc), &st), doc)
	return st
}

// TestHungProgramIsRestartedByItsHealthCheck: a program that hangs, whose
// health check fails --health-retries times in a row, is stopped with TERM
// and restarted; each stop counts as a failure (reason unhealthy), so the
// budget parks it.
func TestHungProgramIsRestartedByItsHealthCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	r := runCL(t, with("--key=hung", "--state="+state, "--max-respawns=1", "--health-cmd=echo db down; exit 1", "--health-interval=10ms", "--health-retries=2",
		"--", "sleep", "1000")...)
	require.Equal(t, exitParked, r.code, r.stderr)
	stops := regexp.MustCompile(`level=WARN msg="health check: 2 failed health checks in a row: db down; stopping the program's process group with SIGTERM" key=hung pid=(\d+) reason=unhealthy\n`).
		FindAllStringSubmatch(r.stderr, -1)
	require.Len(t, stops, 2, "started, stopped as unhealthy, restarted, stopped again: %s", r.stderr)
	assert.NotEqual(t, stops[0][1], stops[1][1], "two runs")
	assert.Contains(t, r.stderr, "crashloop: giving up on hung: respawn_budget_exhausted after 2 starts; last exit: stopped as unhealthy (2 failed health checks in a row: db down), killed by signal TERM\n")
	st, err := newStateStore(state).load(false)
	require.NoError(t, err)
	assert.Equal(t, "TERM", st.Marks["hung"].Signal)
	assert.Equal(t, "sleep stopped as unhealthy (2 failed health checks in a row: db down), killed by signal TERM", st.Marks["hung"].LastError)
}

// TestHealthCheckTimeout: a check that outlasts --health-timeout fails,
// and its process group is killed.
func TestHealthCheckTimeout(t *testing.T) {
	t.Parallel()
	checks := recordFile(t, t.TempDir())
	r := runCL(t, with("--key=slow", "--max-respawns=0", "--health-cmd="+helper+" record="+checks+" hang", "--health-interval=10ms", "--health-timeout=500ms", "--health-retries=1",
		"--", "sleep", "1000")...)
	require.Equal(t, exitParked, r.code, r.stderr)
	assert.Contains(t, r.stderr, `msg="health check: 1 failed health check in a row: the health check timed out after 500ms; stopping the program's process group with SIGTERM" key=slow`)
	_, pgids := records(t, checks)
	require.Len(t, pgids, 1)
	assert.Empty(t, alive(t, pgids[0]), "the check's process group is gone")
}

// TestHealthyProgramIsNeverStopped: a program whose checks pass runs on:
// its first passing check makes the run healthy (/readyz, with
// --healthy-after 0 that only READY=1 would satisfy otherwise), and
// /status and the metrics show it healthy.
func TestHealthyProgramIsNeverStopped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec, checks := recordFile(t, dir), filepath.Join(dir, "checks")
	c := startCL(t, with("--log-format=json", "--metrics-addr=127.0.0.1:0", "--key=ok", "--healthy-after=0", "--health-cmd=echo >> "+checks,
		"--health-interval=5ms", "--health-retries=1", "--", helper, "record="+rec, "hang")...)
	addr := metricsAddr(t, c)
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.GreaterOrEqual(ct, len(lines(ct, checks)), 30) }, patience, tick, "30 checks")
	assert.Len(t, lines(t, rec), 1, "never restarted")
	code, _ := ready(t, addr)
	assert.Equal(t, http.StatusOK, code)
	st := readStatus(t, addr)
	require.NotNil(t, st.Health)
	assert.Equal(t, healthHealthy, st.Health.Status)
	assert.Equal(t, 0, st.Health.FailingStreak)
	assert.False(t, st.Health.LastCheck.IsZero())
	fams, _ := scrape(t, addr)
	assert.Equal(t, 1.0, value(t, fams, "crashloop_health_status", map[string]string{"key": "ok", "status": "healthy"}))
	assert.Equal(t, 0.0, value(t, fams, "crashloop_health_status", map[string]string{"key": "ok", "status": "unhealthy"}))
	assert.Equal(t, 0.0, value(t, fams, "crashloop_health_failing_streak", map[string]string{"key": "ok"}))
	c.signal(t, syscall.SIGTERM)
	assert.Equal(t, 128+int(syscall.SIGTERM), c.wait(t))
	assert.Equal(t, 1, strings.Count(c.stderr.String(), `"msg":"the program is ready (its health check passed)"`), c.stderr.String())
	assert.NotContains(t, c.stderr.String(), "unhealthy")
}

// TestHealthStartPeriod: failed checks within --health-start-period do not
// count, until one passes; from then on each counts.
func TestHealthStartPeriod(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec, checks, up := recordFile(t, dir), filepath.Join(dir, "checks"), filepath.Join(dir, "up")
	c := startCL(t, with("--log-format=json", "--metrics-addr=127.0.0.1:0", "--key=slow-start", "--max-respawns=0",
		"--health-cmd=echo >> "+checks+"; [ -e "+up+" ]", "--health-interval=5ms", "--health-retries=1", "--health-start-period=1h",
		"--", helper, "record="+rec, "hang")...)
	addr := metricsAddr(t, c)
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.GreaterOrEqual(ct, len(lines(ct, checks)), 10) }, patience, tick, "10 failed checks")
	st := readStatus(t, addr)
	require.NotNil(t, st.Health)
	assert.Equal(t, healthStarting, st.Health.Status)
	assert.Equal(t, 0, st.Health.FailingStreak, "failures in the start period do not count")
	assert.Equal(t, "the health check exited with status 1", st.Health.LastOutput)

	touch(t, up)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		st := readStatus(ct, addr)
		require.NotNil(ct, st.Health)
		assert.Equal(ct, healthHealthy, st.Health.Status)
	}, patience, tick, "healthy")
	require.NoError(t, os.Remove(up))
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.Len(ct, lines(ct, rec), 2) }, patience, tick,
		"a failure after a passing check counts, in the start period too: a restart; stderr:\n%s", c.stderr)
	c.signal(t, syscall.SIGTERM)
	c.wait(t)
	assert.Contains(t, c.stderr.String(), `"msg":"health check: 1 failed health check in a row: the health check exited with status 1; stopping the program's process group with SIGTERM"`)
}

// TestRestartResetClearsTheWindow: RESTART_RESET=1 on the notify socket
// clears the respawn window: with --max-respawns 1, the second failed
// start parks, unless it reset the window, and then the third does; alone,
// and on a real redis-server, where the window is the replicas'.
func TestRestartResetClearsTheWindow(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, shared := range []bool{false, true} {
		for _, tc := range []struct {
			reset  string
			starts int
		}{{"", 2}, {"notify=RESTART_RESET=1", 3}} {
			dir := t.TempDir()
			rec := recordFile(t, dir)
			script := helper + " record=" + rec + "; [ $(wc -l < " + rec + ") -eq 2 ] && " + helper + " " + tc.reset + "; exit 1"
			args := []string{"--key=reset" + strconv.Itoa(tc.starts), "--max-respawns=1"}
			if shared {
				args = append(args, "--redis="+srv.URL())
			}
			r := runCL(t, with(append(args, "--", "sh", "-c", script)...)...)
			require.Equal(t, exitParked, r.code, r.stderr)
			assert.Len(t, lines(t, rec), tc.starts, "%s, redis %v", tc.reset, shared)
			assert.Equal(t, tc.reset != "", strings.Contains(r.stderr, "the program reset its restarts (RESTART_RESET=1): the respawn window and the chain are cleared"))
		}
	}
}
