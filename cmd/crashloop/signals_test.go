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
	c := startCL(t, with("--grace=1h", "--", helper, "signals="+got, "record="+rec, "spawn=signals="+got+"+record="+rec+"+hang", "touch="+ready, "hang")...)
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
	assert.Empty(t, c.stderr.String(), "no goroutine dump, no event")
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
			c := startCL(t, with(append([]string{"--grace=1h", "--"}, steps...)...)...)
			require.Eventually(t, func() bool { return exists(ready) }, patience, tick, "the program to start")
			c.signal(t, tc.sig)
			assert.Equal(t, tc.code, c.wait(t), c.stderr.String())
			assert.Len(t, lines(t, rec), 1, "no restart")
			assert.Empty(t, c.stderr.String())
		})
	}
}

// TestStopDuringTheBackoff stops crashloop while it waits to restart the
// program: it exits at once, with 128+N for the signal it got.
func TestStopDuringTheBackoff(t *testing.T) {
	t.Parallel()
	c := startCL(t, "--initial-backoff=1h", "--max-backoff=1h", "--window=4h", "--", helper, "exit=1")
	require.Eventually(t, func() bool { return strings.Contains(c.stderr.String(), "event=agent.respawn_scheduled") }, patience, tick, "the backoff")
	c.signal(t, syscall.SIGTERM)
	assert.Equal(t, 128+int(syscall.SIGTERM), c.wait(t), c.stderr.String())
}
