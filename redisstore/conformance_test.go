package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/internal/redistest"
	"github.com/stretchr/testify/require"
)

// The conformance suite: the same calls, with the same explicit times, go to
// the library's in-memory guards and to the Lua kernels on a real
// redis-server, and every answer must be the same: return values, errors,
// counts, statuses and the events each side publishes (whole events, compared
// field by field). Random sequences come from fixed seeds; the hand-written
// cases pin the boundaries with exact values.
//
// Times are whole microseconds (the kernels' unit). Config durations need not
// be: the kernels round windows down and cooldowns up, which gives the same
// answers for ages in whole microseconds.
//
// The library keeps one latest time per shard of a budget or detector (a
// reading for one key may be raised by a later one for another key of the
// shard); Redis keeps one per key. Each key of a sequence therefore gets an
// in-memory guard of its own, whose only shard is that key's: both sides keep
// one latest time per key, and sequences can send time backwards freely.

// t0 is the time every sequence starts from.
var t0 = time.UnixMicro(1_800_000_000_000_000) // 2027-01-15

// conformanceGrace is the TTL grace of the suite's kernels: a day, so no key
// expires (in server time) while a sequence runs, however far its explicit
// times jump.
const conformanceGrace = 24 * time.Hour

var prefixSeq atomic.Int64

// testKernel returns a kernel on s with a prefix of its own.
func testKernel(t testing.TB, s *redistest.Server, serverTime bool) *kernel {
	ks, err := newKeyspace(fmt.Sprintf("t%d", prefixSeq.Add(1)))
	require.NoError(t, err)
	return &kernel{rdb: s.Client(nil), keys: ks, serverTime: serverTime, grace: conformanceGrace, timeout: 10 * time.Second}
}

func mockAt(t time.Time) *clock.Mock {
	m := clock.NewMock()
	m.Set(t)
	return m
}

// recorder keeps the events it is given (one goroutine only), and counts
// them by kind in seen, when set.
type recorder struct {
	evs  []crashloop.Event
	last []crashloop.Event // what take returned last: the events of the latest call
	seen map[crashloop.EventKind]int
}

func (r *recorder) HandleEvent(ev crashloop.Event) {
	r.evs = append(r.evs, ev)
	if r.seen != nil {
		r.seen[ev.Kind]++
	}
}

// requireSeen checks that random sequences reached every outcome that
// matters, at least min times each: a suite that never parks proves nothing
// about parking.
func requireSeen(t *testing.T, seen map[crashloop.EventKind]int, min int, kinds ...crashloop.EventKind) {
	t.Helper()
	for _, k := range kinds {
		require.GreaterOrEqual(t, seen[k], min, "%v events in all sequences", k)
	}
	t.Logf("events seen: %v", seen)
}

func (r *recorder) take() []crashloop.Event {
	evs := r.evs
	r.evs, r.last = nil, evs
	return evs
}

// event is an Event in comparable form: times as microseconds, errors as
// their text (nil apart from an empty message).
type event struct {
	Kind             crashloop.EventKind
	Key, Inc, Reason string
	Time             int64
	Err              string
	Attempts, Limit  int
	Window, Backoff  time.Duration
	Failing, Total   int
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return "error: " + err.Error()
}

func norm(evs []crashloop.Event) []event {
	out := []event{}
	for _, e := range evs {
		out = append(out, event{Kind: e.Kind, Key: e.Key, Inc: e.Incarnation, Reason: e.Reason, Time: e.Time.UnixMicro(),
			Err: errText(e.LastError), Attempts: e.Attempts, Limit: e.Limit, Window: e.Window, Backoff: e.Backoff,
			Failing: e.Failing, Total: e.Total})
	}
	return out
}

// parkText is a *ParkedError in comparable form.
func parkText(pe *crashloop.ParkedError) string {
	if pe == nil {
		return "<not parked>"
	}
	return fmt.Sprintf("key=%q reason=%q cause=%s attempts=%d since=%d", pe.Key, pe.Reason, errText(pe.LastError), pe.Attempts, pe.Since.UnixMicro())
}

func asPark(err error) *crashloop.ParkedError {
	var pe *crashloop.ParkedError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// trace is the calls of a sequence so far, printed when a comparison fails.
type trace struct{ lines []string }

func (tr *trace) add(format string, args ...any) {
	tr.lines = append(tr.lines, fmt.Sprintf(format, args...))
}

func (tr *trace) String() string {
	lines := tr.lines
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return "calls (last 40):\n  " + strings.Join(lines, "\n  ")
}

// pair is what every comparison holds: the test, the kernel, the in-memory
// side's events and the calls so far.
type pair struct {
	t   testing.TB
	k   *kernel
	rec *recorder
	tr  trace
}

func newPair(t testing.TB, k *kernel) pair { return pair{t: t, k: k, rec: &recorder{}} }

// perKey gives each key an in-memory guard of its own, made on first use.
type perKey[G any] struct {
	m    map[string]G
	make func() (G, error)
}

func (p *perKey[G]) get(t testing.TB, key string) G {
	g, ok := p.m[key]
	if !ok {
		var err error
		g, err = p.make()
		require.NoError(t, err)
		if p.m == nil {
			p.m = map[string]G{}
		}
		p.m[key] = g
	}
	return g
}

// --- RespawnBudget ---

// budgetPair runs each budget call on both sides, compares, and returns the
// in-memory answer.
type budgetPair struct {
	pair
	cfg crashloop.BudgetConfig
	mem perKey[*crashloop.RespawnBudget]
}

func newBudgetPair(t testing.TB, k *kernel, cfg crashloop.BudgetConfig) *budgetPair {
	p := &budgetPair{pair: newPair(t, k), cfg: cfg}
	p.mem.make = func() (*crashloop.RespawnBudget, error) {
		return crashloop.NewRespawnBudget(cfg, crashloop.WithClock(mockAt(t0)), crashloop.WithEventHandler(p.rec))
	}
	return p
}

func (p *budgetPair) budget(key string) *crashloop.RespawnBudget { return p.mem.get(p.t, key) }

func (p *budgetPair) failed(key string, cause error, now time.Time) (time.Duration, error) {
	p.tr.add("FailedAt(%q, %s, %d)", key, errText(cause), now.UnixMicro())
	backoff, err := p.budget(key).FailedAt(key, cause, now)
	memEvs := p.rec.take()
	d, kerr := p.k.budgetFailed(context.Background(), p.cfg, key, cause, now)
	require.NoError(p.t, kerr)
	var rBackoff time.Duration
	if d.park == nil {
		rBackoff = linearBackoff(p.cfg, d.attempt)
	}
	require.Equal(p.t, backoff, rBackoff, "backoff\n%s", &p.tr)
	require.Equal(p.t, parkText(asPark(err)), parkText(d.park), "park\n%s", &p.tr)
	require.Equal(p.t, err == nil, d.park == nil, "%v\n%s", err, &p.tr)
	require.Equal(p.t, norm(memEvs), norm(d.events(key, p.cfg, cause, rBackoff)), "events\n%s", &p.tr)
	return backoff, err
}

func (p *budgetPair) spawn(key string) error {
	p.tr.add("Spawn(%q)", key)
	err := p.budget(key).Spawn(key)
	pe, kerr := p.k.budgetSpawn(context.Background(), key)
	require.NoError(p.t, kerr)
	require.Equal(p.t, parkText(asPark(err)), parkText(pe), "Spawn\n%s", &p.tr)
	p.listed()
	return err
}

// listed compares Parked: every key's guard's on one side, the set of
// parked keys on the other.
func (p *budgetPair) listed() {
	want := []string{}
	for _, b := range p.mem.m {
		want = append(want, b.Parked()...)
	}
	slices.Sort(want)
	got, err := p.k.parkedKeys(context.Background())
	require.NoError(p.t, err)
	require.Equal(p.t, want, append([]string{}, got...), "Parked\n%s", &p.tr)
}

func (p *budgetPair) respawns(key string, now time.Time) int {
	p.tr.add("RespawnsAt(%q, %d)", key, now.UnixMicro())
	n := p.budget(key).RespawnsAt(key, now)
	rn, pe, err := p.k.budgetView(context.Background(), p.cfg, key, now)
	require.NoError(p.t, err)
	require.Equal(p.t, n, rn, "RespawnsAt\n%s", &p.tr)
	require.Equal(p.t, p.budget(key).IsParked(key), pe != nil, "parked\n%s", &p.tr)
	return n
}

func (p *budgetPair) resume(key string, now time.Time) error {
	p.tr.add("ResumeAt(%q, %d)", key, now.UnixMicro())
	err := p.budget(key).ResumeAt(key, now)
	memEvs := p.rec.take()
	ev, ok, kerr := p.k.budgetResume(context.Background(), p.cfg, key, now)
	require.NoError(p.t, kerr)
	require.Equal(p.t, err == nil, ok, "ResumeAt: %v\n%s", err, &p.tr)
	require.Equal(p.t, errors.Is(err, crashloop.ErrNotParked), !ok)
	var evs []crashloop.Event
	if ok {
		evs = append(evs, ev)
	}
	require.Equal(p.t, norm(memEvs), norm(evs), "events\n%s", &p.tr)
	return err
}

func (p *budgetPair) forget(key string) {
	p.tr.add("Forget(%q)", key)
	p.budget(key).Forget(key)
	require.Empty(p.t, p.rec.take(), "Forget announces nothing")
	require.NoError(p.t, p.k.budgetForget(context.Background(), p.cfg, key))
}

// --- ChainDetector ---

type chainPair struct {
	pair
	cfg crashloop.ChainConfig
	mem perKey[*crashloop.ChainDetector]
}

func newChainPair(t testing.TB, k *kernel, cfg crashloop.ChainConfig) *chainPair {
	p := &chainPair{pair: newPair(t, k), cfg: cfg}
	p.mem.make = func() (*crashloop.ChainDetector, error) {
		return crashloop.NewChainDetector(cfg, crashloop.WithClock(mockAt(t0)), crashloop.WithEventHandler(p.rec))
	}
	return p
}

func (p *chainPair) detector(key string) *crashloop.ChainDetector { return p.mem.get(p.t, key) }

func (p *chainPair) rescue(key, inc string, reactive bool, now time.Time) (int, error) {
	p.tr.add("RescueAt(%q, %q, %v, %d)", key, inc, reactive, now.UnixMicro())
	n, err := p.detector(key).RescueAt(key, inc, reactive, now)
	memEvs := p.rec.take()
	d, kerr := p.k.chainRescue(context.Background(), p.cfg, key, inc, reactive, now)
	require.NoError(p.t, kerr)
	require.Equal(p.t, n, d.chain, "chain\n%s", &p.tr)
	require.Equal(p.t, errors.Is(err, crashloop.ErrNeedsHuman), d.needsHuman, "needs human: %v\n%s", err, &p.tr)
	require.Equal(p.t, err == nil, !d.needsHuman, "%v\n%s", err, &p.tr)
	require.Equal(p.t, norm(memEvs), norm(d.events(key, p.cfg)), "events\n%s", &p.tr)
	return n, err
}

func (p *chainPair) chain(key, inc string, now time.Time) int {
	p.tr.add("ChainAt(%q, %q, %d)", key, inc, now.UnixMicro())
	n := p.detector(key).ChainAt(key, inc, now)
	rn, err := p.k.chainView(context.Background(), p.cfg, key, inc, now)
	require.NoError(p.t, err)
	require.Equal(p.t, n, rn, "ChainAt\n%s", &p.tr)
	m, err := p.k.chainMarked(context.Background(), key)
	require.NoError(p.t, err)
	require.Equal(p.t, p.detector(key).IsNeedsHuman(key), m, "IsNeedsHuman\n%s", &p.tr)
	want := []string{}
	for _, d := range p.mem.m {
		want = append(want, d.NeedsHuman()...)
	}
	slices.Sort(want)
	got, err := p.k.needsHumanKeys(context.Background())
	require.NoError(p.t, err)
	require.Equal(p.t, want, append([]string{}, got...), "NeedsHuman\n%s", &p.tr)
	return n
}

func (p *chainPair) clear(key string) {
	p.tr.add("Clear(%q)", key)
	p.detector(key).Clear(key)
	require.Empty(p.t, p.rec.take(), "Clear announces nothing")
	require.NoError(p.t, p.k.chainClear(context.Background(), p.cfg, key))
}

// --- RestartLoopGuard ---

type guardPair struct {
	pair
	cfg  crashloop.GuardConfig
	mem  *crashloop.RestartLoopGuard
	name string
}

func newGuardPair(t testing.TB, k *kernel, cfg crashloop.GuardConfig) *guardPair {
	p := &guardPair{pair: newPair(t, k), cfg: cfg, name: "telegram"}
	g, err := crashloop.NewRestartLoopGuard(cfg.MaxRestarts, cfg.Window, crashloop.WithClock(mockAt(t0)),
		crashloop.WithEventHandler(p.rec), crashloop.WithName(p.name))
	require.NoError(t, err)
	p.mem = g
	return p
}

func (p *guardPair) record(now time.Time) bool {
	p.tr.add("RecordAt(%d)", now.UnixMicro())
	tripped := p.mem.RecordAt(now)
	memEvs := p.rec.take()
	d, err := p.k.guardRecord(context.Background(), p.cfg, p.name, now)
	require.NoError(p.t, err)
	require.Equal(p.t, tripped, d.tripped, "RecordAt\n%s", &p.tr)
	require.Equal(p.t, norm(memEvs), norm(d.events(p.name, p.cfg)), "events\n%s", &p.tr)
	return tripped
}

// view compares TrippedAt and RestartsAt (one kernel call answers both).
func (p *guardPair) view(now time.Time) int {
	p.tr.add("TrippedAt/RestartsAt(%d)", now.UnixMicro())
	tripped, n := p.mem.TrippedAt(now), p.mem.RestartsAt(now)
	rn, err := p.k.guardView(context.Background(), p.cfg, p.name, now)
	require.NoError(p.t, err)
	require.Equal(p.t, n, rn, "RestartsAt\n%s", &p.tr)
	require.Equal(p.t, tripped, rn >= p.cfg.MaxRestarts, "TrippedAt\n%s", &p.tr)
	return n
}

func (p *guardPair) reset() {
	p.tr.add("Reset()")
	p.mem.Reset()
	require.Empty(p.t, p.rec.take(), "Reset announces nothing")
	require.NoError(p.t, p.k.guardReset(context.Background(), p.name))
}

// --- FleetSupervisionPolicy ---

type fleetPair struct {
	pair
	cfg  crashloop.FleetConfig
	mem  *crashloop.FleetSupervisionPolicy
	name string
}

func newFleetPair(t testing.TB, k *kernel, cfg crashloop.FleetConfig) *fleetPair {
	p := &fleetPair{pair: newPair(t, k), cfg: cfg, name: "fleet"}
	f, err := crashloop.NewFleetSupervisionPolicy(cfg, crashloop.WithClock(mockAt(t0)),
		crashloop.WithEventHandler(p.rec), crashloop.WithName(p.name))
	require.NoError(t, err)
	p.mem = f
	return p
}

func (p *fleetPair) check(what string, tripped bool, d fleetDecision) {
	p.t.Helper()
	memEvs := p.rec.take()
	require.Equal(p.t, tripped, d.tripped, "%s\n%s", what, &p.tr)
	require.Equal(p.t, norm(memEvs), norm(d.events(p.name, p.cfg)), "%s events\n%s", what, &p.tr)
}

func (p *fleetPair) restart(now time.Time) bool {
	p.tr.add("NoteRestartAt(%d)", now.UnixMicro())
	tripped := p.mem.NoteRestartAt(now)
	d, err := p.k.fleetRestart(context.Background(), p.cfg, p.name, now)
	require.NoError(p.t, err)
	p.check("NoteRestartAt", tripped, d)
	return tripped
}

func (p *fleetPair) state(failing, total int, now time.Time) bool {
	p.tr.add("NoteFleetStateAt(%d, %d, %d)", failing, total, now.UnixMicro())
	tripped := p.mem.NoteFleetStateAt(failing, total, now)
	d, err := p.k.fleetState(context.Background(), p.cfg, p.name, "", failing, total, 0, now)
	require.NoError(p.t, err)
	p.check("NoteFleetStateAt", tripped, d)
	return tripped
}

func (p *fleetPair) tripped(now time.Time) bool {
	p.tr.add("TrippedAt(%d)", now.UnixMicro())
	tripped := p.mem.TrippedAt(now)
	d, err := p.k.fleetTripped(context.Background(), p.cfg, p.name, now)
	require.NoError(p.t, err)
	p.check("TrippedAt", tripped, d)
	return tripped
}

func statusText(st crashloop.FleetStatus) string {
	rearm := "none"
	if st.RearmAt != nil {
		rearm = fmt.Sprint(st.RearmAt.UnixNano())
	}
	return fmt.Sprintf("tripped=%v limit=%d failing=%d total=%d hour=%d rearm=%s", st.BreakerTripped,
		st.FleetRestartsPerHour, st.FailingChannels, st.TotalChannels, st.RestartsInHour, rearm)
}

func (p *fleetPair) status(now time.Time) crashloop.FleetStatus {
	p.tr.add("StatusAt(%d)", now.UnixMicro())
	st := p.mem.StatusAt(now)
	rst, d, err := p.k.fleetStatus(context.Background(), p.cfg, p.name, now)
	require.NoError(p.t, err)
	p.check("StatusAt", st.BreakerTripped, d)
	require.Equal(p.t, statusText(st), statusText(rst), "StatusAt\n%s", &p.tr)
	return st
}

func (p *fleetPair) reset() {
	p.tr.add("Reset()")
	p.mem.Reset()
	require.Empty(p.t, p.rec.take(), "Reset announces nothing")
	require.NoError(p.t, p.k.fleetReset(context.Background(), p.cfg, p.name))
}

// --- random sequences ---

// timeline moves a sequence's time by steps drawn around the spans that
// matter (a window, a gap, a cooldown, the hour): 0, 1µs, span-1µs, span,
// span+1µs, a random part of two spans, and now and then backwards.
type timeline struct {
	rng   *rand.Rand
	now   time.Time
	spans []int64 // µs
}

func (tl *timeline) next() time.Time {
	span := tl.spans[tl.rng.IntN(len(tl.spans))]
	var d int64
	switch tl.rng.IntN(10) {
	case 0, 1:
		d = 0
	case 2:
		d = 1
	case 3:
		d = span - 1
	case 4:
		d = span
	case 5:
		d = span + 1
	case 6:
		d = -tl.rng.Int64N(span + 2) // backwards: read as the latest time
	default:
		d = tl.rng.Int64N(2*span + 1)
	}
	tl.now = tl.now.Add(time.Duration(d) * time.Microsecond)
	return tl.now
}

// randomSpan returns a duration of about base µs, often not a whole number
// of microseconds, so that the kernels' rounding is exercised.
func randomSpan(rng *rand.Rand, base int64) time.Duration {
	d := time.Duration(1+rng.Int64N(base)) * time.Microsecond
	if rng.IntN(2) == 0 {
		d += time.Duration(rng.Int64N(1000)) // ns
	}
	return d
}

func causeOf(rng *rand.Rand) error {
	switch rng.IntN(3) {
	case 0:
		return nil
	case 1:
		return errors.New("")
	}
	return fmt.Errorf("exit status %d", rng.IntN(3))
}

const (
	sequences = 100 // per guard
	calls     = 60  // per sequence
)

func TestConformanceBudgetRandom(t *testing.T) {
	s := redistest.Start(t)
	rng := rand.New(rand.NewPCG(1, 11))
	keys := []string{"a", "b", "c{x}"}
	seen := map[crashloop.EventKind]int{}
	for range sequences {
		n := rng.IntN(5)
		window := randomSpan(rng, 5_000)
		init := window / time.Duration(max(1, n*(n+1)))
		cfg := crashloop.BudgetConfig{MaxRespawns: n, Window: window, InitialBackoff: init, MaxBackoff: init * time.Duration(1+rng.IntN(3))}
		p := newBudgetPair(t, testKernel(t, s, false), cfg)
		p.rec.seen = seen
		tl := &timeline{rng: rng, now: t0, spans: []int64{micros(window), micros(window) / 3}}
		for range calls {
			key := keys[rng.IntN(len(keys))]
			switch r := rng.IntN(20); {
			case r < 13:
				p.failed(key, causeOf(rng), tl.next())
			case r < 15:
				p.respawns(key, tl.next())
			case r < 17:
				p.spawn(key)
			case r < 19:
				_ = p.resume(key, tl.next())
			default:
				p.forget(key)
			}
		}
	}
	requireSeen(t, seen, 50, crashloop.EventRespawnScheduled, crashloop.EventStartupExhausted, crashloop.EventResumed)
}

func TestConformanceChainRandom(t *testing.T) {
	s := redistest.Start(t)
	rng := rand.New(rand.NewPCG(2, 22))
	keys := []string{"seat-1", "seat-2"}
	incs := []string{"i1", "i2"}
	seen := map[crashloop.EventKind]int{}
	for range sequences {
		cfg := crashloop.ChainConfig{MaxChain: 1 + rng.IntN(4), ResetGap: randomSpan(rng, 5_000)}
		p := newChainPair(t, testKernel(t, s, false), cfg)
		p.rec.seen = seen
		tl := &timeline{rng: rng, now: t0, spans: []int64{micros(cfg.ResetGap)}}
		for range calls {
			key := keys[rng.IntN(len(keys))]
			inc := incs[0]
			if rng.IntN(6) == 0 {
				inc = incs[1]
			}
			switch r := rng.IntN(20); {
			case r < 15:
				_, _ = p.rescue(key, inc, rng.IntN(5) != 0, tl.next())
			case r < 19:
				p.chain(key, inc, tl.next())
			default:
				p.clear(key)
			}
		}
	}
	requireSeen(t, seen, 50, crashloop.EventChainEscalated)
}

func TestConformanceGuardRandom(t *testing.T) {
	s := redistest.Start(t)
	rng := rand.New(rand.NewPCG(3, 33))
	seen := map[crashloop.EventKind]int{}
	for range sequences {
		cfg := crashloop.GuardConfig{MaxRestarts: 1 + rng.IntN(5), Window: randomSpan(rng, 5_000)}
		p := newGuardPair(t, testKernel(t, s, false), cfg)
		p.rec.seen = seen
		tl := &timeline{rng: rng, now: t0, spans: []int64{micros(cfg.Window), micros(cfg.Window) / 4}}
		for range calls {
			switch r := rng.IntN(20); {
			case r < 14:
				p.record(tl.next())
			case r < 19:
				p.view(tl.next())
			default:
				p.reset()
			}
		}
	}
	requireSeen(t, seen, 50, crashloop.EventGuardTripped)
}

func TestConformanceFleetRandom(t *testing.T) {
	s := redistest.Start(t)
	rng := rand.New(rand.NewPCG(4, 44))
	fractions := []float64{0.5, 1.0 / 3, 1, 0.25, 0.7, 0.1}
	hour := micros(time.Hour)
	seen := map[crashloop.EventKind]int{}
	for range sequences {
		cfg := crashloop.FleetConfig{RestartsPerHour: 1 + rng.IntN(6), FailingFraction: fractions[rng.IntN(len(fractions))],
			MinFailing: 1 + rng.IntN(3), Cooldown: randomSpan(rng, 5_000)}
		if rng.IntN(8) == 0 {
			cfg.Cooldown = 0
		}
		p := newFleetPair(t, testKernel(t, s, false), cfg)
		p.rec.seen = seen
		tl := &timeline{rng: rng, now: t0, spans: []int64{micros(cfg.Cooldown), hour, hour / 7}}
		for range calls {
			switch r := rng.IntN(20); {
			case r < 10:
				p.restart(tl.next())
			case r < 15:
				total := rng.IntN(7) - 1
				p.state(rng.IntN(total+3)-1, total, tl.next())
			case r < 17:
				p.tripped(tl.next())
			case r < 19:
				p.status(tl.next())
			default:
				p.reset()
			}
		}
	}
	requireSeen(t, seen, 50, crashloop.EventFleetTripped, crashloop.EventFleetRearmed)
}
