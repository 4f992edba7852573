//go:build unix

package main

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Exit statuses of crashloop itself. Otherwise crashloop exits with the
// status of the program that ended supervision (128+N when signal N killed
// it), as a shell does.
const (
	exitError      = 1   // an error that is not the user's input
	exitUsage      = 2   // bad flags, config or state file
	exitRunning    = 75  // another crashloop supervises the key on the same state file (EX_TEMPFAIL)
	exitParked     = 86  // a guard gave up, or the state file says the key is parked
	exitCannotExec = 126 // the program was found but cannot be executed
	exitNotFound   = 127 // the program cannot be found
)

// failure ends crashloop with code after printing msg as one line.
type failure struct {
	code int
	msg  string
}

func (f *failure) Error() string { return f.msg }

// fail returns a *failure with code and a formatted message.
func fail(code int, format string, args ...any) error {
	return &failure{code: code, msg: fmt.Sprintf(format, args...)}
}

// usagef returns bad input: one line and exit status 2.
func usagef(format string, args ...any) error { return fail(exitUsage, format, args...) }

// exitStatus turns the wait status of a process into the status a shell
// reports (128+N for signal N) and a description such as "exited with
// status 1" or "killed by signal TERM".
func exitStatus(ws syscall.WaitStatus) (int, string) {
	if ws.Signaled() {
		return 128 + int(ws.Signal()), "killed by signal " + signalName(ws.Signal())
	}
	return ws.ExitStatus(), "exited with status " + strconv.Itoa(ws.ExitStatus())
}

// signalName returns the short name of sig that kill -l prints, such as
// "TERM", or its number when it has none (a real-time signal).
func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return strings.TrimPrefix(name, "SIG")
	}
	return strconv.Itoa(int(sig))
}

// plural returns "1 start" or "2 starts".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
