//go:build unix

package main

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/crashloopguard/crashloop/internal/errtext"
)

// The health states of a run, as Docker's HEALTHCHECK names them.
const (
	healthStarting  = "starting"
	healthHealthy   = "healthy"
	healthUnhealthy = "unhealthy"
)

// healthStates are the states in the order the metrics list them.
var healthStates = []string{healthStarting, healthHealthy, healthUnhealthy}

// healthConfig is --health-cmd and its settings, with Docker's HEALTHCHECK
// semantics and defaults: the first check runs interval after the start,
// then every interval after the last one ended; a check that fails or
// outlasts timeout is a failure; retries failures in a row make the run
// unhealthy; failures within start period of the start do not count until
// a check has passed.
type healthConfig struct {
	cmd         string
	interval    time.Duration // 30s
	timeout     time.Duration // 30s
	retries     int           // 3
	startPeriod time.Duration // 0s
	env         []string      // the program's
	dir         string        // the program's --chdir
	reaper      *reaper
}

// health checks one run. It calls healthy after the first check that
// passes, and unhealthy, once, when the run becomes unhealthy; then it
// stops checking. A nil *health (no --health-cmd) does nothing.
type health struct {
	cfg       *healthConfig
	healthy   func()
	unhealthy func(cause string)
	cancel    context.CancelFunc
	done      chan struct{}

	mu      sync.Mutex
	state   string
	streak  int       // failures in a row
	checked time.Time // when the last check ended; zero before the first
	output  string    // the last check's output, bounded
}

// startHealth starts checking a run that starts now.
func startHealth(cfg *healthConfig, healthy func(), unhealthy func(cause string)) *health {
	ctx, cancel := context.WithCancel(context.Background())
	h := &health{cfg: cfg, healthy: healthy, unhealthy: unhealthy, cancel: cancel, done: make(chan struct{}), state: healthStarting}
	go h.loop(ctx, time.Now())
	return h
}

// loop runs the checks until ctx ends or the run is unhealthy.
func (h *health) loop(ctx context.Context, start time.Time) {
	defer close(h.done)
	passed := false
	t := time.NewTimer(h.cfg.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, out := h.check(ctx)
		if ctx.Err() != nil {
			return // the run ended during the check: it tells nothing
		}
		h.mu.Lock()
		h.checked, h.output = time.Now(), out
		switch {
		case ok:
			h.state, h.streak = healthHealthy, 0
		case !passed && time.Since(start) < h.cfg.startPeriod: // does not count
		default:
			h.streak++
			if h.streak >= h.cfg.retries {
				h.state = healthUnhealthy
			}
		}
		state, streak := h.state, h.streak
		h.mu.Unlock()
		if ok && !passed {
			passed = true
			h.healthy()
		}
		if state == healthUnhealthy {
			cause := errtext.Plural(streak, "failed health check") + " in a row"
			if line := lastLine(out); line != "" {
				cause += ": " + line
			}
			h.unhealthy(cause)
			return
		}
		t.Reset(h.cfg.interval)
	}
}

// check runs the health command once, as Docker runs CMD-SHELL: sh -c CMD,
// in the program's environment and folder, in a process group of its own
// that is killed when it outlasts the timeout or the run ends. It returns
// whether it passed (exit status 0), and its output, bounded.
func (h *health) check(ctx context.Context) (bool, string) {
	cctx, cancel := context.WithTimeout(ctx, h.cfg.timeout)
	defer cancel()
	out := &cappedBuffer{max: maxHookOutput}
	ws, ended, err := shellRun(cctx, h.cfg.reaper, h.cfg.cmd, h.cfg.env, h.cfg.dir, out, syscall.SIGKILL)
	switch {
	case err != nil:
		return false, "the health check could not run: " + err.Error()
	case ended && ctx.Err() == nil:
		return false, "the health check timed out after " + h.cfg.timeout.String()
	case ws.Exited() && ws.ExitStatus() == 0:
		return true, out.String()
	}
	if text := out.String(); text != "" {
		return false, text
	}
	_, how := exitStatus(ws)
	return false, "the health check " + how
}

// end stops the checks at the end of the run, and waits until they have
// stopped.
func (h *health) end() {
	if h == nil {
		return
	}
	h.cancel()
	<-h.done
}

// healthStatus is the health of a run, for /status: Docker's State.Health
// in snake_case.
type healthStatus struct {
	Status        string   `json:"status"` // starting, healthy or unhealthy
	FailingStreak int      `json:"failing_streak"`
	LastCheck     jsonTime `json:"last_check,omitzero"`
	LastOutput    string   `json:"last_output,omitempty"`
}

// status returns the run's health; nil for a nil *health.
func (h *health) status() *healthStatus {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return &healthStatus{Status: h.state, FailingStreak: h.streak, LastCheck: jsonTime(h.checked), LastOutput: h.output}
}
