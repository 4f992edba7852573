//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/crashloopguard/crashloop"
)

// runner runs the program for the Supervisor: its run method is the fn of
// crashloop.Supervisor.Run. Each run starts the program in a process group
// of its own, waits for it to exit, stops what is left of the group (TERM,
// then KILL after the grace period) and returns only once nothing of the
// group is left, so two runs never overlap and nothing outlives its run.
type runner struct {
	key       string
	argv      []string
	env       []string // the program's whole environment
	dir       string   // --chdir; "" keeps crashloop's
	grace     time.Duration
	permanent map[int]bool // exit statuses that park at once
	log       *slog.Logger
	cancel    context.CancelFunc // ends supervision
	launch    *launcher

	mu      sync.Mutex
	cur     *run           // the run under way; nil between runs
	stopSig syscall.Signal // the first INT or TERM received; 0 if none
	failed  error          // the program could not be executed: supervision ends with this
	starts  int
	ended   bool   // a run has ended
	last    string // how the last run ended, e.g. "exited with status 1"
	status  int    // the last run's exit status (128+N for signal N)
	stopped bool   // the last run ended after stopSig was received
}

// run is one run of the program.
type run struct {
	group *group
}

// run runs the program once; it is the Supervisor's fn.
func (r *runner) run(ctx context.Context) error {
	cur, err := r.begin(ctx)
	if err != nil {
		return err
	}
	ws := <-cur.group.exited
	cur.group.stop(syscall.SIGTERM, r.grace) // what the program left; a stop under way keeps its own signal and deadline
	if err := cur.group.waitGone(); err != nil {
		r.log.Warn(err.Error(), "key", r.key)
	}
	r.launch.end(cur.group)
	return r.finish(ws)
}

// begin starts a run, unless crashloop is stopping. A program that cannot
// be executed ends supervision.
func (r *runner) begin(ctx context.Context) (*run, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopSig != 0 {
		return nil, ctx.Err()
	}
	g, err := r.launch.start(r.argv, r.env, r.dir)
	var f *failure
	if errors.As(err, &f) {
		r.failed = f
		r.cancel()
		return nil, f
	}
	if err != nil { // such as fork failing for lack of memory: a failed start
		return nil, fmt.Errorf("start %s: %w", r.argv[0], err)
	}
	r.starts++
	cur := &run{group: g}
	r.cur = cur
	return cur, nil
}

// finish records how a run ended and returns its outcome for the
// Supervisor: nil for exit status 0, a crashloop.Permanent error for a
// --permanent-exit-codes status, an error naming the program and its end
// otherwise.
func (r *runner) finish(ws syscall.WaitStatus) error {
	code, how := exitStatus(ws)
	r.mu.Lock()
	r.cur = nil
	r.ended, r.last, r.status, r.stopped = true, how, code, r.stopSig != 0
	r.mu.Unlock()
	err := fmt.Errorf("%s %s", r.argv[0], how)
	switch {
	case code == 0:
		return nil
	case r.permanent[code]:
		return crashloop.Permanent(err)
	}
	return err
}

// forward passes sig on to the group of the run under way, if any.
func (r *runner) forward(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil {
		r.cur.group.signal(sig)
	}
}

// stop ends supervision on INT or TERM. The first one stops the run under
// way gracefully: the same signal to its group, KILL after the grace
// period. A second one kills the group at once.
func (r *runner) stop(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := r.stopSig == 0
	if first {
		r.stopSig = sig
		r.cancel() // under the lock: begin never sees stopSig with a live context
	}
	switch {
	case r.cur == nil:
	case first:
		r.cur.group.stop(sig, r.grace)
	default:
		r.cur.group.signal(syscall.SIGKILL)
	}
}

// stoppedStatus is crashloop's exit status once a stop signal ended
// supervision: the status of the run that ended after it, or 128+N for
// signal N when no program was running.
func (r *runner) stoppedStatus() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return r.status
	}
	return 128 + int(r.stopSig)
}
