//go:build unix

package main

import (
	"io"
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crashloopguard/crashloop/internal/errtext"
)

// failedRun runs script under sh as a run does, its stderr through a
// tail of the default bounds, and returns the program's last line on
// stderr and the error that finish gives the Supervisor.
func failedRun(t *testing.T, script string) (string, error) {
	t.Helper()
	c, err := copyStderr(io.Discard, defaultTailLines, defaultTailBytes)
	require.NoError(t, err)
	cmd := exec.Command("sh", "-c", script)
	cmd.Stderr = c.w
	require.NoError(t, cmd.Start())
	c.w.Close()
	require.Error(t, cmd.Wait())
	<-c.done
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	tail := c.tail.String()
	r := &runner{argv: []string{"sh"}}
	return lastLine(tail), r.finish(ws, "", tail, false)
}

// TestTheCauseOfAFailedRun: the error a failed run gives the Supervisor
// has, as its cause, the exit status (or signal) and the program's last
// line on stderr, normalized: two runs that fail alike on other addresses
// and pids have one cause. Its message stays the program's end alone.
func TestTheCauseOfAFailedRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		script, msg, cause string
	}{
		{`echo starting >&2; echo "FATAL: could not connect to db at 10.0.$(($$ % 256)).$(($$ / 256 % 256)):5432" >&2; exit 3`,
			"sh exited with status 3", "exit status N: FATAL: could not connect to db at N.N.N.N:N"},
		{`echo "worker $$ lost its lease" >&2; echo >&2; kill -KILL $$`,
			"sh killed by signal KILL", "signal KILL: worker N lost its lease"},
		{`exit 78`, "sh exited with status 78", "exit status N"},
	} {
		line1, err1 := failedRun(t, tc.script)
		line2, err2 := failedRun(t, tc.script)
		for _, err := range []error{err1, err2} {
			require.Error(t, err)
			assert.Equal(t, tc.msg, err.Error())
			assert.Equal(t, tc.cause, errtext.CauseOf(err), tc.script)
			assert.Equal(t, tc.cause, errtext.Cause(errtext.Text(err)), "the cause of the text a ledger keeps")
			assert.Equal(t, tc.cause, errtext.CauseOf(errtext.Restore(errtext.Text(err), nil)), "the cause of the error restored from it")
		}
		if line1 != "" {
			assert.NotEqual(t, line1, line2, "two runs, two pids: the lines differ, the cause does not")
		}
	}
}
