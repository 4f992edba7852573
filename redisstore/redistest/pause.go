package redistest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Pause stops the server with SIGSTOP and returns once the kernel reports
// it stopped: from then on it accepts nothing and answers nothing, while
// its connections stay open and take what clients send (a hung server, as
// one stalled in a long fork or swapped out). Continue resumes it; Kill and
// the end of the test end a paused server too. It fails the test when the
// server is not running.
func (s *Server) Pause() {
	s.t.Helper()
	s.signal(syscall.SIGSTOP, true)
}

// Continue resumes a server that Pause stopped, with SIGCONT, and returns
// once the kernel reports it running; it then runs the commands its
// clients sent meanwhile. It fails the test when the server is not running.
func (s *Server) Continue() {
	s.t.Helper()
	s.signal(syscall.SIGCONT, false)
}

// signal sends sig to the server and waits until its state is stopped (or
// no longer stopped).
func (s *Server) signal(sig syscall.Signal, stopped bool) {
	s.t.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		s.t.Fatalf("redistest: %v: the server is not running", sig)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: %v: %v", sig, err)
	}
	deadline := time.Now().Add(startTimeout)
	for {
		st, err := procState(cmd.Process.Pid)
		if err != nil {
			s.t.Fatalf("redistest: %v: %v", sig, err)
		}
		if (st == 'T') == stopped {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: %v: the server's state is still %q after %v", sig, st, startTimeout)
		}
		time.Sleep(100 * time.Microsecond) // polling for the state, not timing anything
	}
}

// procState returns the state letter of process pid from /proc/PID/stat
// (R running, S sleeping, T stopped, ...).
func procState(pid int) (byte, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// "pid (comm) S ...": comm may hold spaces and parentheses; the state
	// follows the last ")".
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, data)
	}
	return data[i+2], nil
}
