//go:build unix

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadyMakesARunHealthy: with --max-respawns=0 a failed start parks at
// once, but a run that sent READY=1 was healthy, so its failure goes to the
// chain (3 rescues, then needs_human), even when READY=1 came just before
// the exit, behind a burst of other datagrams.
func TestReadyMakesARunHealthy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := filepath.Join(dir, "starts")
	r := runCL(t, with("--key=r", "--max-respawns=0", "--healthy-after=0", "--chain-max=3", "--", helper, "record="+f, "exit=1")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Len(t, lines(t, f), 1, "without READY=1: a failed start")
	assert.True(t, strings.HasSuffix(r.stderr, "\ncrashloop: giving up on r: respawn_budget_exhausted after 1 start; last exit: exited with status 1\n"), r.stderr)

	f = filepath.Join(dir, "ready-starts")
	r = runCL(t, with("--key=r", "--max-respawns=0", "--healthy-after=0", "--chain-max=3", "--", helper, "record="+f, "burst=200", "notify=READY=1", "exit=1")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Len(t, lines(t, f), 4, "3 rescues, then the chain gives up")
	assert.Equal(t, 4, strings.Count(r.stderr, `msg="the program is ready (READY=1)" key=r pid=`), r.stderr)
	assert.True(t, strings.HasSuffix(r.stderr, "\ncrashloop: giving up on r: needs_human after 4 starts; last exit: exited with status 1\n"), r.stderr)
}

// TestStatusIsLogged: STATUS=... is logged when it changes; one datagram
// may hold several assignments, and unknown ones are ignored.
func TestStatusIsLogged(t *testing.T) {
	t.Parallel()
	r := runCL(t, with("--log-format=json", "--key=s", "--", helper,
		`notify=STATUS=warming up\nMAINPID=1\nX_UNKNOWN=1`, "notify=STATUS=warming up", "notify=STATUS=serving", "notify=BOGUS", "exit=0")...)
	assert.Equal(t, 0, r.code, r.stderr)
	var statuses []string
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &rec), l)
		assert.Equal(t, "the program's status", rec["msg"])
		assert.Equal(t, "INFO", rec["level"])
		assert.Equal(t, "s", rec["key"])
		statuses = append(statuses, rec["status"].(string))
	}
	assert.Equal(t, []string{"warming up", "serving"}, statuses)
}

// TestTheProgramsNotifyEnvironment: the program gets crashloop's own
// NOTIFY_SOCKET (a socket in a folder only crashloop's user may enter),
// not the one crashloop got; WATCHDOG_USEC and WATCHDOG_PID (its own pid)
// only with --watchdog.
func TestTheProgramsNotifyEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, watchdog := range []string{"0", "1500ms"} {
		file := filepath.Join(dir, "env-"+watchdog)
		cmd := command(with("--watchdog="+watchdog, "--", helper, "env="+file, "exit=0")...)
		cmd.Env = append(cmd.Env, "NOTIFY_SOCKET=/run/systemd/notify", "WATCHDOG_USEC=7", "WATCHDOG_PID=1")
		r := runCmd(t, cmd)
		require.Equal(t, 0, r.code, r.stderr)
		env := envOf(t, file)
		socket := env["NOTIFY_SOCKET"]
		assert.True(t, strings.HasPrefix(filepath.Base(filepath.Dir(socket)), "crashloop-"), socket)
		assert.NoDirExists(t, filepath.Dir(socket), "removed when crashloop exits")
		if watchdog == "0" {
			assert.NotContains(t, env, "WATCHDOG_USEC")
			assert.NotContains(t, env, "WATCHDOG_PID")
			continue
		}
		assert.Equal(t, "1500000", env["WATCHDOG_USEC"])
		assert.Equal(t, env["PID"], env["WATCHDOG_PID"])
	}

	ready := filepath.Join(dir, "ready")
	file := filepath.Join(dir, "env")
	c := startCL(t, with("--", helper, "env="+file, "touch="+ready, "hang")...)
	require.Eventually(t, func() bool { return exists(ready) }, patience, tick, "the program to start")
	socket := envOf(t, file)["NOTIFY_SOCKET"]
	fi, err := os.Stat(socket)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSocket, fi.Mode().Type())
	fi, err = os.Stat(filepath.Dir(socket))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	c.signal(t, syscall.SIGTERM)
	c.wait(t)
}

// TestWatchdogStopsAHungProgram: a program that stops sending WATCHDOG=1
// gets ABRT (KILL after --grace if it ignores ABRT), and the run is a
// failure whose error says the watchdog stopped it. A program that dies of
// the ABRT gets a grace far longer than it takes to: on a loaded machine it
// may not run for tens of milliseconds, and a KILL sent meanwhile would end
// it first.
func TestWatchdogStopsAHungProgram(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		argv  func(rec string) []string
		grace string
		want  string
	}{
		{"hung", func(rec string) []string {
			return []string{"sh", "-c", helper + " record=" + rec + " notify=WATCHDOG=1 && exec sleep 1000"}
		}, patience.String(), "sh stopped by the watchdog (no WATCHDOG=1 for 500ms), killed by signal ABRT"},
		{"ignores ABRT", func(rec string) []string {
			return []string{helper, "record=" + rec, "ignore=ABRT", "hang"}
		}, "50ms", helper + " stopped by the watchdog (no WATCHDOG=1 for 500ms), killed by signal KILL"},
		{"WATCHDOG=trigger", func(rec string) []string {
			return []string{"sh", "-c", helper + " record=" + rec + " ignore=ABRT notify=WATCHDOG=trigger && exec sleep 1000"}
		}, patience.String(), "sh stopped by the watchdog (the program sent WATCHDOG=trigger), killed by signal ABRT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := filepath.Join(t.TempDir(), "starts")
			r := runCL(t, with(append([]string{"--key=w", "--max-respawns=1", "--watchdog=500ms", "--grace=" + tc.grace, "--"}, tc.argv(f)...)...)...)
			assert.Equal(t, exitParked, r.code, r.stderr)
			assert.Len(t, lines(t, f), 2)
			assert.Equal(t, 2, strings.Count(r.stderr, "level=WARN msg=\"watchdog: "), r.stderr)
			assert.Equal(t, 2, strings.Count(r.stderr, " reason=watchdog\n"), r.stderr)
			assert.Contains(t, r.stderr, `event=agent.respawn_scheduled key=w attempts=1 limit=1 window=10s backoff=1ms last_error="`+tc.want+`"`)
			_, last, _ := strings.Cut(tc.want, " ")
			assert.True(t, strings.HasSuffix(r.stderr, "\ncrashloop: giving up on w: respawn_budget_exhausted after 2 starts; last exit: "+last+"\n"), r.stderr)
		})
	}
}

// TestWatchdogKeepsAPingingProgram: a program that sends WATCHDOG=1 every
// 10ms for two and a half times the watchdog's timeout is not stopped.
func TestWatchdogKeepsAPingingProgram(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "starts")
	r := runCL(t, with("--watchdog=1s", "--", helper, "record="+f, "ping=2500ms", "exit=0")...)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Len(t, lines(t, f), 1)
	assert.Empty(t, r.stderr)
}

// TestNotifyOnlyCountsForItsRun: a READY=1 from a process that a run left
// behind, sent once crashloop stops it after the program exited, makes
// neither that run nor the next one healthy.
func TestNotifyOnlyCountsForItsRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f, sent := filepath.Join(dir, "starts"), filepath.Join(dir, "sent")
	r := runCL(t, with("--key=n", "--max-respawns=1", "--healthy-after=0", "--grace=1h", "--", helper, "record="+f,
		"spawn=onterm=notify=READY=1,touch="+sent+",exit=0+hang", "exit=1")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.FileExists(t, sent, "the leftover sent READY=1")
	assert.Len(t, lines(t, f), 2, "two failed starts: no run was healthy")
	assert.NotContains(t, r.stderr, "READY=1")
	assert.True(t, strings.HasSuffix(r.stderr, "\ncrashloop: giving up on n: respawn_budget_exhausted after 2 starts; last exit: exited with status 1\n"), r.stderr)
}

// TestStartsWhereTMPDIRCannotHoldTheSocket: when no folder can be made in
// $TMPDIR (a read-only file system, as in a container with a read-only root
// file system, or a path under a regular file), the notify socket goes to
// the next place that works, $XDG_RUNTIME_DIR here, or, when /run and
// /dev/shm are read-only too, to an abstract socket; the program starts
// and its READY=1 is heard either way. The read-only cases bind-mount the
// folders read-only in a mount namespace of their own, which needs root.
func TestStartsWhereTMPDIRCannotHoldTheSocket(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		readOnly []string // "tmp": $TMPDIR; others: folders under which a read-only tmpfs goes
		notFound bool     // $TMPDIR under a regular file
		xdg      bool     // $XDG_RUNTIME_DIR set to a writable folder
	}{
		{name: "under a file", notFound: true, xdg: true},
		{name: "read-only", readOnly: []string{"tmp"}, xdg: true},
		{name: "nothing writable", readOnly: []string{"tmp", "/run", "/dev/shm"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tmp, xdg, envFile := filepath.Join(dir, "tmp"), filepath.Join(dir, "xdg"), filepath.Join(dir, "env")
			require.NoError(t, os.Mkdir(xdg, 0o700))
			reason := "read-only file system"
			if tc.notFound {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "file"), nil, 0o644))
				tmp, reason = filepath.Join(dir, "file", "tmp"), "not a directory"
			} else {
				require.NoError(t, os.Mkdir(tmp, 0o700))
			}
			args := with("--key=ro", "--", helper, "env="+envFile, "notify=READY=1", "exit=0")
			cmd := command(args...)
			if tc.readOnly != nil {
				if os.Geteuid() != 0 {
					t.Skip("read-only bind mounts in a mount namespace need root")
				}
				unshare, err := exec.LookPath("unshare")
				if err != nil {
					t.Skip("needs unshare(1)")
				}
				script := ""
				for _, d := range tc.readOnly {
					if d == "tmp" {
						script += "mount --bind -o ro " + tmp + " " + tmp + " && "
					} else {
						script += "mount -t tmpfs -o ro tmpfs " + d + " && "
					}
				}
				cmd.Path, cmd.Args = unshare, append([]string{"unshare", "--mount", "--propagation", "private", "sh", "-c", script + `exec "$0" "$@"`, binary}, args...)
			}
			cmd.Env = append(withoutEnv(cmd.Env, "XDG_RUNTIME_DIR"), "TMPDIR="+tmp)
			if tc.xdg {
				cmd.Env = append(cmd.Env, "XDG_RUNTIME_DIR="+xdg)
			}
			r := runCmd(t, cmd)
			require.Equal(t, 0, r.code, r.stderr)
			socket := envOf(t, envFile)["NOTIFY_SOCKET"]
			pid := envOf(t, envFile)["PID"]
			var because string
			if tc.xdg {
				assert.Equal(t, xdg, filepath.Dir(filepath.Dir(socket)), socket)
				because = "the notify socket is " + socket + ": none could be made in " + tmp + " (" + reason + ")"
			} else {
				assert.Regexp(t, `^@crashloop-[A-Z2-7]{26}$`, socket)
				because = "the notify socket is the abstract socket " + socket + ": none could be made in " + tmp + " (" + reason + "), /run (read-only file system), /dev/shm (read-only file system)"
			}
			assert.Equal(t, []string{
				`level=INFO msg="` + because + `" notify_socket=` + socket,
				`level=INFO msg="the program is ready (READY=1)" key=ro pid=` + pid,
			}, untimed(r.stderr))
		})
	}
}
