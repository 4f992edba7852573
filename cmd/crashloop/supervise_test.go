//go:build unix

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFailingProgramParksAfterTheBudget(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "starts")
	r := runCL(t, with("--key=job", "--", "sh", "-c", "echo x >> "+f+"; echo starting; exit 1")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Len(t, lines(t, f), 4, "the first start and 3 respawns")
	assert.Equal(t, strings.Repeat("starting\n", 4), r.stdout)
	assert.True(t, strings.HasSuffix(r.stderr, "\ncrashloop: giving up on job: respawn_budget_exhausted after 4 starts; last exit: exited with status 1\n"), r.stderr)
	assert.Equal(t, 3, strings.Count(r.stderr, "event=agent.respawn_scheduled"), r.stderr)
	assert.Equal(t, 1, strings.Count(r.stderr, "event=agent.startup_exhausted"), r.stderr)
	assert.NotContains(t, r.stderr, "crashloop: crashloop:")
}

func TestMaxRespawnsFlagSetsTheBudget(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "starts")
	r := runCL(t, with("--max-respawns=5", "--", helper, "record="+f, "exit=3")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Len(t, lines(t, f), 6)
}

func TestOneStartAndSignalNamesReadRight(t *testing.T) {
	t.Parallel()
	r := runCL(t, with("--key=one", "--max-respawns=0", "--", helper, "kill=TERM", "hang")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Contains(t, r.stderr, `last_error="`+helper+` killed by signal TERM"`)
	assert.True(t, strings.HasSuffix(r.stderr, "\ncrashloop: giving up on one: respawn_budget_exhausted after 1 start; last exit: killed by signal TERM\n"), r.stderr)
}

func TestCleanExitEndsTheRun(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "starts")
	r := runCL(t, with("--", helper, "record="+f, "exit=0")...)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Len(t, lines(t, f), 1)
	assert.Empty(t, r.stderr)
}

func TestRecoveringProgramEndsWithItsCleanExit(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "starts")
	// Fails twice, then succeeds.
	script := "echo x >> " + f + "; [ $(wc -l < " + f + ") -ge 3 ] && exit 0; exit 1"
	r := runCL(t, with("--", "sh", "-c", script)...)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Len(t, lines(t, f), 3)
	assert.Equal(t, 2, strings.Count(r.stderr, "event=agent.respawn_scheduled"), r.stderr)
}

func TestRestartAlwaysParksEarlyCleanExits(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "starts")
	// A clean exit before the run was healthy is a failed start: it parks.
	r := runCL(t, with("--restart=always", "--", helper, "record="+f, "exit=0")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Len(t, lines(t, f), 4)
}

func TestPermanentExitCodeParksAtOnce(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "starts")
	r := runCL(t, with("--key=p", "--permanent-exit-codes=78, 125", "--", helper, "record="+f, "exit=125")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Len(t, lines(t, f), 1)
	assert.True(t, strings.HasSuffix(r.stderr, "\ncrashloop: giving up on p: permanent_error after 1 start; last exit: exited with status 125\n"), r.stderr)
}

func TestGuardFlagParksOnTheFastGuard(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "starts")
	r := runCL(t, with("--max-respawns=10", "--guard=3/60s", "--", helper, "record="+f, "exit=1")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Len(t, lines(t, f), 4, "the guard allows 3 restarts; the 4th failure parks")
	assert.Contains(t, r.stderr, "restart_loop_guard after 4 starts")
	assert.Equal(t, 1, strings.Count(r.stderr, "channel.crash_loop_tripped"), r.stderr)
}

func TestDefaultKeyIsStableAndReadable(t *testing.T) {
	k := defaultKey([]string{"sh", "-c", "exit 1"})
	assert.Equal(t, k, defaultKey([]string{"sh", "-c", "exit 1"}))
	assert.NotEqual(t, k, defaultKey([]string{"sh", "-c", "exit 2"}))
	assert.True(t, strings.HasPrefix(k, "sh-"), k)
	assert.Len(t, k, len("sh-")+8)
}

// TestRestartsAreLogged: restarts no budget judges are logged too
// (agent.restart_scheduled): a clean exit under --restart=always after a
// healthy run, and a crash after a healthy run.
func TestRestartsAreLogged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec, ready := recordFile(t, dir), filepath.Join(dir, "ready")
	// Healthy (READY=1) runs that exit 0; the third one stays up.
	script := helper + " record=" + rec + " notify=READY=1; [ $(wc -l < " + rec + ") -ge 3 ] && exec " + helper + " touch=" + ready + " hang; exit 0"
	c := startCL(t, with("--key=always", "--restart=always", "--healthy-after=0", "--", "sh", "-c", script)...)
	require.Eventually(t, func() bool { return exists(ready) }, patience, tick, "the third run")
	c.signal(t, syscall.SIGTERM)
	assert.Equal(t, 128+int(syscall.SIGTERM), c.wait(t), c.stderr.String())
	for n := 1; n <= 2; n++ {
		assert.Contains(t, c.stderr.String(), fmt.Sprintf(`level=INFO msg="key \"always\" exited cleanly; restart %d now" event=agent.restart_scheduled key=always incarnation=always#1 reason=clean_exit attempts=%d backoff=0s`+"\n", n, n))
	}
	assert.Equal(t, 2, strings.Count(c.stderr.String(), "event=agent.restart_scheduled"), c.stderr.String())

	r := runCL(t, with("--key=crash", "--healthy-after=0", "--", helper, "notify=READY=1", "exit=1")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	for n := 1; n <= 3; n++ {
		assert.Contains(t, r.stderr, fmt.Sprintf(`level=WARN msg="key \"crash\" crashed after a healthy run; restart %d in 1ms" event=agent.restart_scheduled key=crash incarnation=crash#1 reason=crashed attempts=%d backoff=1ms last_error="%s exited with status 1" exit_code=1`+"\n", n, n, helper))
	}
	assert.Equal(t, 3, strings.Count(r.stderr, "event=agent.restart_scheduled"), r.stderr)
}

// TestChainMaxCountsRestarts: --chain-max N restarts N failures after
// healthy runs, one after the other, and the next one parks, as
// docs/cli.md says: N+1 starts.
func TestChainMaxCountsRestarts(t *testing.T) {
	t.Parallel()
	rec := recordFile(t, t.TempDir())
	r := runCL(t, with("--key=chain", "--healthy-after=0", "--chain-max=2", "--", helper, "record="+rec, "notify=READY=1", "exit=1")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Len(t, lines(t, rec), 3, "starts")
	assert.Equal(t, 2, strings.Count(r.stderr, "event=agent.restart_scheduled"), r.stderr)
	assert.True(t, strings.HasSuffix(r.stderr, "\ncrashloop: giving up on chain: needs_human after 3 starts; last exit: exited with status 1\n"), r.stderr)
}
