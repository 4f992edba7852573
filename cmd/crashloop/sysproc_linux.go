//go:build linux

package main

import "syscall"

// childAttr makes the kernel kill the child if crashloop itself dies (even
// by SIGKILL), so a supervised command is never left orphaned.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
