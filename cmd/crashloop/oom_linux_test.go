package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The cgroup mounts and paths, read from files as the kernel writes them
// (lines of this machine's /proc/self/mountinfo and /proc/self/cgroup, a
// hybrid host, and of a systemd host's /proc/self/cgroup).
func TestCgroupFiles(t *testing.T) {
	dir := t.TempDir()
	mi := writeFile(t, dir, "mountinfo", "31 1 0:27 / /sys/fs/cgroup ro,nosuid,nodev,noexec - tmpfs tmpfs ro,mode=755\n"+
		"33 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"+
		"35 31 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"+
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n")
	mount, err := cgroupMount(mi, "")
	require.NoError(t, err)
	assert.Equal(t, "/sys/fs/cgroup/unified", mount)
	mount, err = cgroupMount(mi, "memory")
	require.NoError(t, err)
	assert.Equal(t, "/sys/fs/cgroup/memory", mount)
	v1only := writeFile(t, dir, "v1only", "35 31 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n")
	_, err = cgroupMount(v1only, "")
	assert.EqualError(t, err, "no cgroup v2 is mounted ("+v1only+" has no cgroup2 line)")
	_, err = cgroupMount(v1only, "pids")
	assert.EqualError(t, err, "no cgroup v1 pids hierarchy is mounted ("+v1only+" has no cgroup line with pids)")

	cg := writeFile(t, dir, "cgroup", "9:name=systemd:/\n5:cpu,cpuacct:/\n4:memory:/process_api/f2d885cd\n0::/system.slice/worker.service\n")
	p, err := cgroupPath(cg, "")
	require.NoError(t, err)
	assert.Equal(t, "/system.slice/worker.service", p)
	p, err = cgroupPath(cg, "memory")
	require.NoError(t, err)
	assert.Equal(t, "/process_api/f2d885cd", p)
	p, err = cgroupPath(cg, "cpuacct")
	require.NoError(t, err)
	assert.Equal(t, "/", p)
	v1 := writeFile(t, dir, "cgroup1", "4:memory:/x\n")
	_, err = cgroupPath(v1, "")
	assert.EqualError(t, err, v1+" has no cgroup v2 line (0::)")
	_, err = cgroupPath(v1, "pids")
	assert.EqualError(t, err, v1+" has no cgroup v1 pids line")

	// memory.events (v2) and memory.oom_control (v1) as Linux 6.x writes them.
	for file, content := range map[string]string{
		"memory.events":      "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n",
		"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
	} {
		n, err := (&oomCounter{path: writeFile(t, dir, file, content)}).count()
		require.NoError(t, err)
		assert.Equal(t, uint64(2), n, file)
	}
	_, err = (&oomCounter{path: filepath.Join(dir, "none")}).count()
	assert.EqualError(t, err, filepath.Join(dir, "none")+" does not exist: the memory controller is not on that cgroup")
	_, err = (&oomCounter{path: writeFile(t, dir, "old", "oom_kill_disable 0\nunder_oom 0\n")}).count()
	assert.EqualError(t, err, filepath.Join(dir, "old")+" has no oom_kill line")
}

// Without a memory cgroup (a mount namespace without /sys/fs/cgroup), an
// oom rule never matches, and crashloop says so once, at start; without
// an oom rule it says nothing.
func TestOOMRuleWithoutCgroupWarnsOnce(t *testing.T) {
	t.Parallel()
	if out, err := exec.Command("unshare", "-m", "sh", "-c", "umount -l /sys/fs/cgroup").CombinedOutput(); err != nil {
		t.Skipf("no mount namespace without cgroups: unshare -m: %v: %s", err, out)
	}
	noCgroups := func(args ...string) result {
		c := command()
		c.Path, _ = exec.LookPath("unshare")
		c.Args = append([]string{"unshare", "-m", "sh", "-c", `umount -l /sys/fs/cgroup && exec "$@"`, "sh", binary}, args...)
		return runCmd(t, c)
	}
	r := noCgroups(with("--key=w", "--log-format=json", "--max-respawns=2", "--on-exit=oom=park", "--", helper, "exit=1")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	got := jsonLines(t, r.stderr)
	require.Len(t, got, 5, r.stderr) // the warning, 2 respawns, the park and giving up
	assert.Equal(t, map[string]any{"level": "WARN", "key": "w", "msg": "crashloop cannot tell OOM kills (cgroup v2: no cgroup v2 is mounted " +
		"(/proc/self/mountinfo has no cgroup2 line); cgroup v1: no cgroup v1 memory hierarchy is mounted (/proc/self/mountinfo has no cgroup " +
		"line with memory)): an --on-exit oom rule never matches; it needs the memory controller on crashloop's cgroup (v2, or a v1 memory hierarchy)"}, got[0])
	for _, line := range got[1:] {
		assert.NotContains(t, line["msg"], "OOM")
	}
	r = noCgroups(with("--key=w", "--max-respawns=0", "--", helper, "exit=1")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.NotContains(t, r.stderr, "cannot tell OOM kills", "no oom rule: no warning")
}

// oomCgroup makes a child memory cgroup, of cgroup v2 ("" controller)
// or of the v1 memory hierarchy, limited to limit bytes, and returns it
// with the file that counts its OOM kills; or it skips the test saying why
// this machine cannot.
func oomCgroup(t *testing.T, controller string, limit int) (dir, counter string) {
	mount, err := cgroupMount("/proc/self/mountinfo", controller)
	if err != nil {
		t.Skip("no real OOM kill: ", err)
	}
	if controller == "" {
		ctl, err := os.ReadFile(filepath.Join(mount, "cgroup.controllers"))
		if err != nil {
			t.Skip("no real OOM kill: ", err)
		}
		if !slices.Contains(strings.Fields(string(ctl)), "memory") {
			t.Skipf("no real OOM kill: the cgroup v2 at %s has no memory controller (its cgroup.controllers: %q); a cgroup v1 hierarchy may hold it", mount, strings.TrimSpace(string(ctl)))
		}
		if err := os.WriteFile(filepath.Join(mount, "cgroup.subtree_control"), []byte("+memory"), 0); err != nil {
			t.Skipf("no real OOM kill: cannot enable the memory controller for the children of %s: %v", mount, err)
		}
	} else {
		rel, err := cgroupPath("/proc/self/cgroup", controller)
		if err != nil {
			t.Skip("no real OOM kill: ", err)
		}
		mount = filepath.Join(mount, rel)
	}
	dir = filepath.Join(mount, fmt.Sprintf("crashloop-oom-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("no real OOM kill: cannot create a cgroup under %s: %v", mount, err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) }) // empty once crashloop and its program have exited
	files := []string{"memory.max", "memory.swap.max"}
	counter = filepath.Join(dir, "memory.events")
	if controller != "" {
		files = []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"}
		counter = filepath.Join(dir, "memory.oom_control")
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, files[0]), []byte(strconv.Itoa(limit)), 0))
	if err := os.WriteFile(filepath.Join(dir, files[1]), []byte(strconv.Itoa(limit)), 0); err != nil && !os.IsNotExist(err) {
		t.Logf("%s: %v (swap may delay the OOM kill)", files[1], err)
	}
	return dir, counter
}

// A real OOM kill in a memory cgroup with a small limit, cgroup v2 and v1:
// the oom rule parks the program at once, and the park says it was
// OOM-killed.
func TestOnExitOOMParksARealOOMKill(t *testing.T) {
	for _, v := range []struct{ name, controller string }{{"cgroup v2", ""}, {"cgroup v1", "memory"}} {
		t.Run(v.name, func(t *testing.T) {
			dir, counter := oomCgroup(t, v.controller, 160<<20)
			f := filepath.Join(t.TempDir(), "starts")
			script := `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`
			cmd := command()
			cmd.Path = "/bin/sh"
			state := filepath.Join(t.TempDir(), "state.json")
			cmd.Args = append([]string{"sh", "-c", script, "sh", dir, binary}, with("--key=oom", "--log-format=json", "--on-exit=oom=park", "--state", state, "--",
				helper, "record="+f, "alloc=1073741824", "hang")...)
			r := runCmd(t, cmd)
			assert.Equal(t, exitParked, r.code, r.stderr)
			assert.Len(t, lines(t, f), 1)
			got := jsonLines(t, r.stderr)
			require.Len(t, got, 4, r.stderr)
			assert.Equal(t, map[string]any{"level": "INFO", "key": "oom", "msg": "parked in " + state + "; once the cause is fixed, run: crashloop resume --state " + state + " oom"}, got[3])
			got = got[:3]

			// The park in the state file, as status --json tells it.
			st := runCL(t, "status", "--state", state, "--json")
			require.Equal(t, 0, st.code, st.stderr)
			valid(t, schemas(t, "status")["status"], st.stdout)
			var doc struct{ Parks []map[string]any }
			require.NoError(t, json.Unmarshal([]byte(st.stdout), &doc))
			require.Len(t, doc.Parks, 1, st.stdout)
			assert.Equal(t, map[string]any{"key": "oom", "reason": "permanent_error", "since": doc.Parks[0]["since"], "attempts": 0.0,
				"last_error": helper + " killed by the kernel's OOM killer (signal KILL)", "signal": "KILL", "oom_killed": true}, doc.Parks[0])
			assert.Equal(t, "the kernel's OOM killer killed the program (oom_kill in "+counter+" rose from 0 to 1)", got[0]["msg"])
			assert.Greater(t, got[0]["pid"], 1.0)
			delete(got[0], "pid")
			delete(got[0], "msg")
			assert.Equal(t, map[string]any{"level": "WARN", "key": "oom", "reason": "oom_killed"}, got[0])
			last := helper + " killed by the kernel's OOM killer (signal KILL)"
			assert.Equal(t, map[string]any{"level": "ERROR", "event": "agent.startup_exhausted", "key": "oom", "reason": "permanent_error",
				"msg":   `key "oom" parked (permanent_error); it stays parked until an operator resumes it`,
				"limit": 3.0, "window": "10s", "last_error": last, "signal": "KILL", "oom_killed": true}, got[1])
			assert.Equal(t, map[string]any{"level": "ERROR", "key": "oom", "reason": "permanent_error", "attempts": 0.0, "starts": 1.0,
				"msg":        "giving up on oom: permanent_error after 1 start; last exit: killed by the kernel's OOM killer (signal KILL)",
				"last_error": last, "last_exit": "killed by the kernel's OOM killer (signal KILL)", "signal": "KILL", "oom_killed": true}, got[2])

			// Without an oom rule the OOM kill is a failed start the budget
			// judges; the park's last error still says what killed it.
			r = runCmd(t, func() *exec.Cmd {
				c := command()
				c.Path = "/bin/sh"
				c.Args = append([]string{"sh", "-c", script, "sh", dir, binary}, with("--key=oom", "--max-respawns=1", "--on-exit=SIGKILL=restart", "--",
					helper, "alloc=1073741824", "hang")...)
				return c
			}())
			assert.Equal(t, exitParked, r.code, r.stderr)
			assert.True(t, strings.HasSuffix(r.stderr, "\ncrashloop: giving up on oom: respawn_budget_exhausted after 2 starts; last exit: killed by the kernel's OOM killer (signal KILL)\n"), r.stderr)
		})
	}
}
