//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/errtext"
	"github.com/crashloopguard/crashloop/redisstore"
	"github.com/crashloopguard/crashloop/share"
)

// resumePoll is how often a waiting crashloop (--on-park wait) reads the
// state file or Redis for a resume: a resume reaches it within this.
const resumePoll = 200 * time.Millisecond

// parkWaiter holds a parked program under --on-park wait: crashloop stays
// up, with the program stopped and its endpoints served, until the program
// is resumed, then starts it again with a full budget. A resume comes from
// the state file (crashloop resume --state: its mark is gone), from Redis
// (crashloop resume --redis: the shared state no longer parks the key), or
// over HTTP (POST /resume with --admin-token-file). With --redis, Redis
// decides, and the state file's mark is only this machine's record, cleared
// on the resume. With --probe-after it also wakes when the park's next
// probe is due, for crashloop to start the probe (the Supervisor claims
// it); while the probe runs, a resume over HTTP still resumes the key.
type parkWaiter struct {
	key   string
	sup   *crashloop.Supervisor
	layer *share.Layer      // nil without --redis
	state *stateStore       // nil without --state
	store *redisstore.Store // nil without --redis
	redis redisConfig
	log   *slog.Logger

	mu      sync.Mutex
	parked  bool
	probing bool          // a probe of the park runs
	resumed chan string   // who resumed it, from resumeHTTP
	polled  bool          // a read of the state file or Redis has failed (logged once)
	resumes *atomic.Int64 // resumes of the key while its probe ran: by the probe, or over HTTP
}

// byProbe is what wait returns when the park's next probe is due.
const byProbe = "the probe"

// probe notes that the probe of the park starts: the program runs, and
// until the probe resumes the key (or fails), the key stays parked.
func (w *parkWaiter) probe() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.parked, w.probing = false, true
}

// probeResumed notes that a healthy probe resumed the key (the Supervisor
// announced agent.resumed, reason probe).
func (w *parkWaiter) probeResumed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.probing = false
}

// isParked reports whether crashloop waits for a resume (for /readyz).
func (w *parkWaiter) isParked() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.parked
}

// wait waits until the key is resumed, and returns who resumed it ("the
// state file", "Redis", "HTTP"), or byProbe once the probe due at probe
// (zero: none) is, or false when ctx ends first (INT or TERM): the key then
// stays parked. flushed is false when the park was decided while Redis was
// unreachable and is not on Redis yet: wait writes it back first, so that
// it is not mistaken for a resume.
func (w *parkWaiter) wait(ctx context.Context, flushed bool, probe time.Time) (by string, ok bool) {
	w.mu.Lock()
	w.parked, w.probing, w.resumed, w.polled = true, false, make(chan string, 1), false
	resumed := w.resumed
	w.mu.Unlock()
	tick := time.NewTicker(resumePoll)
	defer tick.Stop()
	var due <-chan time.Time // nil: no probe
	if !probe.IsZero() {
		timer := time.NewTimer(time.Until(probe))
		defer timer.Stop()
		due = timer.C
	}
	for {
		select {
		case <-ctx.Done():
			return "", false
		case by := <-resumed:
			return by, true
		case <-due:
			if by := w.poll(ctx); by != "" { // resumed meanwhile: no probe needed
				return by, true
			}
			if w.probeStarts() {
				return byProbe, true
			}
			continue
		case <-tick.C:
		}
		if !flushed {
			flushed = w.layer.Flush(ctx) == nil
			continue
		}
		if by := w.poll(ctx); by != "" {
			return by, true
		}
	}
}

// poll reads the state file, or Redis, for a resume, and returns who
// resumed the key, "" if nobody has.
func (w *parkWaiter) poll(ctx context.Context) string {
	var by string
	var err error
	if w.store != nil {
		by, err = w.pollRedis(ctx)
	} else if w.state != nil {
		by, err = w.pollState()
	}
	if err != nil {
		w.mu.Lock()
		first := !w.polled
		w.polled = true
		w.mu.Unlock()
		if first && ctx.Err() == nil {
			w.log.Warn("cannot read whether the program was resumed; trying again: "+err.Error(), "key", w.key)
		}
		return ""
	}
	if by == "" {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.parked { // resumed over HTTP meanwhile
		return ""
	}
	if w.store == nil { // the Supervisor alone knows the park: lift it, announcing agent.resumed
		if err := w.sup.Resume(ctx, w.key); err != nil && !errors.Is(err, crashloop.ErrNotParked) {
			return ""
		}
	} else if w.state != nil {
		w.unmark()
	}
	w.parked = false
	return by
}

// pollRedis reports "Redis" once the shared state no longer parks the key.
func (w *parkWaiter) pollRedis(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, w.redis.timeout)
	defer cancel()
	ch, err := w.store.Lookup(ctx, w.key)
	switch {
	case err != nil:
		return "", fmt.Errorf("--redis %s: %v", redact(w.redis.url), scrub(err, w.redis.url))
	case ch.Park != nil:
		return "", nil
	}
	return "Redis", nil
}

// pollState reports "the state file" once the key's mark is gone from it.
func (w *parkWaiter) pollState() (string, error) {
	st, err := w.state.load(true)
	if err != nil {
		return "", err
	}
	if _, ok := st.Marks[w.key]; ok {
		return "", nil
	}
	return "the state file", nil
}

// probeStarts reports whether the probe that is due may start: crashloop
// is still waiting (not resumed over HTTP meanwhile).
func (w *parkWaiter) probeStarts() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.parked
}

// resumeHTTP resumes the key for POST /resume: the Supervisor's park (on
// Redis, for every replica) and the state file's mark. It returns
// crashloop.ErrNotParked when crashloop is not waiting on a park, nor
// running its probe.
func (w *parkWaiter) resumeHTTP(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.parked && !w.probing {
		return crashloop.ErrNotParked
	}
	err := w.sup.Resume(ctx, w.key)
	switch {
	case w.probing && err != nil: // the probe resumed it a moment ago, or the resume failed
		return err
	case err != nil && !errors.Is(err, crashloop.ErrNotParked):
		return err
	}
	if w.state != nil {
		w.unmark()
	}
	if w.probing { // the probe's run goes on, no longer a probe
		w.probing = false
		w.resumes.Add(1)
		return nil
	}
	w.parked = false
	w.resumed <- "HTTP"
	return nil
}

// unmark removes the key's mark from the state file, if it has one. A
// failure is logged: the program is resumed all the same.
func (w *parkWaiter) unmark() { unmark(w.state, w.key, w.log) }

// unmark removes the mark of key from the state file, if it has one. A
// failure is logged: the program is resumed all the same.
func unmark(state *stateStore, key string, log *slog.Logger) {
	err := state.update(func(st *stateFile) (bool, error) {
		_, ok := st.Marks[key]
		delete(st.Marks, key)
		return ok, nil
	})
	if err != nil {
		log.Error("resumed, but the mark stays in the state file: "+err.Error(), "key", key)
	}
}

// restorePark makes sup know the park m of key, read from the state file
// when crashloop starts with --on-park wait, or with a probe due: its
// status and metrics then show the key parked, and Run refuses it until it
// is resumed or its probe is due (then Run claims the probe). It goes
// through the Supervisor's snapshot, the one way in for a park and its
// probe schedule.
func restorePark(sup *crashloop.Supervisor, key string, m mark) error {
	data, err := sup.Snapshot()
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	since := m.Since.UTC().Format(time.RFC3339Nano)
	p := m.park(key)
	park := map[string]any{"reason": m.Reason, "attempts": p.Attempts, "since": since}
	if m.LastError != "" { // with how the program ended, as the Supervisor keeps it
		park["last_error"] = errtext.Text(&runFailure{msg: m.LastError, exit: p.exit()})
	}
	state := crashloop.StateParked
	if m.Reason == crashloop.ReasonNeedsHuman {
		state = crashloop.StateNeedsHuman
	}
	budget, _ := doc["budget"].(map[string]any)
	if budget == nil {
		return errors.New("the snapshot has no budget")
	}
	budget["keys"] = map[string]any{key: map[string]any{"parked": park}}
	key0 := map[string]any{"state": state, "since": since}
	if m.LastError != "" {
		key0["last_error"] = park["last_error"]
	}
	if m.NextProbe != nil { // the probe schedule; without it, the first probe is ProbeAfter after the park
		key0["next_probe"] = m.NextProbe.UTC().Format(time.RFC3339Nano)
		if m.Probes > 0 {
			key0["probes"] = m.Probes
		}
	}
	doc["keys"] = map[string]any{key: key0}
	if data, err = json.Marshal(doc); err != nil {
		return err
	}
	return sup.Restore(data)
}
