package share

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/ctxdone"
)

// retry is how long a Layer whose ledger failed decides alone before it
// asks the ledger again: at its next call, or by itself while a key runs
// (rejoin.go).
const retry = time.Second

// Layer shares the guard state of one Supervisor with the other replicas
// of a service through a Ledger. Give it to the Supervisor with
// crashloop.WithSharing; the package doc tells the protocol. Its state is
// guarded by the Supervisor's lock. A Layer serves one Supervisor; its
// methods are safe for concurrent use.
type Layer struct {
	l Ledger
	h crashloop.Host

	// guarded by the Supervisor's lock
	cfg     crashloop.SupervisorConfig
	down    bool      // the last call failed: decide alone
	retryAt time.Time // when to ask the ledger again
	lastErr error
	cause   string                            // what the failures since the last success were announced as
	alone   map[string]*crashloop.ParkedError // parks decided alone, to write back
	quiet   bool                              // down for a state loss only: no store.recovered
	epoch   string                            // the state the last loss told of (StateLostError.Epoch)
	gen     uint64                            // losses taken: a claim learnt before one is dropped
	won     map[int64]time.Time               // the versions this replica won and announced lately (see firstWin)
	ver     map[string]int64                  // per key, the version of its last transition learnt

	running  int       // keys that a Run, Wrap or Process runs (rejoin.go)
	rejoiner *rejoiner // asks the ledger again while it is down and a key runs; nil: none

	// writing holds a token while a write-back runs (see writeBack); it is
	// not guarded by the Supervisor's lock, and is taken before it.
	writing chan struct{}
}

// New returns a Layer on l, for one Supervisor.
func New(l Ledger) *Layer {
	return &Layer{l: l, alone: map[string]*crashloop.ParkedError{}, won: map[int64]time.Time{},
		ver: map[string]int64{}, writing: make(chan struct{}, 1)}
}

// Bind opens the ledger with the configuration of h, the Supervisor the
// Layer serves. The Supervisor calls it; a second call fails.
func (y *Layer) Bind(h crashloop.Host) error {
	if y.h != nil {
		return errors.New("share: the Layer serves a Supervisor already")
	}
	y.h, y.cfg = h, h.Config()
	return y.l.Open(h.Config(), y.learn)
}

// now reads the Supervisor's clock.
func (y *Layer) now() time.Time { return y.h.Clock().Now() }

// use reports whether the Layer asks its ledger at now: the last call did
// not fail, or it failed long enough ago to ask again. When the ledger
// answers again after a failure, the parks decided alone are written back
// first. It returns ctx's error when ctx ended while it waited on the
// ledger: the ledger's state is as before, and the next call asks it
// again.
func (y *Layer) use(ctx context.Context, now time.Time) (bool, error) {
	y.h.Lock()
	if !y.down {
		y.h.Unlock()
		return true, nil
	}
	if now.Before(y.retryAt) {
		y.h.Unlock()
		return false, nil
	}
	due, next := y.retryAt, now.Add(retry)
	y.retryAt = next // one caller asks; the others go on alone
	y.h.Unlock()
	err := y.writeBack(ctx, now)
	if cerr := callerErr(ctx); err != nil && cerr != nil {
		y.h.Lock()
		if y.retryAt.Equal(next) {
			y.retryAt = due // the caller gave up, not the ledger: the next call asks
		}
		y.h.Unlock()
		return false, cerr
	}
	return err == nil, nil
}

// Context bounds the ledger calls of one decision (Judge or Proceed, and
// Announce) by one deadline: see decisionContext.
func (y *Layer) Context(ctx context.Context) (context.Context, context.CancelFunc) {
	return y.decisionContext(ctx)
}

// Judge judges j through the ledger, within ctx, the decision's Context.
func (y *Layer) Judge(ctx context.Context, j Judgment) (Verdict, bool, error) {
	if use, err := y.use(ctx, j.Now); err != nil || !use {
		return Verdict{}, false, err
	}
	v, err := y.l.Judge(ctx, j)
	if y.reloaded(ctx, err, j.Now) {
		v, err = y.l.Judge(ctx, j) // on the state written back
	}
	if err != nil {
		if err := callerErr(ctx); err != nil {
			return Verdict{}, false, err
		}
		y.lost(err, j.Now)
		return Verdict{}, false, nil
	}
	return v, true, nil
}

// Judged takes the verdict v of key into the mirror: a park it refused
// for that this replica had not learnt is claimed as from a notice, and a
// reply never moves the mirror back past a newer transition learnt first.
func (y *Layer) Judged(key string, v Verdict, known *crashloop.ParkedError, now time.Time) {
	if v.Park == nil {
		return
	}
	if !v.NewPark {
		y.adopt(Change{Key: key, Version: v.Park.Version, Park: v.Park}, now)
	}
	switch {
	case v.Park.Version >= y.ver[key]:
		y.ver[key] = v.Park.Version
	case known != nil:
		y.h.Parked(key, known, v.Now) // parked again since, as this replica learnt first
	default:
		y.h.Unpark(key, v.Now) // resumed since, as this replica learnt first
	}
}

// Announce emits evs, but a new park's own events, which the replica that
// claims the park emits.
func (y *Layer) Announce(ctx context.Context, v Verdict, evs []crashloop.Event) {
	var park []crashloop.Event
	for _, ev := range evs {
		if v.NewPark && ev.Key == v.Park.Key && ev.Kind.Stops() {
			park = append(park, ev)
			continue
		}
		y.h.Emit(ev)
	}
	if park != nil {
		y.claim(ctx, v.Park.Version, park)
	}
}

// Proceed asks the ledger whether the held restart of key may go.
func (y *Layer) Proceed(ctx context.Context, key string, now time.Time) (Verdict, bool, error) {
	if use, err := y.use(ctx, now); err != nil || !use {
		return Verdict{}, false, err
	}
	v, err := y.l.Proceed(ctx, key, now)
	if err != nil {
		if err := callerErr(ctx); err != nil {
			return Verdict{}, false, err
		}
		y.lost(err, now)
		return Verdict{}, false, nil
	}
	return v, true, nil
}

// Proceeded takes the verdict of a Proceed into the mirror. A verdict
// without a park lifts no park (a resume does, with its version), and one
// with an older park than the mirror knows changes nothing. A park it had
// not learnt is claimed as from a notice.
func (y *Layer) Proceeded(key string, v Verdict, now time.Time) {
	if v.Park == nil {
		return
	}
	if !y.adopt(Change{Key: key, Version: v.Park.Version, Park: v.Park}, now) && v.Park.Version == y.ver[key] {
		if pe, _ := y.h.Park(key); pe == nil {
			y.h.SetPark(key, v.Park, now)
		}
	}
}

// Lookup takes the ledger's state of key into the mirror, for a run's
// gate: a change whose notice was lost or is late. A failing ledger
// leaves the mirror as it is.
func (y *Layer) Lookup(ctx context.Context, key string, now time.Time) error {
	if use, err := y.use(ctx, now); !use {
		return err
	}
	ch, err := y.l.Lookup(ctx, key)
	if y.reloaded(ctx, err, now) {
		ch, err = y.l.Lookup(ctx, key) // on the state written back
	}
	if err != nil {
		if err := callerErr(ctx); err != nil {
			return err
		}
		y.lost(err, now)
		return nil
	}
	y.h.Lock()
	defer y.h.Unlock()
	if _, known := y.h.Park(key); known || ch.Park != nil {
		y.adopt(ch, now) // a key it does not know is made by a park only
	}
	return nil
}

// Resume resumes the park of key that this replica knows, on the ledger
// and then here, and announces it once across replicas. It returns the
// ledger's *ChangedError, changing nothing, if the key was parked again or
// resumed since; an error matching ErrUnavailable while the ledger fails;
// and ctx's error, the key staying parked, if ctx ends first.
func (y *Layer) Resume(ctx context.Context, key string, now time.Time) error {
	if use, err := y.use(ctx, now); err != nil {
		return err
	} else if !use {
		return y.unavailable("resume", key)
	}
	version, err := y.parkVersion(ctx, key, now)
	if err != nil {
		return err
	}
	cleared, resumed, err := y.l.Resume(ctx, key, version, now)
	var ce *ChangedError
	switch {
	case errors.As(err, &ce):
		// resumed, or parked again, since the park this replica saw: the
		// resume names that park and changes nothing else
		y.learn(Change{Key: key, Version: ce.Version, Park: ce.Park})
		return err
	case err != nil && ctxdone.Err(ctx) != nil:
		return ctxdone.Err(ctx) // the caller's cancel, not an outage
	case err != nil:
		y.lost(err, now)
		return y.unavailable("resume", key)
	}
	y.h.Lock()
	if y.ver[key] > resumed {
		// parked again since the resume, as this replica learnt first:
		// the reply never moves the mirror back
		y.h.Unlock()
		y.claim(ctx, resumed, []crashloop.Event{y.h.Resumed(cleared, now)})
		return nil
	}
	if _, known := y.h.Park(key); known {
		y.ver[key] = resumed
	}
	ev, err := y.h.Resume(key, cleared, now)
	delete(y.alone, key)
	y.h.Unlock()
	if err != nil {
		return err
	}
	// announced by whoever claims the resume first: this replica at once
	y.claim(ctx, resumed, []crashloop.Event{ev})
	return nil
}

// parkVersion returns the version of the park of key that a Resume names:
// the one this replica mirrors, or else the one the ledger reports (an
// error matching crashloop.ErrNotParked when there is none).
func (y *Layer) parkVersion(ctx context.Context, key string, now time.Time) (int64, error) {
	y.h.Lock()
	if pe, _ := y.h.Park(key); pe != nil && y.alone[key] == nil {
		v := pe.Version
		y.h.Unlock()
		return v, nil
	}
	y.h.Unlock()
	ch, err := y.l.Lookup(ctx, key)
	switch {
	case err != nil && ctxdone.Err(ctx) != nil:
		return 0, ctxdone.Err(ctx)
	case err != nil:
		y.lost(err, now)
		return 0, y.unavailable("resume", key)
	}
	y.learn(ch)
	if ch.Park == nil {
		return 0, fmt.Errorf("%w: %q", crashloop.ErrNotParked, key)
	}
	return ch.Park.Version, nil
}

// Forget forgets key on the ledger, naming the version this replica
// knows of it, and then here. A key that changed since but is not parked
// is forgotten at its current version (it drops nothing a forget would
// not); a park this replica had not seen stays, and Forget returns a
// *ChangedError. Errors are as Resume's.
func (y *Layer) Forget(ctx context.Context, key string, now time.Time) error {
	if use, err := y.use(ctx, now); err != nil {
		return err
	} else if !use {
		return y.unavailable("forget", key)
	}
	y.h.Lock()
	version := y.ver[key]
	y.h.Unlock()
	var forgot int64
	for try := 0; ; try++ {
		v, err := y.l.Forget(ctx, key, version)
		var ce *ChangedError
		switch {
		case err == nil:
			forgot = v
		case errors.As(err, &ce):
			y.learn(Change{Key: ce.Key, Version: ce.Version, Park: ce.Park})
			if ce.Park != nil || try > 0 {
				return err
			}
			version = ce.Version
			continue
		case ctxdone.Err(ctx) != nil:
			return ctxdone.Err(ctx) // the caller's cancel, not an outage
		default:
			y.lost(err, now)
			return y.unavailable("forget", key)
		}
		break
	}
	y.h.Lock()
	defer y.h.Unlock()
	if y.ver[key] > forgot {
		return nil // parked again since the forget, as this replica learnt first
	}
	delete(y.alone, key)
	y.h.Forget(key)
	if _, known := y.h.Park(key); !known {
		delete(y.ver, key)
	}
	return nil
}

// Fleet returns the ledger's fleet breaker; false when the ledger fails.
func (y *Layer) Fleet(ctx context.Context, now time.Time) (crashloop.FleetStatus, bool, error) {
	use, err := y.use(ctx, now)
	if !use {
		return crashloop.FleetStatus{}, false, err
	}
	fs, err := y.l.Fleet(ctx, now)
	switch {
	case err != nil && ctxdone.Err(ctx) != nil:
		return crashloop.FleetStatus{}, false, ctxdone.Err(ctx) // the caller's cancel, not an outage
	case err != nil:
		y.lost(err, now)
		return crashloop.FleetStatus{}, false, nil
	}
	return fs, true, nil
}

// errAlone is the last error of a ledger held down only until a park
// decided alone is written back (see Alone).
var errAlone = errors.New("a park decided alone is still to be written back")

// Alone keeps pe, the park of key decided alone, to write back when the
// ledger answers, naming the version this replica knew. The ledger may
// have answered since this decision found it failing (a write-back ended
// meanwhile): it is then held down again, quietly (its recovery was
// announced), for the next call, or the rejoiner while a key runs, to
// write pe back at once, rather than leaving it for a Flush.
func (y *Layer) Alone(key string, pe *crashloop.ParkedError, now time.Time) {
	pe.Version = y.ver[key] // the version it was decided on: the write-back names it
	y.alone[key] = pe
	if !y.down {
		y.down, y.quiet, y.retryAt, y.lastErr, y.cause = true, true, now, errAlone, ""
		y.rejoin()
	}
}

// Member tells the ledger whether key counts as a fleet member.
func (y *Layer) Member(key string, member bool) { y.l.Member(key, member) }

// Flush writes back now the parks this replica decided alone while its
// ledger failed, rather than at its next call: for a program about to
// exit, so that the other replicas refuse the keys it parked. It returns
// nil when nothing is left to write back, and an error matching
// ErrUnavailable while the ledger still fails. If ctx ends first, Flush
// returns ctx's error and the parks stay to be written back. A nil Layer,
// or one that serves no Supervisor, has nothing to write back.
func (y *Layer) Flush(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if y == nil || y.h == nil {
		return nil
	}
	err := y.writeBack(ctx, y.now())
	if cerr := callerErr(ctx); err != nil && cerr != nil {
		return cerr
	}
	return err
}

// callerKey is the context key under which a decision's context keeps its
// caller's (see decisionContext).
type callerKey struct{}

// decisionContext bounds the ledger calls of one decision (a write-back of
// the parks decided alone, then the judge or proceed step) by one deadline:
// the ledger's CallTimeout, when it has one. Without it a write-back and a
// judge step could each take the ledger's whole timeout, and the decision
// twice as long. The context keeps the caller's, so that callerErr tells a
// caller's cancel from the decision's deadline, which is the ledger's
// slowness.
func (y *Layer) decisionContext(ctx context.Context) (context.Context, context.CancelFunc) {
	lt, ok := y.l.(interface{ CallTimeout() time.Duration })
	if !ok || lt.CallTimeout() <= 0 {
		return ctx, func() {}
	}
	d, cancel := context.WithTimeout(ctx, lt.CallTimeout())
	return context.WithValue(d, callerKey{}, ctx), cancel
}

// callerErr returns the error of the caller's context when it ended: of
// ctx, or of the caller's context that a decisionContext keeps.
func callerErr(ctx context.Context) error {
	if c, ok := ctx.Value(callerKey{}).(context.Context); ok {
		return ctxdone.Err(c)
	}
	return ctxdone.Err(ctx)
}

// unavailable is the error of an operation that must not be done alone.
func (y *Layer) unavailable(op, key string) error {
	y.h.Lock()
	err := y.lastErr
	y.h.Unlock()
	return fmt.Errorf("%w: %s %q: %w", ErrUnavailable, op, key, err)
}

// learn takes a change another replica made, as the ledger tells of it:
// the park or resume of a key this replica knows.
func (y *Layer) learn(ch Change) {
	if ch.StateLost != nil {
		y.stateLostNow(ch.StateLost)
		return
	}
	now := y.now()
	y.h.Lock()
	defer y.h.Unlock()
	if _, known := y.h.Park(ch.Key); known {
		y.adopt(ch, now)
	}
}

// adopt takes ch, the key as the ledger told of it, into the mirror if it
// is newer than the version this replica knows: a change told late, or
// twice, or out of order (an older version) changes nothing. A park decided
// alone gives way to a newer change: something happened to the key since.
// It reports whether the mirror changed. The Supervisor's lock must be
// held.
func (y *Layer) adopt(ch Change, now time.Time) bool {
	if ch.Version <= y.ver[ch.Key] {
		return false
	}
	y.ver[ch.Key] = ch.Version
	alone := y.alone[ch.Key] != nil
	delete(y.alone, ch.Key)
	switch {
	case ch.Park != nil && alone:
		// this replica announced a park of the key when it decided it
		// alone: it claims this one at once, to announce it no more
		y.h.SetPark(ch.Key, ch.Park, now)
		y.claimLater(ch.Version, nil, 0, 1)
	case ch.Park != nil:
		// a park this replica did not see made: announced by whoever
		// claims it first, its maker at once
		ev := y.h.Parked(ch.Key, ch.Park, now)
		y.claimLater(ch.Version, []crashloop.Event{ev}, claimGrace, 1)
	default:
		if ev, ok := y.h.Unpark(ch.Key, now); ok && !ch.Forgotten {
			y.claimLater(ch.Version, []crashloop.Event{ev}, claimGrace, 1)
		}
	}
	return true
}
