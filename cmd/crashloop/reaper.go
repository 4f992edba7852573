//go:build unix

package main

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// reaper is the only waiter for crashloop's child processes. On every
// SIGCHLD it reaps whatever has exited (wait4 of any child), so processes of
// a program's group that were orphaned and reparented to crashloop (a
// subreaper on Linux, and the init of a container when it runs as PID 1)
// never linger as zombies, and it hands the status of the processes that
// crashloop started itself to their waiters.
type reaper struct {
	mu      sync.Mutex
	waiting map[int]chan syscall.WaitStatus
	sigs    chan os.Signal
	done    chan struct{}
}

// newReaper starts reaping; close stops it.
func newReaper() *reaper {
	r := &reaper{waiting: make(map[int]chan syscall.WaitStatus), sigs: make(chan os.Signal, 1), done: make(chan struct{})}
	signal.Notify(r.sigs, syscall.SIGCHLD)
	go func() {
		defer close(r.done)
		for range r.sigs {
			r.reap()
		}
	}()
	return r
}

// start runs path with syscall.ForkExec and returns its pid and a channel
// that receives its wait status once it exits. The child is registered
// before the reaper can see it exit, so no status is lost.
func (r *reaper) start(path string, argv []string, attr *syscall.ProcAttr) (int, <-chan syscall.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := syscall.ForkExec(path, argv, attr)
	if err != nil {
		return 0, nil, err
	}
	c := make(chan syscall.WaitStatus, 1)
	r.waiting[pid] = c
	return pid, c, nil
}

// reap collects every child that has exited.
func (r *reaper) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		r.mu.Lock()
		c := r.waiting[pid]
		delete(r.waiting, pid)
		r.mu.Unlock()
		if c != nil {
			c <- ws
		}
	}
}

// close stops reaping. Children that exit later are left to the system.
func (r *reaper) close() {
	signal.Stop(r.sigs)
	close(r.sigs)
	<-r.done
}
