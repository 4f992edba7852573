package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The cgroup v2 mount and path, read from files as the kernel writes them
// (lines of this machine's /proc/self/mountinfo and of a systemd host's
// /proc/self/cgroup).
func TestCgroup2Files(t *testing.T) {
	dir := t.TempDir()
	mi := writeFile(t, dir, "mountinfo", "31 1 0:27 / /sys/fs/cgroup ro,nosuid,nodev,noexec - tmpfs tmpfs ro,mode=755\n"+
		"35 31 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"+
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n")
	mount, err := cgroup2Mount(mi)
	require.NoError(t, err)
	assert.Equal(t, "/sys/fs/cgroup/unified", mount)
	_, err = cgroup2Mount(writeFile(t, dir, "v1only", "35 31 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"))
	assert.EqualError(t, err, "no cgroup v2 is mounted ("+filepath.Join(dir, "v1only")+" has no cgroup2 line)")

	cg := writeFile(t, dir, "cgroup", "1:name=systemd:/user.slice\n0::/system.slice/worker.service\n")
	p, err := cgroup2Path(cg)
	require.NoError(t, err)
	assert.Equal(t, "/system.slice/worker.service", p)
	_, err = cgroup2Path(writeFile(t, dir, "cgroup1", "4:memory:/x\n"))
	assert.EqualError(t, err, filepath.Join(dir, "cgroup1")+" has no cgroup v2 line (0::)")

	// memory.events as the kernel writes it (Linux 6.x).
	ev := writeFile(t, dir, "memory.events", "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n")
	n, err := (&oomCounter{path: ev}).count()
	require.NoError(t, err)
	assert.Equal(t, uint64(2), n)
	_, err = (&oomCounter{path: filepath.Join(dir, "none")}).count()
	assert.EqualError(t, err, filepath.Join(dir, "none")+" does not exist: the memory controller is not enabled on crashloop's cgroup v2")
}

// Without a readable memory.events, an oom rule never matches, and
// crashloop says so once.
func TestOOMRuleWithoutCgroupWarnsOnce(t *testing.T) {
	t.Parallel()
	r := runCL(t, with("--key=w", "--max-respawns=2", "--on-exit=oom=park", "--", helper, "exit=1")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	_, err := newOOMCounter() // the test runs in crashloop's cgroup
	if err == nil {
		assert.NotContains(t, r.stderr, "cannot tell OOM kills")
		return
	}
	want := "crashloop cannot tell OOM kills (" + err.Error() + "): an --on-exit oom rule never matches; it needs cgroup v2 with the memory controller on crashloop's cgroup"
	assert.Equal(t, 1, strings.Count(r.stderr, want), r.stderr)
	r = runCL(t, with("--key=w", "--max-respawns=0", "--", helper, "exit=1")...)
	assert.NotContains(t, r.stderr, "cannot tell OOM kills", "no oom rule: no warning")
}

// oomCgroup makes a child cgroup v2 with memory.max limit for the test, or
// skips the test saying why this machine cannot.
func oomCgroup(t *testing.T, limit string) string {
	mount, err := cgroup2Mount("/proc/self/mountinfo")
	if err != nil {
		t.Skip("no real OOM kill: ", err)
	}
	ctl, err := os.ReadFile(filepath.Join(mount, "cgroup.controllers"))
	if err != nil {
		t.Skip("no real OOM kill: ", err)
	}
	if !slices.Contains(strings.Fields(string(ctl)), "memory") {
		t.Skipf("no real OOM kill: the cgroup v2 at %s has no memory controller (its cgroup.controllers: %q); a cgroup v1 hierarchy may hold it", mount, strings.TrimSpace(string(ctl)))
	}
	if err := os.WriteFile(filepath.Join(mount, "cgroup.subtree_control"), []byte("+memory"), 0); err != nil {
		t.Skipf("no real OOM kill: cannot enable the memory controller for children of %s: %v", mount, err)
	}
	dir := filepath.Join(mount, fmt.Sprintf("crashloop-oom-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("no real OOM kill: cannot create a cgroup: %v", err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) }) // empty once crashloop and its program have exited
	require.NoError(t, os.WriteFile(filepath.Join(dir, "memory.max"), []byte(limit), 0))
	if err := os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0); err != nil && !os.IsNotExist(err) {
		t.Logf("memory.swap.max: %v", err)
	}
	return dir
}

// A real OOM kill in a cgroup v2 with a small memory.max: the oom rule
// parks the program at once, and the park says it was OOM-killed.
func TestOnExitOOMParksARealOOMKill(t *testing.T) {
	dir := oomCgroup(t, "160M")
	f := filepath.Join(t.TempDir(), "starts")
	script := `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`
	args := append([]string{"-c", script, "sh", dir, binary}, with("--key=oom", "--log-format=json", "--on-exit=oom=park", "--",
		helper, "record="+f, "alloc=1073741824", "hang")...)
	cmd := command()
	cmd.Path, cmd.Args = "/bin/sh", append([]string{"sh"}, args...)
	r := runCmd(t, cmd)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Len(t, lines(t, f), 1)
	got := jsonLines(t, r.stderr)
	require.Len(t, got, 3, r.stderr)
	events := filepath.Join(dir, "memory.events")
	assert.Equal(t, "the kernel's OOM killer killed the program (oom_kill in "+events+" rose from 0 to 1)", got[0]["msg"])
	assert.Greater(t, got[0]["pid"], 1.0)
	delete(got[0], "pid")
	delete(got[0], "msg")
	assert.Equal(t, map[string]any{"level": "WARN", "key": "oom", "reason": "oom_killed"}, got[0])
	last := helper + " killed by the kernel's OOM killer (signal KILL)"
	assert.Equal(t, map[string]any{"level": "ERROR", "event": "agent.startup_exhausted", "key": "oom", "reason": "permanent_error",
		"msg":   `key "oom" parked (permanent_error); nothing records the park (no --state or --redis): it ends with this crashloop, and the next one starts the program`,
		"limit": 3.0, "window": "10s", "last_error": last, "signal": "KILL", "oom_killed": true}, got[1])
	assert.Equal(t, map[string]any{"level": "ERROR", "key": "oom", "reason": "permanent_error", "attempts": 0.0, "starts": 1.0,
		"msg":        "giving up on oom: permanent_error after 1 start; last exit: killed by the kernel's OOM killer (signal KILL)",
		"last_error": last, "last_exit": "killed by the kernel's OOM killer (signal KILL)", "signal": "KILL", "oom_killed": true}, got[2])
}
