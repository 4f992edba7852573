package main

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// leaderAttr returns the attributes of a run's first process: a process
// group of its own, and SIGKILL from the kernel when crashloop dies, even by
// SIGKILL (the parent-death signal; the kernel sends it when the thread that
// forked the child ends, and Go ends a thread only when a goroutine locked to
// it exits, which crashloop never does). The kernel clears it when the
// program executes a set-user-ID or set-group-ID file.
func leaderAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// abstractSockets says that unix sockets may have abstract names (a path
// that starts with @), which need no folder.
const abstractSockets = true

// becomeSubreaper makes crashloop the parent of its orphaned descendants
// (instead of init), so that the reaper collects the processes of a group
// whose leader has exited, and the end of a group is seen without relying
// on another process to reap them.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// selfPath returns the path that runs crashloop's own binary again; on
// Linux it works even after the binary was replaced or deleted.
func selfPath() (string, error) { return "/proc/self/exe", nil }
