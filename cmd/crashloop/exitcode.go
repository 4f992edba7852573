//go:build unix

package main

import (
	"fmt"
	"strconv"
	"syscall"
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

// signalNames are the names kill -l prints, without "SIG".
var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "HUP", syscall.SIGINT: "INT", syscall.SIGQUIT: "QUIT", syscall.SIGILL: "ILL",
	syscall.SIGTRAP: "TRAP", syscall.SIGABRT: "ABRT", syscall.SIGBUS: "BUS", syscall.SIGFPE: "FPE",
	syscall.SIGKILL: "KILL", syscall.SIGUSR1: "USR1", syscall.SIGSEGV: "SEGV", syscall.SIGUSR2: "USR2",
	syscall.SIGPIPE: "PIPE", syscall.SIGALRM: "ALRM", syscall.SIGTERM: "TERM", syscall.SIGCHLD: "CHLD",
	syscall.SIGCONT: "CONT", syscall.SIGSTOP: "STOP", syscall.SIGTSTP: "TSTP", syscall.SIGTTIN: "TTIN",
	syscall.SIGTTOU: "TTOU", syscall.SIGURG: "URG", syscall.SIGXCPU: "XCPU", syscall.SIGXFSZ: "XFSZ",
	syscall.SIGVTALRM: "VTALRM", syscall.SIGPROF: "PROF", syscall.SIGWINCH: "WINCH", syscall.SIGIO: "IO",
	syscall.SIGSYS: "SYS",
}

// signalName returns the short name of sig, such as "TERM", or its number.
func signalName(sig syscall.Signal) string {
	if name, ok := signalNames[sig]; ok {
		return name
	}
	return strconv.Itoa(int(sig))
}
