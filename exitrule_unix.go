//go:build unix

package crashloop

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

// signalName returns the POSIX name of sig without SIG, "" for another.
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGHUP:
		return "HUP"
	case syscall.SIGINT:
		return "INT"
	case syscall.SIGQUIT:
		return "QUIT"
	case syscall.SIGILL:
		return "ILL"
	case syscall.SIGTRAP:
		return "TRAP"
	case syscall.SIGABRT:
		return "ABRT"
	case syscall.SIGBUS:
		return "BUS"
	case syscall.SIGFPE:
		return "FPE"
	case syscall.SIGKILL:
		return "KILL"
	case syscall.SIGUSR1:
		return "USR1"
	case syscall.SIGSEGV:
		return "SEGV"
	case syscall.SIGUSR2:
		return "USR2"
	case syscall.SIGPIPE:
		return "PIPE"
	case syscall.SIGALRM:
		return "ALRM"
	case syscall.SIGTERM:
		return "TERM"
	case syscall.SIGCHLD:
		return "CHLD"
	case syscall.SIGCONT:
		return "CONT"
	case syscall.SIGSTOP:
		return "STOP"
	case syscall.SIGTSTP:
		return "TSTP"
	case syscall.SIGTTIN:
		return "TTIN"
	case syscall.SIGTTOU:
		return "TTOU"
	case syscall.SIGURG:
		return "URG"
	case syscall.SIGXCPU:
		return "XCPU"
	case syscall.SIGXFSZ:
		return "XFSZ"
	case syscall.SIGVTALRM:
		return "VTALRM"
	case syscall.SIGPROF:
		return "PROF"
	case syscall.SIGWINCH:
		return "WINCH"
	case syscall.SIGIO:
		return "IO"
	case syscall.SIGSYS:
		return "SYS"
	}
	return ""
}
