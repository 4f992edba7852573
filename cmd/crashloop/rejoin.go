//go:build unix

package main

import (
	"context"
	"time"

	"github.com/crashloopguard/crashloop"
)

// rejoinEvery is how often crashloop, once a decision found Redis failing,
// asks it whether it answers again.
const rejoinEvery = time.Second

// rejoin brings sup back to the shared state as soon as Redis answers
// again, rather than at its next decision: every rejoinEvery until stop is
// called, it calls sup.Flush, which, while a decision found Redis failing,
// writes back the parks decided alone (none, often: then it only asks) and,
// when Redis takes them, announces store.recovered. While sup uses Redis,
// Flush sends nothing.
//
// The Supervisor asks its ledger again only at its own calls, so without
// rejoin a crashloop whose program failed during a failover (the decision
// found no master) and then kept running stayed on its own guards, saying
// store.unavailable, until the program's next failure, hours later maybe:
// meanwhile its /status and metrics told of an outage long over, and a
// park it had decided alone waited to be written back.
func rejoin(sup *crashloop.Supervisor, timeout time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(rejoinEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			// a write-back after a lost state is two steps
			fctx, fcancel := context.WithTimeout(ctx, 2*timeout)
			_ = sup.Flush(fctx) // still failing: announced already; asked again at the next tick
			fcancel()
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
