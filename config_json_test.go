package crashloop_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const defaultConfigJSON = `{"budget":{"max_respawns":3,"window":"60s","initial_backoff":"500ms","max_backoff":"5s"},` +
	`"healthy_after":"10s","backoff":null,"chain":{"max_chain":3,"reset_gap":"20m"},` +
	`"fleet":{"restarts_per_hour":40,"failing_fraction":0.5,"min_failing":2,"cooldown":"120s","shared_cause":null},` +
	`"guard":null,"hourly_cap":0,"restart_on_clean_exit":false,"exit_rules":[],"probe_after":"0s","probe_max":"0s"}`

func TestConfigJSONDefault(t *testing.T) {
	got, err := json.Marshal(crashloop.DefaultSupervisorConfig())
	require.NoError(t, err)
	assert.Equal(t, defaultConfigJSON, string(got))

	// Into the zero value: every key is present, so the result is the default.
	var back crashloop.SupervisorConfig
	require.NoError(t, json.Unmarshal(got, &back))
	assert.Equal(t, crashloop.DefaultSupervisorConfig(), back)

	// A pointer marshals the same.
	cfg := crashloop.DefaultSupervisorConfig()
	got2, err := json.Marshal(&cfg)
	require.NoError(t, err)
	assert.Equal(t, defaultConfigJSON, string(got2))
}

func fullSupervisorConfig() crashloop.SupervisorConfig {
	return crashloop.SupervisorConfig{
		Budget:       crashloop.BudgetConfig{MaxRespawns: 5, Window: 2 * time.Minute, InitialBackoff: 250 * time.Millisecond, MaxBackoff: 10 * time.Second},
		HealthyAfter: 90 * time.Second,
		Backoff:      crashloop.Exponential(250*time.Millisecond, 1.5, 10*time.Second),
		Chain:        &crashloop.ChainConfig{MaxChain: 4, ResetGap: 45 * time.Minute},
		Fleet: &crashloop.FleetConfig{RestartsPerHour: 100, FailingFraction: 0.25, MinFailing: 3, Cooldown: 90 * time.Second,
			SharedCause: &crashloop.SharedCauseConfig{Keys: 4, Window: 2 * time.Minute, ProbeEvery: 100 * time.Second}},
		Guard:              &crashloop.GuardConfig{MaxRestarts: 3, Window: 60 * time.Second},
		HourlyCap:          10,
		RestartOnCleanExit: true,
		ExitRules:          []crashloop.ExitRule{"oom=park", "75=planned"},
		ProbeAfter:         time.Minute,
		ProbeMax:           30 * time.Minute,
	}
}

func TestConfigJSONFullRoundTrip(t *testing.T) {
	cfg := fullSupervisorConfig()
	_, err := crashloop.NewSupervisor(cfg)
	require.NoError(t, err, "the document is a valid configuration")

	got, err := json.Marshal(cfg)
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"budget": {"max_respawns": 5, "window": "120s", "initial_backoff": "250ms", "max_backoff": "10s"},
		"healthy_after": "90s",
		"backoff": {"kind": "exponential", "initial": "250ms", "factor": 1.5, "max": "10s"},
		"chain": {"max_chain": 4, "reset_gap": "45m"},
		"fleet": {"restarts_per_hour": 100, "failing_fraction": 0.25, "min_failing": 3, "cooldown": "90s",
			"shared_cause": {"keys": 4, "window": "120s", "probe_every": "100s"}},
		"guard": {"max_restarts": 3, "window": "60s"},
		"hourly_cap": 10,
		"restart_on_clean_exit": true,
		"exit_rules": ["oom=park", "75=planned"],
		"probe_after": "60s",
		"probe_max": "30m"
	}`, string(got))

	for name, into := range map[string]crashloop.SupervisorConfig{
		"zero":    {},
		"default": crashloop.DefaultSupervisorConfig(),
	} {
		t.Run("into "+name, func(t *testing.T) {
			require.NoError(t, json.Unmarshal(got, &into))
			assert.Equal(t, cfg, into)
		})
	}
}

func TestConfigJSONCurves(t *testing.T) {
	budget := `"budget":{"max_respawns":3,"window":"60s","initial_backoff":"1s","max_backoff":"4s"}`
	for _, tc := range []struct {
		name  string
		curve crashloop.Backoff
		json  string // the backoff as written
	}{
		{"linear", crashloop.Linear(time.Second, 4*time.Second), `{"kind":"linear","initial":"1s","max":"4s"}`},
		{"exponential", crashloop.Exponential(time.Second, 2, 4*time.Second), `{"kind":"exponential","initial":"1s","factor":2,"max":"4s"}`},
		{"full jitter", crashloop.FullJitter(crashloop.Exponential(time.Second, 2, 4*time.Second), nil), `{"kind":"exponential","initial":"1s","factor":2,"max":"4s","jitter":"full"}`},
		{"equal jitter", crashloop.EqualJitter(crashloop.Linear(time.Second, 4*time.Second), nil), `{"kind":"linear","initial":"1s","max":"4s","jitter":"equal"}`},
		{"decorrelated", crashloop.DecorrelatedJitter(100*time.Millisecond, 4*time.Second, nil), `{"kind":"exponential","initial":"100ms","max":"4s","jitter":"decorrelated"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := crashloop.DefaultSupervisorConfig()
			cfg.Budget.InitialBackoff, cfg.Budget.MaxBackoff = time.Second, 4*time.Second
			cfg.Backoff = tc.curve
			got, err := json.Marshal(cfg)
			require.NoError(t, err)
			var doc map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(got, &doc))
			assert.Equal(t, tc.json, string(doc["backoff"]))

			var back crashloop.SupervisorConfig
			require.NoError(t, json.Unmarshal([]byte(`{`+budget+`,"backoff":`+tc.json+`}`), &back))
			again, err := json.Marshal(back.Backoff)
			require.NoError(t, err)
			want, err := json.Marshal(cfg.Backoff)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(again))
			for attempt := 1; attempt <= 6; attempt++ {
				d := back.Backoff.Delay(attempt, 0)
				assert.True(t, d >= 0 && d <= 4*time.Second, "%v", d)
			}
		})
	}

	t.Run("unjittered curves compare equal", func(t *testing.T) {
		var back crashloop.SupervisorConfig
		require.NoError(t, json.Unmarshal([]byte(`{"backoff":{"kind":"exponential","initial":"1s","factor":3,"max":"1m"}}`), &back))
		assert.Equal(t, crashloop.Exponential(time.Second, 3, time.Minute), back.Backoff)
	})
	t.Run("omitted settings come from the budget, whatever the key order", func(t *testing.T) {
		for _, doc := range []string{
			`{"backoff":{"kind":"exponential"},` + budget + `}`,
			`{` + budget + `,"backoff":{"kind":"exponential"}}`,
		} {
			var back crashloop.SupervisorConfig
			require.NoError(t, json.Unmarshal([]byte(doc), &back))
			assert.Equal(t, crashloop.Exponential(time.Second, 2, 4*time.Second), back.Backoff, doc)
		}
		back := crashloop.DefaultSupervisorConfig()
		require.NoError(t, json.Unmarshal([]byte(`{"backoff":{}}`), &back))
		assert.Equal(t, crashloop.Linear(500*time.Millisecond, 5*time.Second), back.Backoff)
	})
	t.Run("null is the default curve", func(t *testing.T) {
		back := crashloop.DefaultSupervisorConfig()
		back.Backoff = crashloop.Linear(time.Second, time.Second)
		require.NoError(t, json.Unmarshal([]byte(`{"backoff":null}`), &back))
		assert.Nil(t, back.Backoff)
	})
	t.Run("a curve of the user's own has no JSON form", func(t *testing.T) {
		cfg := crashloop.DefaultSupervisorConfig()
		cfg.Backoff = supConstCurve(time.Second)
		_, err := json.Marshal(cfg)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no JSON form")
	})
}

func TestConfigJSONOptionalGuards(t *testing.T) {
	t.Run("null turns a guard off", func(t *testing.T) {
		cfg := fullSupervisorConfig()
		require.NoError(t, json.Unmarshal([]byte(`{"guard":null,"chain":null,"fleet":null}`), &cfg))
		assert.Nil(t, cfg.Guard)
		assert.Nil(t, cfg.Chain)
		assert.Nil(t, cfg.Fleet)
		assert.Equal(t, 10, cfg.HourlyCap, "omitted keys keep their values")
		_, err := crashloop.NewSupervisor(cfg)
		require.NoError(t, err)
	})
	t.Run("an object turns it on with defaults", func(t *testing.T) {
		cfg := crashloop.DefaultSupervisorConfig()
		require.NoError(t, json.Unmarshal([]byte(`{"guard":{}}`), &cfg))
		assert.Equal(t, &crashloop.GuardConfig{MaxRestarts: 3, Window: 60 * time.Second}, cfg.Guard)

		cfg = crashloop.DefaultSupervisorConfig()
		require.NoError(t, json.Unmarshal([]byte(`{"guard":{"window":"5s"}}`), &cfg))
		assert.Equal(t, &crashloop.GuardConfig{MaxRestarts: 3, Window: 5 * time.Second}, cfg.Guard)
	})
	t.Run("an object edits a guard that is on", func(t *testing.T) {
		cfg := crashloop.DefaultSupervisorConfig()
		old := &crashloop.GuardConfig{MaxRestarts: 7, Window: time.Minute}
		cfg.Guard = old
		require.NoError(t, json.Unmarshal([]byte(`{"guard":{"window":"5s"},"fleet":{"cooldown":"1h"}}`), &cfg))
		assert.Equal(t, &crashloop.GuardConfig{MaxRestarts: 7, Window: 5 * time.Second}, cfg.Guard)
		assert.Equal(t, crashloop.GuardConfig{MaxRestarts: 7, Window: time.Minute}, *old, "the caller's guard is not written through")
		assert.Equal(t, &crashloop.FleetConfig{RestartsPerHour: 40, FailingFraction: 0.5, MinFailing: 2, Cooldown: time.Hour}, cfg.Fleet)
	})
	t.Run("omitted keys keep their values", func(t *testing.T) {
		cfg := crashloop.DefaultSupervisorConfig()
		require.NoError(t, json.Unmarshal([]byte(`{"hourly_cap":10,"budget":{"window":"1m30s"}}`), &cfg))
		want := crashloop.DefaultSupervisorConfig()
		want.HourlyCap = 10
		want.Budget.Window = 90 * time.Second
		assert.Equal(t, want, cfg)
		require.NoError(t, json.Unmarshal([]byte(`{}`), &cfg))
		assert.Equal(t, want, cfg)
	})
}

func TestConfigJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		doc   string
		field string
		value any
	}{
		{`{"guard":{"windw":"1s"}}`, "guard.windw", `"1s"`},
		{`{"budget":{"window":"soon"}}`, "budget.window", "soon"},
		{`{"budget":{"window":60}}`, "budget.window", "60"},
		{`{"budget":{"max_respawns":2.5}}`, "budget.max_respawns", "2.5"},
		{`{"budget":{"max_respawns":"3"}}`, "budget.max_respawns", `"3"`},
		{`{"budget":{"max_respawns":1e300}}`, "budget.max_respawns", "1e300"},
		{`{"budget":{"max_respawns":null}}`, "budget.max_respawns", "null"},
		{`{"budgett":{}}`, "budgett", "{}"},
		{`{"zz":1,"aa":2}`, "aa", "2"},
		{`{"healthy_after":"10 s"}`, "healthy_after", "10 s"},
		{`{"chain":{"reset_gap":true}}`, "chain.reset_gap", "true"},
		{`{"chain":{"max_chain":"three"}}`, "chain.max_chain", `"three"`},
		{`{"fleet":{"failing_fraction":"half"}}`, "fleet.failing_fraction", `"half"`},
		{`{"fleet":{"failing_fraction":null}}`, "fleet.failing_fraction", "null"},
		{`{"fleet":{"cooldown":"2 minutes"}}`, "fleet.cooldown", "2 minutes"},
		{`{"fleet":{"restarts_per_hour":[]}}`, "fleet.restarts_per_hour", "[]"},
		{`{"guard":{"max_restarts":null}}`, "guard.max_restarts", "null"},
		{`{"guard":5}`, "guard", "5"},
		{`{"hourly_cap":"ten"}`, "hourly_cap", `"ten"`},
		{`{"hourly_cap":null}`, "hourly_cap", "null"},
		{`{"restart_on_clean_exit":"yes"}`, "restart_on_clean_exit", `"yes"`},
		{`{"restart_on_clean_exit":null}`, "restart_on_clean_exit", "null"},
		{`{"backoff":"exponential"}`, "backoff", `"exponential"`},
		{`{"backoff":{"speed":1}}`, "backoff.speed", "1"},
		{`{"backoff":{"kind":"cubic"}}`, "backoff.kind", "cubic"},
		{`{"backoff":{"kind":null}}`, "backoff.kind", "null"},
		{`{"backoff":{"jitter":"wild"}}`, "backoff.jitter", "wild"},
		{`{"backoff":{"kind":"linear","jitter":"decorrelated"}}`, "backoff.jitter", "decorrelated"},
		{`{"backoff":{"initial":"fast"}}`, "backoff.initial", "fast"},
		{`{"backoff":{"factor":"2"}}`, "backoff.factor", `"2"`},
		{`[]`, "config", "[]"},
		{`{"budget":[]}`, "budget", "[]"},
	} {
		t.Run(tc.doc, func(t *testing.T) {
			cfg := crashloop.DefaultSupervisorConfig()
			err := json.Unmarshal([]byte(tc.doc), &cfg)
			var ce *crashloop.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, crashloop.ErrInvalidConfig)
			assert.Equal(t, tc.field, ce.Field)
			assert.Equal(t, tc.value, ce.Value)
			assert.NotEmpty(t, ce.Rule)
		})
	}

	// Unmarshal checks the form; NewSupervisor checks the values.
	cfg := crashloop.DefaultSupervisorConfig()
	require.NoError(t, json.Unmarshal([]byte(`{"guard":{"max_restarts":0},"backoff":{"kind":"exponential","factor":0.5}}`), &cfg))
	_, err := crashloop.NewSupervisor(cfg)
	var ce *crashloop.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "backoff.factor", ce.Field, "the first broken rule in the config's order")
	cfg.Backoff = nil
	_, err = crashloop.NewSupervisor(cfg)
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "guard.max_restarts", ce.Field)
}

func TestConfigJSONPrimitives(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		json string
	}{
		{"budget", crashloop.DefaultBudgetConfig(), `{"max_respawns":3,"window":"60s","initial_backoff":"500ms","max_backoff":"5s"}`},
		{"chain", crashloop.DefaultChainConfig(), `{"max_chain":3,"reset_gap":"20m"}`},
		{"guard", crashloop.DefaultGuardConfig(), `{"max_restarts":3,"window":"60s"}`},
		{"fleet", crashloop.DefaultFleetConfig(), `{"restarts_per_hour":40,"failing_fraction":0.5,"min_failing":2,"cooldown":"120s","shared_cause":null}`},
		{"odd durations", crashloop.BudgetConfig{MaxRespawns: 1, Window: time.Hour + 30*time.Minute, InitialBackoff: 1500 * time.Microsecond, MaxBackoff: 2*time.Second + time.Nanosecond},
			`{"max_respawns":1,"window":"90m","initial_backoff":"1.5ms","max_backoff":"2.000000001s"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.v)
			require.NoError(t, err)
			assert.Equal(t, tc.json, string(got))
		})
	}

	var b crashloop.BudgetConfig
	require.NoError(t, json.Unmarshal([]byte(`{"initial_backoff":"1.5ms","max_backoff":"2.000000001s","max_respawns":1,"window":"90m"}`), &b))
	assert.Equal(t, crashloop.BudgetConfig{MaxRespawns: 1, Window: 90 * time.Minute, InitialBackoff: 1500 * time.Microsecond, MaxBackoff: 2*time.Second + 1}, b)

	var g crashloop.GuardConfig
	err := json.Unmarshal([]byte(`{"windw":"1s"}`), &g)
	var ce *crashloop.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "windw", ce.Field, "a config on its own names the bare field")

	var f crashloop.FleetConfig
	require.NoError(t, json.Unmarshal([]byte(`{"failing_fraction":1}`), &f))
	assert.Equal(t, 1.0, f.FailingFraction)
	require.NoError(t, json.Unmarshal([]byte(`{"restarts_per_hour":9007199254740992}`), &f))
	assert.Equal(t, 1<<53, f.RestartsPerHour)
	assert.False(t, math.IsNaN(f.FailingFraction))
}
