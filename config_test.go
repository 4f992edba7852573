package crashloop

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every invalid setting is a *ConfigError naming the field in snake_case,
// its value and the rule it broke, and matches ErrInvalidConfig.
func TestConfigErrors(t *testing.T) {
	budget := func(mutate func(*BudgetConfig)) func() error {
		return func() error {
			c := DefaultBudgetConfig()
			mutate(&c)
			_, err := NewRespawnBudget(c)
			return err
		}
	}
	chain := func(mutate func(*ChainConfig)) func() error {
		return func() error {
			c := DefaultChainConfig()
			mutate(&c)
			_, err := NewChainDetector(c)
			return err
		}
	}
	guard := func(maxRestarts int, window time.Duration) func() error {
		return func() error {
			_, err := NewRestartLoopGuard(maxRestarts, window)
			return err
		}
	}
	fleet := func(mutate func(*FleetConfig)) func() error {
		return func() error {
			c := DefaultFleetConfig()
			mutate(&c)
			_, err := NewFleetSupervisionPolicy(c)
			return err
		}
	}
	const neverParks = ", or a crash loop never parks"

	for _, tc := range []struct {
		name  string
		build func() error
		field string
		value any
		rule  string
	}{
		{"budget max_respawns < 0", budget(func(c *BudgetConfig) { c.MaxRespawns = -1 }), "max_respawns", -1, ">= 0"},
		{"budget window 0", budget(func(c *BudgetConfig) { c.Window = 0 }), "window", time.Duration(0), "> 0"},
		{"budget window < 0", budget(func(c *BudgetConfig) { c.Window = -time.Second }), "window", -time.Second, "> 0"},
		{"budget initial_backoff < 0", budget(func(c *BudgetConfig) { c.InitialBackoff = -time.Nanosecond }), "initial_backoff", -time.Nanosecond, ">= 0"},
		{"budget max_backoff < initial_backoff", budget(func(c *BudgetConfig) { c.MaxBackoff = 499 * time.Millisecond }),
			"max_backoff", 499 * time.Millisecond, ">= initial_backoff (500ms)"},
		{"budget backoffs outlast the window", budget(func(c *BudgetConfig) { c.Window = 3*time.Second - time.Nanosecond }),
			"window", 3*time.Second - time.Nanosecond, ">= the sum of the first 3 backoffs (3s)" + neverParks},
		{"budget systemd trap", budget(func(c *BudgetConfig) {
			*c = BudgetConfig{MaxRespawns: 5, Window: 10 * time.Second, InitialBackoff: 10 * time.Second, MaxBackoff: 10 * time.Second}
		}), "window", 10 * time.Second, ">= the sum of the first 5 backoffs (50s)" + neverParks},
		{"budget capped backoffs outlast the window", budget(func(c *BudgetConfig) { c.MaxRespawns = 20 }),
			"window", 60 * time.Second, ">= the sum of the first 20 backoffs (1m17.5s)" + neverParks},
		{"budget first broken rule wins", budget(func(c *BudgetConfig) { *c = BudgetConfig{MaxRespawns: -1, InitialBackoff: -1, MaxBackoff: -2} }),
			"max_respawns", -1, ">= 0"},

		{"chain max_chain 0", chain(func(c *ChainConfig) { c.MaxChain = 0 }), "max_chain", 0, ">= 1"},
		{"chain max_chain < 0", chain(func(c *ChainConfig) { c.MaxChain = -3 }), "max_chain", -3, ">= 1"},
		{"chain reset_gap 0", chain(func(c *ChainConfig) { c.ResetGap = 0 }), "reset_gap", time.Duration(0), "> 0"},
		{"chain reset_gap < 0", chain(func(c *ChainConfig) { c.ResetGap = -time.Minute }), "reset_gap", -time.Minute, "> 0"},
		{"chain zero value", func() error { _, err := NewChainDetector(ChainConfig{}); return err }, "max_chain", 0, ">= 1"},

		{"guard max_restarts 0", guard(0, time.Minute), "max_restarts", 0, ">= 1"},
		{"guard max_restarts < 0", guard(-1, time.Minute), "max_restarts", -1, ">= 1"},
		{"guard window 0", guard(3, 0), "window", time.Duration(0), "> 0"},
		{"guard window < 0", guard(3, -time.Nanosecond), "window", -time.Nanosecond, "> 0"},
		{"guard first broken rule wins", guard(0, 0), "max_restarts", 0, ">= 1"},

		{"fleet restarts_per_hour 0", fleet(func(c *FleetConfig) { c.RestartsPerHour = 0 }), "restarts_per_hour", 0, ">= 1"},
		{"fleet failing_fraction +Inf", fleet(func(c *FleetConfig) { c.FailingFraction = math.Inf(1) }), "failing_fraction", math.Inf(1), "> 0 and <= 1"},
		{"fleet failing_fraction -Inf", fleet(func(c *FleetConfig) { c.FailingFraction = math.Inf(-1) }), "failing_fraction", math.Inf(-1), "> 0 and <= 1"},
		{"fleet failing_fraction 0", fleet(func(c *FleetConfig) { c.FailingFraction = 0 }), "failing_fraction", 0.0, "> 0 and <= 1"},
		{"fleet failing_fraction < 0", fleet(func(c *FleetConfig) { c.FailingFraction = -0.5 }), "failing_fraction", -0.5, "> 0 and <= 1"},
		{"fleet failing_fraction > 1", fleet(func(c *FleetConfig) { c.FailingFraction = math.Nextafter(1, 2) }), "failing_fraction", math.Nextafter(1, 2), "> 0 and <= 1"},
		{"fleet failing_fraction 2", fleet(func(c *FleetConfig) { c.FailingFraction = 2 }), "failing_fraction", 2.0, "> 0 and <= 1"},
		{"fleet min_failing 0", fleet(func(c *FleetConfig) { c.MinFailing = 0 }), "min_failing", 0, ">= 1"},
		{"fleet cooldown < 0", fleet(func(c *FleetConfig) { c.Cooldown = -time.Nanosecond }), "cooldown", -time.Nanosecond, ">= 0"},
		{"fleet first broken rule wins", fleet(func(c *FleetConfig) { *c = FleetConfig{Cooldown: -1} }), "restarts_per_hour", 0, ">= 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.build()
			require.Error(t, err)
			require.ErrorIs(t, err, ErrInvalidConfig)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, &ConfigError{Field: tc.field, Value: tc.value, Rule: tc.rule}, ce)
		})
	}

	// NaN never equals itself, so it gets its own check.
	t.Run("fleet failing_fraction NaN", func(t *testing.T) {
		err := fleet(func(c *FleetConfig) { c.FailingFraction = math.NaN() })()
		require.ErrorIs(t, err, ErrInvalidConfig)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, "failing_fraction", ce.Field)
		assert.Equal(t, "> 0 and <= 1", ce.Rule)
		f, ok := ce.Value.(float64)
		require.True(t, ok)
		assert.True(t, math.IsNaN(f))
		assert.EqualError(t, err, "crashloop: invalid configuration: failing_fraction = NaN: must be > 0 and <= 1")
	})
}

// The limits of each rule are accepted.
func TestConfigBoundariesAccepted(t *testing.T) {
	for _, c := range []BudgetConfig{
		{MaxRespawns: 0, Window: time.Nanosecond},
		{MaxRespawns: 3, Window: 3 * time.Second, InitialBackoff: 500 * time.Millisecond, MaxBackoff: 5 * time.Second}, // sum == window
		{MaxRespawns: 3, Window: time.Minute, InitialBackoff: time.Second, MaxBackoff: time.Second},
		{MaxRespawns: 20, Window: 77500 * time.Millisecond, InitialBackoff: 500 * time.Millisecond, MaxBackoff: 5 * time.Second},
	} {
		b, err := NewRespawnBudget(c)
		require.NoError(t, err, "%+v", c)
		assert.Equal(t, c, b.Config())
	}
	_, err := NewChainDetector(ChainConfig{MaxChain: 1, ResetGap: time.Nanosecond})
	require.NoError(t, err)
	_, err = NewRestartLoopGuard(1, time.Nanosecond)
	require.NoError(t, err)
	for _, c := range []FleetConfig{
		{RestartsPerHour: 1, FailingFraction: 1, MinFailing: 1, Cooldown: 0},
		{RestartsPerHour: 1, FailingFraction: math.SmallestNonzeroFloat64, MinFailing: 1},
	} {
		p, err := NewFleetSupervisionPolicy(c)
		require.NoError(t, err, "%+v", c)
		assert.Equal(t, c, p.Config())
	}
}

// A window exactly as long as the backoffs is accepted, and it does park a
// crash loop that waits each backoff and fails at once: the first respawn is
// exactly a window old when the budget is full.
func TestConfigWindowEqualToBackoffsParks(t *testing.T) {
	m := coreMock()
	b, err := NewRespawnBudget(BudgetConfig{MaxRespawns: 3, Window: 3 * time.Second, InitialBackoff: 500 * time.Millisecond, MaxBackoff: 5 * time.Second},
		WithClock(m))
	require.NoError(t, err)
	var err2 error
	var waits []time.Duration
	for i := 0; i < 10 && err2 == nil; i++ {
		var d time.Duration
		d, err2 = b.Failed("s", errors.New("boom"))
		if err2 == nil {
			waits = append(waits, d)
			m.Add(d)
		}
	}
	require.ErrorIs(t, err2, ErrParked)
	assert.Equal(t, []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond}, waits)
}

func TestConfigErrorText(t *testing.T) {
	_, err := NewRestartLoopGuard(0, time.Minute)
	assert.EqualError(t, err, "crashloop: invalid configuration: max_restarts = 0: must be >= 1")

	_, err = NewRespawnBudget(BudgetConfig{MaxRespawns: 3, Window: 2 * time.Second, InitialBackoff: 500 * time.Millisecond, MaxBackoff: 5 * time.Second})
	assert.EqualError(t, err, "crashloop: invalid configuration: window = 2s: must be >= the sum of the first 3 backoffs (3s), or a crash loop never parks")

	_, err = NewFleetSupervisionPolicy(FleetConfig{RestartsPerHour: 40, FailingFraction: 0.5, MinFailing: 2, Cooldown: -time.Second})
	assert.EqualError(t, err, "crashloop: invalid configuration: cooldown = -1s: must be >= 0")

	ce := &ConfigError{Field: "budget.window", Value: 7, Rule: "> 0"}
	assert.Equal(t, "crashloop: invalid configuration: budget.window = 7: must be > 0", ce.Error())
	assert.ErrorIs(t, ce, ErrInvalidConfig)
	assert.NotErrorIs(t, ce, ErrParked)
}

// prefixed places a field under the path of a nested config.
func TestConfigErrorPrefixed(t *testing.T) {
	err := prefixed("budget", &ConfigError{Field: "window", Value: time.Duration(0), Rule: "> 0"})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, &ConfigError{Field: "budget.window", Value: time.Duration(0), Rule: "> 0"}, ce)
	assert.ErrorIs(t, err, ErrInvalidConfig)

	other := errors.New("not a config error")
	assert.Same(t, other, prefixed("budget", other))
}

// Huge settings never overflow a backoff or a sum, and never panic.
func TestConfigHugeValues(t *testing.T) {
	const maxDur = time.Duration(math.MaxInt64)

	t.Run("initial backoff near MaxInt64", func(t *testing.T) {
		for _, tc := range []struct {
			cfg  BudgetConfig
			want []time.Duration
		}{
			{BudgetConfig{MaxRespawns: 1, Window: maxDur, InitialBackoff: maxDur, MaxBackoff: maxDur}, []time.Duration{maxDur}},
			{BudgetConfig{MaxRespawns: 1, Window: maxDur, InitialBackoff: maxDur - 1, MaxBackoff: maxDur - 1}, []time.Duration{maxDur - 1}},
			{BudgetConfig{MaxRespawns: 3, Window: maxDur, InitialBackoff: maxDur / 3, MaxBackoff: maxDur / 3},
				[]time.Duration{maxDur / 3, maxDur / 3, maxDur / 3}},
			{BudgetConfig{MaxRespawns: 2, Window: maxDur, InitialBackoff: maxDur / 4, MaxBackoff: maxDur / 2},
				[]time.Duration{maxDur / 4, 2 * (maxDur / 4)}},
		} {
			b, err := NewRespawnBudget(tc.cfg, WithClock(coreMock()))
			require.NoError(t, err, "%+v", tc.cfg)
			var got []time.Duration
			require.NotPanics(t, func() {
				for range tc.want {
					d, err := b.FailedAt("s", errors.New("boom"), coreT0)
					require.NoError(t, err)
					got = append(got, d)
				}
			})
			assert.Equal(t, tc.want, got, "%+v", tc.cfg)
			for _, d := range got {
				assert.Positive(t, d)
			}
			_, err = b.FailedAt("s", errors.New("boom"), coreT0)
			require.ErrorIs(t, err, ErrParked)
		}
	})

	t.Run("sums beyond int64 are rejected exactly", func(t *testing.T) {
		_, err := NewRespawnBudget(BudgetConfig{MaxRespawns: 2, Window: maxDur, InitialBackoff: maxDur, MaxBackoff: maxDur})
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, &ConfigError{Field: "window", Value: maxDur,
			Rule: ">= the sum of the first 2 backoffs (18446744073709551614ns), or a crash loop never parks"}, ce)

		// 1ns, 2ns, 3ns ... MaxInt ns: n(n+1)/2 nanoseconds, beyond
		// MaxUint64: the sum saturates there, and still parks nothing.
		_, err = NewRespawnBudget(BudgetConfig{MaxRespawns: math.MaxInt, Window: maxDur, InitialBackoff: 1, MaxBackoff: maxDur})
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, &ConfigError{Field: "window", Value: maxDur,
			Rule: ">= the sum of the first 9223372036854775807 backoffs (at least 18446744073709551615ns), or a crash loop never parks"}, ce)
	})

	t.Run("sums at the edge of int64", func(t *testing.T) {
		// One backoff of MaxInt64 fits a window of MaxInt64 exactly.
		_, err := NewRespawnBudget(BudgetConfig{MaxRespawns: 1, Window: maxDur, InitialBackoff: maxDur, MaxBackoff: maxDur})
		require.NoError(t, err)
		// Two of 2^62 are one nanosecond more than MaxInt64.
		_, err = NewRespawnBudget(BudgetConfig{MaxRespawns: 2, Window: maxDur, InitialBackoff: 1 << 62, MaxBackoff: 1 << 62})
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, &ConfigError{Field: "window", Value: maxDur,
			Rule: ">= the sum of the first 2 backoffs (9223372036854775808ns), or a crash loop never parks"}, ce)
		// Two of 2^62 - 1 are MaxInt64 - 1: within the window.
		_, err = NewRespawnBudget(BudgetConfig{MaxRespawns: 2, Window: maxDur, InitialBackoff: 1<<62 - 1, MaxBackoff: 1<<62 - 1})
		require.NoError(t, err)
		_, err = NewRespawnBudget(BudgetConfig{MaxRespawns: 2, Window: maxDur - 2, InitialBackoff: 1<<62 - 1, MaxBackoff: 1<<62 - 1})
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, ">= the sum of the first 2 backoffs (2562047h47m16.854775806s), or a crash loop never parks", ce.Rule)
	})

	t.Run("a curve's worst sum saturates", func(t *testing.T) {
		// An exponential curve capped at MaxInt64 reaches it at once and
		// stays there: MaxInt respawns of MaxInt64 saturate.
		cfg := SupervisorConfig{Budget: BudgetConfig{MaxRespawns: math.MaxInt, Window: maxDur, InitialBackoff: 0, MaxBackoff: 0},
			Backoff: Exponential(maxDur, 2, maxDur)}
		_, err := NewSupervisor(cfg)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, &ConfigError{Field: "budget.window", Value: maxDur,
			Rule: ">= the sum of the first 9223372036854775807 backoffs (at least 18446744073709551615ns), or a crash loop never parks"}, ce)
		// Below saturation the sum is exact: 1s + 2s + 4s.
		cfg.Backoff = Exponential(time.Second, 2, maxDur)
		cfg.Budget.MaxRespawns = 3
		cfg.Budget.Window = 7*time.Second - 1
		_, err = NewSupervisor(cfg)
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, ">= the sum of the first 3 backoffs (7s), or a crash loop never parks", ce.Rule)
		cfg.Budget.Window = 7 * time.Second
		_, err = NewSupervisor(cfg)
		require.NoError(t, err)
	})

	t.Run("max respawns near MaxInt with no backoff", func(t *testing.T) {
		for _, maxBackoff := range []time.Duration{0, maxDur} {
			rec := &coreRecorder{}
			b, err := NewRespawnBudget(BudgetConfig{MaxRespawns: math.MaxInt, Window: time.Hour, InitialBackoff: 0, MaxBackoff: maxBackoff},
				WithClock(coreMock()), WithEventHandler(rec))
			require.NoError(t, err)
			require.NotPanics(t, func() {
				for i := 0; i < 1000; i++ {
					d, err := b.FailedAt("s", errors.New("boom"), coreT0)
					require.NoError(t, err)
					require.Equal(t, time.Duration(0), d)
				}
			})
			assert.Equal(t, 1000, b.RespawnsAt("s", coreT0))
			evs := rec.All()
			require.Len(t, evs, 1000)
			assert.Equal(t, math.MaxInt, evs[999].Limit)
			assert.Equal(t, 1000, evs[999].Attempts)
		}
	})

	t.Run("backoff formula at the extremes", func(t *testing.T) {
		c := BudgetConfig{InitialBackoff: maxDur / 2, MaxBackoff: maxDur}
		assert.Equal(t, maxDur/2, newLinear(c.InitialBackoff, c.MaxBackoff).Delay(1, 0))
		assert.Equal(t, maxDur-1, newLinear(c.InitialBackoff, c.MaxBackoff).Delay(2, 0))
		assert.Equal(t, maxDur, newLinear(c.InitialBackoff, c.MaxBackoff).Delay(3, 0))
		assert.Equal(t, maxDur, newLinear(c.InitialBackoff, c.MaxBackoff).Delay(math.MaxInt, 0))
		c = BudgetConfig{InitialBackoff: 1, MaxBackoff: maxDur}
		assert.Equal(t, maxDur, newLinear(c.InitialBackoff, c.MaxBackoff).Delay(math.MaxInt, 0))
		assert.Equal(t, maxDur-1, newLinear(c.InitialBackoff, c.MaxBackoff).Delay(math.MaxInt-1, 0))
	})

	t.Run("guard chain and fleet", func(t *testing.T) {
		g, err := NewRestartLoopGuard(math.MaxInt, maxDur)
		require.NoError(t, err)
		require.NotPanics(t, func() {
			for i := 0; i < 100; i++ {
				require.False(t, g.RecordAt(coreT0))
			}
		})
		assert.Equal(t, 100, g.RestartsAt(coreT0))

		g, err = NewRestartLoopGuard(1, maxDur)
		require.NoError(t, err)
		assert.True(t, g.RecordAt(coreT0))
		assert.True(t, g.TrippedAt(coreT0.Add(200*365*24*time.Hour)), "still inside a MaxInt64 window two centuries on")

		d, err := NewChainDetector(ChainConfig{MaxChain: math.MaxInt, ResetGap: maxDur})
		require.NoError(t, err)
		for i := 1; i <= 100; i++ {
			n, err := d.RescueAt("k", "i", true, coreT0)
			require.NoError(t, err)
			require.Equal(t, i, n)
		}

		p, err := NewFleetSupervisionPolicy(FleetConfig{RestartsPerHour: math.MaxInt, FailingFraction: 1, MinFailing: math.MaxInt, Cooldown: maxDur})
		require.NoError(t, err)
		for i := 0; i < 100; i++ {
			require.False(t, p.NoteRestartAt(coreT0))
		}
		assert.False(t, p.NoteFleetStateAt(math.MaxInt-1, math.MaxInt, coreT0))
		assert.True(t, p.NoteFleetStateAt(math.MaxInt, math.MaxInt, coreT0))
		assert.True(t, p.TrippedAt(coreT0.Add(200*365*24*time.Hour)))
	})
}
