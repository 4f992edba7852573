package crashloop_test

// Fuzz targets: each decodes its input into a small configuration and a
// sequence of operations, runs them on a guard and on its reference model
// (model_test.go) side by side, and requires the same decision at every step:
// return values, errors (by errors.Is and the fields of a *ParkedError) and
// the whole payload of every event published.
//
//	go test -run '^$' -fuzz '^FuzzBudget$' -fuzztime 10s .
//
// A failure prints the operations that led to it, one a line, as a
// reproducer. The committed seed corpora live in testdata/fuzz/<target>.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/crashloopguard/crashloop"
)

// fuzzRun is the state of one fuzz execution: the input being decoded, the
// current time, the log of operations, and the events the object published.
type fuzzRun struct {
	t     *testing.T
	in    []byte
	pos   int
	start time.Time
	now   time.Time
	// latest is the latest time the object may have been given: the latest
	// of the run's times and the mock's.
	latest time.Time
	// restored is set once the object was restored from a snapshot: errors
	// then come back as their text (snapshot.go).
	restored bool
	log      []string
	got      []crashloop.Event
}

func newFuzzRun(t *testing.T, in []byte) *fuzzRun { return &fuzzRun{t: t, in: in} }

// HandleEvent records ev: fuzzRun is the event handler of the object.
func (r *fuzzRun) HandleEvent(ev crashloop.Event) { r.got = append(r.got, ev) }

func (r *fuzzRun) more() bool { return r.pos < len(r.in) }

// byte returns the next input byte, 0 once the input is used up.
func (r *fuzzRun) byte() byte {
	if r.pos >= len(r.in) {
		return 0
	}
	b := r.in[r.pos]
	r.pos++
	return b
}

// n returns a number in [0, k).
func (r *fuzzRun) n(k int) int { return int(r.byte()) % k }

func (r *fuzzRun) u32() uint32 {
	return uint32(r.byte()) | uint32(r.byte())<<8 | uint32(r.byte())<<16 | uint32(r.byte())<<24
}

func fuzzPick[T any](r *fuzzRun, xs []T) T { return xs[r.n(len(xs))] }

func (r *fuzzRun) logf(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf(format, args...))
}

// fail stops the execution, printing the operations so far.
func (r *fuzzRun) fail(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\noperations (T = %s):\n  %s", fmt.Sprintf(format, args...),
		r.start.UTC().Format(time.RFC3339Nano), strings.Join(r.log, "\n  "))
}

// at names the current time for the log.
func (r *fuzzRun) at() string { return fuzzTime(r.start, r.now) }

func fuzzTime(start, t time.Time) string {
	d := t.Sub(start)
	if d > -100*365*24*time.Hour && d < 100*365*24*time.Hour {
		if d < 0 {
			return "T-" + (-d).String()
		}
		return "T+" + d.String()
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// fuzzStarts are the first readings of a run: the mock's epoch (the base of
// every object), just after it, a plausible date, and before the base.
var fuzzStarts = []time.Time{
	time.Unix(0, 0), time.Unix(0, 1), time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC), time.Unix(-3600, 0),
}

// fuzzSpans are the windows, gaps and cooldowns of the decoded configs:
// tiny ones where every nanosecond matters, usual ones, and huge ones up to
// the largest time.Duration.
var fuzzSpans = []time.Duration{1, 2, 3, 10, time.Microsecond, time.Second, time.Minute, time.Hour, 1 << 62, math.MaxInt64}

// fuzzFarTimes lie past the far ends of a time.Duration from the base.
var fuzzFarTimes = []time.Time{
	{}, time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Unix(1<<62, 0), time.Unix(-1<<62, 0),
}

// Move kinds (the byte after a move opcode, mod 16).
const (
	mvSame = iota
	mvNano
	mvNanos
	mvSpan
	mvSpanLess
	mvSpanMore
	mvSpanPart
	mvSeconds
	mvMillis
	mvBackNano
	mvBackNanos
	mvBackSpan
	mvBackCentury
	mvCentury
	mvFar
	mvStart
)

// move moves the clock by the next input: forward by a little, by span
// exactly (and one nanosecond less or more), by a lot, backwards, or past
// the far ends.
func (r *fuzzRun) move(span time.Duration) {
	switch r.n(16) {
	case mvSame:
	case mvNano:
		r.now = r.now.Add(1)
	case mvNanos:
		r.now = r.now.Add(time.Duration(r.byte()))
	case mvSpan:
		r.now = r.now.Add(span)
	case mvSpanLess:
		r.now = r.now.Add(span - 1)
	case mvSpanMore:
		r.now = r.now.Add(span).Add(1)
	case mvSpanPart:
		r.now = r.now.Add(span / time.Duration(r.n(4)+2))
	case mvSeconds:
		r.now = r.now.Add(time.Duration(r.byte()) * time.Second)
	case mvMillis:
		r.now = r.now.Add(time.Duration(r.u32()) * time.Millisecond)
	case mvBackNano:
		r.now = r.now.Add(-1)
	case mvBackNanos:
		r.now = r.now.Add(-time.Duration(r.byte()))
	case mvBackSpan:
		r.now = r.now.Add(-span)
	case mvBackCentury:
		r.now = r.now.AddDate(-100, 0, 0)
	case mvCentury:
		r.now = r.now.AddDate(100, 0, 0)
	case mvFar:
		r.now = fuzzPick(r, fuzzFarTimes)
	case mvStart:
		r.now = r.start
	}
	if r.now.After(r.latest) {
		r.latest = r.now
	}
	r.logf("clock -> %s", r.at())
}

// events requires the events published since the last call to be want.
func (r *fuzzRun) events(want []crashloop.Event) {
	r.t.Helper()
	got := r.got
	r.got = nil
	if len(got) != len(want) {
		r.fail("published %d events, the model %d:\n got  %s\n want %s", len(got), len(want), fuzzEvents(got), fuzzEvents(want))
	}
	for i := range got {
		if !r.sameEvent(got[i], want[i]) {
			r.fail("event %d differs:\n got  %s\n want %s", i, fuzzEvent(got[i]), fuzzEvent(want[i]))
		}
	}
}

// sameErr compares errors by identity, or by text once the object was
// restored from a snapshot (which keeps an error as its text).
func (r *fuzzRun) sameErr(a, b error) bool {
	return a == b || r.restored && a != nil && b != nil && a.Error() == b.Error()
}

func (r *fuzzRun) sameEvent(a, b crashloop.Event) bool {
	return a.Kind == b.Kind && a.Key == b.Key && a.Incarnation == b.Incarnation && a.Time.Equal(b.Time) &&
		a.Reason == b.Reason && r.sameErr(a.LastError, b.LastError) && a.Attempts == b.Attempts && a.Limit == b.Limit &&
		a.Window == b.Window && a.Backoff == b.Backoff && a.Failing == b.Failing && a.Total == b.Total
}

func fuzzEvent(ev crashloop.Event) string {
	return fmt.Sprintf("{%v key=%q inc=%q time=%s reason=%q err=%v attempts=%d limit=%d window=%v backoff=%v failing=%d total=%d}",
		ev.Kind, ev.Key, ev.Incarnation, ev.Time.UTC().Format(time.RFC3339Nano), ev.Reason, ev.LastError,
		ev.Attempts, ev.Limit, ev.Window, ev.Backoff, ev.Failing, ev.Total)
}

func fuzzEvents(evs []crashloop.Event) string {
	var s []string
	for _, ev := range evs {
		s = append(s, fuzzEvent(ev))
	}
	return "[" + strings.Join(s, " ") + "]"
}

// parked requires err to be want: nil, or a *ParkedError with want's fields.
func (r *fuzzRun) parked(what string, err error, want *crashloop.ParkedError) *crashloop.ParkedError {
	r.t.Helper()
	if want == nil {
		if err != nil {
			r.fail("%s = %v, the model: nil", what, err)
		}
		return nil
	}
	var pe *crashloop.ParkedError
	if !errors.As(err, &pe) || !errors.Is(err, crashloop.ErrParked) {
		r.fail("%s = %v, the model: a *ParkedError", what, err)
	}
	if pe.Key != want.Key || pe.Reason != want.Reason || !r.sameErr(pe.LastError, want.LastError) ||
		pe.Attempts != want.Attempts || !pe.Since.Equal(want.Since) || !r.sameErr(errors.Unwrap(err), want.LastError) {
		r.fail("%s = %+v, the model: %+v", what, *pe, *want)
	}
	return pe
}

var (
	errFuzzBoom = errors.New("boom")
	errFuzzBang = errors.New("bang")
)

var (
	fuzzKeys   = []string{"a", "b", ""}
	fuzzCauses = []error{nil, errFuzzBoom, errFuzzBang}
	fuzzIncs   = []string{"i1", "i2", ""}
)

// ---------------------------------------------------------------------------
// RespawnBudget

// Budget opcodes (mod 16).
const (
	bgFail = iota // 0-4
	_
	_
	_
	_
	bgSpawn
	bgIsParked
	bgParked
	bgRespawns
	bgResume
	bgForget
	bgFailNow // Failed/Resume: the shorthand forms, at the mock's time
	bgMove    // 12-14
	_
	_
	bgSnapshot
)

var fuzzBackoffs = []time.Duration{0, 1, 2, 7, time.Millisecond, 500 * time.Millisecond, time.Second, 1 << 40, math.MaxInt64 / 3, math.MaxInt64}

// fuzzBudgetConfig decodes a budget configuration that can park.
func fuzzBudgetConfig(r *fuzzRun) crashloop.BudgetConfig {
	cfg := crashloop.BudgetConfig{MaxRespawns: r.n(6), Window: fuzzPick(r, fuzzSpans), InitialBackoff: fuzzPick(r, fuzzBackoffs)}
	extra := fuzzPick(r, []time.Duration{0, 1, 1000, time.Second, math.MaxInt64})
	cfg.MaxBackoff = cfg.InitialBackoff + min(extra, math.MaxInt64-cfg.InitialBackoff)
	if !modelBudgetValid(cfg) { // cap the backoffs so that the budget parks
		cfg.MaxBackoff = cfg.Window / time.Duration(max(cfg.MaxRespawns, 1))
		cfg.InitialBackoff = min(cfg.InitialBackoff, cfg.MaxBackoff)
	}
	return cfg
}

func FuzzBudget(f *testing.F) {
	for _, seed := range fuzzBudgetSeeds() {
		f.Add(seed)
	}
	f.Fuzz(fuzzBudget)
}

// fuzzBudgetSeeds are meaningful runs: config bytes (max respawns, window,
// initial backoff, extra max backoff, start) then operations.
func fuzzBudgetSeeds() [][]byte {
	return [][]byte{
		// 3 in 60s, 500ms..+1s: fail until parked, spawn, resume, fail again.
		{3, 6, 5, 3, 2, bgFail, 0, 1, bgFail, 0, 1, bgFail, 0, 2, bgFail, 0, 1, bgSpawn, 0, bgFail, 0, 2,
			bgParked, bgResume, 0, bgFail, 0, 0, bgRespawns, 0},
		// Respawns age out exactly at the window's edge.
		{2, 6, 4, 2, 0, bgFail, 1, 1, bgMove, mvSpan, bgFail, 1, 1, bgRespawns, 1, bgMove, mvNano, bgRespawns, 1,
			bgFail, 1, 1, bgFail, 1, 1, bgIsParked, 1},
		// The clock goes back and far: nothing un-expires or expires twice.
		{3, 5, 1, 1, 2, bgFail, 0, 1, bgMove, mvBackCentury, bgFail, 0, 1, bgMove, mvFar, 1, bgFail, 0, 1,
			bgMove, mvFar, 0, bgFail, 0, 2, bgRespawns, 0, bgFail, 0, 1},
		// MaxRespawns 0 parks at once; Forget drops the park silently.
		{0, 9, 0, 0, 1, bgFail, 2, 1, bgFail, 2, 2, bgForget, 2, bgSpawn, 2, bgFail, 2, 0, bgResume, 2, bgResume, 2},
		// Huge backoffs capped, shorthand forms at the mock's time.
		{4, 9, 9, 4, 3, bgFailNow, 0, 1, bgFailNow, 0, 1, bgFail, 0, 1, bgFail, 1, 2, bgFail, 0, 0, bgFailNow, 0, 1,
			bgFail, 0, 1, bgSnapshot, 0, bgFail, 0, 1},
	}
}

func fuzzBudget(t *testing.T, data []byte) {
	r := newFuzzRun(t, data)
	cfg := fuzzBudgetConfig(r)
	mock := clock.NewMock()
	b, err := crashloop.NewRespawnBudget(cfg, crashloop.WithClock(mock), crashloop.WithEventHandler(r))
	if err != nil {
		r.fail("NewRespawnBudget(%+v) = %v; the documented rules accept it", cfg, err)
	}
	m := newModelBudget(cfg, mock.Now())
	r.start = fuzzPick(r, fuzzStarts)
	r.now, r.latest = r.start, r.start
	if mock.Now().After(r.latest) {
		r.latest = mock.Now()
	}
	r.logf("NewRespawnBudget(%+v) at T", cfg)
	parks := map[string]*crashloop.ParkedError{} // the ParkedError each parked key keeps returning
	samePark := func(what, key string, pe *crashloop.ParkedError) {
		if pe == nil {
			return
		}
		if parks[key] == nil {
			parks[key] = pe
		} else if parks[key] != pe {
			r.fail("%s returned a new *ParkedError for a key that stayed parked", what)
		}
	}
	for r.more() {
		switch op := r.n(16); {
		case op < bgSpawn || op == bgFailNow:
			key, cause := fuzzPick(r, fuzzKeys), fuzzPick(r, fuzzCauses)
			what := fmt.Sprintf("FailedAt(%q, %v, %s)", key, cause, r.at())
			now := r.now
			var d time.Duration
			var err error
			if op == bgFailNow {
				now = mock.Now()
				what = fmt.Sprintf("Failed(%q, %v) at the mock's %s", key, cause, fuzzTime(r.start, now))
				d, err = b.Failed(key, cause)
			} else {
				d, err = b.FailedAt(key, cause, now)
			}
			r.logf("%s = %v, %v", what, d, err)
			if key == "" {
				if d != 0 || !errors.Is(err, crashloop.ErrInvalidKey) {
					r.fail("%s = %v, %v; want the empty key refused", what, d, err)
				}
				continue
			}
			wd, wpe, wevs := m.FailedAt(key, cause, now)
			if d != wd {
				r.fail("%s backoff %v, the model %v", what, d, wd)
			}
			samePark(what, key, r.parked(what, err, wpe))
			r.events(wevs)
		case op == bgSpawn:
			key := fuzzPick(r, fuzzKeys)
			err := b.Spawn(key)
			r.logf("Spawn(%q) = %v", key, err)
			if key == "" {
				if !errors.Is(err, crashloop.ErrInvalidKey) {
					r.fail("Spawn(\"\") = %v; want the empty key refused", err)
				}
				continue
			}
			samePark("Spawn", key, r.parked(fmt.Sprintf("Spawn(%q)", key), err, m.Spawn(key)))
		case op == bgIsParked:
			key := fuzzPick(r, fuzzKeys)
			got := b.IsParked(key)
			r.logf("IsParked(%q) = %v", key, got)
			if got != m.IsParked(key) {
				r.fail("IsParked(%q) = %v, the model %v", key, got, !got)
			}
		case op == bgParked:
			got, want := b.Parked(), m.Parked()
			r.logf("Parked() = %q", got)
			if !slices.Equal(got, want) {
				r.fail("Parked() = %q, the model %q", got, want)
			}
		case op == bgRespawns:
			key := fuzzPick(r, fuzzKeys)
			got, want := b.RespawnsAt(key, r.now), m.RespawnsAt(key, r.now)
			r.logf("RespawnsAt(%q, %s) = %d", key, r.at(), got)
			if got != want {
				r.fail("RespawnsAt = %d, the model %d", got, want)
			}
		case op == bgResume:
			key := fuzzPick(r, fuzzKeys)
			shorthand := r.n(2) == 0
			now := r.now
			var err error
			if shorthand {
				now = mock.Now()
				err = b.Resume(key)
			} else {
				err = b.ResumeAt(key, now)
			}
			r.logf("ResumeAt(%q, %s) = %v", key, fuzzTime(r.start, now), err)
			notParked, wevs := m.ResumeAt(key, now)
			if errors.Is(err, crashloop.ErrNotParked) != notParked || (err != nil) != notParked {
				r.fail("ResumeAt(%q) = %v, the model: not parked = %v", key, err, notParked)
			}
			delete(parks, key)
			r.events(wevs)
		case op == bgForget:
			key := fuzzPick(r, fuzzKeys)
			b.Forget(key)
			m.Forget(key)
			delete(parks, key)
			r.logf("Forget(%q)", key)
		case op == bgSnapshot:
			b = fuzzRestoreBudget(r, b, cfg)
			clear(parks) // a restored park is a new *ParkedError
		default:
			r.move(cfg.Window)
		}
		r.events(nil)
	}
}

// ---------------------------------------------------------------------------
// ChainDetector

// Chain opcodes (mod 16).
const (
	chRescue = iota // 0-4
	_
	_
	_
	_
	chChain
	chIsNeedsHuman
	chNeedsHuman
	chClear
	chRescueNow // Rescue/Chain: the shorthand forms, at the mock's time
	chMove      // 10-14
	_
	_
	_
	_
	chSnapshot
)

func FuzzChain(f *testing.F) {
	for _, seed := range fuzzChainSeeds() {
		f.Add(seed)
	}
	f.Fuzz(fuzzChain)
}

// fuzzChainSeeds: config bytes (max chain - 1, reset gap, start) then
// operations; a rescue is (key, incarnation, reactive unless the byte is 0
// mod 4).
func fuzzChainSeeds() [][]byte {
	return [][]byte{
		// 3 within 1m: three reactive rescues, the fourth escalates; sticky.
		{2, 6, 2, chRescue, 0, 0, 1, chMove, mvSeconds, 30, chRescue, 0, 0, 1, chMove, mvSpan, chRescue, 0, 0, 1,
			chMove, mvSpan, chRescue, 0, 0, 1, chRescue, 0, 0, 1, chNeedsHuman, chIsNeedsHuman, 0, chClear, 0,
			chRescue, 0, 0, 1, chChain, 0, 0},
		// A gap of exactly the reset gap keeps the chain, one more breaks it.
		{1, 5, 0, chRescue, 1, 1, 1, chMove, mvSpan, chChain, 1, 1, chRescue, 1, 1, 1, chMove, mvSpanMore, chChain, 1, 1,
			chRescue, 1, 1, 1},
		// A planned rescue and a new incarnation both end the chain.
		{1, 6, 2, chRescue, 0, 0, 1, chRescue, 0, 0, 0, chRescue, 0, 0, 1, chRescue, 0, 1, 1, chChain, 0, 0, chChain, 0, 1,
			chRescue, 0, 1, 1, chRescue, 0, 1, 1},
		// Clock back and far, shorthand forms.
		{0, 4, 3, chRescueNow, 2, 2, 1, chMove, mvBackCentury, chRescue, 2, 2, 1, chMove, mvFar, 2, chRescue, 2, 2, 1,
			chMove, mvFar, 1, chRescue, 2, 2, 1, chSnapshot, chRescue, 2, 2, 1},
	}
}

func fuzzChain(t *testing.T, data []byte) {
	r := newFuzzRun(t, data)
	cfg := crashloop.ChainConfig{MaxChain: r.n(5) + 1, ResetGap: fuzzPick(r, fuzzSpans)}
	mock := clock.NewMock()
	d, err := crashloop.NewChainDetector(cfg, crashloop.WithClock(mock), crashloop.WithEventHandler(r))
	if err != nil {
		r.fail("NewChainDetector(%+v) = %v", cfg, err)
	}
	m := newModelChain(cfg, mock.Now())
	r.start = fuzzPick(r, fuzzStarts)
	r.now, r.latest = r.start, r.start
	if mock.Now().After(r.latest) {
		r.latest = mock.Now()
	}
	r.logf("NewChainDetector(%+v) at T", cfg)
	for r.more() {
		switch op := r.n(16); {
		case op < chChain || op == chRescueNow:
			key, inc, reactive := fuzzPick(r, fuzzKeys), fuzzPick(r, fuzzIncs), r.n(4) != 0
			what := fmt.Sprintf("RescueAt(%q, %q, %v, %s)", key, inc, reactive, r.at())
			now := r.now
			var n int
			var err error
			if op == chRescueNow {
				now = mock.Now()
				what = fmt.Sprintf("Rescue(%q, %q, %v) at the mock's %s", key, inc, reactive, fuzzTime(r.start, now))
				n, err = d.Rescue(key, inc, reactive)
			} else {
				n, err = d.RescueAt(key, inc, reactive, now)
			}
			r.logf("%s = %d, %v", what, n, err)
			if key == "" {
				if n != 0 || !errors.Is(err, crashloop.ErrInvalidKey) {
					r.fail("%s = %d, %v; want the empty key refused", what, n, err)
				}
				continue
			}
			wn, wesc, wevs := m.RescueAt(key, inc, reactive, now)
			if n != wn || errors.Is(err, crashloop.ErrNeedsHuman) != wesc || (err != nil) != wesc {
				r.fail("%s = %d, %v; the model: %d, needs human = %v", what, n, err, wn, wesc)
			}
			r.events(wevs)
		case op == chChain:
			key, inc := fuzzPick(r, fuzzKeys), fuzzPick(r, fuzzIncs)
			now := r.now
			var got int
			if r.n(2) == 0 {
				now = mock.Now()
				got = d.Chain(key, inc)
			} else {
				got = d.ChainAt(key, inc, now)
			}
			want := m.ChainAt(key, inc, now)
			r.logf("ChainAt(%q, %q, %s) = %d", key, inc, fuzzTime(r.start, now), got)
			if got != want {
				r.fail("ChainAt = %d, the model %d", got, want)
			}
		case op == chIsNeedsHuman:
			key := fuzzPick(r, fuzzKeys)
			got := slices.Contains(d.NeedsHuman(), key)
			r.logf("IsNeedsHuman(%q) = %v", key, got)
			if got != m.IsNeedsHuman(key) {
				r.fail("IsNeedsHuman(%q) = %v, the model %v", key, got, !got)
			}
		case op == chNeedsHuman:
			got, want := d.NeedsHuman(), m.NeedsHuman()
			r.logf("NeedsHuman() = %q", got)
			if !slices.Equal(got, want) {
				r.fail("NeedsHuman() = %q, the model %q", got, want)
			}
		case op == chClear:
			key := fuzzPick(r, fuzzKeys)
			d.Clear(key)
			r.events(m.Clear(key, mock.Now()))
			r.logf("Clear(%q)", key)
		case op == chSnapshot:
			d = fuzzRestoreChain(r, d, cfg)
		default:
			r.move(cfg.ResetGap)
		}
		r.events(nil)
	}
}

// ---------------------------------------------------------------------------
// RestartLoopGuard

// Guard opcodes (mod 12).
const (
	gdRecord = iota // 0-3
	_
	_
	_
	gdTripped
	gdRestarts
	gdReset
	gdMove // 7-10
	_
	_
	_
	gdSnapshot
)

func FuzzGuard(f *testing.F) {
	for _, seed := range fuzzGuardSeeds() {
		f.Add(seed)
	}
	f.Fuzz(fuzzGuard)
}

// fuzzGuardSeeds: config bytes (max restarts, window, name, start) then
// operations; a record is (shorthand if the byte is 0 mod 4).
func fuzzGuardSeeds() [][]byte {
	return [][]byte{
		// 3 in 60s trips on the third, announced once.
		{2, 6, 1, 2, gdRecord, 1, gdRecord, 1, gdRecord, 1, gdRecord, 1, gdTripped, gdMove, mvSpan, gdRestarts,
			gdMove, mvNano, gdRestarts, gdRecord, 1, gdReset, gdRecord, 1},
		// 1 in 1ns: each restart after a quiet ns is a new trip.
		{0, 0, 0, 0, gdRecord, 1, gdMove, mvNano, gdRecord, 1, gdMove, mvNanos, 2, gdRecord, 1, gdTripped,
			gdRecord, 1},
		// 2 in 10ns: a trip, a partial expiry, a record.
		{1, 3, 1, 0, gdRecord, 1, gdMove, mvNanos, 5, gdRecord, 1, gdMove, mvNanos, 6, gdRecord, 1, gdMove, mvNanos, 20,
			gdRecord, 1, gdRecord, 1},
		// Clock back and far.
		{3, 5, 0, 3, gdRecord, 1, gdMove, mvBackCentury, gdRecord, 1, gdMove, mvFar, 1, gdRecord, 1, gdRecord, 0,
			gdSnapshot, gdRecord, 1, gdMove, mvFar, 0, gdRecord, 1},
	}
}

func fuzzGuard(t *testing.T, data []byte) {
	r := newFuzzRun(t, data)
	maxRestarts := r.n(5) + 1
	if maxRestarts == 5 {
		maxRestarts = fuzzPick(r, []int{5, 64, 1000})
	}
	cfg := crashloop.GuardConfig{MaxRestarts: maxRestarts, Window: fuzzPick(r, fuzzSpans)}
	name := fuzzPick(r, []string{"", "ch-1"})
	mock := clock.NewMock()
	g, err := crashloop.NewRestartLoopGuard(cfg.MaxRestarts, cfg.Window, crashloop.WithClock(mock),
		crashloop.WithEventHandler(r), crashloop.WithName(name))
	if err != nil {
		r.fail("NewRestartLoopGuard(%+v) = %v", cfg, err)
	}
	m := newModelGuard(cfg, name, mock.Now())
	r.start = fuzzPick(r, fuzzStarts)
	r.now, r.latest = r.start, r.start
	if mock.Now().After(r.latest) {
		r.latest = mock.Now()
	}
	r.logf("NewRestartLoopGuard(%d, %v, WithName(%q)) at T", cfg.MaxRestarts, cfg.Window, name)
	for r.more() {
		switch op := r.n(12); {
		case op < gdTripped:
			now := r.now
			var got bool
			if r.n(4) == 0 {
				now = mock.Now()
				got = g.Record()
			} else {
				got = g.RecordAt(now)
			}
			r.logf("RecordAt(%s) = %v", fuzzTime(r.start, now), got)
			want, wevs := m.RecordAt(now)
			if got != want {
				r.fail("RecordAt = %v, the model %v", got, want)
			}
			r.events(wevs)
		case op == gdTripped:
			now := r.now
			var got bool
			if r.n(2) == 0 {
				now = mock.Now()
				got = g.Tripped()
			} else {
				got = g.TrippedAt(now)
			}
			r.logf("TrippedAt(%s) = %v", fuzzTime(r.start, now), got)
			if want := m.TrippedAt(now); got != want {
				r.fail("TrippedAt = %v, the model %v", got, want)
			}
		case op == gdRestarts:
			got := g.RestartsAt(r.now)
			r.logf("RestartsAt(%s) = %d", r.at(), got)
			if want := m.RestartsAt(r.now); got != want {
				r.fail("RestartsAt = %d, the model %d", got, want)
			}
		case op == gdReset:
			g.Reset()
			m.Reset()
			r.logf("Reset()")
		case op == gdSnapshot:
			g = fuzzRestoreGuard(r, g, cfg, name)
		default:
			r.move(cfg.Window)
		}
		r.events(nil)
	}
}

// ---------------------------------------------------------------------------
// FleetSupervisionPolicy

// Fleet opcodes (mod 14).
const (
	flRestart = iota // 0-2
	_
	_
	flState // 3-4
	_
	flTripped
	flStatus
	flReset
	flMove // 8-12
	_
	_
	_
	_
	flSnapshot
)

var (
	fuzzFractions = []float64{5e-324, 0.1, 0.25, 1.0 / 3, 0.5, 2.0 / 3, 0.75, 1}
	fuzzCooldowns = []time.Duration{0, 1, 2, 10, time.Microsecond, time.Second, 2 * time.Minute, time.Hour, 1 << 62, math.MaxInt64}
	fuzzCounts    = []int{-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 100, math.MaxInt, math.MinInt}
)

func FuzzFleet(f *testing.F) {
	for _, seed := range fuzzFleetSeeds() {
		f.Add(seed)
	}
	f.Fuzz(fuzzFleet)
}

// fuzzFleetSeeds: config bytes (restarts per hour - 1, fraction, min
// failing - 1, cooldown, name, start) then operations; a fleet state is
// (failing, total) as indexes of fuzzCounts; a move is (hour or cooldown,
// kind).
func fuzzFleetSeeds() [][]byte {
	return [][]byte{
		// 3 an hour: trip on the third, hold, re-arm exactly at the cooldown.
		{2, 4, 1, 6, 1, 2, flRestart, flRestart, flRestart, flRestart, flStatus, flMove, 0, mvSpanLess, flTripped,
			flMove, 0, mvNano, flTripped, flRestart, flStatus},
		// Fraction: 1 of 1 never trips with min failing 2; 2 of 4 does; extend.
		{9, 4, 1, 5, 0, 0, flState, 2, 2, flState, 3, 5, flStatus, flMove, 0, mvSpanPart, 0, flState, 3, 5,
			flMove, 0, mvSpanPart, 0, flTripped, flMove, 0, mvSpanPart, 0, flTripped, flReset, flStatus},
		// Bad counts are clamped.
		{0, 7, 0, 0, 0, 1, flState, 0, 0, flState, 11, 12, flState, 12, 11, flState, 11, 11, flState, 1, 0, flStatus},
		// The hour rolls; clock back and far.
		{1, 3, 0, 9, 1, 3, flRestart, flMove, 1, mvSpan, flRestart, flMove, 1, mvSpanMore, flRestart, flMove, 1, mvBackCentury,
			flRestart, flMove, 0, mvFar, 2, flRestart, flRestart, flSnapshot, flStatus, flMove, 1, mvFar, 0, flRestart},
	}
}

func fuzzFleet(t *testing.T, data []byte) {
	r := newFuzzRun(t, data)
	cfg := crashloop.FleetConfig{RestartsPerHour: r.n(6) + 1, FailingFraction: fuzzPick(r, fuzzFractions),
		MinFailing: r.n(4) + 1, Cooldown: fuzzPick(r, fuzzCooldowns)}
	name := fuzzPick(r, []string{"", "fleet"})
	mock := clock.NewMock()
	p, err := crashloop.NewFleetSupervisionPolicy(cfg, crashloop.WithClock(mock), crashloop.WithEventHandler(r),
		crashloop.WithName(name))
	if err != nil {
		r.fail("NewFleetSupervisionPolicy(%+v) = %v", cfg, err)
	}
	m := newModelFleet(cfg, name, mock.Now())
	r.start = fuzzPick(r, fuzzStarts)
	r.now, r.latest = r.start, r.start
	if mock.Now().After(r.latest) {
		r.latest = mock.Now()
	}
	r.logf("NewFleetSupervisionPolicy(%+v, WithName(%q)) at T", cfg, name)
	for r.more() {
		switch op := r.n(14); {
		case op < flState:
			now := r.now
			var got bool
			if r.n(4) == 0 {
				now = mock.Now()
				got = p.NoteRestart()
			} else {
				got = p.NoteRestartAt(now)
			}
			r.logf("NoteRestartAt(%s) = %v", fuzzTime(r.start, now), got)
			want, wevs := m.NoteRestartAt(now)
			if got != want {
				r.fail("NoteRestartAt = %v, the model %v", got, want)
			}
			r.events(wevs)
		case op < flTripped:
			failing, total := fuzzPick(r, fuzzCounts), fuzzPick(r, fuzzCounts)
			got := p.NoteFleetStateAt(failing, total, r.now)
			r.logf("NoteFleetStateAt(%d, %d, %s) = %v", failing, total, r.at(), got)
			want, wevs := m.NoteFleetStateAt(failing, total, r.now)
			if got != want {
				r.fail("NoteFleetStateAt = %v, the model %v", got, want)
			}
			r.events(wevs)
		case op == flTripped:
			got := p.TrippedAt(r.now)
			r.logf("TrippedAt(%s) = %v", r.at(), got)
			want, wevs := m.TrippedAt(r.now)
			if got != want {
				r.fail("TrippedAt = %v, the model %v", got, want)
			}
			r.events(wevs)
		case op == flStatus:
			got := p.StatusAt(r.now)
			r.logf("StatusAt(%s) = %s", r.at(), fuzzFleetStatus(got))
			want, wevs := m.StatusAt(r.now)
			if !fuzzSameFleetStatus(got, want) {
				r.fail("StatusAt = %s, the model %s", fuzzFleetStatus(got), fuzzFleetStatus(want))
			}
			r.events(wevs)
		case op == flReset:
			p.Reset()
			m.Reset()
			r.logf("Reset()")
		case op == flSnapshot:
			p = fuzzRestoreFleet(r, p, cfg, name)
		default:
			span := time.Hour
			if r.n(2) == 0 {
				span = cfg.Cooldown
			}
			r.move(span)
		}
		r.events(nil)
	}
}

func fuzzSameFleetStatus(a, b crashloop.FleetStatus) bool {
	if (a.RearmAt == nil) != (b.RearmAt == nil) || a.RearmAt != nil && !a.RearmAt.Equal(*b.RearmAt) {
		return false
	}
	a.RearmAt, b.RearmAt = nil, nil
	return reflect.DeepEqual(a, b)
}

func fuzzFleetStatus(st crashloop.FleetStatus) string {
	rearm := "nil"
	if st.RearmAt != nil {
		rearm = st.RearmAt.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("{tripped=%v limit=%d failing=%d total=%d restarts=%d rearm_at=%s}", st.BreakerTripped,
		st.FleetRestartsPerHour, st.FailingKeys, st.Keys, st.RestartsInHour, rearm)
}

// ---------------------------------------------------------------------------
// Configuration

var (
	fuzzCfgInts  = []int{-1, 0, 1, 2, 3, 5, 40, 1 << 20, math.MaxInt32, math.MaxInt, math.MinInt}
	fuzzCfgDurs  = []time.Duration{-1, 0, 1, time.Millisecond, 500 * time.Millisecond, time.Second, time.Minute, time.Hour, 1 << 62, math.MaxInt64, math.MinInt64}
	fuzzCfgFloat = []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 5e-324, 0.5, 1, math.Nextafter(1, 2), 2, -0.5, 1e308}
)

// cfgInt, cfgDur and cfgFloat decode a setting: mostly a value from the
// edges above, sometimes any value at all.
func (r *fuzzRun) cfgInt() int {
	if b := r.byte(); b >= 240 {
		return int(int32(r.u32()))
	} else {
		return fuzzCfgInts[int(b)%len(fuzzCfgInts)]
	}
}

func (r *fuzzRun) cfgDur() time.Duration {
	if b := r.byte(); b >= 240 {
		return time.Duration(int32(r.u32())) * time.Millisecond
	} else {
		return fuzzCfgDurs[int(b)%len(fuzzCfgDurs)]
	}
}

func (r *fuzzRun) cfgFloat() float64 {
	if b := r.byte(); b >= 240 {
		return math.Float64frombits(uint64(r.u32())<<32 | uint64(r.u32()))
	} else {
		return fuzzCfgFloat[int(b)%len(fuzzCfgFloat)]
	}
}

// fuzzSnake is a setting's name as a config file writes it.
var fuzzSnake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// rejected requires err to be a *ConfigError matching ErrInvalidConfig
// whose Field is want (when want is not empty) or a dotted snake_case path.
func (r *fuzzRun) rejected(what string, err error, want string) {
	r.t.Helper()
	var ce *crashloop.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, crashloop.ErrInvalidConfig) {
		r.fail("%s = %v (%T), want a *ConfigError matching ErrInvalidConfig", what, err, err)
	}
	for _, part := range strings.Split(ce.Field, ".") {
		if !fuzzSnake.MatchString(part) {
			r.fail("%s: Field %q is not a dotted snake_case path (%v)", what, ce.Field, err)
		}
	}
	if want != "" && ce.Field != want {
		r.fail("%s: Field %q, the documented first broken rule is %q (%v)", what, ce.Field, want, err)
	}
	if ce.Rule == "" || err.Error() == "" {
		r.fail("%s: %#v says no rule", what, *ce)
	}
}

// The first broken rule of each config, in the order the config lists its
// fields, whole-config rules last; "" when it is valid.

func fuzzBudgetField(c crashloop.BudgetConfig) string {
	switch {
	case c.MaxRespawns < 0:
		return "max_respawns"
	case c.Window <= 0:
		return "window"
	case c.InitialBackoff < 0:
		return "initial_backoff"
	case c.MaxBackoff < c.InitialBackoff:
		return "max_backoff"
	case !modelBudgetValid(c):
		return "window"
	}
	return ""
}

func fuzzChainField(c crashloop.ChainConfig) string {
	switch {
	case c.MaxChain < 1:
		return "max_chain"
	case c.ResetGap <= 0:
		return "reset_gap"
	}
	return ""
}

func fuzzGuardField(c crashloop.GuardConfig) string {
	switch {
	case c.MaxRestarts < 1:
		return "max_restarts"
	case c.Window <= 0:
		return "window"
	}
	return ""
}

func fuzzFleetField(c crashloop.FleetConfig) string {
	switch {
	case c.RestartsPerHour < 1:
		return "restarts_per_hour"
	case math.IsNaN(c.FailingFraction) || c.FailingFraction <= 0 || c.FailingFraction > 1:
		return "failing_fraction"
	case c.MinFailing < 1:
		return "min_failing"
	case c.Cooldown < 0:
		return "cooldown"
	}
	return ""
}

// fuzzConstBackoff is a Backoff of the user's own: the package does not
// check it.
type fuzzConstBackoff time.Duration

func (d fuzzConstBackoff) Delay(int, time.Duration) time.Duration { return time.Duration(d) }

// cfgBackoff decodes a restart curve, and the largest delay it may give
// (-1 for a curve of the user's own).
func (r *fuzzRun) cfgBackoff() (crashloop.Backoff, time.Duration, string) {
	a, b := r.cfgDur(), r.cfgDur()
	switch r.n(8) {
	case 0:
		return nil, 0, "nil"
	case 1:
		return crashloop.Linear(a, b), b, fmt.Sprintf("Linear(%v, %v)", a, b)
	case 2:
		f := r.cfgFloat()
		return crashloop.Exponential(a, f, b), b, fmt.Sprintf("Exponential(%v, %v, %v)", a, f, b)
	case 3:
		return crashloop.FullJitter(crashloop.Linear(a, b), nil), b, fmt.Sprintf("FullJitter(Linear(%v, %v))", a, b)
	case 4:
		f := r.cfgFloat()
		return crashloop.EqualJitter(crashloop.Exponential(a, f, b), nil), b, fmt.Sprintf("EqualJitter(Exponential(%v, %v, %v))", a, f, b)
	case 5:
		return crashloop.DecorrelatedJitter(a, b, nil), b, fmt.Sprintf("DecorrelatedJitter(%v, %v)", a, b)
	case 6:
		return crashloop.FullJitter(nil, nil), 0, "FullJitter(nil)"
	default:
		return fuzzConstBackoff(a), -1, fmt.Sprintf("const(%v)", a)
	}
}

func FuzzConfig(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 6, 4, 5, 3, 7, 1, 0, 6, 7, 6, 7, 2, 6, 7, 5, 1, 0})
	f.Add([]byte{1, 9, 1, 9, 0, 2, 0, 0, 1, 2, 0, 2, 1, 9, 1, 1})
	f.Add([]byte{10, 8, 6, 9, 0, 0, 2, 10, 3, 1, 4, 2, 5, 4, 1, 3, 9, 9, 3, 0})
	f.Fuzz(fuzzConfig)
}

// fuzzConfig builds every config from random settings: no constructor
// panics, every rejection names the documented first broken rule, and every
// accepted config works.
func fuzzConfig(t *testing.T, data []byte) {
	r := newFuzzRun(t, data)
	r.start = fuzzStarts[2]
	budget := crashloop.BudgetConfig{MaxRespawns: r.cfgInt(), Window: r.cfgDur(), InitialBackoff: r.cfgDur(), MaxBackoff: r.cfgDur()}
	chain := crashloop.ChainConfig{MaxChain: r.cfgInt(), ResetGap: r.cfgDur()}
	guard := crashloop.GuardConfig{MaxRestarts: r.cfgInt(), Window: r.cfgDur()}
	fleet := crashloop.FleetConfig{RestartsPerHour: r.cfgInt(), FailingFraction: r.cfgFloat(), MinFailing: r.cfgInt(), Cooldown: r.cfgDur()}
	r.logf("budget %+v", budget)
	r.logf("chain %+v", chain)
	r.logf("guard %+v", guard)
	r.logf("fleet %+v", fleet)

	if b, err := crashloop.NewRespawnBudget(budget); fuzzBudgetField(budget) != "" {
		r.rejected("NewRespawnBudget", err, fuzzBudgetField(budget))
	} else if err != nil {
		r.fail("NewRespawnBudget = %v, the documented rules accept it", err)
	} else {
		fuzzBudgetWorks(r, b, budget)
	}
	if d, err := crashloop.NewChainDetector(chain); fuzzChainField(chain) != "" {
		r.rejected("NewChainDetector", err, fuzzChainField(chain))
	} else if err != nil {
		r.fail("NewChainDetector = %v, the documented rules accept it", err)
	} else if chain.MaxChain <= 1000 {
		for i := 1; i <= chain.MaxChain; i++ {
			if n, err := d.RescueAt("k", "i", true, r.start); n != i || err != nil {
				r.fail("RescueAt #%d = %d, %v", i, n, err)
			}
		}
		if _, err := d.RescueAt("k", "i", true, r.start); !errors.Is(err, crashloop.ErrNeedsHuman) {
			r.fail("RescueAt after MaxChain = %v, want ErrNeedsHuman", err)
		}
	}
	if g, err := crashloop.NewRestartLoopGuard(guard.MaxRestarts, guard.Window); fuzzGuardField(guard) != "" {
		r.rejected("NewRestartLoopGuard", err, fuzzGuardField(guard))
	} else if err != nil {
		r.fail("NewRestartLoopGuard = %v, the documented rules accept it", err)
	} else if guard.MaxRestarts <= 1000 {
		for i := 1; i <= guard.MaxRestarts; i++ {
			if got := g.RecordAt(r.start); got != (i == guard.MaxRestarts) {
				r.fail("RecordAt #%d = %v", i, got)
			}
		}
	}
	if p, err := crashloop.NewFleetSupervisionPolicy(fleet); fuzzFleetField(fleet) != "" {
		r.rejected("NewFleetSupervisionPolicy", err, fuzzFleetField(fleet))
	} else if err != nil {
		r.fail("NewFleetSupervisionPolicy = %v, the documented rules accept it", err)
	} else {
		p.NoteFleetStateAt(fleet.MinFailing, fleet.MinFailing, r.start)
		if !p.TrippedAt(r.start) && fleet.Cooldown > 0 {
			r.fail("all %d members failing did not trip the fleet", fleet.MinFailing)
		}
		p.Reset()
		if fleet.RestartsPerHour <= 1000 {
			for i := 1; i <= fleet.RestartsPerHour; i++ {
				if got := p.NoteRestartAt(r.start); got != (i == fleet.RestartsPerHour) && fleet.Cooldown > 0 {
					r.fail("NoteRestartAt #%d = %v", i, got)
				}
			}
		}
	}

	// The Supervisor: the four configs and the rest of its settings.
	cfg := crashloop.SupervisorConfig{Budget: budget, HealthyAfter: r.cfgDur(), HourlyCap: r.cfgInt(), RestartOnCleanExit: r.n(2) == 0}
	curve, curveMax, curveName := r.cfgBackoff()
	cfg.Backoff = curve
	if r.n(3) != 0 {
		cfg.Chain = &chain
	}
	if r.n(3) != 0 {
		cfg.Fleet = &fleet
	}
	if r.n(2) == 0 {
		cfg.Guard = &guard
	}
	r.logf("supervisor HealthyAfter %v, HourlyCap %d, Backoff %s, chain %v, fleet %v, guard %v", cfg.HealthyAfter,
		cfg.HourlyCap, curveName, cfg.Chain != nil, cfg.Fleet != nil, cfg.Guard != nil)
	s, err := crashloop.NewSupervisor(cfg)
	if err != nil {
		r.rejected("NewSupervisor", err, "")
		var ce *crashloop.ConfigError
		errors.As(err, &ce)
		if !fuzzSupervisorFields[ce.Field] {
			r.fail("NewSupervisor: Field %q names no setting of a SupervisorConfig", ce.Field)
		}
		if want := fuzzSupervisorField(cfg); want != "" && want != ce.Field {
			r.fail("NewSupervisor: Field %q, the documented first broken rule is %q (%v)", ce.Field, want, err)
		}
		return
	}
	if want := fuzzSupervisorField(cfg); want != "" {
		r.fail("NewSupervisor accepted a config whose %s is broken", want)
	}
	if curveMax >= 0 {
		c := cfg.Backoff
		if c == nil {
			c, curveMax = crashloop.Linear(budget.InitialBackoff, budget.MaxBackoff), budget.MaxBackoff
		}
		prev := time.Duration(0)
		for _, attempt := range []int{1, 2, 3, 10, 1000, math.MaxInt} {
			d := c.Delay(attempt, prev)
			if d < 0 || d > curveMax {
				r.fail("%s.Delay(%d, %v) = %v, outside [0, %v]", curveName, attempt, prev, d, curveMax)
			}
			prev = d
		}
	}
	fuzzSupervisorWorks(r, s, cfg, curveMax)
}

// fuzzSupervisorFields are the settings of a SupervisorConfig as their
// paths.
var fuzzSupervisorFields = map[string]bool{
	"budget.max_respawns": true, "budget.window": true, "budget.initial_backoff": true, "budget.max_backoff": true,
	"healthy_after": true, "backoff.initial": true, "backoff.max": true, "backoff.factor": true, "backoff.jitter": true,
	"backoff.kind": true, "chain.max_chain": true, "chain.reset_gap": true, "fleet.restarts_per_hour": true,
	"fleet.failing_fraction": true, "fleet.min_failing": true, "fleet.cooldown": true, "guard.max_restarts": true,
	"guard.window": true, "hourly_cap": true, "restart_on_clean_exit": true, "exit_rules": true,
}

// fuzzSupervisorField is the first broken rule of a SupervisorConfig whose
// answer the documented rules fix without knowing how a curve is checked: "" when a
// curve is in play and nothing else is broken.
func fuzzSupervisorField(c crashloop.SupervisorConfig) string {
	if f := fuzzBudgetField(c.Budget); f != "" && f != "window" || c.Budget.Window <= 0 {
		return "budget." + f
	}
	if c.HealthyAfter < 0 {
		return "healthy_after"
	}
	if c.Backoff != nil {
		return "" // the curve's own rules come next
	}
	if c.Chain != nil && fuzzChainField(*c.Chain) != "" {
		return "chain." + fuzzChainField(*c.Chain)
	}
	if c.Fleet != nil && fuzzFleetField(*c.Fleet) != "" {
		return "fleet." + fuzzFleetField(*c.Fleet)
	}
	if c.Guard != nil && fuzzGuardField(*c.Guard) != "" {
		return "guard." + fuzzGuardField(*c.Guard)
	}
	if c.HourlyCap < 0 {
		return "hourly_cap"
	}
	if !modelBudgetValid(c.Budget) {
		return "budget.window"
	}
	return ""
}

// fuzzBudgetWorks runs a tight crash loop on an accepted budget: each
// failure waits out the backoff it was given, which is min(InitialBackoff *
// attempt, MaxBackoff), and the failure after MaxRespawns of them parks.
func fuzzBudgetWorks(r *fuzzRun, b *crashloop.RespawnBudget, cfg crashloop.BudgetConfig) {
	if cfg.MaxRespawns > 64 {
		for i := 0; i < 3; i++ {
			if d, err := b.FailedAt("k", errFuzzBoom, r.start); err != nil || d < 0 || d > cfg.MaxBackoff {
				r.fail("FailedAt #%d = %v, %v", i+1, d, err)
			}
		}
		return
	}
	now := r.start
	for i := 1; i <= cfg.MaxRespawns; i++ {
		d, err := b.FailedAt("k", errFuzzBoom, now)
		if err != nil || d != modelLinear(cfg.InitialBackoff, cfg.MaxBackoff, i) || d < 0 || d > cfg.MaxBackoff {
			r.fail("FailedAt #%d at %s = %v, %v; want %v", i, fuzzTime(r.start, now), d, err,
				modelLinear(cfg.InitialBackoff, cfg.MaxBackoff, i))
		}
		now = now.Add(d)
	}
	_, err := b.FailedAt("k", errFuzzBoom, now)
	var pe *crashloop.ParkedError
	if !errors.As(err, &pe) || pe.Attempts != cfg.MaxRespawns {
		r.fail("a crash loop that waited its backoffs did not park after %d respawns at %s: %v", cfg.MaxRespawns,
			fuzzTime(r.start, now), err)
	}
}

// fuzzWaitLimit is how many waits a Run may start in fuzzSupervisorWorks
// before it is stopped as a livelock.
const fuzzWaitLimit = 10000

// fuzzCountingClock is the bubble's clock (time.Now and time.After, fake
// inside a synctest bubble) that also counts the waits it is asked for, and
// cancels the run once there are more than fuzzWaitLimit.
type fuzzCountingClock struct {
	waits  atomic.Int64
	cancel context.CancelFunc
}

func (c *fuzzCountingClock) Now() time.Time { return time.Now() }

func (c *fuzzCountingClock) After(d time.Duration) <-chan time.Time {
	if c.waits.Add(1) > fuzzWaitLimit {
		c.cancel()
	}
	return time.After(d)
}

// fuzzKnownHoldForever reports the settings known to make a held restart
// wait without end: once the Supervisor's time passes the far end of its
// timeline (about 292 years after its creation: a huge cooldown, backoff or
// curve of the user's own), offsets saturate and the fleet breaker never
// re-arms. (Held restarts re-tripping a breaker of restarts_per_hour 1,
// once also here, are fixed: a held restart is counted once.) A config
// without these must never livelock.
func fuzzKnownHoldForever(cfg crashloop.SupervisorConfig, curveMax time.Duration) bool {
	const day = 24 * time.Hour
	return cfg.Fleet != nil && (cfg.Fleet.Cooldown > day || curveMax < 0 || curveMax > day || cfg.Budget.MaxBackoff > day)
}

// fuzzSupervisorWorks runs a function that fails at once under an accepted
// Supervisor, inside a synctest bubble (the Supervisor's clock is the
// bubble's): Run ends, every backoff is within the curve's bounds, and with
// only the budget on (and one of the package's curves) the key parks after
// exactly MaxRespawns + 1 runs.
func fuzzSupervisorWorks(r *fuzzRun, s *crashloop.Supervisor, cfg crashloop.SupervisorConfig, curveMax time.Duration) {
	synctest.Test(r.t, func(t *testing.T) {
		r := &fuzzRun{t: t, start: r.start, log: r.log}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		clk := &fuzzCountingClock{cancel: cancel}
		var mu sync.Mutex
		var backoffs []time.Duration
		s, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(clk),
			crashloop.WithEventHandler(crashloop.EventHandlerFunc(func(ev crashloop.Event) {
				if ev.Kind == crashloop.EventRespawnScheduled && !ev.Held { // a held respawn waits for the breaker
					mu.Lock()
					backoffs = append(backoffs, ev.Backoff)
					mu.Unlock()
				}
			})))
		if err != nil {
			r.fail("NewSupervisor in the bubble = %v", err)
		}
		const limit = 64
		runs := 0
		err = s.Run(ctx, "k", func(context.Context) error {
			runs++
			if runs >= limit {
				cancel()
			}
			return errFuzzBoom
		})
		var pe *crashloop.ParkedError
		if !errors.As(err, &pe) && !errors.Is(err, context.Canceled) {
			r.fail("Run = %v after %d runs, want a *ParkedError or context.Canceled", err, runs)
		}
		if clk.waits.Load() > fuzzWaitLimit && !fuzzKnownHoldForever(cfg, curveMax) {
			r.fail("Run waited %d times over %d runs: a livelock", clk.waits.Load(), runs)
		}
		for _, d := range backoffs {
			if curveMax >= 0 && (d < 0 || d > curveMax) {
				r.fail("a backoff of %v, outside [0, %v]", d, curveMax)
			}
		}
		onlyBudget := cfg.Fleet == nil && cfg.Guard == nil && cfg.HourlyCap == 0 && curveMax >= 0
		if onlyBudget && cfg.Budget.MaxRespawns < limit-1 && (pe == nil || runs != cfg.Budget.MaxRespawns+1) {
			r.fail("a crash loop under the budget alone: Run = %v after %d runs, want parked after %d", err, runs,
				cfg.Budget.MaxRespawns+1)
		}
	})
	_ = s.Status(context.Background())
}

// fuzzKnownEmptyKeyField tolerates the one rejection whose Field is not a
// path: an unknown key "" is reported as Field "" ("budget." when nested),
// since the Field of an unknown key is the key as written. Reported in issue
// 4; set to false once an empty key is named (e.g. `""` or the enclosing
// path).
const fuzzKnownEmptyKeyField = false

func FuzzConfigJSON(f *testing.F) {
	def, err := json.Marshal(crashloop.DefaultSupervisorConfig())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(def)
	for _, doc := range []string{
		`{}`, `null`, `[]`, `"x"`, `{"budget":{"max_respawns":0}}`, `{"guard":{}}`, `{"chain":null,"fleet":null}`,
		`{"backoff":{"kind":"exponential","jitter":"decorrelated"}}`, `{"backoff":{"kind":"linear","jitter":"full","initial":"1s","max":"2s"}}`,
		`{"budget":{"window":"1s","initial_backoff":"1s","max_backoff":"1s"}}`, `{"Budget":1}`, `{"budget":{"winDow":"1s"}}`,
		`{"fleet":{"failing_fraction":1e999}}`, `{"hourly_cap":1.5}`, `{"hourly_cap":-1}`, `{"healthy_after":"-1s"}`,
		`{"guard":{"max_restarts":0,"window":"0s"}}`, `{"backoff":{"kind":"exponential","factor":0.5}}`,
		`{"budget":{"max_respawns":9007199254740993}}`, `{"restart_on_clean_exit":"yes"}`, `{"budget":null}`,
		`{"fleet":{"restarts_per_hour":2,"cooldown":"0s"},"guard":{"max_restarts":5}}`,
		`{"exit_rules":["oom=park","1-9,12=restart","SIGKILL=stop","75=planned"]}`, `{"exit_rules":[]}`, `{"exit_rules":null}`,
		`{"exit_rules":["0=park"]}`, `{"exit_rules":[78]}`, `{"exit_rules":"78=park"}`, `{"exit_rules":["SIGFOO=stop"]}`,
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(fuzzConfigJSON)
}

// fuzzConfigJSON reads random documents as a SupervisorConfig: a rejected
// document is a *ConfigError naming a dotted path, an accepted one that
// NewSupervisor also accepts writes back the same document and works.
func fuzzConfigJSON(t *testing.T, data []byte) {
	r := newFuzzRun(t, nil)
	r.logf("UnmarshalJSON(%q)", data)
	cfg := crashloop.DefaultSupervisorConfig()
	if err := cfg.UnmarshalJSON(data); err != nil {
		var ce *crashloop.ConfigError
		if errors.As(err, &ce) && strings.Contains(ce.Rule, "unknown key") {
			// The Field of an unknown key is its path: the enclosing
			// setting, then the key as the user wrote it.
			path, key := "config", ce.Field
			for _, p := range []string{"budget", "chain", "fleet", "guard", "backoff"} {
				if strings.HasPrefix(ce.Field, p+".") {
					path, key = p, strings.TrimPrefix(ce.Field, p+".")
				}
			}
			if key == "" && !fuzzKnownEmptyKeyField {
				r.fail("UnmarshalJSON: an unknown key named by an empty Field %q (%v)", ce.Field, err)
			}
			err = &crashloop.ConfigError{Field: path, Value: ce.Value, Rule: ce.Rule}
		}
		r.rejected("UnmarshalJSON", err, "")
		return
	}
	s, err := crashloop.NewSupervisor(cfg)
	if err != nil {
		r.rejected("NewSupervisor", err, "")
		var ce *crashloop.ConfigError
		errors.As(err, &ce)
		if !fuzzSupervisorFields[ce.Field] {
			r.fail("NewSupervisor: Field %q names no setting of a SupervisorConfig", ce.Field)
		}
		return
	}
	out, err := json.Marshal(cfg)
	if err != nil {
		r.fail("Marshal of an accepted config = %v", err)
	}
	again := crashloop.DefaultSupervisorConfig()
	if err := again.UnmarshalJSON(out); err != nil {
		r.fail("UnmarshalJSON(%s) of its own output = %v", out, err)
	}
	if out2, _ := json.Marshal(again); string(out2) != string(out) {
		r.fail("a config does not survive a round trip:\n %s\n %s", out, out2)
	}
	if _, err := crashloop.NewSupervisor(again); err != nil {
		r.fail("NewSupervisor rejects the round trip of an accepted config: %v", err)
	}
	curveMax := cfg.Budget.MaxBackoff
	if cfg.Backoff != nil { // a curve read from JSON: its max as written back
		var doc struct {
			Backoff struct {
				Max string `json:"max"`
			} `json:"backoff"`
		}
		if err := json.Unmarshal(out, &doc); err != nil {
			r.fail("%s: %v", out, err)
		}
		d, err := time.ParseDuration(doc.Backoff.Max)
		if err != nil {
			r.fail("backoff.max of %s: %v", out, err)
		}
		curveMax = d
	}
	fuzzSupervisorWorks(r, s, cfg, curveMax)
}

// ---------------------------------------------------------------------------
// Snapshot and restore

// restore takes the snapshot data of an object into a new one (same config,
// a new mock clock at the same reading) through restoreAt: at the current
// time, or, when that is refused because the clock has gone back by more
// than an hour (the snapshot's skew) since the latest time the object was given, at that
// time, as snapshot.go documents.
func (r *fuzzRun) restore(what string, data []byte, restoreAt func(time.Time) error) {
	r.t.Helper()
	r.logf("%s: Snapshot(), then RestoreAt(it, %s) into a new object", what, r.at())
	if err := restoreAt(r.now); err != nil {
		if !errors.Is(err, crashloop.ErrBadSnapshot) || !r.latest.After(r.now.Add(time.Hour)) {
			r.fail("%s.RestoreAt(snapshot, %s) = %v\nsnapshot:\n%s", what, r.at(), err, data)
		}
		r.logf("  refused (%v); RestoreAt(it, %s)", err, fuzzTime(r.start, r.latest))
		if err := restoreAt(r.latest); err != nil {
			r.fail("%s.RestoreAt(snapshot, %s) = %v\nsnapshot:\n%s", what, fuzzTime(r.start, r.latest), err, data)
		}
	}
	r.restored = true
}

// snapshot takes a snapshot, which must not fail.
func (r *fuzzRun) snapshot(what string, snap func() ([]byte, error)) []byte {
	r.t.Helper()
	data, err := snap()
	if err != nil {
		r.fail("%s.Snapshot() = %v", what, err)
	}
	return data
}

func fuzzRestoreBudget(r *fuzzRun, b *crashloop.RespawnBudget, cfg crashloop.BudgetConfig) *crashloop.RespawnBudget {
	data := r.snapshot("RespawnBudget", b.Snapshot)
	fresh, err := crashloop.NewRespawnBudget(cfg, crashloop.WithClock(clock.NewMock()), crashloop.WithEventHandler(r))
	if err != nil {
		r.fail("NewRespawnBudget: %v", err)
	}
	r.restore("RespawnBudget", data, func(now time.Time) error { return fresh.RestoreAt(data, now) })
	return fresh
}

func fuzzRestoreChain(r *fuzzRun, d *crashloop.ChainDetector, cfg crashloop.ChainConfig) *crashloop.ChainDetector {
	data := r.snapshot("ChainDetector", d.Snapshot)
	fresh, err := crashloop.NewChainDetector(cfg, crashloop.WithClock(clock.NewMock()), crashloop.WithEventHandler(r))
	if err != nil {
		r.fail("NewChainDetector: %v", err)
	}
	r.restore("ChainDetector", data, func(now time.Time) error { return fresh.RestoreAt(data, now) })
	return fresh
}

func fuzzRestoreGuard(r *fuzzRun, g *crashloop.RestartLoopGuard, cfg crashloop.GuardConfig, name string) *crashloop.RestartLoopGuard {
	data := r.snapshot("RestartLoopGuard", g.Snapshot)
	fresh, err := crashloop.NewRestartLoopGuard(cfg.MaxRestarts, cfg.Window, crashloop.WithClock(clock.NewMock()),
		crashloop.WithEventHandler(r), crashloop.WithName(name))
	if err != nil {
		r.fail("NewRestartLoopGuard: %v", err)
	}
	r.restore("RestartLoopGuard", data, func(now time.Time) error { return fresh.RestoreAt(data, now) })
	return fresh
}

func fuzzRestoreFleet(r *fuzzRun, p *crashloop.FleetSupervisionPolicy, cfg crashloop.FleetConfig, name string) *crashloop.FleetSupervisionPolicy {
	data := r.snapshot("FleetSupervisionPolicy", p.Snapshot)
	fresh, err := crashloop.NewFleetSupervisionPolicy(cfg, crashloop.WithClock(clock.NewMock()),
		crashloop.WithEventHandler(r), crashloop.WithName(name))
	if err != nil {
		r.fail("NewFleetSupervisionPolicy: %v", err)
	}
	r.restore("FleetSupervisionPolicy", data, func(now time.Time) error { return fresh.RestoreAt(data, now) })
	return fresh
}
