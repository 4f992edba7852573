//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoProcessOfTheGroupSurvives checks the process table: on every path
// that ends a run, nothing of the run's process group is left, neither the
// program nor what it started in the background, even what ignores TERM.
func TestNoProcessOfTheGroupSurvives(t *testing.T) {
	t.Parallel()
	type path struct {
		name  string
		args  func(rec, ready string) []string
		end   func(t *testing.T, c *bg, ready string) // nil: crashloop ends by itself
		code  int
		procs int    // processes recorded in all
		after string // what stderr ends with
	}
	paths := []path{
		{name: "crash", code: exitParked, procs: 6,
			args: func(rec, _ string) []string {
				return with("--max-respawns=1", "--grace=50ms", "--", helper, "record="+rec, "spawn=record="+rec+"+hang", "spawn=ignore=TERM+record="+rec+"+hang", "exit=1")
			}},
		{name: "clean exit", code: 0, procs: 3,
			args: func(rec, _ string) []string {
				return with("--grace=50ms", "--", helper, "record="+rec, "spawn=record="+rec+"+hang", "spawn=ignore=TERM+record="+rec+"+hang", "exit=0")
			}},
		{name: "stop by TERM", code: 128 + int(syscall.SIGTERM), procs: 2,
			args: func(rec, ready string) []string {
				return with("--", helper, "record="+rec, "spawn=record="+rec+"+hang", "touch="+ready, "hang")
			},
			end: func(t *testing.T, c *bg, _ string) { c.signal(t, syscall.SIGTERM) }},
		{name: "grace expiry", code: 128 + int(syscall.SIGKILL), procs: 2,
			args: func(rec, ready string) []string {
				return with("--grace=50ms", "--", helper, "ignore=TERM", "record="+rec, "spawn=record="+rec+"+hang", "touch="+ready, "hang")
			},
			end: func(t *testing.T, c *bg, _ string) { c.signal(t, syscall.SIGTERM) }},
		{name: "second TERM", code: 128 + int(syscall.SIGKILL), procs: 2,
			args: func(rec, ready string) []string {
				got := ready + ".signals"
				return with("--grace=1h", "--", helper, "signals="+got, "record="+rec, "spawn=signals="+got+"+record="+rec+"+hang", "touch="+ready, "hang")
			},
			end: func(t *testing.T, c *bg, ready string) {
				c.signal(t, syscall.SIGTERM)
				// The kernel merges a signal sent while the same one is
				// pending: wait until the first TERM has been forwarded.
				require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Len(c, lines(c, ready+".signals"), 2) }, patience, tick, "TERM to reach both processes")
				c.signal(t, syscall.SIGTERM)
			}},
		{name: "watchdog", code: exitParked, procs: 2,
			args: func(rec, _ string) []string {
				// no tail: the helper's goroutine dump on ABRT would end the line
				return with("--max-respawns=0", "--watchdog=1h", "--grace=50ms", "--stderr-tail-lines=0", "--", helper, "ignore=ABRT", "record="+rec, "spawn=record="+rec+"+hang", "notify=WATCHDOG=trigger", "hang")
			},
			after: "last exit: stopped by the watchdog (the program sent WATCHDOG=trigger), killed by signal KILL\n"},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			rec, ready := recordFile(t, dir), filepath.Join(dir, "ready")
			c := startCL(t, p.args(rec, ready)...)
			if p.end != nil {
				require.EventuallyWithT(t, func(c *assert.CollectT) {
					assert.FileExists(c, ready)
					assert.Len(c, lines(c, rec), 2)
				}, patience, tick, "the program to start")
				p.end(t, c, ready)
			}
			assert.Equal(t, p.code, c.wait(t), c.stderr.String())
			assert.True(t, strings.HasSuffix(c.stderr.String(), p.after), c.stderr.String())
			pids, pgids := records(t, rec)
			require.Len(t, pids, p.procs, "every run's program and its background processes started")
			for _, pgid := range pgids {
				assert.Empty(t, alive(t, pgid), "processes of group %d are left", pgid)
			}
		})
	}
}

// TestKillingCrashloopLeavesNothing kills crashloop with SIGKILL, which it
// cannot catch: the kernel kills the program (its parent-death signal), and
// the keeper kills the rest of the group, then removes the notify socket's
// folder and exits.
func TestKillingCrashloopLeavesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec, env, ready := recordFile(t, dir), filepath.Join(dir, "env"), filepath.Join(dir, "ready")
	c := startCL(t, with("--", helper, "ignore=TERM", "record="+rec, "env="+env, "spawn=record="+rec+"+hang", "spawn=record="+rec+"+hang", "touch="+ready, "hang")...)
	require.Eventually(t, func() bool { return exists(ready) }, patience, tick, "the program to start")
	var keeper []proc
	for _, p := range procs(t) {
		if p.ppid == c.cmd.Process.Pid && strings.HasPrefix(p.cmdline, keeperName+" ") {
			keeper = append(keeper, p)
		}
	}
	require.Len(t, keeper, 1, "crashloop runs one keeper")
	socket := envOf(t, env)["NOTIFY_SOCKET"]
	require.True(t, exists(socket))

	c.signal(t, syscall.SIGKILL)
	assert.Equal(t, -1, c.wait(t), "killed")
	_, pgids := records(t, rec)
	require.Len(t, pgids, 3)
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Empty(c, alive(c, pgids[0])) }, patience, tick, "the program's group to end")
	assert.Equal(t, pgids, []int{pgids[0], pgids[0], pgids[0]}, "one group")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, p := range procs(c) {
			if p.pid == keeper[0].pid {
				assert.Equal(c, byte('Z'), p.state, "the keeper runs")
			}
		}
	}, patience, tick, "the keeper to exit")
	assert.NoDirExists(t, filepath.Dir(socket), "the keeper removed the notify socket's folder")
}

// TestNothingIsLeftBeforeTheNextStart checks, from inside each new run,
// that no process of an earlier run's group is alive when it starts, and
// that each run has a group of its own.
func TestNothingIsLeftBeforeTheNextStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec, check := recordFile(t, dir), filepath.Join(dir, "check.sh")
	// Each run prints how many of the groups that earlier runs recorded
	// still exist (kill -0 reaches zombies too), then records its own group
	// and leaves a process behind that ignores TERM.
	script := `n=0; for g in $(cut -d' ' -f2 ` + rec + ` 2>/dev/null); do kill -0 -$g 2>/dev/null && n=$((n + 1)); done; echo $n`
	require.NoError(t, os.WriteFile(check, []byte(script), 0o755))
	r := runCL(t, with("--max-respawns=3", "--grace=20ms", "--", "sh", "-c", "sh "+check+"; exec "+helper+" record="+rec+" spawn=ignore=TERM+hang exit=1")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Equal(t, "0\n0\n0\n0\n", r.stdout, "live processes of earlier runs, seen by each run")
	_, pgids := records(t, rec)
	require.Len(t, pgids, 4)
	for i := range pgids {
		for j := range i {
			assert.NotEqual(t, pgids[j], pgids[i], "runs %d and %d share a group", j, i)
		}
	}
}

// envOf reads a file written by the helper's env step.
func envOf(t *testing.T, file string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, l := range lines(t, file) {
		k, v, _ := strings.Cut(l, "=")
		env[k] = v
	}
	return env
}

// TestKernelKillsTheProgramWithoutTheKeeper: with the keeper gone, killing
// crashloop still kills the program, by the kernel's parent-death signal.
func TestKernelKillsTheProgramWithoutTheKeeper(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec, ready := recordFile(t, dir), filepath.Join(dir, "ready")
	c := startCL(t, with("--", helper, "ignore=TERM", "record="+rec, "touch="+ready, "hang")...)
	require.Eventually(t, func() bool { return exists(ready) }, patience, tick, "the program to start")
	for _, p := range procs(t) {
		if p.ppid == c.cmd.Process.Pid && strings.HasPrefix(p.cmdline, keeperName+" ") {
			require.NoError(t, syscall.Kill(p.pid, syscall.SIGKILL))
		}
	}
	c.signal(t, syscall.SIGKILL)
	c.wait(t)
	pids, pgids := records(t, rec)
	require.Len(t, pids, 1)
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Empty(c, alive(c, pgids[0])) }, patience, tick, "the program to die")
}

// TestCrashloopAdoptsWhatTheProgramLeaves: a process the program left
// behind becomes crashloop's child (crashloop is a subreaper), so crashloop
// reaps it and sees its group end without relying on init.
func TestCrashloopAdoptsWhatTheProgramLeaves(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec, got, done := recordFile(t, dir), filepath.Join(dir, "signals"), filepath.Join(dir, "done")
	c := startCL(t, with("--grace=1h", "--", helper, "record="+rec, "spawn=signals="+got+"+record="+rec+"+wait="+done+"+exit=0", "exit=0")...)
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Len(c, lines(c, got), 1) }, patience, tick, "the leftover to get TERM")
	pids, _ := records(t, rec)
	require.Len(t, pids, 2)
	var ppid int
	for _, p := range procs(t) {
		if p.pid == pids[1] {
			ppid = p.ppid
		}
	}
	assert.Equal(t, c.cmd.Process.Pid, ppid, "the leftover's parent")
	require.NoError(t, os.WriteFile(done, nil, 0o644))
	assert.Equal(t, 0, c.wait(t), c.stderr.String())
}
