//go:build unix

package main

import (
	"context"
	"io"
	"os"
	"syscall"
	"time"
)

// shellRun runs "sh -c cmd" for a hook or a health check, through the
// reaper (crashloop's only waiter for its children), in a process group of
// its own, with env in dir ("" keeps crashloop's), its stdin /dev/null, and
// its stdout and stderr copied to out. When ctx ends first, stop goes to
// its group, and SIGKILL a second later (at once if stop is SIGKILL). It
// returns the wait status, and whether ctx ended first.
func shellRun(ctx context.Context, rp *reaper, cmd string, env []string, dir string, out io.Writer, stop syscall.Signal) (syscall.WaitStatus, bool, error) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return 0, false, err
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return 0, false, err
	}
	attr := &syscall.ProcAttr{Dir: dir, Env: env, Files: []uintptr{null.Fd(), w.Fd(), w.Fd()},
		Sys: &syscall.SysProcAttr{Setpgid: true}}
	pid, exited, err := rp.start("/bin/sh", []string{"sh", "-c", cmd}, attr)
	w.Close()
	if err != nil {
		r.Close()
		return 0, false, err
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, r)
	}()
	var ws syscall.WaitStatus
	ended := false
	select {
	case ws = <-exited:
	case <-ctx.Done():
		ended = true
		_ = syscall.Kill(-pid, stop)
		kill := time.AfterFunc(time.Second, func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
		ws = <-exited
		kill.Stop()
		if stop != syscall.SIGKILL {
			_ = syscall.Kill(-pid, syscall.SIGKILL) // what the shell left in its group
		}
	}
	t := time.NewTimer(tailWait) // a process that left the group may still hold the pipe
	defer t.Stop()
	select {
	case <-copied:
	case <-t.C:
	}
	r.Close()
	return ws, ended, nil
}
