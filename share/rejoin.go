package share

import "context"

// The rejoin of a Layer: while its ledger is held to have
// failed and a Run, Wrap or Process runs a key, it asks the ledger again
// by itself, rather than at its next call, which may come hours later.
//
// A decision that found the ledger failing is made alone; if the work it
// restarted then keeps running, no call comes to ask the ledger again, and
// the Supervisor would stay on its own guards, its Status telling of an
// outage long over, a park it decided alone not written back. So one
// goroutine per Supervisor, the rejoiner, asks it every retry, as a
// call would (use: the parks decided alone written back, and
// EventStoreRecovered announced once, when the ledger takes them), until
// the ledger answers or no key runs. While the ledger is in use there is
// no rejoiner, no timer and nothing allocated.

// rejoiner is the goroutine that asks a failed ledger again.
type rejoiner struct {
	cancel context.CancelFunc // when no key runs any more
}

// rejoin starts the rejoiner if the ledger is held to have failed, a key
// runs and none is running yet. The Supervisor's lock must be held.
func (y *Layer) rejoin() {
	if !y.down || y.running == 0 || y.rejoiner != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	rj := &rejoiner{cancel: cancel}
	y.rejoiner = rj
	go y.rejoinLoop(ctx, rj)
}

// rejoinLoop asks the ledger whenever a call would (retry after the
// last ask), each ask bounded as a decision is, until it answers or ctx,
// cancelled when no key runs any more, ends.
func (y *Layer) rejoinLoop(ctx context.Context, rj *rejoiner) {
	for {
		y.h.Lock()
		wait := y.retryAt.Sub(y.h.Clock().Now())
		y.h.Unlock()
		if wait > 0 {
			select {
			case <-y.h.Clock().After(wait):
			case <-ctx.Done():
				return
			}
		}
		lctx, cancel := y.decisionContext(ctx)
		_, _ = y.use(lctx, y.h.Clock().Now()) // still failing: announced already
		cancel()
		y.h.Lock()
		if ctx.Err() == nil && y.down { // failing still, or again
			y.h.Unlock()
			continue
		}
		if y.rejoiner == rj {
			y.rejoiner = nil
		}
		y.h.Unlock()
		return
	}
}

// Running counts a key that a Run, Wrap or Process starts (delta 1) or
// stops (-1) running. The first starts the rejoiner if the ledger is held
// to have failed; the last cancels it, which returns as soon as its ask, if
// one is under way, does: an EventHandler may call back into the
// Supervisor, and the rejoiner may be running one. The Supervisor's lock
// must be held.
func (y *Layer) Running(delta int) {
	y.running += delta
	if delta > 0 {
		y.rejoin()
		return
	}
	if y.running == 0 && y.rejoiner != nil {
		y.rejoiner.cancel()
		y.rejoiner = nil
	}
}
