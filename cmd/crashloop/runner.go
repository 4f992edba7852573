//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/errtext"
)

// runner runs the program for the Supervisor: its run method is the fn of
// crashloop.Supervisor.Run. Each run starts the program in a process group
// of its own, waits for it to exit, stops what is left of the group (TERM,
// then KILL after the grace period) and returns only once nothing of the
// group is left, so two runs never overlap and nothing outlives its run.
type runner struct {
	key      string
	argv     []string
	env      []string // the program's whole environment
	dir      string   // --chdir; "" keeps crashloop's
	grace    time.Duration
	watchdog time.Duration // 0: off
	health   *healthConfig // nil: --health-cmd off
	healthy  time.Duration // the Supervisor's HealthyAfter: a run this long is healthy (0: only READY=1)
	oom      *oomCounter   // the oom_kill count of crashloop's cgroup v2; nil: unknown
	log      *slog.Logger
	cancel   context.CancelFunc // ends supervision
	launch   *launcher
	notify   *notifier

	mu      sync.Mutex
	cur     *run           // the run under way; nil between runs
	stopSig syscall.Signal // the first INT or TERM received; 0 if none
	failed  error          // the program could not be executed: supervision ends with this
	starts  int
	ended   bool         // a run has ended
	last    string       // how the last run ended, e.g. "exited with status 1"
	status  int          // the last run's exit status (128+N for signal N)
	signal  string       // the name of the signal that killed the last run, such as "KILL"; "" if it exited
	exit    errtext.Exit // how the last run ended, with its stderr tail
	stopped bool         // the last run ended after stopSig was received
	park    *parkDoc     // the program's park, from when it parks until it is resumed; nil otherwise
}

// run is one run of the program.
type run struct {
	ctx   context.Context // the Supervisor's context for this run, for crashloop.Ready
	start time.Time
	group *group
	ooms  uint64    // the oom_kill count before the run
	oomOK bool      // ooms was read
	dog   *watchdog // nil: --watchdog off
	check *health   // nil: --health-cmd off
	over  bool      // the program has exited: later notifications are ignored (runner.mu)
	// unhealthy is why the health check stopped the run; "" if it did
	// not (runner.mu).
	unhealthy string

	// notified writes these, and markReady ready, under runner.mu
	// (readyNow and statusText read them); the notifier calls notified for
	// one datagram at a time.
	ready  bool
	status string
}

// run runs the program once; it is the Supervisor's fn.
// The reason codes of the command's own lines, beside the library's: a run
// the command stopped itself, or one the kernel's OOM killer ended.
const (
	reasonWatchdog  = "watchdog"   // the program stopped feeding its watchdog, or asked for it
	reasonUnhealthy = "unhealthy"  // its health check failed --health-retries times in a row
	reasonOOMKilled = "oom_killed" // the oom_kill count of its memory cgroup rose during the run
)

func (r *runner) run(ctx context.Context) error {
	r.notify.discard() // what the processes of an ended run sent
	cur, err := r.begin(ctx)
	if err != nil {
		return err
	}
	ws := <-cur.group.exited
	r.launch.takeTerminal()
	if r.launch.term != nil && ws.Signaled() && ws.Signal() == syscall.SIGINT {
		// Ctrl-C at the terminal went to the program's group alone, which
		// had the terminal: crashloop stops, as a shell does.
		r.stop(syscall.SIGINT)
	}
	cause := cur.dog.end()
	if cause != "" {
		cause = "stopped by the watchdog (" + cause + ")"
	}
	cur.check.end()
	r.notify.drain() // a READY=1 sent just before the exit counts for this run
	r.mu.Lock()
	cur.over = true
	if cause == "" && cur.unhealthy != "" {
		cause = "stopped as unhealthy (" + cur.unhealthy + ")"
	}
	r.mu.Unlock()
	oom := ws.Signaled() && ws.Signal() == syscall.SIGKILL && r.oomKilled(cur)
	cur.group.stop(syscall.SIGTERM, r.grace) // what the program left; a stop under way keeps its own signal and deadline
	if err := cur.group.waitGone(); err != nil {
		r.log.Warn(err.Error(), "key", r.key)
	}
	r.launch.end(cur.group)
	return r.finish(ws, cause, cur.group.stderrTail(), oom)
}

// oomKilled reports whether the oom_kill count of crashloop's cgroup rose
// during the run cur, whose program a KILL ended, and says so: the kernel's
// OOM killer killed it.
func (r *runner) oomKilled(cur *run) bool {
	if !cur.oomOK {
		return false
	}
	n, err := r.oom.count()
	if err != nil || n <= cur.ooms {
		return false
	}
	r.log.Warn(fmt.Sprintf("the kernel's OOM killer killed the program (oom_kill in %s rose from %d to %d)", r.oom.path, cur.ooms, n),
		"key", r.key, "pid", cur.group.pgid, "reason", reasonOOMKilled)
	return true
}

// runFailure is a run's failure: its text, such as "sh exited with status
// 3", and how the program ended (errtext.Exiter), which its park keeps.
type runFailure struct {
	msg  string
	exit errtext.Exit
}

func (f *runFailure) Error() string             { return f.msg }
func (f *runFailure) ProgramExit() errtext.Exit { return f.exit }

// begin starts a run, unless crashloop is stopping. A program that cannot
// be executed ends supervision.
func (r *runner) begin(ctx context.Context) (*run, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopSig != 0 {
		return nil, ctx.Err()
	}
	var ooms uint64
	oomOK := false
	if r.oom != nil {
		n, err := r.oom.count()
		ooms, oomOK = n, err == nil
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
	cur := &run{ctx: ctx, start: time.Now(), group: g, ooms: ooms, oomOK: oomOK}
	if r.watchdog > 0 {
		cur.dog = startWatchdog(r.watchdog, func(cause string) { r.watchdogTripped(cur, cause) })
	}
	if r.health != nil {
		cur.check = startHealth(r.health, func() { r.markReady(cur, "its health check passed") }, func(cause string) { r.unhealthyStop(cur, cause) })
	}
	r.cur = cur
	return cur, nil
}

// finish records how a run ended and returns its outcome for the
// Supervisor: nil for exit status 0, a *runFailure naming the program and
// its end otherwise (and always when crashloop stopped it: cause says why,
// and the exit rules do not judge it), with its exit status or signal, the
// OOM kill, and its tail, the last lines of its stderr. The Supervisor's
// ExitRules (--on-exit) judge the rest.
func (r *runner) finish(ws syscall.WaitStatus, cause, tail string, oom bool) error {
	code, how := exitStatus(ws)
	if oom {
		how = "killed by the kernel's OOM killer (signal KILL)"
	}
	if cause != "" {
		how = cause + ", " + how
	}
	exit := errtext.Exit{StderrTail: tail, OOMKilled: oom, Stopped: cause != ""}
	if ws.Signaled() {
		exit.Signal = signalName(ws.Signal())
	} else {
		exit.ExitCode = &code
	}
	r.mu.Lock()
	r.cur = nil
	r.ended, r.last, r.status, r.stopped = true, how, code, r.stopSig != 0
	r.signal, r.exit = exit.Signal, exit
	r.mu.Unlock()
	err := &runFailure{msg: r.argv[0] + " " + how, exit: exit}
	if code == 0 && cause == "" {
		return nil
	}
	return err
}

// watchdogTripped stops a hung run: ABRT to its group, KILL after the
// grace period.
func (r *runner) watchdogTripped(cur *run, cause string) {
	r.log.Warn("watchdog: "+cause+"; stopping the program's process group with SIGABRT",
		"key", r.key, "pid", cur.group.pgid, "reason", reasonWatchdog)
	cur.group.stop(syscall.SIGABRT, r.grace)
}

// notified handles one sd_notify datagram: READY=1 makes the run healthy
// (crashloop.Ready), STATUS=... is logged when it changes, WATCHDOG=1 feeds
// the watchdog and WATCHDOG=trigger trips it. Other assignments (MAINPID,
// RELOADING, STOPPING, ...) are ignored, and so is every datagram that comes
// between runs or after the program exited.
func (r *runner) notified(msg string) {
	r.mu.Lock()
	cur := r.cur
	if cur != nil && cur.over {
		cur = nil
	}
	r.mu.Unlock()
	if cur == nil {
		return
	}
	for _, line := range strings.Split(msg, "\n") {
		name, value, _ := strings.Cut(line, "=")
		switch {
		case name == "READY" && value == "1":
			r.markReady(cur, "READY=1")
		case name == "RESTART_RESET" && value == "1":
			crashloop.ResetRestarts(cur.ctx)
			r.log.Info("the program reset its restarts (RESTART_RESET=1): the respawn window and the chain are cleared", "key", r.key, "pid", cur.group.pgid)
		case name == "STATUS":
			r.mu.Lock() // statusText reads it for /status
			changed := value != cur.status
			cur.status = value
			r.mu.Unlock()
			if changed {
				r.log.Info("the program's status", "key", r.key, "pid", cur.group.pgid, "status", value)
			}
		case name == "WATCHDOG" && value == "1":
			cur.dog.kick()
		case name == "WATCHDOG" && value == "trigger":
			cur.dog.trip("the program sent WATCHDOG=trigger")
		}
	}
}

// markReady makes the run cur healthy, once (crashloop.Ready), and says
// why.
func (r *runner) markReady(cur *run, why string) {
	r.mu.Lock() // readyNow reads it for /readyz
	was := cur.ready || cur.over
	cur.ready = true
	r.mu.Unlock()
	if !was {
		crashloop.Ready(cur.ctx)
		r.log.Info("the program is ready ("+why+")", "key", r.key, "pid", cur.group.pgid)
	}
}

// unhealthyStop stops a run that its health check found unhealthy: TERM
// to its group, KILL after the grace period; the run counts as a failure.
func (r *runner) unhealthyStop(cur *run, cause string) {
	r.mu.Lock()
	over := cur.over
	if !over {
		cur.unhealthy = cause
	}
	r.mu.Unlock()
	if over {
		return
	}
	r.log.Warn("health check: "+cause+"; stopping the program's process group with SIGTERM",
		"key", r.key, "pid", cur.group.pgid, "reason", reasonUnhealthy)
	cur.group.stop(syscall.SIGTERM, r.grace)
}

// healthNow returns the health of the run under way, nil when there is no
// run or no --health-cmd (for /status and the metrics).
func (r *runner) healthNow() *healthStatus {
	r.mu.Lock()
	cur := r.cur
	r.mu.Unlock()
	if cur == nil {
		return nil
	}
	return cur.check.status()
}

// statusText returns the last STATUS= text of the run under way, "" if
// none (for /status).
func (r *runner) statusText() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		return ""
	}
	return r.cur.status
}

// readyNow reports whether a run is under way and healthy: the program sent
// READY=1, or has run for the healthy-after duration (for /readyz).
func (r *runner) readyNow() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.cur
	return cur != nil && !cur.over && (cur.ready || r.healthy > 0 && time.Since(cur.start) >= r.healthy)
}

// resumed starts the count of starts again, for the next park's report:
// the program was resumed with a full budget.
func (r *runner) resumed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts, r.ended, r.park = 0, false, nil
}

// parked keeps p, the program's park, for /status.
func (r *runner) parked(p *parkDoc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.park = p
}

// lastExit returns how the last run ended: its exit status if it exited,
// the signal's name if one killed it, and its stderr tail; nothing before
// a run has ended.
func (r *runner) lastExit() errtext.Exit {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ended {
		return errtext.Exit{}
	}
	return r.exit
}

// parkNow returns the park kept by parked, nil if none.
func (r *runner) parkNow() *parkDoc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.park
}

// forward passes sig on to the group of the run under way, if any.
func (r *runner) forward(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil {
		r.cur.group.signal(sig)
	}
}

// stop ends supervision on INT or TERM, and says so. The first one stops
// the run under way gracefully: the same signal to its group, KILL after
// the grace period. A second one kills the group at once.
func (r *runner) stop(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := r.stopSig == 0
	if first {
		r.stopSig = sig
		r.cancel() // under the lock: begin never sees stopSig with a live context
	}
	name := "SIG" + signalName(sig)
	switch {
	case r.cur == nil:
		r.log.Info("got "+name+"; stopping (no program is running)", "key", r.key, "signal", name)
	case first:
		r.log.Info(fmt.Sprintf("got %s; stopping: %s to the program's process group, SIGKILL after --grace %s", name, name, r.grace),
			"key", r.key, "pid", r.cur.group.pgid, "signal", name)
		r.cur.group.stop(sig, r.grace)
	default:
		r.log.Info("got "+name+" again; killing the program's process group with SIGKILL", "key", r.key, "pid", r.cur.group.pgid, "signal", name)
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
