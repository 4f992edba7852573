package share

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/errtext"
)

// writeBack writes the parks decided alone to the ledger; when the ledger
// takes them, the Layer uses it again, announcing its recovery if it had
// failed. Parks decided alone while it runs (the decisions made meanwhile
// still decide alone) are written back by it too, in a step of their own,
// before the ledger is marked in use: else they would wait, with the
// ledger in use, for a Flush. When ctx ends first it returns ctx's error
// and records no failure of the ledger.
//
// One write-back runs at a time: a second one (a Flush, the rejoiner, the
// write-back of a loss of state found meanwhile) waits for the first,
// then finds what is left. Side by side, the second found the parks the
// first had just written standing, wrote nothing, and could announce
// EventStoreRecovered with no park written before the first could tell of
// them. A write-back whose ctx ends while it waits returns as above: the
// caller's error, or ErrUnavailable for the decision's deadline, the
// ledger's slowness, which the write-back under way records if it fails.
func (y *Layer) writeBack(ctx context.Context, now time.Time) error {
	select {
	case y.writing <- struct{}{}:
	case <-ctx.Done():
		if err := callerErr(ctx); err != nil {
			return err
		}
		return fmt.Errorf("%w: waiting for the write-back under way: %v", ErrUnavailable, ctx.Err())
	}
	var evs []crashloop.Event
	err := y.writeBackSteps(ctx, now, &evs)
	<-y.writing
	y.h.Emit(evs...) // with no lock and no token held: a handler may call back
	return err
}

// writeBackSteps is writeBack's steps, run with its token held; the events
// they make are added to evs, for writeBack to emit once it gave the token
// back.
func (y *Layer) writeBackSteps(ctx context.Context, now time.Time, evs *[]crashloop.Event) error {
	again := true // one more try when the ledger reports a loss of its state
	n := 0        // the parks written, in every step
	for {
		y.h.Lock()
		parks := make([]*crashloop.ParkedError, 0, len(y.alone))
		for _, pe := range y.alone {
			parks = append(parks, pe)
		}
		down := y.down
		y.h.Unlock()
		if len(parks) == 0 && !down {
			return nil
		}
		stand, err := y.l.Restore(ctx, parks)
		var sl *StateLostError
		if errors.As(err, &sl) && again {
			*evs = y.takeLoss(sl, now, *evs) // every park it knows, to write back now
			again = false
			continue
		}
		if err == nil && len(stand) != len(parks) {
			err = fmt.Errorf("the ledger's Restore told of %d keys for %d parks", len(stand), len(parks))
		}
		if err != nil {
			if err := callerErr(ctx); err != nil {
				return err // the caller's cancel, not an outage
			}
			*evs = y.failed(err, now, *evs)
			y.h.Lock()
			err = y.lastErr
			y.h.Unlock()
			return fmt.Errorf("%w: writing back %s decided alone: %v", ErrUnavailable, errtext.Plural(len(parks), "park"), err)
		}
		y.h.Lock()
		n += y.wroteBack(parks, stand, now)
		if len(y.alone) > 0 && y.down {
			y.h.Unlock()
			continue // decided alone meanwhile: written back before the ledger is used again
		}
		recovered := y.down && !y.quiet
		y.down, y.lastErr, y.quiet, y.cause = false, nil, false, ""
		y.h.Unlock()
		if recovered {
			*evs = append(*evs, crashloop.Event{Kind: crashloop.EventStoreRecovered, Key: "store", Time: now, Attempts: n})
		}
		return nil
	}
}

// wroteBack takes what the ledger's Restore of parks answered, stand, into
// the mirror, and returns how many of them it wrote. The Supervisor's lock
// must be held.
func (y *Layer) wroteBack(parks []*crashloop.ParkedError, stand []Restored, now time.Time) int {
	n := 0
	for i, pe := range parks {
		if stand[i].Written {
			n++
		}
		if y.alone[pe.Key] != pe {
			continue // decided again, or resumed, meanwhile
		}
		delete(y.alone, pe.Key)
		cur, known := y.h.Park(pe.Key)
		ch := stand[i].Change
		switch {
		case !known:
		case stand[i].Written && cur == pe && ch.Version > y.ver[pe.Key]:
			// written back: the park stands with its new version, and keeps
			// the error values this replica made it with
			w := *pe
			w.Version = ch.Version
			y.h.SetPark(pe.Key, &w, now)
			y.ver[pe.Key] = ch.Version
		default:
			y.adopt(ch, now) // something happened to the key since: the ledger's state wins
		}
	}
	return n
}

// stateLost takes the ledger's report that its server lost its state: every
// park this replica knows (and no resume it learnt has superseded) is to
// be written back at once, as decided alone on a key with no version, and
// the versions it knows restart. It announces the loss if the ledger says
// this replica is the one to.
func (y *Layer) stateLost(sl *StateLostError, now time.Time) {
	y.h.Emit(y.takeLoss(sl, now, nil)...)
}

// takeLoss is stateLost but for its announcement, which it appends to evs
// for the caller to emit.
func (y *Layer) takeLoss(sl *StateLostError, now time.Time, evs []crashloop.Event) []crashloop.Event {
	if sl.Announce {
		evs = append(evs, crashloop.Event{Kind: crashloop.EventStoreStateLost, Key: "store", Time: now, Reason: sl.Reason})
	}
	y.h.Lock()
	defer y.h.Unlock()
	if sl.Epoch != "" && sl.Epoch == y.epoch {
		return evs // told before (a late announcement of it): written back already
	}
	y.epoch = sl.Epoch
	y.gen++ // the claims pending are of the state lost: dropped
	clear(y.won)
	clear(y.ver)
	y.lastErr = sl
	y.h.Parks(func(key string, pe *crashloop.ParkedError) *crashloop.ParkedError {
		w := *pe
		w.Version = 0
		y.alone[key] = &w
		return &w
	})
	if !y.down {
		y.down, y.quiet = true, true
	}
	y.retryAt = now // the next call writes them back
	y.rejoin()
	return evs
}

// stateLostNow takes a loss of state that the ledger found outside a call
// of this replica (Change.StateLost, or a claim refused for it), and
// writes back the parks it knows at once, on a goroutine of its own (the
// ledger bounds the call), rather than at the next decision: an idle
// replica's parks are back as soon as the loss is found.
func (y *Layer) stateLostNow(sl *StateLostError) {
	now := y.now()
	y.stateLost(sl, now)
	go func() {
		ctx, cancel := y.decisionContext(context.Background())
		defer cancel()
		// not through use: the decisions made meanwhile must not decide
		// alone while this one writes back (they write back too)
		_ = y.writeBack(ctx, now)
	}()
}

// reloaded reports, for err from a call of the ledger, whether the ledger
// lost its state and this replica wrote back the parks it knows: the call
// is then made again, on the state written back, rather than decided
// alone.
func (y *Layer) reloaded(ctx context.Context, err error, now time.Time) bool {
	var sl *StateLostError
	if !errors.As(err, &sl) {
		return false
	}
	y.stateLost(sl, now)
	return y.writeBack(ctx, now) == nil
}

// lost records a failed call of the ledger at now, and announces the first
// of a run of failures: EventStoreMisconfigured for an error matching
// ErrMisconfigured, else EventStoreUnavailable. A run of failures whose
// cause changes (an outage becomes a refused password) announces the new
// cause; the same cause again announces nothing.
func (y *Layer) lost(err error, now time.Time) {
	y.h.Emit(y.failed(err, now, nil)...)
}

// failed is lost but for its announcement, which it appends to evs for the
// caller to emit.
func (y *Layer) failed(err error, now time.Time, evs []crashloop.Event) []crashloop.Event {
	var sl *StateLostError
	if errors.As(err, &sl) {
		return y.takeLoss(sl, now, evs)
	}
	kind, cause := crashloop.EventStoreUnavailable, "unavailable"
	if errors.Is(err, ErrMisconfigured) {
		kind, cause = crashloop.EventStoreMisconfigured, misconfiguredCause(err)
	}
	y.h.Lock()
	announce := !y.down || y.quiet || y.cause != cause
	y.down, y.retryAt, y.lastErr, y.quiet, y.cause = true, now.Add(retry), err, false, cause
	y.rejoin()
	y.h.Unlock()
	if !announce {
		return evs
	}
	ev := crashloop.Event{Kind: kind, Key: "store", Time: now, LastError: err}
	if kind == crashloop.EventStoreMisconfigured {
		ev.Reason = cause
	}
	return append(evs, ev)
}

// misconfiguredCause names the cause of a misconfigured ledger's error: its
// StoreCause, else its text.
func misconfiguredCause(err error) string {
	var c interface{ StoreCause() string }
	if errors.As(err, &c) && c.StoreCause() != "" {
		return c.StoreCause()
	}
	return err.Error()
}
