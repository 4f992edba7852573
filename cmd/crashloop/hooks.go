//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/errtext"
)

// maxHookOutput bounds the output of a hook that is logged: its first
// bytes, and how many more it wrote.
const maxHookOutput = 4096

// hooks runs --on-park-exec and --on-trip-exec: "sh -c CMD" once for each
// event that announces a park of the key (agent.startup_exhausted,
// rescue.needs_human, channel.crash_loop_tripped) or a trip of the fleet
// breaker (fleet.breaker_tripped), with the event in its environment. The
// Supervisor delivers each event once, and with --redis on one replica
// only, the one that announces it: so each park runs the hook once across
// replicas. A hook runs on a goroutine of its own, never holding up
// supervision or a resume; it is stopped (TERM, then KILL to its process
// group) after timeout; its status and output are logged. It is an
// crashloop.EventHandler, safe for concurrent use.
type hooks struct {
	park, trip string // "": none
	timeout    time.Duration
	log        *slog.Logger
	reaper     *reaper
	running    sync.WaitGroup
}

// HandleEvent starts the hook of ev, if it has one.
func (h *hooks) HandleEvent(ev crashloop.Event) {
	flag, cmd := "--on-park-exec", h.park
	if ev.Kind == crashloop.EventFleetTripped {
		flag, cmd = "--on-trip-exec", h.trip
	} else if !ev.Kind.Stops() {
		return
	}
	if cmd == "" {
		return
	}
	h.running.Go(func() { h.run(flag, cmd, ev) })
}

// wait waits for the hooks under way, each bounded by the timeout: call it
// before crashloop exits, so that the hook of the park that ends it runs.
func (h *hooks) wait() { h.running.Wait() }

// run runs cmd for ev and logs how it ended.
func (h *hooks) run(flag, cmd string, ev crashloop.Event) {
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	defer cancel()
	out := &cappedBuffer{max: maxHookOutput}
	start := time.Now()
	ws, ended, err := shellRun(ctx, h.reaper, cmd, append(os.Environ(), hookEnv(ev)...), "", out, syscall.SIGTERM)
	took := time.Since(start).Round(time.Millisecond)
	attrs := []any{"key", ev.Key, "event", ev.Kind.String(), "took", took.String()}
	if text := out.String(); text != "" {
		attrs = append(attrs, "output", text)
	}
	code, how := exitStatus(ws)
	switch {
	case err != nil:
		h.log.Error(flag+" could not run: "+err.Error(), attrs...)
	case ended:
		h.log.Warn(fmt.Sprintf("%s did not finish within --hook-timeout %s; stopped it", flag, h.timeout), attrs...)
	case code == 0:
		h.log.Info(flag+" exited with status 0", attrs...)
	default:
		h.log.Warn(flag+" "+how, append(attrs, "exit_code", code)...)
	}
}

// hookEnv is the environment a hook gets, besides crashloop's own: the
// event's key, reason, attempts and time, and how the program ended, each
// "" when unknown; for a fleet trip, the failing and total keys too.
func hookEnv(ev crashloop.Event) []string {
	x, _ := errtext.ExitOf(ev.LastError)
	code, last := "", ""
	if x.ExitCode != nil {
		code = strconv.Itoa(*x.ExitCode)
	}
	if ev.LastError != nil {
		last = ev.LastError.Error()
	}
	env := []string{
		"CRASHLOOP_KEY=" + ev.Key,
		"CRASHLOOP_REASON=" + ev.Reason,
		"CRASHLOOP_EVENT=" + ev.Kind.String(),
		"CRASHLOOP_ATTEMPTS=" + strconv.Itoa(ev.Attempts),
		"CRASHLOOP_SINCE=" + ev.Time.UTC().Format(time.RFC3339),
		"CRASHLOOP_LAST_ERROR=" + last,
		"CRASHLOOP_EXIT_CODE=" + code,
		"CRASHLOOP_SIGNAL=" + x.Signal,
		"CRASHLOOP_STDERR_TAIL=" + x.StderrTail,
	}
	if ev.Kind == crashloop.EventFleetTripped {
		env = append(env, "CRASHLOOP_FAILING="+strconv.Itoa(ev.Failing), "CRASHLOOP_TOTAL="+strconv.Itoa(ev.Total))
	}
	return env
}

// cappedBuffer keeps the first max bytes written to it and counts the
// rest; it never fails a write. It is safe for concurrent use.
type cappedBuffer struct {
	max     int
	mu      sync.Mutex
	b       bytes.Buffer
	dropped int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := min(len(p), c.max-c.b.Len())
	c.b.Write(p[:keep])
	c.dropped += len(p) - keep
	return len(p), nil
}

// String returns what was kept, and how much was not.
func (c *cappedBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped > 0 {
		return fmt.Sprintf("%s... (%d more bytes)", c.b.String(), c.dropped)
	}
	return c.b.String()
}
