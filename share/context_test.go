package share_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/share"
	"github.com/stretchr/testify/require"
)

// The context of every Supervisor call that can wait on a shared ledger
// reaches the ledger, and ends the call: a call whose context is done, or
// ends while it waits, returns the context's error at once, commits and
// announces nothing, and leaves the ledger in use.

// tagKey is the key of the value a test puts in a context, to see which
// context reached the ledger.
type tagKey struct{}

// ledgerCall is one call a ctxLedger took: the method and the tag of its
// context (nil: none).
type ledgerCall struct {
	method string
	tag    any
}

// ctxLedger is a MemoryLedger that records the context of every call and,
// on demand, fails each call (an outage) or blocks it until its context
// ends (a ledger stuck on the network), telling entered which method
// blocked.
type ctxLedger struct {
	share.Ledger
	entered chan string

	mu    sync.Mutex
	block bool
	fail  error
	calls []ledgerCall
}

func newCtxLedger() *ctxLedger {
	return &ctxLedger{Ledger: share.NewMemoryLedger(), entered: make(chan string)}
}

func (l *ctxLedger) set(block bool, fail error) {
	l.mu.Lock()
	l.block, l.fail = block, fail
	l.mu.Unlock()
}

// seen returns the calls so far and forgets them.
func (l *ctxLedger) seen() []ledgerCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.calls
	l.calls = nil
	return c
}

func (l *ctxLedger) enter(ctx context.Context, method string) error {
	l.mu.Lock()
	l.calls = append(l.calls, ledgerCall{method, ctx.Value(tagKey{})})
	block, fail := l.block, l.fail
	l.mu.Unlock()
	switch {
	case fail != nil:
		return fail
	case block:
		l.entered <- method
		<-ctx.Done()
		return fmt.Errorf("ctxledger: %s: %w", method, ctx.Err())
	}
	return nil
}

func (l *ctxLedger) Lookup(ctx context.Context, key string) (share.Change, error) {
	if err := l.enter(ctx, "Lookup"); err != nil {
		return share.Change{}, err
	}
	return l.Ledger.Lookup(ctx, key)
}

func (l *ctxLedger) Judge(ctx context.Context, j share.Judgment) (share.Verdict, error) {
	if err := l.enter(ctx, "Judge"); err != nil {
		return share.Verdict{}, err
	}
	return l.Ledger.Judge(ctx, j)
}

func (l *ctxLedger) Proceed(ctx context.Context, key string, now time.Time) (share.Verdict, error) {
	if err := l.enter(ctx, "Proceed"); err != nil {
		return share.Verdict{}, err
	}
	return l.Ledger.Proceed(ctx, key, now)
}

func (l *ctxLedger) Resume(ctx context.Context, key string, version int64, now time.Time) (*crashloop.ParkedError, int64, error) {
	if err := l.enter(ctx, "Resume"); err != nil {
		return nil, 0, err
	}
	return l.Ledger.Resume(ctx, key, version, now)
}

func (l *ctxLedger) Forget(ctx context.Context, key string, version int64) (int64, error) {
	if err := l.enter(ctx, "Forget"); err != nil {
		return 0, err
	}
	return l.Ledger.Forget(ctx, key, version)
}

func (l *ctxLedger) Restore(ctx context.Context, parks []*crashloop.ParkedError) ([]share.Restored, error) {
	if err := l.enter(ctx, "Restore"); err != nil {
		return nil, err
	}
	return l.Ledger.Restore(ctx, parks)
}

func (l *ctxLedger) Parked(ctx context.Context) ([]*crashloop.ParkedError, error) {
	if err := l.enter(ctx, "Parked"); err != nil {
		return nil, err
	}
	return l.Ledger.Parked(ctx)
}

func (l *ctxLedger) Fleet(ctx context.Context, now time.Time) (crashloop.FleetStatus, error) {
	if err := l.enter(ctx, "Fleet"); err != nil {
		return crashloop.FleetStatus{}, err
	}
	return l.Ledger.Fleet(ctx, now)
}

// ctxFixture is a shared Supervisor on a ctxLedger, with its events and
// mock clock.
type ctxFixture struct {
	s   *crashloop.Supervisor
	l   *ctxLedger
	rec *recorder
	c   *clock.Mock
}

func newCtxFixture(t *testing.T) *ctxFixture {
	t.Helper()
	f := &ctxFixture{l: newCtxLedger(), rec: newRecorder(), c: mockAt(testT0)}
	s, err := newShared(crashloop.DefaultSupervisorConfig(), f.l, crashloop.WithClock(f.c), crashloop.WithEventHandler(f.rec))
	require.NoError(t, err)
	f.s = s
	return f
}

// snapshot is what the Supervisor keeps of its keys and breaker.
func (f *ctxFixture) snapshot(t *testing.T) string {
	t.Helper()
	b, err := f.s.Snapshot()
	require.NoError(t, err)
	return string(b)
}

var errCtxBoom = errors.New("boom")

// outage makes the ledger fail, and parks "p" alone (announcing
// store.unavailable and the park), for a write-back to wait on.
func (f *ctxFixture) outage(t *testing.T) {
	t.Helper()
	f.l.set(false, errRefused)
	d := f.s.Decide(context.Background(), "p", crashloop.RunResult{Err: crashloop.Permanent(errCtxBoom)})
	require.ErrorIs(t, d.Err, crashloop.ErrParked)
	require.Equal(t, 1, f.rec.Of(crashloop.EventStoreUnavailable))
	f.l.set(false, nil)
}

// ctxOp is one Supervisor call that waits on the ledger.
type ctxOp struct {
	name   string
	setup  func(t *testing.T, f *ctxFixture)            // before; nil: nothing
	call   func(ctx context.Context, f *ctxFixture) any // the call, and what it returned
	waits  string                                       // the ledger method the call waits on
	ended  any                                          // what it returns when its context ends (context.Canceled)
	live   any                                          // what it returns next, with a live context
	recent bool                                         // the live call announces store.recovered
}

func ctxOps() []ctxOp {
	boom := crashloop.RunResult{Err: errCtxBoom}
	stopped := crashloop.Decision{Action: crashloop.ActionStop, Err: context.Canceled}
	restart := crashloop.Decision{Action: crashloop.ActionRestart, Wait: 500 * time.Millisecond}
	park := func(t *testing.T, f *ctxFixture) {
		d := f.s.Decide(context.Background(), "k", crashloop.RunResult{Err: crashloop.Permanent(errCtxBoom)})
		require.ErrorIs(t, d.Err, crashloop.ErrParked)
	}
	known := func(t *testing.T, f *ctxFixture) {
		require.Equal(t, restart, f.s.Decide(context.Background(), "k", boom))
	}
	keysOf := func(st crashloop.Status) any {
		if st.Keys == nil && st.Fleet == nil {
			return crashloop.Status{}
		}
		keys := []string{}
		for k := range st.Keys {
			keys = append(keys, k)
		}
		return fmt.Sprintf("keys %v, fleet restarts %d", keys, st.Fleet.RestartsInHour)
	}
	return []ctxOp{
		{name: "Decide", waits: "Judge", ended: stopped, live: restart,
			call: func(ctx context.Context, f *ctxFixture) any { return f.s.Decide(ctx, "k", boom) }},
		{name: "DecideAt", waits: "Judge", ended: stopped, live: restart,
			call: func(ctx context.Context, f *ctxFixture) any { return f.s.DecideAt(ctx, "k", boom, testT0) }},
		{name: "Proceed", setup: known, waits: "Proceed", ended: stopped, live: crashloop.Decision{Action: crashloop.ActionRestart},
			call: func(ctx context.Context, f *ctxFixture) any { return f.s.Proceed(ctx, "k") }},
		{name: "ProceedAt", setup: known, waits: "Proceed", ended: stopped, live: crashloop.Decision{Action: crashloop.ActionRestart},
			call: func(ctx context.Context, f *ctxFixture) any { return f.s.ProceedAt(ctx, "k", testT0) }},
		{name: "Resume", setup: park, waits: "Resume", ended: context.Canceled, live: nil,
			call: func(ctx context.Context, f *ctxFixture) any { return f.s.Resume(ctx, "k") }},
		{name: "ResumeAt", setup: park, waits: "Resume", ended: context.Canceled, live: nil,
			call: func(ctx context.Context, f *ctxFixture) any { return f.s.ResumeAt(ctx, "k", testT0) }},
		{name: "Forget", setup: known, waits: "Forget", ended: context.Canceled, live: nil,
			call: func(ctx context.Context, f *ctxFixture) any { return f.s.Forget(ctx, "k") }},
		{name: "Status", setup: known, waits: "Fleet", ended: crashloop.Status{}, live: "keys [k], fleet restarts 1",
			call: func(ctx context.Context, f *ctxFixture) any { return keysOf(f.s.Status(ctx)) }},
		{name: "StatusAt", setup: known, waits: "Fleet", ended: crashloop.Status{}, live: "keys [k], fleet restarts 1",
			call: func(ctx context.Context, f *ctxFixture) any { return keysOf(f.s.StatusAt(ctx, testT0)) }},
		{name: "Flush", setup: func(t *testing.T, f *ctxFixture) { f.outage(t) }, waits: "Restore", ended: context.Canceled, live: nil, recent: true,
			call: func(ctx context.Context, f *ctxFixture) any { return layerOf(f.s).Flush(ctx) }},
		// A decision due to ask a failed ledger again waits on the
		// write-back of the parks decided alone first.
		{name: "Decide/write-back", waits: "Restore", ended: stopped, live: restart, recent: true,
			setup: func(t *testing.T, f *ctxFixture) { f.outage(t); f.c.Add(time.Second) },
			call:  func(ctx context.Context, f *ctxFixture) any { return f.s.Decide(ctx, "k", boom) }},
	}
}

// checkLive checks that, after a call ended by its context, the next call
// with a live context asks the ledger and gets its answer.
func checkLive(t *testing.T, f *ctxFixture, op ctxOp) {
	t.Helper()
	f.l.seen()
	require.Equal(t, op.live, op.call(context.Background(), f), "the next call, with a live context")
	calls := f.l.seen()
	require.Contains(t, calls, ledgerCall{op.waits, nil}, "the next call asks the ledger: %v", calls)
	evs := f.rec.Take()
	if op.recent {
		require.NotEmpty(t, evs)
		require.Equal(t, crashloop.EventStoreRecovered, evs[0].Kind, "the write-back the cancel left undone")
		evs = evs[1:]
	}
	for _, ev := range evs {
		require.NotEqual(t, crashloop.EventStoreUnavailable, ev.Kind, "the ledger never failed")
	}
}

// A call whose context ends while it waits on the ledger returns the
// context's error the moment it ends, with nothing changed or announced,
// and the next call uses the ledger.
func TestContextEndsACallWaitingOnTheLedger(t *testing.T) {
	for _, op := range ctxOps() {
		t.Run(op.name, func(t *testing.T) {
			f := newCtxFixture(t)
			if op.setup != nil {
				op.setup(t, f)
			}
			f.rec.Take()
			before := f.snapshot(t)
			f.l.seen()

			f.l.set(true, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := make(chan any, 1)
			go func() { got <- op.call(ctx, f) }()
			select {
			case m := <-f.l.entered: // the call waits on the ledger until its context ends
				require.Equal(t, op.waits, m)
			case r := <-got:
				t.Fatalf("returned without waiting on the ledger: %v", r)
			}
			cancel()
			require.Equal(t, op.ended, <-got)
			f.l.set(false, nil)

			require.Equal(t, []ledgerCall{{op.waits, nil}}, f.l.seen(), "one call of the ledger, the one cancelled")
			require.JSONEq(t, before, f.snapshot(t), "nothing committed")
			require.Empty(t, f.rec.Take(), "nothing announced")
			checkLive(t, f, op)
		})
	}
}

// A call whose context is done before it starts returns the context's
// error without asking the ledger, changing or announcing anything; the
// next call uses the ledger.
func TestContextDoneBeforeTheCall(t *testing.T) {
	for _, op := range ctxOps() {
		t.Run(op.name, func(t *testing.T) {
			f := newCtxFixture(t)
			if op.setup != nil {
				op.setup(t, f)
			}
			f.rec.Take()
			before := f.snapshot(t)
			f.l.seen()

			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			require.Equal(t, op.ended, op.call(ctx, f))
			require.Empty(t, f.l.seen(), "the ledger is not asked")
			require.JSONEq(t, before, f.snapshot(t), "nothing committed")
			require.Empty(t, f.rec.Take(), "nothing announced")
			checkLive(t, f, op)
		})
	}
}

// A done context ends even a call of a Supervisor without a ledger, which
// waits on nothing: the semantics do not depend on the ledger. Nothing is
// decided or announced.
func TestContextDoneWithoutALedger(t *testing.T) {
	rec := newRecorder()
	s, err := crashloop.NewSupervisor(crashloop.DefaultSupervisorConfig(), crashloop.WithClock(mockAt(testT0)), crashloop.WithEventHandler(rec))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stopped := crashloop.Decision{Action: crashloop.ActionStop, Err: context.Canceled}
	require.Equal(t, stopped, s.Decide(ctx, "k", crashloop.RunResult{Err: errCtxBoom}))
	require.Equal(t, stopped, s.DecideAt(ctx, "k", crashloop.RunResult{Err: errCtxBoom}, testT0))
	require.Equal(t, stopped, s.Proceed(ctx, "k"))
	require.Equal(t, stopped, s.ProceedAt(ctx, "k", testT0))
	require.Equal(t, context.Canceled, s.Resume(ctx, "k"))
	require.Equal(t, context.Canceled, s.ResumeAt(ctx, "k", testT0))
	require.Equal(t, context.Canceled, s.Forget(ctx, "k"))
	require.Equal(t, context.Canceled, layerOf(s).Flush(ctx))
	require.Equal(t, crashloop.Status{}, s.Status(ctx))
	require.Equal(t, crashloop.Status{}, s.StatusAt(ctx, testT0))
	require.Empty(t, rec.Take())
	require.Empty(t, s.Status(context.Background()).Keys, "no key was made")

	past, cancel2 := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel2()
	require.Equal(t, crashloop.Decision{Action: crashloop.ActionStop, Err: context.DeadlineExceeded},
		s.Decide(past, "k", crashloop.RunResult{Err: errCtxBoom}))
}

// lateCtx is a context whose deadline has passed but which does not say so
// yet, as a context whose timer has not fired: a ledger's read bounded by
// that deadline fails a moment before the context ends.
type lateCtx struct{ context.Context }

func (lateCtx) Deadline() (time.Time, bool) { return time.Unix(1, 0), true }

// A ledger that fails after the caller's deadline passed failed by the
// caller's deadline, even before the context reports it: the call returns
// context.DeadlineExceeded, and the ledger is not taken for failed.
func TestContextDeadlinePassedIsNoOutage(t *testing.T) {
	f := newCtxFixture(t)
	late := lateCtx{context.Background()}
	timeout := errors.New("read unix ->redis.sock: i/o timeout")
	f.l.set(false, timeout)
	require.Equal(t, crashloop.Decision{Action: crashloop.ActionStop, Err: context.DeadlineExceeded},
		f.s.Decide(late, "k", crashloop.RunResult{Err: errCtxBoom}))
	require.Equal(t, context.DeadlineExceeded, f.s.Forget(late, "k"))
	require.Equal(t, crashloop.Status{}, f.s.Status(late))
	require.Empty(t, f.rec.Take(), "no store.unavailable")

	// The same error before the deadline is an outage.
	require.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: 500 * time.Millisecond},
		f.s.Decide(context.Background(), "k", crashloop.RunResult{Err: errCtxBoom}), "decided alone")
	evs := f.rec.Take()
	require.NotEmpty(t, evs)
	require.Equal(t, crashloop.Event{Kind: crashloop.EventStoreUnavailable, Key: "store", Time: testT0, LastError: timeout}, evs[0])
}

// The context of Run, Wrap and Process reaches every call they make of the
// ledger: the gate's lookup, the proceed before a run, the judgment after
// it, and the write-back of the parks decided alone.
func TestRunContextReachesTheLedger(t *testing.T) {
	f := newCtxFixture(t)
	tagged := func(tag string) context.Context { return context.WithValue(context.Background(), tagKey{}, tag) }
	clean := func(context.Context) error { return nil }

	require.NoError(t, f.s.Run(tagged("run"), "r", clean))
	require.Equal(t, []ledgerCall{{"Lookup", "run"}, {"Judge", "run"}}, f.l.seen())

	require.NoError(t, f.s.Wrap("w", clean)(tagged("wrap")))
	require.Equal(t, []ledgerCall{{"Lookup", "wrap"}, {"Proceed", "wrap"}, {"Judge", "wrap"}}, f.l.seen())

	d := f.s.Process(tagged("process"), "p", func(context.Context) error { return errCtxBoom })
	require.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: 500 * time.Millisecond}, d)
	require.Equal(t, []ledgerCall{{"Lookup", "process"}, {"Proceed", "process"}, {"Judge", "process"}}, f.l.seen())

	f.outage(t)
	f.c.Add(time.Second) // due to ask the ledger again
	f.l.seen()
	require.NoError(t, f.s.Run(tagged("back"), "r", clean))
	require.Equal(t, []ledgerCall{{"Restore", "back"}, {"Lookup", "back"}, {"Judge", "back"}}, f.l.seen())
	require.Equal(t, 1, f.rec.Of(crashloop.EventStoreRecovered))
}

// A nil context is context.Background(), as Run reads it: the calls reach
// the ledger, unbounded but by the ledger's own timeout, and never panic.
func TestNilContextIsBackground(t *testing.T) {
	f := newCtxFixture(t)
	var none context.Context
	require.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: 500 * time.Millisecond},
		f.s.Decide(none, "k", crashloop.RunResult{Err: errCtxBoom}))
	require.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart}, f.s.Proceed(none, "k"))
	st := f.s.Status(none)
	require.Equal(t, crashloop.StateBackoff, st.Keys["k"].State)
	require.Equal(t, 1, st.Fleet.RestartsInHour)
	require.NoError(t, layerOf(f.s).Flush(none))
	// a Resume of a key this Supervisor holds unparked asks the ledger for the park it would name
	require.ErrorIs(t, f.s.Resume(none, "k"), crashloop.ErrNotParked)
	require.NoError(t, f.s.Forget(none, "k"))
	require.Equal(t, []ledgerCall{{"Judge", nil}, {"Proceed", nil}, {"Fleet", nil}, {"Lookup", nil}, {"Forget", nil}}, f.l.seen())
}
