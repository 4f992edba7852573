package crashloop

import "context"

// The rejoin of a shared Supervisor: while its ledger is held to have
// failed and a Run, Wrap or Process runs a key, it asks the ledger again
// by itself, rather than at its next call, which may come hours later.
//
// A decision that found the ledger failing is made alone; if the work it
// restarted then keeps running, no call comes to ask the ledger again, and
// the Supervisor would stay on its own guards, its Status telling of an
// outage long over, a park it decided alone not written back. So one
// goroutine per Supervisor, the rejoiner, asks it every sharedRetry, as a
// call would (useShared: the parks decided alone written back, and
// EventStoreRecovered announced once, when the ledger takes them), until
// the ledger answers or no key runs. While the ledger is in use there is
// no rejoiner, no timer and nothing allocated.

// rejoiner is the goroutine that asks a failed ledger again.
type rejoiner struct {
	cancel context.CancelFunc // when no key runs any more
}

// rejoin starts the rejoiner if the ledger is held to have failed, a key
// runs and none is running yet. s.mu must be held.
func (s *Supervisor) rejoin() {
	sh := s.shared
	if sh == nil || !sh.down || sh.running == 0 || sh.rejoiner != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	rj := &rejoiner{cancel: cancel}
	sh.rejoiner = rj
	go s.rejoinLoop(ctx, rj)
}

// rejoinLoop asks the ledger whenever a call would (sharedRetry after the
// last ask), each ask bounded as a decision is, until it answers or ctx,
// cancelled when no key runs any more, ends.
func (s *Supervisor) rejoinLoop(ctx context.Context, rj *rejoiner) {
	for {
		s.mu.Lock()
		wait := s.shared.retryAt.Sub(s.o.clock.Now())
		s.mu.Unlock()
		if wait > 0 {
			select {
			case <-s.o.clock.After(wait):
			case <-ctx.Done():
				return
			}
		}
		lctx, cancel := s.decisionContext(ctx)
		_, _ = s.useShared(lctx, s.o.clock.Now()) // still failing: announced already
		cancel()
		s.mu.Lock()
		if ctx.Err() == nil && s.shared.down { // failing still, or again
			s.mu.Unlock()
			continue
		}
		if s.shared.rejoiner == rj {
			s.shared.rejoiner = nil
		}
		s.mu.Unlock()
		return
	}
}

// runs counts a key that a Run, Wrap or Process starts running, and starts
// the rejoiner if the ledger is held to have failed. s.mu must be held.
func (s *Supervisor) runs() {
	if s.shared != nil {
		s.shared.running++
		s.rejoin()
	}
}

// ran counts a key that no Run, Wrap or Process runs any more; when it was
// the last, it cancels the rejoiner, which returns as soon as its ask, if
// one is under way, does. End does not wait for it: an EventHandler may call
// back into the Supervisor (even Run), and the rejoiner may be running one.
// s.mu must be held.
func (s *Supervisor) ran() {
	sh := s.shared
	if sh == nil {
		return
	}
	sh.running--
	if sh.running == 0 && sh.rejoiner != nil {
		sh.rejoiner.cancel()
		sh.rejoiner = nil
	}
}
