//go:build unix && !linux

package main

import (
	"os"
	"syscall"
)

// leaderAttr returns the attributes of a run's first process: a process
// group of its own. There is no parent-death signal off Linux; the keeper
// kills the group if crashloop dies.
func leaderAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// abstractSockets says that unix sockets may have abstract names: Linux
// only.
const abstractSockets = false

// becomeSubreaper does nothing off Linux: orphaned processes of a group go
// to init, which reaps them.
func becomeSubreaper() error { return nil }

// selfPath returns the path of crashloop's own binary.
func selfPath() (string, error) { return os.Executable() }
