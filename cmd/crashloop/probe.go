//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/crashloopguard/crashloop"
)

// The command's side of the probe after a park (--probe-after): the
// Supervisor schedules each probe, claims it when a Run starts a parked key
// whose probe is due, and resumes the key once the probe's run is healthy
// (agent.resumed, reason probe). crashloop starts the probe: under
// --on-park wait in place, when the next probe is due; under --on-park
// exit, a crashloop started while a probe is due runs it, the probe's due
// time kept in the state file's mark (--state) or on Redis (--redis).

// probeWatch is the crashloop.EventHandler that sees a healthy probe
// resume the key: it calls the func that onResume set (none before). It is
// safe for concurrent use: a shared layer may deliver events on its own
// goroutines.
type probeWatch struct {
	key     string
	resumed atomic.Pointer[func()]
}

// onResume makes f what a resume of the key by a probe calls.
func (w *probeWatch) onResume(f func()) { w.resumed.Store(&f) }

// HandleEvent calls the onResume func for the resume of w.key by a probe.
func (w *probeWatch) HandleEvent(ev crashloop.Event) {
	if ev.Kind != crashloop.EventResumed || ev.Reason != crashloop.ReasonProbe || ev.Key != w.key {
		return
	}
	if f := w.resumed.Load(); f != nil {
		(*f)()
	}
}

// probeState is the probe schedule of a parked key: when its next probe is
// due (zero: none) and how many probes have started since its park.
type probeState struct {
	next   time.Time
	probes int
}

// probeOf returns the probe schedule of key as sup knows it: when its next
// probe is due from its status, and the probes started from its snapshot.
func probeOf(sup *crashloop.Supervisor, key string) probeState {
	ps := probeState{next: sup.Status(context.Background()).Keys[key].NextProbe}
	if ps.next.IsZero() {
		return ps
	}
	data, err := sup.Snapshot()
	if err != nil {
		return ps
	}
	var doc struct {
		Keys map[string]struct {
			Probes int `json:"probes"`
		} `json:"keys"`
	}
	if json.Unmarshal(data, &doc) == nil {
		ps.probes = doc.Keys[key].Probes
	}
	return ps
}

// withProbe returns m with the probe schedule ps.
func (m mark) withProbe(ps probeState) mark {
	m.NextProbe, m.Probes = nil, ps.probes
	if !ps.next.IsZero() {
		next := ps.next
		m.NextProbe = &next
	}
	return m
}

// probeFailed says that the probe of key failed, the key still parked,
// and when its next probe is due; with --state it first writes the new
// schedule into the key's mark.
func probeFailed(r *runner, state *stateStore, ps probeState, out *output) error {
	r.mu.Lock()
	last := r.last
	r.mu.Unlock()
	msg := fmt.Sprintf("the probe of %s failed (%s); it stays parked", r.key, last)
	attrs := []any{"key", r.key, "last_exit", last}
	if !ps.next.IsZero() {
		msg += "; the next probe is due at " + ps.next.UTC().Format(time.RFC3339Nano)
		attrs = append(attrs, "next_probe", ps.next)
	}
	var err error
	if state != nil {
		err = state.update(func(st *stateFile) (bool, error) {
			m, ok := st.Marks[r.key]
			if ok {
				st.Marks[r.key] = m.withProbe(ps)
			}
			return ok, nil
		})
	}
	out.print(slog.LevelWarn, msg, attrs...)
	return err
}
