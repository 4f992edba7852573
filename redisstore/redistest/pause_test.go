package redistest

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A paused server is stopped: it takes a command and answers nothing, on
// a connection made before the pause; once continued, it answers the
// command it held.
func TestPauseHoldsRepliesUntilContinue(t *testing.T) {
	s := Start(t)
	c, err := net.Dial("unix", s.Addr())
	require.NoError(t, err)
	defer c.Close()
	rd := bufio.NewReader(c)

	s.Pause()
	s.mu.Lock()
	pid := s.cmd.Process.Pid
	s.mu.Unlock()
	st, err := procState(pid)
	require.NoError(t, err)
	require.Equal(t, byte('T'), st, "stopped")
	_, err = c.Write([]byte("*1\r\n$4\r\nPING\r\n"))
	require.NoError(t, err, "a paused server's connection takes a command")
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err = rd.ReadString('\n')
	require.True(t, isTimeout(err), "a paused server answers nothing: %v", err)

	s.Continue()
	st, err = procState(pid)
	require.NoError(t, err)
	require.NotEqual(t, byte('T'), st, "running again")
	_ = c.SetReadDeadline(time.Now().Add(startTimeout))
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "+PONG\r\n", line, "the command held during the pause")
}
