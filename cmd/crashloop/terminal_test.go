//go:build linux

package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestAnInteractiveShellGetsTheTerminal runs crashloop as a session leader
// with a pty as its controlling terminal (as docker run -it does), in the
// terminal's foreground group, supervising an interactive shell. The shell
// gets the terminal: it reads what is typed, runs it, and exits 0, and so
// does crashloop. Outside the foreground group the shell would be stopped
// by SIGTTIN, and crashloop would wait for ever.
func TestAnInteractiveShellGetsTheTerminal(t *testing.T) {
	t.Parallel()
	master, slave := openPty(t)
	cmd := command("--key=shell", "--env=PS1=prompt> ", "--", "sh", "-i")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	require.NoError(t, cmd.Start())
	slave.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	out := &buffer{}
	read := make(chan struct{})
	go func() { // until the terminal is gone: EIO once no process has it open
		defer close(read)
		_, _ = io.Copy(out, master)
	}()
	for i, line := range []string{"echo $((6 * 7))\n", "exit 0\n"} {
		require.Eventually(t, func() bool { return strings.Count(out.String(), "prompt> ") == i+1 }, patience, tick, "prompt %d; the terminal showed:\n%s", i+1, out)
		_, err := master.WriteString(line)
		require.NoError(t, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "crashloop's exit; the terminal showed:\n%s", out.String())
	case <-time.After(patience):
		t.Fatalf("crashloop did not exit within %v; the terminal showed:\n%s", patience, out.String())
	}
	<-read
	assert.Equal(t, "prompt> echo $((6 * 7))\r\n42\r\nprompt> exit 0\r\n", out.String(), "the shell read and ran what was typed")
}

// openPty opens a pseudo-terminal: its master, and its slave, which is not
// the test's controlling terminal.
func openPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { master.Close() })
	require.NoError(t, unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0), "unlock the slave")
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { slave.Close() })
	return master, slave
}
