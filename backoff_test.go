package crashloop_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seededRand returns the random source every jitter test uses; the expected
// values are drawn from a second source with the same seed.
func seededRand() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

func TestCurveLinear(t *testing.T) {
	b := crashloop.Linear(500*time.Millisecond, 5*time.Second)
	for attempt := 1; attempt <= 12; attempt++ {
		want := min(time.Duration(attempt)*500*time.Millisecond, 5*time.Second)
		assert.Equal(t, want, b.Delay(attempt, 0), "attempt %d", attempt)
	}
	assert.Equal(t, []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond, 2 * time.Second},
		[]time.Duration{b.Delay(1, 0), b.Delay(2, 0), b.Delay(3, 0), b.Delay(4, 0)})
	assert.Equal(t, 5*time.Second, b.Delay(math.MaxInt, 0), "no overflow")
	assert.Equal(t, time.Duration(0), b.Delay(0, 0))
	assert.Equal(t, time.Duration(0), b.Delay(-1, 0))
	assert.Equal(t, time.Duration(0), crashloop.Linear(0, 0).Delay(7, 0))
	assert.Equal(t, time.Duration(math.MaxInt64),
		crashloop.Linear(time.Duration(math.MaxInt64/2+1), math.MaxInt64).Delay(3, 0), "capped, no overflow")
}

func TestCurveExponential(t *testing.T) {
	// The kubelet's curve: 10s doubling to 300s.
	k := crashloop.Exponential(10*time.Second, 2, 300*time.Second)
	var got []time.Duration
	for attempt := 1; attempt <= 8; attempt++ {
		got = append(got, k.Delay(attempt, 0))
	}
	s := time.Second
	assert.Equal(t, []time.Duration{10 * s, 20 * s, 40 * s, 80 * s, 160 * s, 300 * s, 300 * s, 300 * s}, got)

	// min(max, initial*factor^(attempt-1)) for a factor that is not 2.
	e := crashloop.Exponential(time.Second, 1.5, time.Minute)
	for attempt := 1; attempt <= 20; attempt++ {
		want := min(time.Minute, time.Duration(float64(time.Second)*math.Pow(1.5, float64(attempt-1))))
		assert.Equal(t, want, e.Delay(attempt, 0), "attempt %d", attempt)
	}
	assert.Equal(t, 5062500*time.Microsecond, e.Delay(5, 0), "1s * 1.5^4")

	for _, attempt := range []int{64, 1000, 1 << 20, math.MaxInt} {
		assert.Equal(t, 300*s, k.Delay(attempt, 0), "attempt %d: capped, no overflow", attempt)
	}
	assert.Equal(t, 7*s, crashloop.Exponential(7*s, 1, time.Hour).Delay(50, 0), "factor 1 is constant")
	assert.Equal(t, time.Duration(0), crashloop.Exponential(0, 2, time.Hour).Delay(5, 0))
	assert.Equal(t, time.Duration(math.MaxInt64),
		crashloop.Exponential(time.Second, 10, math.MaxInt64).Delay(40, 0), "1e39ns is capped at max")
}

func TestCurveFullJitter(t *testing.T) {
	inner := crashloop.Exponential(100*time.Millisecond, 2, 10*time.Second)
	b := crashloop.FullJitter(inner, seededRand())
	ref := seededRand()
	for attempt := 1; attempt <= 20; attempt++ {
		d := inner.Delay(attempt, 0)
		want := time.Duration(ref.Int64N(int64(d) + 1)) // uniform in [0, d]
		got := b.Delay(attempt, 0)
		assert.Equal(t, want, got, "attempt %d", attempt)
		assert.True(t, got >= 0 && got <= d, "attempt %d: %v outside [0, %v]", attempt, got, d)
	}
	assert.Equal(t, time.Duration(0), crashloop.FullJitter(crashloop.Linear(0, 0), seededRand()).Delay(3, 0))
}

func TestCurveEqualJitter(t *testing.T) {
	inner := crashloop.Linear(333*time.Millisecond+1, 5*time.Second) // odd, so the halves differ
	b := crashloop.EqualJitter(inner, seededRand())
	ref := seededRand()
	for attempt := 1; attempt <= 20; attempt++ {
		d := inner.Delay(attempt, 0)
		half := d / 2
		want := half + time.Duration(ref.Int64N(int64(d-half)+1)) // d/2 + uniform in [0, d - d/2]
		got := b.Delay(attempt, 0)
		assert.Equal(t, want, got, "attempt %d", attempt)
		assert.True(t, got >= half && got <= d, "attempt %d: %v outside [%v, %v]", attempt, got, half, d)
	}
}

func TestCurveDecorrelatedJitter(t *testing.T) {
	base, ceiling := 100*time.Millisecond, 10*time.Second
	b := crashloop.DecorrelatedJitter(base, ceiling, seededRand())
	ref := seededRand()
	// Each wait is min(max, uniform in [base, prev*3]), with prev = base
	// before the first: the first wait is already random, in [base, 3*base].
	prev := time.Duration(0)
	for attempt := 1; attempt <= 30; attempt++ {
		if prev == 0 {
			prev = base
		}
		hi := min(prev*3, ceiling)
		want := min(ceiling, base+time.Duration(ref.Int64N(int64(hi-base)+1)))
		got := b.Delay(attempt, prev)
		assert.Equal(t, want, got, "attempt %d (prev %v)", attempt, prev)
		assert.True(t, got >= base && got <= hi, "attempt %d: %v outside [%v, %v]", attempt, got, base, hi)
		prev = got
	}
	// A previous wait at the cap draws in [base, max].
	ref2, b2 := seededRand(), crashloop.DecorrelatedJitter(base, ceiling, seededRand())
	assert.Equal(t, base+time.Duration(ref2.Int64N(int64(ceiling-base)+1)), b2.Delay(9, ceiling))
}

func TestCurveJitterGlobalSourceAndNil(t *testing.T) {
	inner := crashloop.Linear(time.Second, 5*time.Second)
	full, equal := crashloop.FullJitter(inner, nil), crashloop.EqualJitter(inner, nil)
	dec := crashloop.DecorrelatedJitter(time.Second, 5*time.Second, nil)
	for i := 0; i < 200; i++ {
		d := full.Delay(3, 0)
		assert.True(t, d >= 0 && d <= 3*time.Second, "%v", d)
		d = equal.Delay(3, 0)
		assert.True(t, d >= 1500*time.Millisecond && d <= 3*time.Second, "%v", d)
		d = dec.Delay(2, 2*time.Second)
		assert.True(t, d >= time.Second && d <= 5*time.Second, "%v", d)
	}
	assert.Equal(t, time.Duration(0), crashloop.FullJitter(nil, nil).Delay(1, 0), "nothing to jitter")
}

func TestCurveJitterConcurrentUnsynchronizedSource(t *testing.T) {
	// *rand.Rand is not safe for concurrent use; the curve serializes it
	// (go test -race checks this).
	b := crashloop.FullJitter(crashloop.Linear(time.Millisecond, time.Second), seededRand())
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 1; i <= 500; i++ {
				if d := b.Delay(i%20+1, 0); d < 0 || d > time.Second {
					t.Errorf("delay %v outside [0, 1s]", d)
				}
			}
		})
	}
	wg.Wait()
}

// TestSupervisorUsesCurve runs a worker that fails at once under an
// exponential and a seeded jittered curve: the restarts follow the curve
// exactly, and the budget still parks after 3 respawns.
func TestSupervisorUsesCurve(t *testing.T) {
	boom := errors.New("boom")
	run := func(t *testing.T, curve crashloop.Backoff) (starts []time.Duration, backoffs []time.Duration) {
		t.Helper()
		rec, st := newRecorder(), newSupStarts()
		cfg := crashloop.DefaultSupervisorConfig()
		cfg.Backoff = curve
		s := newTestSupervisor(t, cfg, crashloop.WithEventHandler(rec))
		err := s.Run(t.Context(), "w", func(context.Context) error {
			st.mark()
			return boom
		})
		require.ErrorIs(t, err, crashloop.ErrParked)
		for _, ev := range eventsOf(rec, crashloop.EventRespawnScheduled) {
			backoffs = append(backoffs, ev.Backoff)
		}
		assert.Equal(t, 1, rec.Of(crashloop.EventStartupExhausted))
		return st.times(), backoffs
	}

	t.Run("exponential", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			starts, backoffs := run(t, crashloop.Exponential(time.Second, 3, time.Minute))
			s := time.Second
			assert.Equal(t, []time.Duration{s, 3 * s, 9 * s}, backoffs)
			assert.Equal(t, []time.Duration{0, s, 4 * s, 13 * s}, starts)
		})
	})
	t.Run("full jitter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			inner := crashloop.Exponential(time.Second, 2, 8*time.Second)
			starts, backoffs := run(t, crashloop.FullJitter(inner, seededRand()))
			ref := seededRand()
			var want, wantStarts []time.Duration
			at := time.Duration(0)
			wantStarts = append(wantStarts, at)
			for attempt := 1; attempt <= 3; attempt++ {
				d := time.Duration(ref.Int64N(int64(inner.Delay(attempt, 0)) + 1))
				want = append(want, d)
				at += d
				wantStarts = append(wantStarts, at)
			}
			assert.Equal(t, want, backoffs)
			assert.Equal(t, wantStarts, starts)
		})
	})
	t.Run("decorrelated jitter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base, ceiling := 100*time.Millisecond, 5*time.Second
			starts, backoffs := run(t, crashloop.DecorrelatedJitter(base, ceiling, seededRand()))
			ref := seededRand()
			var want []time.Duration
			for len(want) < 3 {
				prev := base // before the first wait
				if len(want) > 0 {
					prev = want[len(want)-1]
				}
				hi := min(prev*3, ceiling)
				want = append(want, base+time.Duration(ref.Int64N(int64(hi-base)+1)))
			}
			assert.Equal(t, want, backoffs, "each wait depends on the key's previous one")
			assert.Equal(t, []time.Duration{0, want[0], want[0] + want[1], want[0] + want[1] + want[2]}, starts)
		})
	})
}

func TestSupervisorRejectsCurveThatNeverParks(t *testing.T) {
	budget := crashloop.DefaultBudgetConfig() // 3 respawns in 60s
	for _, tc := range []struct {
		name   string
		curve  crashloop.Backoff
		window time.Duration
		ok     bool
		sum    string // in the rule of the error
	}{
		{"exponential 10+20+40 = 70s > 60s", crashloop.Exponential(10*time.Second, 2, 5*time.Minute), 60 * time.Second, false, "1m10s"},
		{"exponential sums to the window", crashloop.Exponential(10*time.Second, 2, 5*time.Minute), 70 * time.Second, true, ""},
		{"exponential 1ns over the window", crashloop.Exponential(10*time.Second, 2, 5*time.Minute), 70*time.Second - 1, false, "1m10s"},
		{"capped: 10+20+25 = 55s", crashloop.Exponential(10*time.Second, 2, 25*time.Second), 55 * time.Second, true, ""},
		{"linear 20+40+60 > 60s", crashloop.Linear(20*time.Second, time.Minute), 60 * time.Second, false, "2m0s"},
		{"linear sums to the window", crashloop.Linear(10*time.Second, time.Minute), 60 * time.Second, true, ""},
		{"full jitter is judged at its worst", crashloop.FullJitter(crashloop.Exponential(10*time.Second, 2, 5*time.Minute), nil), 60 * time.Second, false, "1m10s"},
		{"equal jitter is judged at its worst", crashloop.EqualJitter(crashloop.Exponential(10*time.Second, 2, 5*time.Minute), nil), 60 * time.Second, false, "1m10s"},
		{"decorrelated worst 30+90+270", crashloop.DecorrelatedJitter(10*time.Second, 5*time.Minute, nil), 389 * time.Second, false, "6m30s"},
		{"decorrelated worst sums to the window", crashloop.DecorrelatedJitter(10*time.Second, 5*time.Minute, nil), 390 * time.Second, true, ""},
		{"decorrelated worst capped: 30+60+60", crashloop.DecorrelatedJitter(10*time.Second, time.Minute, nil), 150 * time.Second, true, ""},
		{"a custom curve is not judged", crashloop.Backoff(supConstCurve(time.Hour)), 60 * time.Second, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := crashloop.DefaultSupervisorConfig()
			cfg.Budget = budget
			cfg.Budget.Window = tc.window
			cfg.Backoff = tc.curve
			s, err := crashloop.NewSupervisor(cfg)
			if tc.ok {
				require.NoError(t, err)
				assert.NotNil(t, s)
				return
			}
			assert.Nil(t, s)
			var ce *crashloop.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, crashloop.ErrInvalidConfig)
			assert.Equal(t, "budget.window", ce.Field)
			assert.Equal(t, tc.window, ce.Value)
			assert.Equal(t, ">= the sum of the first 3 backoffs ("+tc.sum+"), or a crash loop never parks", ce.Rule)
		})
	}
}

// supConstCurve is a Backoff of the user's own: a constant wait.
type supConstCurve time.Duration

func (c supConstCurve) Delay(int, time.Duration) time.Duration { return time.Duration(c) }

func TestSupervisorRejectsBadCurveSettings(t *testing.T) {
	for _, tc := range []struct {
		curve crashloop.Backoff
		field string
		value any
	}{
		{crashloop.Linear(-1, time.Second), "backoff.initial", time.Duration(-1)},
		{crashloop.Linear(2*time.Second, time.Second), "backoff.max", time.Second},
		{crashloop.Exponential(-1, 2, time.Second), "backoff.initial", time.Duration(-1)},
		{crashloop.Exponential(time.Second, 0.5, 10*time.Second), "backoff.factor", 0.5},
		{crashloop.Exponential(time.Second, math.Inf(1), 10*time.Second), "backoff.factor", math.Inf(1)},
		{crashloop.Exponential(2*time.Second, 2, time.Second), "backoff.max", time.Second},
		{crashloop.FullJitter(nil, nil), "backoff.jitter", nil},
		{crashloop.EqualJitter(crashloop.Exponential(time.Second, 0, time.Second), nil), "backoff.factor", 0.0},
		{crashloop.DecorrelatedJitter(-1, time.Second, nil), "backoff.initial", time.Duration(-1)},
		{crashloop.DecorrelatedJitter(2*time.Second, time.Second, nil), "backoff.max", time.Second},
	} {
		t.Run(tc.field, func(t *testing.T) {
			cfg := crashloop.DefaultSupervisorConfig()
			cfg.Backoff = tc.curve
			_, err := crashloop.NewSupervisor(cfg)
			var ce *crashloop.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, crashloop.ErrInvalidConfig)
			assert.Equal(t, tc.field, ce.Field)
			assert.Equal(t, tc.value, ce.Value)
		})
	}
	// NaN is rejected too (and cannot be compared with Equal).
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Backoff = crashloop.Exponential(time.Second, math.NaN(), 10*time.Second)
	_, err := crashloop.NewSupervisor(cfg)
	var ce *crashloop.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "backoff.factor", ce.Field)
}
