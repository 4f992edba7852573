package share

import (
	"context"
	"errors"
	"time"

	"github.com/crashloopguard/crashloop"
)

// claimGrace is how long a replica that learns a transition it did not
// see made (from a notice, a lookup, a refusal) waits before it claims it,
// to announce it: the replica whose step made it claims at once when its
// reply arrives, and announces it with its own error values. A claim that
// cannot be sent is tried again every retry, claimTries times in all.
const (
	claimGrace = time.Second
	claimTries = 60
)

// claim claims the transition of version v on the ledger at once, and
// announces it with evs if this replica wins; a claim that could not be
// sent is tried again later.
func (y *Layer) claim(ctx context.Context, v int64, evs []crashloop.Event) {
	y.h.Lock()
	gen := y.gen
	y.h.Unlock()
	won, err := y.l.Claim(ctx, v)
	if err != nil {
		if !y.claimLost(err) {
			y.claimAfter(v, evs, retry, 1, gen)
		}
		return
	}
	if won && y.firstWin(v, gen) {
		y.h.Emit(evs...)
	}
}

// wonFor is how long a replica remembers a version it won: longer than
// the last retry of a claim of it.
const wonFor = claimGrace + claimTries*retry + time.Minute

// firstWin reports whether this replica won the claim of version v, in
// generation gen of the ledger's state, for the first time. A claim that
// its holder makes again wins again (a retry after a lost reply must), and
// a replica may claim one version twice: at its step's reply, and from the
// step's notice when that came first. It announces the first win only.
func (y *Layer) firstWin(v int64, gen uint64) bool {
	now := y.now()
	y.h.Lock()
	defer y.h.Unlock()
	if y.gen != gen {
		return false // a claim of the state lost
	}
	if _, ok := y.won[v]; ok {
		return false
	}
	for w, at := range y.won {
		if now.Sub(at) > wonFor {
			delete(y.won, w)
		}
	}
	y.won[v] = now
	return true
}

// claimLater claims the transition of version v after a wait, and
// announces it with evs if this replica wins. The Supervisor's lock must
// be held.
func (y *Layer) claimLater(v int64, evs []crashloop.Event, after time.Duration, try int) {
	y.claimAfter(v, evs, after, try, y.gen)
}

// claimAfter is claimLater of a transition learnt in generation gen of the
// ledger's state: once the ledger lost that state (a later generation),
// the claim is dropped, as its version may name another transition now.
// The wait reads the Supervisor's clock.
func (y *Layer) claimAfter(v int64, evs []crashloop.Event, after time.Duration, try int, gen uint64) {
	wake := y.h.Clock().After(after)
	go func() {
		<-wake
		y.h.Lock()
		current := y.gen == gen
		y.h.Unlock()
		if !current {
			return
		}
		won, err := y.l.Claim(context.Background(), v)
		switch {
		case err != nil && y.claimLost(err):
		case err != nil && try < claimTries:
			y.claimAfter(v, evs, retry, try+1, gen)
		case err == nil && won && y.firstWin(v, gen):
			y.h.Emit(evs...)
		}
	}()
}

// claimLost reports whether err, from a claim, tells that the ledger lost
// its state, and takes the loss: the claim is dropped (see claimAfter).
func (y *Layer) claimLost(err error) bool {
	var sl *StateLostError
	if !errors.As(err, &sl) {
		return false
	}
	y.stateLostNow(sl)
	return true
}
