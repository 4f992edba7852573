package crashloop

import (
	"context"
	"time"

	"github.com/crashloopguard/crashloop/internal/seam"
)

// A Supervisor's side of the probe after a park (probe.go has the rule):
// Proceed claims the probe of a parked key, Run and Process start one for
// a parked key whose probe is due, and the probe's run resumes the key
// once it is healthy (Ready, HealthyAfter, or a healthy end).

// claimProbe asks, for a Run about to start key at now, whether key is
// parked with its probe due, and claims the probe if it is. It reports
// whether the run that follows is a probe.
func (s *Supervisor) claimProbe(ctx context.Context, key string, now time.Time) bool {
	if s.cfg.ProbeAfter <= 0 {
		return false
	}
	s.mu.Lock()
	r := s.keys[key]
	parked := r != nil && r.park != nil && !r.running
	s.mu.Unlock()
	return parked && s.ProceedAt(ctx, key, now).Action == ActionRestart
}

// probeEnded ends the probe of r's park, if its run was one: a healthy run
// resumes the key (adding EventResumed, reason ReasonProbe, to evs) and
// probeEnded reports true. s.mu must be held; a Supervisor without a
// shared layer calls it.
func (s *Supervisor) probeEnded(r *record, healthy bool, now time.Time, evs *events) bool {
	probing := r.probing
	r.probing = nil
	if probing == nil || !healthy || r.park != probing {
		return false // no probe, or a probe of a park since resumed
	}
	pe, err := s.resumeLocked(r.key, nil, now)
	if err != nil {
		return false
	}
	evs.add(s.probeResumed(pe, now))
	return true
}

// probeResumed is the event of a resume of pe by a healthy probe.
func (s *Supervisor) probeResumed(pe *ParkedError, now time.Time) Event {
	ev := s.cfg.Budget.resumedEvent(pe, now)
	ev.Reason = ReasonProbe
	return ev
}

// probeHealthy resumes key if its run is a probe of its park, the park it
// has now: the run became healthy at now. With a shared layer the layer
// resumes it everywhere (its version: a park made since is not resumed);
// if the layer cannot, the key stays parked and the run goes on, to be
// judged when it ends.
func (s *Supervisor) probeHealthy(ctx context.Context, key string, now time.Time) {
	s.mu.Lock()
	r := s.keys[key]
	if r == nil || r.probing == nil || r.park == nil || r.park.Version != r.probing.Version {
		s.mu.Unlock()
		return
	}
	if s.share == nil {
		var evs events
		ok := s.probeEnded(r, true, now, &evs)
		s.mu.Unlock()
		emitAll(s.o.handler, evs.list())
		if ok {
			s.save(now, true)
		}
		return
	}
	r.probing, r.probed = nil, true
	s.mu.Unlock()
	ctx, cancel := s.share.Context(ctx)
	_ = s.share.Resume(ctx, key, now) // a refusal: changed since, or no ledger to resume it on
	cancel()
	s.mu.Lock()
	r.probed = false
	s.mu.Unlock()
}

// watchProbe makes the run of key that rs tracks healthy once it has run
// HealthyAfter, if it is a probe of its park: a probe's run resumes its key
// while it runs, not when it ends. It returns a func that stops the watch.
func (s *Supervisor) watchProbe(ctx context.Context, key string, rs *runState) (stop func()) {
	s.mu.Lock()
	r := s.keys[key]
	probing := r != nil && r.probing != nil
	s.mu.Unlock()
	if !probing || s.cfg.HealthyAfter <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	after := s.o.clock.After(s.cfg.HealthyAfter)
	go func() {
		select {
		case <-after:
			if !rs.done.Load() {
				s.probeHealthy(context.WithoutCancel(ctx), key, s.o.clock.Now())
			}
		case <-done:
		}
	}()
	return func() { close(done) }
}

// untilProbe is, for a verdict that found or made a park, how long until
// its next probe is due (at least 1ns); 0 if none is scheduled.
func untilProbe(v verdict) time.Duration {
	if v.ProbeAt.IsZero() {
		return 0
	}
	return max(v.ProbeAt.Sub(v.Now), time.Nanosecond)
}

// causeEvent is the event of a hold on a shared cause, begun or ended.
func (s *Supervisor) causeEvent(kind EventKind, now time.Time, ch *seam.CauseChange) Event {
	sc := s.rules.cause
	return Event{Kind: kind, Key: s.fleetName, Time: now, Reason: ReasonSharedCause, Cause: ch.Cause,
		Attempts: ch.Keys, Limit: sc.Keys, Window: sc.ProbeEvery}
}

// fleetEvents adds the events of the fleet changes v made, but a trip:
// the breaker's re-arm and the end of a hold on a cause. s.mu must be held.
func (s *Supervisor) fleetEvents(v verdict, evs *events) {
	if v.Rearmed != nil {
		evs.add(s.cfg.Fleet.event(EventFleetRearmed, s.fleetName, v.Now, v.Rearmed))
	}
	if v.CauseReleased != nil {
		evs.add(s.causeEvent(EventFleetCauseReleased, v.Now, v.CauseReleased))
	}
}

// heldForCause acts on a verdict that holds the restart of r for its
// shared cause: nothing was counted, and the loop waits, then asks again
// with Proceed. s.mu must be held.
func (s *Supervisor) heldForCause(r *record, j *seam.Judgment, cause error, v verdict, evs *events) Decision {
	r.held, r.cause = max(r.held, 1), v.Cause // a mirror: the order is the ledger's
	s.setState(r, StateHeld, v.Now)
	if v.CauseHeld != nil {
		evs.add(s.causeEvent(EventFleetCauseHeld, v.Now, v.CauseHeld))
	}
	if s.o.handler != nil {
		evs.add(Event{Kind: EventRestartScheduled, Key: j.Key, Incarnation: j.Incarnation, Time: v.Now,
			Reason: ReasonSharedCause, LastError: cause, Attempts: v.Restarts, Backoff: v.Wait, Held: true, Cause: v.Cause})
	}
	return Decision{Action: ActionHold, Wait: v.Wait}
}
