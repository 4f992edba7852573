//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/replay"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runPlan runs crashloop plan in this process and returns its JSON
// document, checked against docs/schema/plan.json.
func runPlan(t *testing.T, args ...string) map[string]any {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, planCmd(append(args, "--json"), &out))
	valid(t, schemas(t, "plan")["plan"], out.String())
	var doc map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	return doc
}

func steps(pairs ...string) []any {
	var out []any
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, map[string]any{"restart": float64(i/2 + 1), "wait": pairs[i], "total": pairs[i+1]})
	}
	return out
}

func TestPlanOfTheDefaults(t *testing.T) {
	doc := runPlan(t)
	assert.Equal(t, map[string]any{
		"policy":   "budget 3 in 1m; linear 500ms to 5s; healthy after 10s; chain 3 within 20m",
		"schedule": steps("500ms", "500ms", "1s", "1.5s", "1.5s", "3s"),
		"park":     map[string]any{"after": "3s", "reason": "respawn_budget_exhausted", "failed_starts": 4.0},
		"refill":   map[string]any{"after": "1m0s", "healthy_after": "10s"},
		"outages": []any{
			map[string]any{"outage": "10s", "parked": true, "restarts": 3.0, "parked_after": "3s"},
			map[string]any{"outage": "30s", "parked": true, "restarts": 3.0, "parked_after": "3s"},
			map[string]any{"outage": "1m0s", "parked": true, "restarts": 3.0, "parked_after": "3s"},
			map[string]any{"outage": "5m0s", "parked": true, "restarts": 3.0, "parked_after": "3s"},
		},
		"warnings": []any{map[string]any{"code": "parks_on_short_outage",
			"message": "every outage longer than 3s parks the key: its failed start at 3s parks it (respawn_budget_exhausted); a dependency down for a minute parks every key that needs it, until an operator resumes each"}},
	}, doc)
}

// Custom flags: an exponential curve to its cap, a longer window; an
// outage just short of the park, one at it, one past it.
func TestPlanOfCustomFlags(t *testing.T) {
	doc := runPlan(t, "--max-respawns=6", "--backoff=exponential", "--initial-backoff=1s", "--max-backoff=10s", "--window=5m",
		"--outage=38s", "--outage=39s", "--outage=40s", "--outage=5s")
	assert.Equal(t, "budget 6 in 5m; exponential 1s x2 to 10s; healthy after 10s; chain 3 within 20m", doc["policy"])
	assert.Equal(t, steps("1s", "1s", "2s", "3s", "4s", "7s", "8s", "15s", "10s", "25s", "10s", "35s"), doc["schedule"])
	assert.Equal(t, map[string]any{"after": "35s", "reason": "respawn_budget_exhausted", "failed_starts": 7.0}, doc["park"])
	assert.Equal(t, map[string]any{"after": "5m0s", "healthy_after": "10s"}, doc["refill"])
	assert.Equal(t, []any{
		map[string]any{"outage": "38s", "parked": true, "restarts": 6.0, "parked_after": "35s"},
		map[string]any{"outage": "39s", "parked": true, "restarts": 6.0, "parked_after": "35s"},
		map[string]any{"outage": "40s", "parked": true, "restarts": 6.0, "parked_after": "35s"},
		map[string]any{"outage": "5s", "parked": false, "restarts": 3.0, "running_after": "7s"},
	}, doc["outages"])
	assert.Len(t, doc["warnings"], 1)

	// A budget that rides out a minute: no short-outage warning.
	doc = runPlan(t, "--max-respawns=10", "--initial-backoff=2s", "--max-backoff=10s", "--window=10m", "--outage=1m")
	assert.Equal(t, steps("2s", "2s", "4s", "6s", "6s", "12s", "8s", "20s", "10s", "30s", "10s", "40s", "10s", "50s", "10s", "1m0s",
		"10s", "1m10s", "10s", "1m20s"), doc["schedule"])
	assert.Equal(t, map[string]any{"after": "1m20s", "reason": "respawn_budget_exhausted", "failed_starts": 11.0}, doc["park"])
	assert.Equal(t, []any{map[string]any{"outage": "1m0s", "parked": false, "restarts": 8.0, "running_after": "1m0s"}}, doc["outages"])
	assert.Equal(t, []any{}, doc["warnings"])
}

// A config file's curve (a factor of its own), with a flag over it.
func TestPlanOfAConfigFile(t *testing.T) {
	file := writeFile(t, t.TempDir(), "c.json", `{"budget": {"max_respawns": 4, "window": "10m"}, "healthy_after": "0s",
		"backoff": {"kind": "exponential", "initial": "2s", "factor": 1.5, "max": "5s"}, "chain": null, "hourly_cap": 30}`)
	doc := runPlan(t, "--config="+file, "--outage=20s")
	assert.Equal(t, "budget 4 in 10m; exponential 2s x1.5 to 5s; healthy on READY=1 only; hourly cap 30", doc["policy"])
	assert.Equal(t, steps("2s", "2s", "3s", "5s", "4.5s", "9.5s", "5s", "14.5s"), doc["schedule"])
	assert.Equal(t, map[string]any{"after": "14.5s", "reason": "respawn_budget_exhausted", "failed_starts": 5.0}, doc["park"])
	assert.Equal(t, map[string]any{"after": "10m0s"}, doc["refill"], "only READY=1 refills it at once")
	assert.Equal(t, []any{map[string]any{"outage": "20s", "parked": true, "restarts": 4.0, "parked_after": "14.5s"}}, doc["outages"])
	doc = runPlan(t, "--config="+file, "--max-respawns=2", "--outage=20s")
	assert.Equal(t, steps("2s", "2s", "3s", "5s"), doc["schedule"])
}

// The warnings of limits that never trip, each computed by the guards.
func TestPlanWarnsOfLimitsThatNeverTrip(t *testing.T) {
	// A chain gap shorter than the shortest gap between crashes after
	// healthy runs (10s + 500ms): it never escalates.
	doc := runPlan(t, "--max-respawns=40", "--window=30m", "--max-backoff=2s", "--chain-gap=10s", "--outage=1s")
	assert.Equal(t, []any{map[string]any{"code": "never_escalates", "limit": "chain",
		"message": "the chain (3 crashes after healthy runs, each within 10s of the last) never escalates: in the fastest loops it judges, crashes right after healthy runs never park within 1d"}},
		doc["warnings"])
	// With a gap of 11s it escalates: no warning.
	doc = runPlan(t, "--max-respawns=40", "--window=30m", "--max-backoff=2s", "--chain-gap=11s", "--outage=1s")
	assert.Equal(t, []any{}, doc["warnings"])

	// An hourly cap above what the budget and the chain let through.
	doc = runPlan(t, "--hourly-cap=10", "--outage=1s")
	assert.Equal(t, []any{
		map[string]any{"code": "parks_on_short_outage",
			"message": "every outage longer than 3s parks the key: its failed start at 3s parks it (respawn_budget_exhausted); a dependency down for a minute parks every key that needs it, until an operator resumes each"},
		map[string]any{"code": "never_trips", "limit": "hourly_cap",
			"message": "the hourly cap (10 restarts an hour) never trips: in the fastest loops it judges, failed starts park with respawn_budget_exhausted after 3s; crashes right after healthy runs park with needs_human after 41.5s"},
	}, doc["warnings"])
	// Without the chain it trips on crashes after healthy runs.
	doc = runPlan(t, "--hourly-cap=10", "--chain-max=0", "--outage=1s")
	assert.Len(t, doc["warnings"], 1)

	// A guard of 3 in 60s trips; one of 5 in 2s never does (restarts
	// are 500ms and more apart, and the budget parks failed starts first).
	doc = runPlan(t, "--guard=3/60s", "--chain-max=0", "--outage=1s")
	assert.Len(t, doc["warnings"], 1)
	doc = runPlan(t, "--guard=5/2s", "--chain-max=0", "--outage=1s")
	assert.Equal(t, map[string]any{"code": "never_trips", "limit": "guard",
		"message": "the guard (5 restarts in 2s) never trips: in the fastest loops it judges, failed starts park with respawn_budget_exhausted after 3s; crashes right after healthy runs never park within 1d"},
		doc["warnings"].([]any)[1])
	// With a planned rule, planned restarts come at once: the same guard
	// trips on them.
	doc = runPlan(t, "--guard=5/2s", "--chain-max=0", "--on-exit=75=planned", "--outage=1s")
	assert.Equal(t, "budget 3 in 1m; linear 500ms to 5s; healthy after 10s; guard 5 in 2s; exit rules 75=planned", doc["policy"])
	assert.Len(t, doc["warnings"], 1, "only parks_on_short_outage")
}

// The outage rows agree with replay.Simulate, which drives the same
// Supervisor its own way.
func TestPlanOutagesAgreeWithSimulate(t *testing.T) {
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Fleet = nil
	cfg.Budget = crashloop.BudgetConfig{MaxRespawns: 8, Window: 10 * time.Minute, InitialBackoff: time.Second, MaxBackoff: 20 * time.Second}
	pol, err := replay.CandidatePolicy(replay.Candidate{Config: cfg})
	require.NoError(t, err)
	outages := []time.Duration{time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 90 * time.Second, 5 * time.Minute}
	doc, err := plan(cfg, outages)
	require.NoError(t, err)
	for i, o := range outages {
		sim, err := replay.Simulate(pol, replay.Program{Outage: o}, planHorizon)
		require.NoError(t, err)
		row := doc.Outages[i]
		assert.Equal(t, sim.GaveUp, row.Parked, o)
		assert.Equal(t, len(sim.Starts)-1, row.Restarts, o)
		if sim.GaveUp {
			assert.Equal(t, jsonDuration(sim.GaveUpAt), *row.ParkedAfter, o)
		} else {
			assert.Equal(t, jsonDuration(o+sim.ExtraDelay), *row.RunningAfter, o)
		}
	}
}

func TestPlanText(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, planCmd([]string{"--outage=2s", "--outage=1m"}, &out))
	assert.Equal(t, `Policy: budget 3 in 1m; linear 500ms to 5s; healthy after 10s; chain 3 within 20m

A program whose every start fails at once:
  restart  wait   total
  1        500ms  500ms
  2        1s     1.5s
  3        1.5s   3s
  parked at 3s (respawn_budget_exhausted), on failed start 4

The budget refills: the whole schedule is back 1m after the last of those failures short of the park; a run of 10s (or READY=1) refills it at once.

Outages (every start fails until the dependency is back):
  outage  parked  restarts  then
  2s      no      3         running at 3s
  1m      yes     3         parked at 3s

Warnings:
  parks_on_short_outage: every outage longer than 3s parks the key: its failed start at 3s parks it (respawn_budget_exhausted); a dependency down for a minute parks every key that needs it, until an operator resumes each
`, out.String())
}

func TestPlanErrors(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "bad.json", `{"budget": {"window": "-1s"}}`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--outage=0s"}, `--outage: "0s" must be a duration > 0, such as 10s`},
		{[]string{"plan", "--window=-1s"}, "--window: must be > 0"},
		{[]string{"plan", "--config=" + file}, file + ": budget.window: must be > 0 (got -1s)"},
		{[]string{"plan", "x"}, `plan takes no arguments, got "x"`},
		{[]string{"plan", "--on-exit=3"}, `--on-exit: "3" must be MATCH=ACTION, such as 78=park or SIGKILL=stop`},
		{[]string{"simulate", "--on-exit=3"}, `--on-exit: "3" must be MATCH=ACTION, such as 78=park or SIGKILL=stop`},
	} {
		r := runCL(t, c.args...)
		assert.Equal(t, exitUsage, r.code, c.args)
		assert.Equal(t, "crashloop: "+c.want+"\n", r.stderr, c.args)
	}
	r := runCL(t, "plan", "--config="+file, "--window=2m", "--json")
	assert.Equal(t, 0, r.code, r.stderr)
}

// TestPlanProbe: with --probe-after 30s the park at 3s is probed at 33s,
// then 1m, 2m, 4m and 8m apart (16 x 30s), as the library schedules it;
// each outage is back at the first probe after its end. With
// --probe-max 2m the list ends at 2m. With --healthy-after 0 a probe
// passes only on READY=1: a warning says so.
func TestPlanProbe(t *testing.T) {
	probe := func(n int, afterPark, total, every string) any {
		return map[string]any{"probe": float64(n), "after_park": afterPark, "total": total, "interval": every}
	}
	doc := runPlan(t, "--probe-after=30s", "--outage=10s", "--outage=5m", "--outage=1h")
	assert.Equal(t, "budget 3 in 1m; linear 500ms to 5s; healthy after 10s; chain 3 within 20m; probe after 30s doubling to 8m", doc["policy"])
	assert.Equal(t, []any{probe(1, "30s", "33s", "30s"), probe(2, "1m30s", "1m33s", "1m0s"), probe(3, "3m30s", "3m33s", "2m0s"),
		probe(4, "7m30s", "7m33s", "4m0s"), probe(5, "15m30s", "15m33s", "8m0s")}, doc["probes"])
	assert.Equal(t, []any{
		map[string]any{"outage": "10s", "parked": true, "restarts": 3.0, "parked_after": "3s", "running_after": "33s", "probes": 1.0},
		map[string]any{"outage": "5m0s", "parked": true, "restarts": 3.0, "parked_after": "3s", "running_after": "7m33s", "probes": 4.0},
		map[string]any{"outage": "1h0m0s", "parked": true, "restarts": 3.0, "parked_after": "3s", "running_after": "1h3m33s", "probes": 11.0},
	}, doc["outages"])
	assert.Equal(t, []any{map[string]any{"code": "parks_on_short_outage",
		"message": "every outage longer than 3s parks the key: its failed start at 3s parks it (respawn_budget_exhausted); a dependency down for a minute parks every key that needs it, until a probe finds it back (the first 30s after the park)"}},
		doc["warnings"])

	doc = runPlan(t, "--probe-after=30s", "--probe-max=2m", "--healthy-after=0")
	assert.Equal(t, []any{probe(1, "30s", "33s", "30s"), probe(2, "1m30s", "1m33s", "1m0s"), probe(3, "3m30s", "3m33s", "2m0s")}, doc["probes"])
	assert.Contains(t, doc["warnings"], map[string]any{"code": "probe_needs_ready", "message": "probe_after is set but healthy_after is 0: " +
		"a probe's run becomes healthy, and resumes the key, only when the program sends READY=1; a program that never does is probed and never resumed"})
	_, ok := runPlan(t)["probes"]
	assert.False(t, ok, "no probe without --probe-after")

	var out bytes.Buffer
	require.NoError(t, planCmd([]string{"--probe-after=30s", "--outage=1m"}, &out))
	assert.Contains(t, out.String(), `
Its probes (probe_after), while every probe fails:
  probe  after the park  total   interval
  1      30s             33s     30s
  2      1m30s           1m33s   1m
  3      3m30s           3m33s   2m
  4      7m30s           7m33s   4m
  5      15m30s          15m33s  8m
  then one every 8m; a probe whose run is healthy resumes the key
`)
	assert.Contains(t, out.String(), "\n  1m      yes     3         parked at 3s, running at 1m33s (probe 2)\n")
}
