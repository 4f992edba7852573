package crashloop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/crashloopguard/crashloop/internal/ctxdone"
	"github.com/crashloopguard/crashloop/internal/errtext"
)

// sharedRetry is how long a Supervisor whose ledger failed decides alone
// before it asks the ledger again: at its next call, or by itself while a
// key runs (rejoin.go).
const sharedRetry = time.Second

// claimGrace is how long a Supervisor that learns a transition it did not
// see made (from a notice, a lookup, a refusal) waits before it claims it,
// to announce it: the Supervisor whose step made it claims at once when
// its reply arrives, and announces it with its own error values. A claim
// that cannot be sent is tried again every sharedRetry, claimTries times
// in all.
const (
	claimGrace = time.Second
	claimTries = 60
)

// shared is the state of a Supervisor's use of a shared Ledger; the
// Supervisor's lock guards it.
type shared struct {
	l       Ledger
	down    bool      // the last call failed: decide alone
	retryAt time.Time // when to ask the ledger again
	lastErr error
	cause   string                  // what the failures since the last success were announced as
	alone   map[string]*ParkedError // parks decided alone, to write back
	quiet   bool                    // down for a state loss only: no store.recovered
	epoch   string                  // the state the last loss told of (StateLostError.Epoch)
	gen     uint64                  // losses taken: a claim learnt before one is dropped
	won     map[int64]time.Time     // the versions this Supervisor won and announced lately (see firstWin)

	running  int       // keys that a Run, Wrap or Process runs (rejoin.go)
	rejoiner *rejoiner // asks the ledger again while it is down and a key runs; nil: none

	// writing holds a token while a write-back runs (see writeBack); it is
	// not guarded by the Supervisor's lock, and is taken before it.
	writing chan struct{}
}

// NewSharedSupervisor returns a Supervisor whose guards keep their state in
// the ledger l, so that the Supervisors sharing it (the replicas of a
// service) share one budget, one chain and one fleet breaker per key: a key
// parked by one is refused by every other, and a Resume on any applies to
// all. When the ledger fails, it announces EventStoreUnavailable once,
// decides alone with its own guards, asks the ledger again every second, and
// writes back the parks it decided alone when the ledger answers
// (EventStoreRecovered). A Resume or Forget while the ledger fails returns an
// error matching ErrStoreUnavailable. A nil l is NewSupervisor. It returns a
// *ConfigError for WithStore, WithSaveInterval or WithSaveErrorHandler, as
// the ledger keeps the state. docs/supervisor.md and docs/redis.md tell more.
func NewSharedSupervisor(cfg SupervisorConfig, l Ledger, opts ...Option) (*Supervisor, error) {
	if l == nil {
		return NewSupervisor(cfg, opts...)
	}
	s, err := newSupervisor(cfg, sharedOptions, opts)
	if err != nil {
		return nil, err
	}
	s.shared = &shared{l: l, alone: map[string]*ParkedError{}, won: map[int64]time.Time{}, writing: make(chan struct{}, 1)}
	if err := l.Open(s.cfg.clone(), s.learn); err != nil {
		return nil, err
	}
	return s, nil
}

// useShared reports whether the Supervisor asks its ledger at now: it has
// one and the last call did not fail, or it failed long enough ago to ask
// again. When the ledger answers again after a failure, the parks decided
// alone are written back first. It returns ctx's error when ctx ended while
// it waited on the ledger: the ledger's state is as before, and the next
// call asks it again.
func (s *Supervisor) useShared(ctx context.Context, now time.Time) (bool, error) {
	if s.shared == nil {
		return false, nil
	}
	s.mu.Lock()
	sh := s.shared
	if !sh.down {
		s.mu.Unlock()
		return true, nil
	}
	if now.Before(sh.retryAt) {
		s.mu.Unlock()
		return false, nil
	}
	due, retry := sh.retryAt, now.Add(sharedRetry)
	sh.retryAt = retry // one caller asks; the others go on alone
	s.mu.Unlock()
	err := s.writeBack(ctx, now)
	if cerr := callerErr(ctx); err != nil && cerr != nil {
		s.mu.Lock()
		if sh.retryAt.Equal(retry) {
			sh.retryAt = due // the caller gave up, not the ledger: the next call asks
		}
		s.mu.Unlock()
		return false, cerr
	}
	return err == nil, nil
}

// Flush writes back now the parks this Supervisor decided alone while its
// shared ledger failed, rather than at its next call: for a program about to
// exit, so that the other replicas refuse the keys it parked. It returns nil
// when nothing is left to write back, and an error matching
// ErrStoreUnavailable while the ledger still fails. If ctx ends first, Flush
// returns ctx's error and the parks stay to be written back. Without a shared
// ledger it does nothing. Flush is safe for concurrent use.
func (s *Supervisor) Flush(ctx context.Context) error {
	ctx = orBackground(ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.shared == nil {
		return nil
	}
	err := s.writeBack(ctx, s.o.clock.Now())
	if cerr := callerErr(ctx); err != nil && cerr != nil {
		return cerr
	}
	return err
}

// writeBack writes the parks decided alone to the ledger; when the ledger
// takes them, the Supervisor uses it again, announcing its recovery if it
// had failed. Parks decided alone while it runs (the decisions made
// meanwhile still decide alone) are written back by it too, in a step of
// their own, before the ledger is marked in use: else they would wait,
// with the ledger in use, for a Flush. When ctx ends first it returns
// ctx's error and records no failure of the ledger.
//
// One write-back runs at a time: a second one (a Flush, the rejoiner, the
// write-back of a loss of state found meanwhile) waits for the first,
// then finds what is left. Side by side, the second found the parks the
// first had just written standing, wrote nothing, and could announce
// EventStoreRecovered with no park written before the first could tell of
// them. A write-back whose ctx ends while it waits returns as above: the
// caller's error, or ErrStoreUnavailable for the decision's deadline, the
// ledger's slowness, which the write-back under way records if it fails.
func (s *Supervisor) writeBack(ctx context.Context, now time.Time) error {
	sh := s.shared
	select {
	case sh.writing <- struct{}{}:
	case <-ctx.Done():
		if err := callerErr(ctx); err != nil {
			return err
		}
		return fmt.Errorf("%w: waiting for the write-back under way: %v", ErrStoreUnavailable, ctx.Err())
	}
	var evs []Event
	err := s.writeBackSteps(ctx, now, &evs)
	<-sh.writing
	for _, ev := range evs { // with no lock and no token held: a handler may call back
		emit(s.o.handler, ev)
	}
	return err
}

// writeBackSteps is writeBack's steps, run with its token held; the events
// they make are added to evs, for writeBack to emit once it gave the token
// back.
func (s *Supervisor) writeBackSteps(ctx context.Context, now time.Time, evs *[]Event) error {
	sh := s.shared
	again := true // one more try when the ledger reports a loss of its state
	n := 0        // the parks written, in every step
	for {
		s.mu.Lock()
		parks := make([]*ParkedError, 0, len(sh.alone))
		for _, pe := range sh.alone {
			parks = append(parks, pe)
		}
		down := sh.down
		s.mu.Unlock()
		if len(parks) == 0 && !down {
			return nil
		}
		stand, err := sh.l.Restore(ctx, parks)
		var sl *StateLostError
		if errors.As(err, &sl) && again {
			*evs = s.takeLoss(sl, now, *evs) // every park it knows, to write back now
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
			*evs = s.failed(err, now, *evs)
			s.mu.Lock()
			err = sh.lastErr
			s.mu.Unlock()
			return fmt.Errorf("%w: writing back %s decided alone: %v", ErrStoreUnavailable, errtext.Plural(len(parks), "park"), err)
		}
		s.mu.Lock()
		n += s.wroteBack(parks, stand, now)
		if len(sh.alone) > 0 && sh.down {
			s.mu.Unlock()
			continue // decided alone meanwhile: written back before the ledger is used again
		}
		recovered := sh.down && !sh.quiet
		sh.down, sh.lastErr, sh.quiet, sh.cause = false, nil, false, ""
		s.mu.Unlock()
		if recovered {
			*evs = append(*evs, Event{Kind: EventStoreRecovered, Key: "store", Time: now, Attempts: n})
		}
		return nil
	}
}

// wroteBack takes what the ledger's Restore of parks answered, stand, into
// the records, and returns how many of them it wrote. s.mu must be held.
func (s *Supervisor) wroteBack(parks []*ParkedError, stand []Restored, now time.Time) int {
	sh := s.shared
	n := 0
	for i, pe := range parks {
		if stand[i].Written {
			n++
		}
		if sh.alone[pe.Key] != pe {
			continue // decided again, or resumed, meanwhile
		}
		delete(sh.alone, pe.Key)
		r, ch := s.keys[pe.Key], stand[i].LedgerChange
		switch {
		case r == nil:
		case stand[i].Written && r.park == pe && ch.Version > r.ver:
			// written back: the park stands with its new version, and keeps
			// the error values this Supervisor made it with
			w := *pe
			w.Version = ch.Version
			r.park, r.ver = &w, ch.Version
		default:
			s.adopt(r, ch, now) // something happened to the key since: the ledger's state wins
		}
	}
	return n
}

// errAlone is the last error of a ledger held down only until a park
// decided alone is written back (see decidedAlone).
var errAlone = errors.New("a park decided alone is still to be written back")

// decidedAlone keeps pe, the park of key decided alone, to write back when
// the ledger answers. The ledger may have answered since this decision
// found it failing (a write-back ended meanwhile): it is then held down
// again, quietly (its recovery was announced), for the next call, or the
// rejoiner while a key runs, to write pe back at once, rather than
// leaving it for a Flush. s.mu must be held.
func (s *Supervisor) decidedAlone(key string, pe *ParkedError, now time.Time) {
	sh := s.shared
	sh.alone[key] = pe
	if !sh.down {
		sh.down, sh.quiet, sh.retryAt, sh.lastErr, sh.cause = true, true, now, errAlone, ""
		s.rejoin()
	}
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
func (s *Supervisor) decisionContext(ctx context.Context) (context.Context, context.CancelFunc) {
	lt, ok := s.shared.l.(interface{ CallTimeout() time.Duration })
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

// orBackground returns ctx, or context.Background() for a nil ctx: every
// method that takes a context reads nil as no bound, as Run does.
func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// stateLost takes the ledger's report that its server lost its state: every
// park this Supervisor knows (and no resume it learnt has superseded) is
// to be written back at once, as decided alone on a key with no version,
// and the versions it knows restart. It announces the loss if the ledger
// says this replica is the one to.
func (s *Supervisor) stateLost(sl *StateLostError, now time.Time) {
	for _, ev := range s.takeLoss(sl, now, nil) {
		emit(s.o.handler, ev)
	}
}

// takeLoss is stateLost but for its announcement, which it appends to evs
// for the caller to emit.
func (s *Supervisor) takeLoss(sl *StateLostError, now time.Time, evs []Event) []Event {
	if sl.Announce {
		evs = append(evs, Event{Kind: EventStoreStateLost, Key: "store", Time: now, Reason: sl.Reason})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.shared
	if sl.Epoch != "" && sl.Epoch == sh.epoch {
		return evs // told before (a late announcement of it): written back already
	}
	sh.epoch = sl.Epoch
	sh.gen++ // the claims pending are of the state lost: dropped
	clear(sh.won)
	sh.lastErr = sl
	for key, r := range s.keys {
		r.ver = 0
		if r.park != nil {
			w := *r.park
			w.Version = 0
			r.park = &w
			sh.alone[key] = &w
		}
	}
	if !sh.down {
		sh.down, sh.quiet = true, true
	}
	sh.retryAt = now // the next call writes them back
	s.rejoin()
	return evs
}

// stateLostNow takes a loss of state that the ledger found outside a call
// of this Supervisor (LedgerChange.StateLost, or a claim refused for it),
// and writes back the parks it knows at once, on a goroutine of its own
// (the ledger bounds the call), rather than at the next decision: an idle
// replica's parks are back as soon as the loss is found.
func (s *Supervisor) stateLostNow(sl *StateLostError) {
	now := s.o.clock.Now()
	s.stateLost(sl, now)
	go func() {
		ctx, cancel := s.decisionContext(context.Background())
		defer cancel()
		// not through useShared: the decisions made meanwhile must not
		// decide alone while this one writes back (they write back too)
		_ = s.writeBack(ctx, now)
	}()
}

// reloaded reports, for err from a call of the ledger, whether the ledger
// lost its state and this Supervisor wrote back the parks it knows: the
// call is then made again, on the state written back, rather than decided
// alone.
func (s *Supervisor) reloaded(ctx context.Context, err error, now time.Time) bool {
	var sl *StateLostError
	if !errors.As(err, &sl) {
		return false
	}
	s.stateLost(sl, now)
	return s.writeBack(ctx, now) == nil
}

// lost records a failed call of the ledger at now, and announces the first
// of a run of failures: EventStoreMisconfigured for an error matching
// ErrStoreMisconfigured, else EventStoreUnavailable. A run of failures whose
// cause changes (an outage becomes a refused password) announces the new
// cause; the same cause again announces nothing.
func (s *Supervisor) lost(err error, now time.Time) {
	for _, ev := range s.failed(err, now, nil) {
		emit(s.o.handler, ev)
	}
}

// failed is lost but for its announcement, which it appends to evs for the
// caller to emit.
func (s *Supervisor) failed(err error, now time.Time, evs []Event) []Event {
	var sl *StateLostError
	if errors.As(err, &sl) {
		return s.takeLoss(sl, now, evs)
	}
	kind, cause := EventStoreUnavailable, "unavailable"
	if errors.Is(err, ErrStoreMisconfigured) {
		kind, cause = EventStoreMisconfigured, misconfiguredCause(err)
	}
	s.mu.Lock()
	sh := s.shared
	announce := !sh.down || sh.quiet || sh.cause != cause
	sh.down, sh.retryAt, sh.lastErr, sh.quiet, sh.cause = true, now.Add(sharedRetry), err, false, cause
	s.rejoin()
	s.mu.Unlock()
	if !announce {
		return evs
	}
	ev := Event{Kind: kind, Key: "store", Time: now, LastError: err}
	if kind == EventStoreMisconfigured {
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

// unavailable is the error of an operation that must not be done alone.
func (s *Supervisor) unavailable(op, key string) error {
	s.mu.Lock()
	err := s.shared.lastErr
	s.mu.Unlock()
	return fmt.Errorf("%w: %s %q: %w", ErrStoreUnavailable, op, key, err)
}

// decideShared is DecideAt through the ledger; it reports false when the
// ledger failed, for the caller to decide alone. When ctx ends while it
// waits on the ledger, it returns ActionStop with ctx's error, having
// changed nothing.
func (s *Supervisor) decideShared(ctx context.Context, key string, res RunResult, now time.Time) (Decision, bool) {
	s.mu.Lock()
	r := s.keys[key]
	if r == nil {
		r = &record{state: StateExited, since: now} // made only once the ledger has decided
	}
	j, cause := s.judgment(r, key, res, now)
	s.mu.Unlock()
	v, err := s.shared.l.Judge(ctx, j)
	if s.reloaded(ctx, err, now) {
		v, err = s.shared.l.Judge(ctx, j) // on the state written back
	}
	if err != nil {
		if err := callerErr(ctx); err != nil {
			return Decision{Action: ActionStop, Err: err}, true
		}
		s.lost(err, now)
		return Decision{}, false
	}
	var evs events
	s.mu.Lock()
	rec := s.record(key, now)
	known := rec.park // the mirror before the reply: it may know newer transitions
	d := s.apply(rec, &j, cause, v, &evs)
	if v.Park != nil && !v.NewPark {
		// refused for a park: one this Supervisor had not learnt (its
		// maker's reply and notice lost) is claimed as from a notice
		s.adopt(rec, LedgerChange{Key: key, Version: v.Park.Version, Park: v.Park}, now)
	}
	if v.Park != nil {
		switch {
		case v.Park.Version >= rec.ver:
			rec.ver = v.Park.Version
		case known != nil:
			// parked again since, as this Supervisor learnt first: a reply
			// never moves the mirror back
			rec.park = known
			s.setState(rec, stateOf(known), v.Now)
		default:
			s.unpark(rec, v.Now) // resumed since, as this Supervisor learnt first
		}
	}
	s.mu.Unlock()
	var park []Event
	for _, ev := range evs.list() {
		if v.NewPark && ev.Key == key && isParkEvent(ev.Kind) {
			park = append(park, ev) // announced by the replica that claims it
			continue
		}
		emit(s.o.handler, ev)
	}
	if park != nil {
		s.claim(ctx, v.Park.Version, park)
	}
	return d, true
}

// isParkEvent reports whether k is the kind of an event that announces a
// park.
func isParkEvent(k EventKind) bool {
	return k == EventStartupExhausted || k == EventChainEscalated || k == EventGuardTripped
}

// claim claims the transition of version v on the ledger at once, and
// announces it with evs if this Supervisor wins; a claim that could not be
// sent is tried again later.
func (s *Supervisor) claim(ctx context.Context, v int64, evs []Event) {
	s.mu.Lock()
	gen := s.shared.gen
	s.mu.Unlock()
	won, err := s.shared.l.Claim(ctx, v)
	if err != nil {
		if !s.claimLost(err) {
			s.claimAfter(v, evs, sharedRetry, 1, gen)
		}
		return
	}
	if won && s.firstWin(v, gen) {
		emitAll(s.o.handler, evs)
	}
}

// wonFor is how long a Supervisor remembers a version it won: longer than
// the last retry of a claim of it.
const wonFor = claimGrace + claimTries*sharedRetry + time.Minute

// firstWin reports whether this Supervisor won the claim of version v, in
// generation gen of the ledger's state, for the first time. A claim that
// its holder makes again wins again (a retry after a lost reply must), and
// a Supervisor may claim one version twice: at its step's reply, and from
// the step's notice when that came first. It announces the first win only.
func (s *Supervisor) firstWin(v int64, gen uint64) bool {
	now := s.o.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.shared
	if sh.gen != gen {
		return false // a claim of the state lost
	}
	if _, ok := sh.won[v]; ok {
		return false
	}
	for w, at := range sh.won {
		if now.Sub(at) > wonFor {
			delete(sh.won, w)
		}
	}
	sh.won[v] = now
	return true
}

// claimLater claims the transition of version v after a wait, and
// announces it with evs if this Supervisor wins. s.mu may be held.
func (s *Supervisor) claimLater(v int64, evs []Event, after time.Duration, try int) {
	s.claimAfter(v, evs, after, try, s.shared.gen)
}

// claimAfter is claimLater of a transition learnt in generation gen of the
// ledger's state: once the ledger lost that state (a later generation),
// the claim is dropped, as its version may name another transition now.
func (s *Supervisor) claimAfter(v int64, evs []Event, after time.Duration, try int, gen uint64) {
	wake := s.o.clock.After(after)
	go func() {
		<-wake
		s.mu.Lock()
		current := s.shared.gen == gen
		s.mu.Unlock()
		if !current {
			return
		}
		won, err := s.shared.l.Claim(context.Background(), v)
		switch {
		case err != nil && s.claimLost(err):
		case err != nil && try < claimTries:
			s.claimAfter(v, evs, sharedRetry, try+1, gen)
		case err == nil && won && s.firstWin(v, gen):
			emitAll(s.o.handler, evs)
		}
	}()
}

// claimLost reports whether err, from a claim, tells that the ledger lost
// its state, and takes the loss: the claim is dropped (see claimAfter).
func (s *Supervisor) claimLost(err error) bool {
	var sl *StateLostError
	if !errors.As(err, &sl) {
		return false
	}
	s.stateLostNow(sl)
	return true
}

// proceedShared is ProceedAt through the ledger; like decideShared, it
// returns ActionStop with ctx's error when ctx ends first.
func (s *Supervisor) proceedShared(ctx context.Context, key string, now time.Time) (Decision, bool) {
	v, err := s.shared.l.Proceed(ctx, key, now)
	if err != nil {
		if err := callerErr(ctx); err != nil {
			return Decision{Action: ActionStop, Err: err}, true
		}
		s.lost(err, now)
		return Decision{}, false
	}
	var evs events
	s.mu.Lock()
	d := Decision{Action: ActionRestart}
	if r := s.keys[key]; r != nil {
		// A verdict without a park carries no version: it lifts no park
		// (a resume does, with its version, from its notice or a lookup),
		// and one with an older park than the mirror knows changes nothing.
		// A park it had not learnt is claimed as from a notice.
		if v.Park != nil && !s.adopt(r, LedgerChange{Key: key, Version: v.Park.Version, Park: v.Park}, now) && v.Park.Version == r.ver {
			r.mirror(v.Park)
		}
		d = s.proceeded(r, v)
	}
	if v.Rearmed != nil {
		evs.add(s.cfg.Fleet.event(EventFleetRearmed, s.fleetName, v.Now, v.Rearmed))
	}
	s.mu.Unlock()
	emitAll(s.o.handler, evs.list())
	return d, true
}

// lookupShared returns the park the ledger knows of key, mirrored into its
// record, for Run's gate; nil when it is not parked or the ledger failed. It
// returns ctx's error, having changed nothing, when ctx ends first.
func (s *Supervisor) lookupShared(ctx context.Context, key string, now time.Time) (*ParkedError, error) {
	use, err := s.useShared(ctx, now)
	if !use {
		return nil, err
	}
	ch, err := s.shared.l.Lookup(ctx, key)
	if s.reloaded(ctx, err, now) {
		ch, err = s.shared.l.Lookup(ctx, key) // on the state written back
	}
	if err != nil {
		if err := callerErr(ctx); err != nil {
			return nil, err
		}
		s.lost(err, now)
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.keys[key]
	if r == nil && ch.Park == nil {
		return nil, nil
	}
	if r == nil {
		r = s.record(key, now)
	}
	s.adopt(r, ch, now) // a change whose notice was lost or is late; an older answer changes nothing
	return r.park, nil
}

// unpark lifts the park of r that another Supervisor resumed (the one that
// resumed it announced it). s.mu must be held.
func (s *Supervisor) unpark(r *record, now time.Time) {
	r.resume()
	if failing(r.state) {
		s.setState(r, StateExited, now)
	}
}

// mirror takes the park the ledger reports for a key (nil: none), keeping
// the one this Supervisor made itself, which carries its own error values.
func (r *record) mirror(pe *ParkedError) {
	if pe == nil || r.park == nil {
		r.park = pe
	}
}

// learn takes a change another Supervisor made, as the ledger tells of it:
// the park or resume of a key this Supervisor knows.
func (s *Supervisor) learn(ch LedgerChange) {
	if ch.StateLost != nil {
		s.stateLostNow(ch.StateLost)
		return
	}
	now := s.o.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.keys[ch.Key]; r != nil {
		s.adopt(r, ch, now)
	}
}

// adopt takes ch, the key of r as the ledger told of it, into r if it is
// newer than the version r knows: a change told late, or twice, or out of
// order (an older version) changes nothing. A park decided alone gives way
// to a newer change: something happened to the key since. It reports
// whether r changed. s.mu must be held.
func (s *Supervisor) adopt(r *record, ch LedgerChange, now time.Time) bool {
	if ch.Version <= r.ver {
		return false
	}
	r.ver = ch.Version
	alone := s.shared.alone[ch.Key] != nil
	delete(s.shared.alone, ch.Key)
	switch {
	case ch.Park != nil && alone:
		// this Supervisor announced a park of the key when it decided it
		// alone: it claims this one at once, to announce it no more
		r.park = ch.Park
		s.claimLater(ch.Version, nil, 0, 1)
	case ch.Park != nil:
		r.park = ch.Park
		if !r.running {
			s.setState(r, stateOf(ch.Park), now)
		}
		// a park this Supervisor did not see made: announced by whoever
		// claims it first, its maker at once
		s.claimLater(ch.Version, []Event{s.parkEvent(ch.Park, r.incarnation, now, ch.Park.LastError)}, claimGrace, 1)
	case r.park != nil:
		if !ch.Forgotten {
			s.claimLater(ch.Version, []Event{s.cfg.Budget.resumedEvent(r.park, now)}, claimGrace, 1)
		}
		s.unpark(r, now)
	}
	return true
}
