//go:build unix

package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crashloopguard/crashloop/redisstore/redistest"
)

// gated returns the argv of a program that records each start in tried,
// fails until gate exists, and then records its pid in running, says
// READY=1 and runs until killed.
func gated(gate, tried, running string) []string {
	return []string{"sh", "-c", `"$0" record="$3" && test -e "$1" || exit 1; exec "$0" record="$2" notify=READY=1 hang`,
		helper, gate, running, tried}
}

// gateFiles returns the files of a gated program in a new folder.
func gateFiles(t *testing.T) (gate, tried, running string) {
	dir := t.TempDir()
	return filepath.Join(dir, "gate"), filepath.Join(dir, "tried"), filepath.Join(dir, "running")
}

// written returns the number of whole lines in file (a line being written
// has no newline yet): 0 if it does not exist.
func written(file string) int {
	data, _ := os.ReadFile(file)
	return strings.Count(string(data), "\n")
}

// ready returns /readyz's status and body.
func ready(t tb, addr string) (int, string) {
	t.Helper()
	return get(t, http.MethodGet, "http://"+addr+"/readyz")
}

// waitingOn waits until crashloop says it waits for a resume.
func waitingOn(t *testing.T, c *bg) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(c.stderr.String(), "--on-park wait: the program stays stopped") },
		patience, tick, "crashloop to wait on the park")
}

// TestParkedCommandFiresTheAlertAndResumes is the operator's loop with a
// real Prometheus: a crashloop with --on-park wait parks its program and
// stays up, so the CrashloopParked alert fires in Prometheus's own alerts
// API; crashloop resume through the state file starts the program again
// under the same crashloop (same pid, the program its child again), and
// the alert resolves. /healthz stays 200 throughout; /readyz is 503 while
// parked and 200 once the program said READY=1.
func TestParkedCommandFiresTheAlertAndResumes(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state.json")
	gate, tried, running := gateFiles(t)
	c := startCL(t, append(with("--log-format=json", "--metrics-addr=127.0.0.1:0", "--on-park=wait", "--state="+state,
		"--key=web", "--max-respawns=0", "--"), gated(gate, tried, running)...)...)
	addr := metricsAddr(t, c)
	waitingOn(t, c)
	prom := startPrometheus(t, addr)

	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, "firing", prom.alert(ct, "CrashloopParked", "web"))
	}, patience, promTick, "CrashloopParked to fire")
	code, body := get(t, http.MethodGet, "http://"+addr+"/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)
	code, body = ready(t, addr)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "parked\n", body)
	r := runCL(t, "status", "--state", state)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "\nweb  respawn_budget_exhausted  ")
	assert.Len(t, lines(t, tried), 1, "one failed start parks (--max-respawns=0)")

	touch(t, gate)
	r = runCL(t, "resume", "--state", state, "web")
	require.Equal(t, 0, r.code, r.stderr)
	require.Eventually(t, func() bool { return written(running) == 1 }, patience, tick, "the resumed program")
	pids, _ := records(t, running)
	var parent int
	for _, p := range procs(t) {
		if p.pid == pids[0] {
			parent = p.ppid
		}
	}
	assert.Equal(t, c.cmd.Process.Pid, parent, "the program runs again under the same crashloop")
	assert.False(t, c.exited())
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		code, body := ready(ct, addr)
		assert.Equal(ct, http.StatusOK, code)
		assert.Equal(ct, "ready\n", body)
	}, patience, tick, "the resumed program to be ready")
	fams, _ := scrape(t, addr)
	assert.NotContains(t, fams, "crashloop_parked")
	assert.Equal(t, 1.0, value(t, fams, "crashloop_events_total", map[string]string{"kind": "agent.resumed"}))

	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, "", prom.alert(ct, "CrashloopParked", "web"))
	}, patience, promTick, "CrashloopParked to resolve")
	assert.Len(t, lines(t, tried), 2)
	assert.Empty(t, readMarks(t, state))

	c.signal(t, syscall.SIGTERM)
	assert.Equal(t, 128+int(syscall.SIGTERM), c.wait(t), "the running program's status")
	assert.Contains(t, c.stderr.String(), `"msg":"web was resumed (the state file): starting it with a full budget"`)
}

// promTick is how often a test asks Prometheus's API for a condition.
const promTick = 100 * time.Millisecond

// TestWaitingOnAParkAtStart: a crashloop with --on-park wait started on a
// key the state file parks serves the park (the supervisor knows it, with
// its reason) instead of refusing; INT or TERM while parked ends it with
// status 0, the park kept.
func TestWaitingOnAParkAtStart(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state.json")
	gate, tried, running := gateFiles(t)
	r := runCL(t, append(with("--state="+state, "--key=web", "--max-respawns=0", "--"), gated(gate, tried, running)...)...)
	require.Equal(t, exitParked, r.code, r.stderr)
	require.Len(t, lines(t, tried), 1)

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		c := startCL(t, append(with("--log-format=json", "--metrics-addr=127.0.0.1:0", "--on-park=wait", "--state="+state,
			"--key=web", "--max-respawns=0", "--"), gated(gate, tried, running)...)...)
		addr := metricsAddr(t, c)
		waitingOn(t, c)
		fams, _ := scrape(t, addr)
		assert.Equal(t, 1.0, value(t, fams, "crashloop_parked", map[string]string{"key": "web", "reason": "respawn_budget_exhausted"}))
		assert.Equal(t, 1.0, value(t, fams, "crashloop_key_state", map[string]string{"key": "web", "state": "parked"}))
		code, body := ready(t, addr)
		assert.Equal(t, http.StatusServiceUnavailable, code)
		assert.Equal(t, "parked\n", body)
		code, body = get(t, http.MethodGet, "http://"+addr+"/healthz")
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, "ok\n", body)
		code, _ = get(t, http.MethodPost, "http://"+addr+"/resume")
		assert.Equal(t, http.StatusNotFound, code, "no --admin-token-file: no /resume")
		assert.Contains(t, c.stderr.String(), `"msg":"web is parked since `)

		c.signal(t, sig)
		assert.Equal(t, 0, c.wait(t), c.stderr.String())
		assert.Contains(t, c.stderr.String(), `"msg":"stopped while web was parked; it stays parked"`)
		assert.Len(t, lines(t, tried), 1, "the program was not started")
		assert.Equal(t, "respawn_budget_exhausted", readMarks(t, state)["web"].Reason)
	}
}

// readMarks returns the marks of a state file.
func readMarks(t *testing.T, state string) map[string]mark {
	t.Helper()
	st, err := newStateStore(state).load(false)
	require.NoError(t, err)
	return st.Marks
}

// TestResumeOverHTTP: with --admin-token-file, POST /resume with the
// bearer token resumes a waiting crashloop at once; a missing token gets
// 401, a wrong one 403, a GET 405, and a program that is not parked 409.
// The token never reaches crashloop's stderr.
func TestResumeOverHTTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const token = "s3cret-T0KEN-never-logged"
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	gate, tried, running := gateFiles(t)
	c := startCL(t, append(with("--log-format=json", "--metrics-addr=127.0.0.1:0", "--on-park=wait", "--admin-token-file="+tokenFile,
		"--key=web", "--max-respawns=0", "--"), gated(gate, tried, running)...)...)
	addr := metricsAddr(t, c)
	waitingOn(t, c)
	url := "http://" + addr + "/resume"

	post := func(auth string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, url, nil)
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, _ := post("")
	assert.Equal(t, http.StatusUnauthorized, code, "no token")
	code, _ = post("Basic " + token)
	assert.Equal(t, http.StatusUnauthorized, code, "not a bearer token")
	code, _ = post("bearer wrong")
	assert.Equal(t, http.StatusForbidden, code, "a wrong token (the scheme is case-insensitive)")
	code, _ = post("Bearer " + token + "x")
	assert.Equal(t, http.StatusForbidden, code, "a longer token")
	code, _ = get(t, http.MethodGet, url)
	assert.Equal(t, http.StatusMethodNotAllowed, code, "GET")
	assert.Len(t, lines(t, tried), 1, "refused requests resume nothing")
	code, _ = ready(t, addr)
	assert.Equal(t, http.StatusServiceUnavailable, code)

	touch(t, gate)
	code, body := post("Bearer " + token)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "resumed web; it starts again with a full budget\n", body)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		code, body := ready(ct, addr)
		assert.Equal(ct, http.StatusOK, code)
		assert.Equal(ct, "ready\n", body)
	}, patience, tick, "the resumed program to be ready")
	assert.Len(t, lines(t, tried), 2)
	code, body = post("Bearer " + token)
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, "web is not parked\n", body)

	c.signal(t, syscall.SIGTERM)
	assert.Equal(t, 128+int(syscall.SIGTERM), c.wait(t), "the running program's status")
	assert.NotContains(t, c.stderr.String(), token)
	assert.NotContains(t, c.stderr.String(), "s3cret")
	assert.Contains(t, c.stderr.String(), `"msg":"refused a resume over HTTP: wrong token"`)
	assert.Contains(t, c.stderr.String(), `"msg":"web was resumed (HTTP): starting it with a full budget"`)
}

// TestResumeOverRedisReachesAWaitingCrashloop: crashloop resume --redis
// starts the program of a crashloop that waits on the park within a
// second.
func TestResumeOverRedisReachesAWaitingCrashloop(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	gate, tried, running := gateFiles(t)
	c := startCL(t, append(with("--log-format=json", "--redis="+srv.URL(), "--on-park=wait", "--key=web", "--max-respawns=0", "--"),
		gated(gate, tried, running)...)...)
	waitingOn(t, c)
	touch(t, gate)
	r := runCL(t, "resume", "--redis", srv.URL(), "web")
	require.Equal(t, 0, r.code, r.stderr)
	resumed := time.Now()
	require.Eventually(t, func() bool { return written(running) == 1 }, time.Second, tick, "the program to start within a second of the resume")
	t.Logf("the program started %v after the resume", time.Since(resumed))
	assert.Len(t, lines(t, tried), 2)
	assert.False(t, c.exited(), "the same crashloop")
	c.signal(t, syscall.SIGTERM)
	assert.Equal(t, 128+int(syscall.SIGTERM), c.wait(t), c.stderr.String())
	assert.Contains(t, c.stderr.String(), `"msg":"web was resumed (Redis): starting it with a full budget"`)
}

// TestOnParkExitSaysAParkIsNotScrapeable: with --metrics-addr and the
// default --on-park exit, crashloop says once, at the start, that a park
// will end it and its metrics server.
func TestOnParkExitSaysAParkIsNotScrapeable(t *testing.T) {
	t.Parallel()
	r := runCL(t, with("--metrics-addr=127.0.0.1:0", "--key=web", "--max-respawns=0", "--", helper, "exit=3")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Equal(t, 1, strings.Count(r.stderr, `msg="--on-park exit: a park ends crashloop and its metrics server, so no scrape will see it (--on-park wait keeps serving)" key=web`+"\n"), r.stderr)
	r = runCL(t, with("--key=web", "--max-respawns=0", "--", helper, "exit=3")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.NotContains(t, r.stderr, "--on-park", "nothing to scrape, nothing to say")
}

// TestOnParkFlagErrors: --on-park and --admin-token-file that cannot work
// are one line naming the flag, and exit status 2, before anything starts;
// the token file's content is never printed.
func TestOnParkFlagErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token, empty, missing := filepath.Join(dir, "token"), filepath.Join(dir, "empty"), filepath.Join(dir, "missing")
	require.NoError(t, os.WriteFile(token, []byte("tok"), 0o600))
	require.NoError(t, os.WriteFile(empty, []byte(" \n"), 0o600))
	state := filepath.Join(dir, "state.json")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--on-park=later"}, `--on-park: "later" is not exit or wait`},
		{[]string{"--on-park=wait"}, "--on-park wait: needs --state, --redis or --admin-token-file, or nothing could resume the program"},
		{[]string{"--admin-token-file=" + token, "--metrics-addr=127.0.0.1:0", "--state=" + state},
			"--admin-token-file: only with --on-park wait (it serves the resume of a waiting crashloop)"},
		{[]string{"--on-park=wait", "--admin-token-file=" + token}, "--admin-token-file: needs --metrics-addr, the address that serves POST /resume"},
		{[]string{"--on-park=wait", "--metrics-addr=127.0.0.1:0", "--admin-token-file=" + empty}, "--admin-token-file " + empty + ": the file is empty"},
		{[]string{"--on-park=wait", "--metrics-addr=127.0.0.1:0", "--admin-token-file=" + missing}, "--admin-token-file " + missing + ": no such file or directory"},
	}
	for _, tc := range cases {
		r := runCL(t, append(tc.args, "--", helper, "touch="+filepath.Join(dir, "started"), "exit=0")...)
		assert.Equal(t, exitUsage, r.code, tc.want)
		assert.Equal(t, "crashloop: "+tc.want+"\n", r.stderr)
		assert.NoFileExists(t, filepath.Join(dir, "started"))
	}
	assert.NoFileExists(t, state)
}
