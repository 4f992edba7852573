package crashloop

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/crashloopguard/crashloop/internal/satsum"
	"github.com/crashloopguard/crashloop/internal/settings"
)

// Backoff is a restart delay curve: how long a Supervisor waits before the
// attempt-th restart in a row (1 for the first).
//
// The curves of this package are Linear (the default, the RespawnBudget's
// curve), Exponential (the Kubernetes and Docker curve), and the jitters
// FullJitter, EqualJitter and DecorrelatedJitter from the AWS "Exponential
// Backoff And Jitter" analysis. They are safe for concurrent use and never
// panic or overflow; a Supervisor checks their settings when it is created.
// A Backoff of your own must be safe for concurrent use, must not call back
// into the Supervisor, and is not checked for a budget that can never park.
// A nil Backoff in a SupervisorConfig means the default,
// Linear(Budget.InitialBackoff, Budget.MaxBackoff).
type Backoff interface {
	// Delay returns the wait before restart attempt (>= 1), given the
	// previous wait of the same key (0 before the first).
	Delay(attempt int, prev time.Duration) time.Duration
}

// curve is what the package's own curves add to Backoff: their settings can
// be checked, summed at their worst case, and written to a config file.
type curve interface {
	Backoff
	validate() error
	// worst returns the longest wait the curve may give for attempt, and
	// the wait it settles at for every attempt from then on (or -1 if it
	// has not settled yet).
	worst(attempt int) time.Duration
	spec() backoffSpec
}

// randSource is the random source of the jittered curves: a *rand.Rand of
// math/rand/v2, or the global source.
type randSource interface {
	Int64N(n int64) int64
}

type globalSource struct{}

func (globalSource) Int64N(n int64) int64 { return rand.Int64N(n) }

// lockedSource serializes a randSource and draws in [lo, hi].
type lockedSource struct {
	mu  sync.Mutex
	src randSource
}

func newLockedSource(src *rand.Rand) *lockedSource {
	if src == nil {
		return &lockedSource{src: globalSource{}}
	}
	return &lockedSource{src: src}
}

func (l *lockedSource) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	span := int64(hi - lo)
	if span == math.MaxInt64 {
		span-- // Int64N(n) draws in [0, n): keep n+1 from overflowing
	}
	l.mu.Lock()
	r := l.src.Int64N(span + 1)
	l.mu.Unlock()
	return lo + time.Duration(r)
}

// Linear returns the curve min(initial*attempt, max): 500ms, 1s, 1.5s ... 5s
// with the budget's defaults. It is the RespawnBudget's curve and the
// Supervisor's default.
func Linear(initial, max time.Duration) Backoff { return newLinear(initial, max) }

type linearCurve struct {
	initial, max time.Duration
	steps        int64 // the last attempt below the cap: max/initial, divided once here
}

func newLinear(initial, max time.Duration) linearCurve {
	steps := int64(math.MaxInt64)
	if initial > 0 {
		steps = int64(max / initial)
	}
	return linearCurve{initial: initial, max: max, steps: steps}
}

// Delay returns min(initial*attempt, max) for attempt >= 1 (0 before), without
// overflow for any input.
func (c linearCurve) Delay(attempt int, _ time.Duration) time.Duration {
	switch {
	case c.initial <= 0 || attempt <= 0:
		return 0
	case int64(attempt) > c.steps:
		return c.max
	}
	return c.initial * time.Duration(attempt)
}

func (c linearCurve) validate() error { return checkSpan(c.initial, c.max) }

// checkSpan is the rule every curve of this package shares: 0 <= initial <=
// max, reported by the field names of the backoff config block.
func checkSpan(initial, max time.Duration) error {
	switch {
	case initial < 0:
		return &ConfigError{Field: "initial", Value: initial, Rule: ">= 0"}
	case max < initial:
		return &ConfigError{Field: "max", Value: max, Rule: fmt.Sprintf(">= initial (%v)", initial)}
	}
	return nil
}

func (c linearCurve) worst(attempt int) time.Duration { return c.Delay(attempt, 0) }
func (c linearCurve) spec() backoffSpec {
	return backoffSpec{Kind: "linear", Initial: c.initial, Max: c.max}
}

// Exponential returns the curve min(max, initial*factor^(attempt-1)): with
// 10s, 2 and 300s it is the kubelet's 10s, 20s, 40s ... 300s. factor must be
// >= 1.
func Exponential(initial time.Duration, factor float64, max time.Duration) Backoff {
	return expCurve{initial: initial, factor: factor, max: max}
}

type expCurve struct {
	initial time.Duration
	factor  float64
	max     time.Duration
}

func (c expCurve) Delay(attempt int, _ time.Duration) time.Duration {
	if attempt < 1 || c.initial <= 0 {
		return max(c.initial, 0)
	}
	d := float64(c.initial) * math.Pow(c.factor, float64(attempt-1))
	if math.IsNaN(d) || d >= float64(c.max) {
		return c.max
	}
	return time.Duration(d)
}

func (c expCurve) validate() error {
	if c.initial >= 0 && (math.IsNaN(c.factor) || math.IsInf(c.factor, 0) || c.factor < 1) {
		// factor comes between initial and max in the config block
		return &ConfigError{Field: "factor", Value: c.factor, Rule: ">= 1 and finite"}
	}
	return checkSpan(c.initial, c.max)
}

func (c expCurve) worst(attempt int) time.Duration { return c.Delay(attempt, 0) }
func (c expCurve) spec() backoffSpec {
	return backoffSpec{Kind: "exponential", Initial: c.initial, Factor: c.factor, Max: c.max}
}

// FullJitter returns b with full jitter: a wait drawn uniformly from
// [0, b.Delay]. Workers that failed together then do not restart in
// lockstep. src may be nil (the global source).
func FullJitter(b Backoff, src *rand.Rand) Backoff {
	return jitterCurve{inner: b, equal: false, src: newLockedSource(src)}
}

// EqualJitter returns b with equal jitter: half of b.Delay plus a wait drawn
// uniformly from [0, half]. src may be nil (the global source).
func EqualJitter(b Backoff, src *rand.Rand) Backoff {
	return jitterCurve{inner: b, equal: true, src: newLockedSource(src)}
}

type jitterCurve struct {
	inner Backoff
	equal bool
	src   *lockedSource
}

func (c jitterCurve) Delay(attempt int, prev time.Duration) time.Duration {
	if c.inner == nil {
		return 0
	}
	d := max(c.inner.Delay(attempt, prev), 0)
	if c.equal {
		return d/2 + c.src.between(0, d-d/2)
	}
	return c.src.between(0, d)
}

func (c jitterCurve) validate() error {
	if c.inner == nil {
		return &ConfigError{Field: "jitter", Value: nil, Rule: "a curve to jitter"}
	}
	if in, ok := c.inner.(curve); ok {
		return in.validate()
	}
	return nil
}

func (c jitterCurve) worst(attempt int) time.Duration {
	if in, ok := c.inner.(curve); ok {
		return in.worst(attempt)
	}
	return -1
}

func (c jitterCurve) spec() backoffSpec {
	sp := backoffSpec{Kind: "custom"}
	if in, ok := c.inner.(curve); ok {
		sp = in.spec()
	}
	sp.Jitter = "full"
	if c.equal {
		sp.Jitter = "equal"
	}
	return sp
}

// DecorrelatedJitter returns the curve random in [base, min(max, prev*3)],
// drawn uniformly, where prev is the key's previous wait, or base before the
// first: each wait depends on the previous one, so workers that failed
// together spread out further with every attempt, the first one included.
// (Capping the range rather than the draw, as AWS's min(max, random(base,
// prev*3)) does, keeps the waits from piling up at max.) src may be nil (the
// global source).
func DecorrelatedJitter(base, max time.Duration, src *rand.Rand) Backoff {
	return decorrelatedCurve{base: base, max: max, src: newLockedSource(src)}
}

type decorrelatedCurve struct {
	base, max time.Duration
	src       *lockedSource
}

func (c decorrelatedCurve) Delay(_ int, prev time.Duration) time.Duration {
	if prev <= 0 {
		prev = c.base
	}
	return c.src.between(max(c.base, 0), c.triple(prev))
}

// triple returns min(max, 3*d) without overflow.
func (c decorrelatedCurve) triple(d time.Duration) time.Duration {
	if d >= c.max/3 {
		return c.max
	}
	return 3 * d
}

func (c decorrelatedCurve) validate() error { return checkSpan(c.base, c.max) }

// worst: the longest chain of draws is 3*base, 9*base ... capped.
func (c decorrelatedCurve) worst(attempt int) time.Duration {
	d := c.triple(c.base)
	for i := 1; i < attempt && d > 0 && d < c.max; i++ { // 0 stays 0; else it triples to max within ~40 steps
		d = c.triple(d)
	}
	return d
}

func (c decorrelatedCurve) spec() backoffSpec {
	return backoffSpec{Kind: "exponential", Initial: c.base, Factor: 3, Max: c.max, Jitter: "decorrelated"}
}

// checkCanPark rejects a budget that a crash loop can never exhaust: when the
// first n backoffs add up to more than window (sum, in nanoseconds,
// saturated at math.MaxUint64), the first respawn has aged out before the
// window fills (the systemd trap of RestartSec=10s with
// StartLimitIntervalSec=10s). field names the window in the error.
func checkCanPark(field string, window time.Duration, n int, sum uint64) error {
	if window < 0 || sum > uint64(window) {
		return &ConfigError{Field: field, Value: window,
			Rule: fmt.Sprintf(">= the sum of the first %d backoffs (%s), or a crash loop never parks", n, satsum.Text(sum))}
	}
	return nil
}

// worstSum returns the sum of the longest waits of attempts 1..n, saturated
// as linearSum's, with ok false if the curve is not one of this package's.
// Once the worst wait reaches the curve's cap the rest is multiplied out; a
// curve still growing after 1<<16 steps is summed as if it stopped there (a
// lower bound).
func worstSum(b Backoff, n int) (sum uint64, ok bool) {
	c, ok := b.(curve)
	if !ok {
		return 0, false
	}
	if l, ok := c.(linearCurve); ok {
		return satsum.Linear(l.initial, l.max, n), true
	}
	capAt := c.spec().Max
	for i := 1; i <= n; i++ {
		d := c.worst(i)
		if d < 0 {
			return 0, false
		}
		if d >= capAt || i >= 1<<16 {
			return satsum.Add(sum, satsum.Mul(uint64(d), uint64(n-i+1))), true
		}
		sum = satsum.Add(sum, uint64(d))
	}
	return sum, true
}

// backoffSpec is the JSON form of a curve of this package:
//
//	{"kind": "exponential", "initial": "1s", "factor": 2, "max": "5m", "jitter": "full"}
//
// kind is "linear" (the default) or "exponential"; jitter is "none" (the
// default), "full", "equal" or "decorrelated" (which needs kind exponential
// and ignores factor). An omitted initial or max takes the budget's.
type backoffSpec struct {
	Kind    string
	Initial time.Duration
	Factor  float64
	Max     time.Duration
	Jitter  string
}

func (sp *backoffSpec) settings() []settings.Setting {
	return []settings.Setting{
		settings.String("kind", &sp.Kind, nil),
		settings.Duration("initial", &sp.Initial, nil),
		settings.Float("factor", &sp.Factor, nil),
		settings.Duration("max", &sp.Max, nil),
		settings.String("jitter", &sp.Jitter, nil),
	}
}

// MarshalJSON writes the spec; factor only where it applies, jitter only
// when there is one.
func (sp backoffSpec) MarshalJSON() ([]byte, error) {
	var ss []settings.Setting
	for _, s := range sp.settings() {
		switch {
		case s.Name == "factor" && (sp.Kind != "exponential" || sp.Jitter == "decorrelated"):
		case s.Name == "jitter" && sp.Jitter == "":
		default:
			ss = append(ss, s)
		}
	}
	return settings.Marshal(ss)
}

// decodeBackoff reads a backoff object into a curve; budget's initial and
// max backoffs fill the ones it omits. null means the default curve (nil).
func decodeBackoff(raw json.RawMessage, path string, initial, max time.Duration) (Backoff, error) {
	if settings.IsNull(raw) {
		return nil, nil
	}
	sp := backoffSpec{Initial: -1, Max: -1}
	if err := decodeSettings(raw, path, sp.settings()); err != nil {
		return nil, err
	}
	if sp.Initial < 0 {
		sp.Initial = initial
	}
	if sp.Max < 0 {
		sp.Max = max
	}
	b, err := sp.build(nil)
	if err != nil {
		return nil, prefixed(path, err)
	}
	return b, nil
}

// build turns a spec into a curve.
func (sp backoffSpec) build(src *rand.Rand) (Backoff, error) {
	var b Backoff
	switch sp.Kind {
	case "", "linear":
		if sp.Jitter == "decorrelated" {
			return nil, &ConfigError{Field: "jitter", Value: sp.Jitter, Rule: `"decorrelated" only with kind "exponential"`}
		}
		b = Linear(sp.Initial, sp.Max)
	case "exponential":
		if sp.Factor == 0 {
			sp.Factor = 2
		}
		b = Exponential(sp.Initial, sp.Factor, sp.Max)
	default:
		return nil, &ConfigError{Field: "kind", Value: sp.Kind, Rule: `"linear" or "exponential"`}
	}
	switch sp.Jitter {
	case "", "none":
	case "full":
		b = FullJitter(b, src)
	case "equal":
		b = EqualJitter(b, src)
	case "decorrelated":
		b = DecorrelatedJitter(sp.Initial, sp.Max, src)
	default:
		return nil, &ConfigError{Field: "jitter", Value: sp.Jitter, Rule: `"none", "full", "equal" or "decorrelated"`}
	}
	return b, nil
}
