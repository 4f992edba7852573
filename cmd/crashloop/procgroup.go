//go:build unix

package main

import (
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"
)

// group is the process group of one run. The program leads it (its pid is
// the group's id) and every process it starts stays in it unless it leaves
// on purpose (setsid or setpgid, as daemons that detach do). crashloop
// signals the whole group, never the leader alone, like systemd's
// KillMode=control-group and supervisord's killasgroup.
type group struct {
	pgid   int
	exited <-chan syscall.WaitStatus // the leader's wait status, once
	log    *slog.Logger              // says when the grace period ends in KILL
	key    string
	stderr *stderrCopy // nil: the stderr tail is off

	mu       sync.Mutex
	stopping bool        // a stop signal was sent and kill is armed
	kill     *time.Timer // sends KILL to the group when the grace period ends
	gone     bool        // the group is empty: its id may be reused, so signal nothing
}

// signal sends sig to every process of the group, unless the group is gone.
func (g *group) signal(sig syscall.Signal) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.gone {
		_ = syscall.Kill(-g.pgid, sig)
	}
}

// stop sends sig to the group and KILL once grace has passed, which it
// logs. Only the first stop counts: a later one neither signals again nor
// moves the deadline (force the end with signal(SIGKILL)).
func (g *group) stop(sig syscall.Signal, grace time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone || g.stopping {
		return
	}
	g.stopping = true
	_ = syscall.Kill(-g.pgid, sig)
	g.kill = time.AfterFunc(grace, func() {
		// Under the lock, so that the line comes before waitGone returns.
		g.mu.Lock()
		defer g.mu.Unlock()
		if !g.gone && syscall.Kill(-g.pgid, syscall.SIGKILL) == nil {
			g.log.Warn(fmt.Sprintf("the program's process group did not exit within --grace %s of SIG%s; sent SIGKILL", grace, signalName(sig)),
				"key", g.key, "pid", g.pgid)
		}
	})
}

// waitGone returns once no process is left in the group; call it after
// stop, whose KILL ends whatever ignores the stop signal. The processes of
// the group are reaped by the reaper (crashloop is their subreaper on
// Linux) or by init. It returns an error when the only processes left are
// ones crashloop may not signal (a set-user-ID program run by a crashloop
// that is not root): waiting for them would never end.
func (g *group) waitGone() error {
	var err error
	for d := time.Millisecond; ; d = min(2*d, 50*time.Millisecond) {
		if e := syscall.Kill(-g.pgid, 0); e == syscall.ESRCH {
			break
		} else if e == syscall.EPERM {
			err = fmt.Errorf("process group %d has processes crashloop may not signal; they may be left running", g.pgid)
			break
		}
		time.Sleep(d)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gone = true
	if g.kill != nil {
		g.kill.Stop()
	}
	return err
}
