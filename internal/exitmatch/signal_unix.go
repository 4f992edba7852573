//go:build unix

package exitmatch

import (
	"os"
	"syscall"
)

// signalOf returns the name, without SIG, of the signal that killed the
// process of ps; "" if it exited or the signal has no POSIX name.
func signalOf(ps *os.ProcessState) string {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return ""
	}
	return signalName(ws.Signal())
}

// signalNames are the POSIX names of the signals, without SIG.
var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "HUP", syscall.SIGINT: "INT", syscall.SIGQUIT: "QUIT", syscall.SIGILL: "ILL", syscall.SIGTRAP: "TRAP",
	syscall.SIGABRT: "ABRT", syscall.SIGBUS: "BUS", syscall.SIGFPE: "FPE", syscall.SIGKILL: "KILL", syscall.SIGUSR1: "USR1",
	syscall.SIGSEGV: "SEGV", syscall.SIGUSR2: "USR2", syscall.SIGPIPE: "PIPE", syscall.SIGALRM: "ALRM", syscall.SIGTERM: "TERM",
	syscall.SIGCHLD: "CHLD", syscall.SIGCONT: "CONT", syscall.SIGSTOP: "STOP", syscall.SIGTSTP: "TSTP", syscall.SIGTTIN: "TTIN",
	syscall.SIGTTOU: "TTOU", syscall.SIGURG: "URG", syscall.SIGXCPU: "XCPU", syscall.SIGXFSZ: "XFSZ", syscall.SIGVTALRM: "VTALRM",
	syscall.SIGPROF: "PROF", syscall.SIGWINCH: "WINCH", syscall.SIGIO: "IO", syscall.SIGSYS: "SYS",
}

// signalName returns the POSIX name of sig without SIG, "" for another.
func signalName(sig syscall.Signal) string { return signalNames[sig] }
