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

// TestSignalsAreForwardedToTheWholeGroup sends crashloop the signals it
// forwards, one at a time: each reaches the program and the process it
// started, and none stops crashloop or restarts the program (QUIT makes no
// goroutine dump). A TERM the program survives leaves crashloop waiting out
// --grace; a second TERM kills the group at once.
func TestSignalsAreForwardedToTheWholeGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	got, rec, ready := filepath.Join(dir, "signals"), recordFile(t, dir), filepath.Join(dir, "ready")
	c := startCL(t, with("--key=fwd", "--grace=1h", "--", helper, "signals="+got, "record="+rec, "spawn=signals="+got+"+record="+rec+"+hang", "touch="+ready, "hang")...)
	require.Eventually(t, func() bool { return exists(ready) }, patience, tick, "the program to start")
	pids, _ := records(t, rec)
	require.Len(t, pids, 2)

	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGQUIT, syscall.SIGTERM} {
		c.signal(t, sig)
		want := []string{fmt.Sprintf("%d %s", pids[0], signalName(sig)), fmt.Sprintf("%d %s", pids[1], signalName(sig))}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			l := lines(c, got)
			assert.Contains(c, l, want[0])
			assert.Contains(c, l, want[1])
		}, patience, tick, "%s to reach both processes", signalName(sig))
		assert.False(t, c.exited(), "crashloop exited on %s", signalName(sig))
	}
	c.signal(t, syscall.SIGTERM)
	assert.Equal(t, 128+int(syscall.SIGKILL), c.wait(t))
	assert.Len(t, lines(t, got), 12, "each signal once to each process")
	assert.Len(t, lines(t, rec), 2, "no restart")
	assert.Equal(t, []string{
		fmt.Sprintf(`level=INFO msg="got SIGTERM; stopping: SIGTERM to the program's process group, SIGKILL after --grace 1h0m0s" key=fwd pid=%d signal=SIGTERM`, pids[0]),
		fmt.Sprintf(`level=INFO msg="got SIGTERM again; killing the program's process group with SIGKILL" key=fwd pid=%d signal=SIGTERM`, pids[0]),
	}, untimed(c.stderr.String()), "the stop, and no goroutine dump, no event")
}

// untimed returns the lines of text log output without their time=
// attribute, which comes first.
func untimed(stderr string) []string {
	var ls []string
	for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		if t, rest, ok := strings.Cut(l, " "); ok && strings.HasPrefix(t, "time=") {
			l = rest
		}
		ls = append(ls, l)
	}
	return ls
}

// TestStopReturnsTheProgramsStatus stops crashloop with TERM and INT: the
// program gets the same signal, and crashloop exits with the program's
// status, without a restart.
func TestStopReturnsTheProgramsStatus(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		sig   syscall.Signal
		steps []string
		code  int
	}{
		{"TERM, program exits 42", syscall.SIGTERM, []string{"onterm=exit=42"}, 42},
		{"TERM, program killed", syscall.SIGTERM, nil, 128 + int(syscall.SIGTERM)},
		{"INT, program killed", syscall.SIGINT, nil, 128 + int(syscall.SIGINT)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			rec, ready := recordFile(t, dir), filepath.Join(dir, "ready")
			steps := append(append([]string{helper, "record=" + rec}, tc.steps...), "touch="+ready, "hang")
			c := startCL(t, with(append([]string{"--key=stop", "--grace=1h", "--"}, steps...)...)...)
			require.Eventually(t, func() bool { return exists(ready) }, patience, tick, "the program to start")
			c.signal(t, tc.sig)
			assert.Equal(t, tc.code, c.wait(t), c.stderr.String())
			pids, _ := records(t, rec)
			require.Len(t, pids, 1, "no restart")
			name := "SIG" + signalName(tc.sig)
			assert.Equal(t, []string{fmt.Sprintf(`level=INFO msg="got %s; stopping: %s to the program's process group, SIGKILL after --grace 1h0m0s" key=stop pid=%d signal=%s`, name, name, pids[0], name)},
				untimed(c.stderr.String()))
		})
	}
}

// TestStopDuringTheBackoff stops crashloop while it waits to restart the
// program: it exits at once, with 128+N for the signal it got.
func TestStopDuringTheBackoff(t *testing.T) {
	t.Parallel()
	c := startCL(t, "--key=backoff", "--initial-backoff=1h", "--max-backoff=1h", "--window=4h", "--", helper, "exit=1")
	require.Eventually(t, func() bool { return strings.Contains(c.stderr.String(), "event=agent.respawn_scheduled") }, patience, tick, "the backoff")
	c.signal(t, syscall.SIGTERM)
	assert.Equal(t, 128+int(syscall.SIGTERM), c.wait(t), c.stderr.String())
	l := untimed(c.stderr.String())
	require.Len(t, l, 2, c.stderr.String())
	assert.Equal(t, `level=INFO msg="got SIGTERM; stopping (no program is running)" key=backoff signal=SIGTERM`, l[1])
}

// TestGraceEndsInALoggedKill: a program that outlives --grace after the
// stop signal is killed, and crashloop says so in one line.
func TestGraceEndsInALoggedKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec, ready := recordFile(t, dir), filepath.Join(dir, "ready")
	c := startCL(t, with("--key=stubborn", "--grace=50ms", "--", helper, "ignore=TERM", "record="+rec, "touch="+ready, "hang")...)
	require.Eventually(t, func() bool { return exists(ready) }, patience, tick, "the program to start")
	c.signal(t, syscall.SIGTERM)
	assert.Equal(t, 128+int(syscall.SIGKILL), c.wait(t), c.stderr.String())
	pids, _ := records(t, rec)
	require.Len(t, pids, 1)
	assert.Equal(t, []string{
		fmt.Sprintf(`level=INFO msg="got SIGTERM; stopping: SIGTERM to the program's process group, SIGKILL after --grace 50ms" key=stubborn pid=%d signal=SIGTERM`, pids[0]),
		fmt.Sprintf(`level=WARN msg="the program's process group did not exit within --grace 50ms of SIGTERM; sent SIGKILL" key=stubborn pid=%d`, pids[0]),
	}, untimed(c.stderr.String()))
}

// TestTheProgramGetsTheSignalStateCrashloopGot, after tini's sigconf test:
// crashloop, started by a helper that sets signals ignored and blocked and
// executes it, runs a program that reads its own signal state. It gets all
// of it: the ignored signals that crashloop catches for itself (INT, HUP)
// or the Go runtime takes over before crashloop's main runs (SEGV, PIPE)
// ignored, the blocked signals that the runtime unblocks (ILL, TERM, QUIT)
// blocked, and libc's own signals. Built without cgo, crashloop sees only
// what the runtime left: those reach the program as defaults, but for INT,
// HUP and 32 and 34 ignored.
func TestTheProgramGetsTheSignalStateCrashloopGot(t *testing.T) {
	t.Parallel()
	mask := func(sigs ...syscall.Signal) string {
		var m uint64
		for _, s := range sigs {
			m |= 1 << (s - 1)
		}
		return fmt.Sprintf("%016x", m)
	}
	type state struct{ ignored, blocked string }
	cases := []struct {
		name       string
		steps      []string
		cgo, nocgo state
	}{
		{"tini's sigconf", []string{"sigign=TTOU", "sigign=SEGV", "sigign=INT", "block=TTIN", "block=ILL", "block=TERM"},
			state{mask(syscall.SIGTTOU, syscall.SIGSEGV, syscall.SIGINT), mask(syscall.SIGTTIN, syscall.SIGILL, syscall.SIGTERM)},
			state{mask(syscall.SIGTTOU, syscall.SIGINT), mask(syscall.SIGTTIN)}},
		{"nohup, under a parent that ignores PIPE", []string{"sigign=HUP", "sigign=PIPE", "block=USR1", "block=QUIT"},
			state{mask(syscall.SIGHUP, syscall.SIGPIPE), mask(syscall.SIGUSR1, syscall.SIGQUIT)},
			state{mask(syscall.SIGHUP), mask(syscall.SIGUSR1)}},
		// libc's own signals (glibc's 32 and 33, whose handler glibc installs
		// at its first pthread_create; musl's 32 to 34), and a realtime one.
		{"libc's and realtime signals", []string{"sigign=32", "sigign=33", "sigign=34", "sigign=40", "block=32", "block=33", "block=34", "block=40"},
			state{mask(32, 33, 34, 40), mask(32, 33, 34, 40)},
			state{mask(32, 34), mask(40)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := command()
			cmd.Path = helper
			cmd.Args = append(append([]string{helper}, tc.steps...), "exec", binary, "--key=sigs", "--", "cat", "/proc/self/status")
			r := runCmd(t, cmd)
			require.Equal(t, 0, r.code, r.stderr)
			got := map[string]string{}
			for _, l := range strings.Split(r.stdout, "\n") {
				if k, v, ok := strings.Cut(l, ":\t"); ok && (k == "SigIgn" || k == "SigBlk") {
					got[k] = v
				}
			}
			want := tc.nocgo
			if cgoEnabled {
				want = tc.cgo
			}
			assert.Equal(t, map[string]string{"SigIgn": want.ignored, "SigBlk": want.blocked}, got)
			assert.Empty(t, r.stderr)
		})
	}
}
