//go:build unix

package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// schemaDir holds the JSON Schema of every document crashloop writes.
const schemaDir = "../../docs/schema"

// schemas compiles docs/schema/NAME.json for each name, with common.json
// (which they refer to) loaded from the folder, not fetched.
func schemas(t *testing.T, names ...string) map[string]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	files, err := filepath.Glob(filepath.Join(schemaDir, "*.json"))
	require.NoError(t, err)
	ids := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(data)))
		require.NoError(t, err, f)
		id := doc.(map[string]any)["$id"].(string)
		require.NoError(t, c.AddResource(id, doc), f)
		ids[strings.TrimSuffix(filepath.Base(f), ".json")] = id
	}
	out := map[string]*jsonschema.Schema{}
	for _, name := range names {
		s, err := c.Compile(ids[name])
		require.NoError(t, err, name)
		out[name] = s
	}
	return out
}

// valid asserts that doc, a JSON document, is valid against s.
func valid(t testing.TB, s *jsonschema.Schema, doc string) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	require.NoError(t, err, doc)
	assert.NoError(t, s.Validate(inst), doc)
}

// TestEveryJSONOutputHasItsSchema validates every JSON document crashloop
// writes against its JSON Schema in docs/schema/: status of a state file
// and of Redis, GET /status, replay, simulate, tune and each line of the JSON
// log, with a park in each, and checks that they agree on the park.
func TestEveryJSONOutputHasItsSchema(t *testing.T) {
	t.Parallel()
	s := schemas(t, "status", "live", "replay", "simulate", "tune", "plan", "log")
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	logs := map[string]string{}

	// status --state --json, empty and with parks: one that exited, one
	// that a signal killed.
	r := runCL(t, with("--state", state, "--log-format=json", "--max-respawns=1", "--probe-after=1h", "--key=exited", "--", helper, "exit=3")...)
	require.Equal(t, exitParked, r.code, r.stderr)
	logs["park with --state"] = r.stderr
	r = runCL(t, with("--state", state, "--log-format=json", "--max-respawns=0", "--key=killed", "--", helper, "kill=KILL")...)
	require.Equal(t, exitParked, r.code, r.stderr)
	logs["park by a signal"] = r.stderr
	r = runCL(t, with("--state", state, "--log-format=json", "--key=exited", "--", helper, "exit=0")...)
	require.Equal(t, exitParked, r.code, r.stderr)
	logs["refusal"] = r.stderr
	// A park stopped by its health check, with a stderr tail, whose
	// --on-park-exec hook fails: the hook's and the health check's lines.
	r = runCL(t, with("--state", state, "--log-format=json", "--max-respawns=0", "--key=unhealthy", "--health-cmd=echo db down; exit 1",
		"--health-interval=5ms", "--health-retries=1", "--on-park-exec=echo paging; exit 2",
		"--", "sh", "-c", `echo "fatal: no db" >&2; exec sleep 1000`)...)
	require.Equal(t, exitParked, r.code, r.stderr)
	var own []string // crashloop's lines, without the program's stderr, which passes through
	for _, line := range strings.SplitAfter(r.stderr, "\n") {
		if line != "fatal: no db\n" {
			own = append(own, line)
		}
	}
	logs["park by a health check, with a hook"] = strings.Join(own, "")
	assert.Equal(t, strings.Count(r.stderr, "\n")-1, strings.Count(logs["park by a health check, with a hook"], "\n"),
		"the program's one line passed through: %s", r.stderr)
	assert.Contains(t, r.stderr, `"msg":"--on-park-exec exited with status 2","key":"unhealthy","event":"agent.startup_exhausted","took":"`)
	assert.Contains(t, r.stderr, `"output":"paging\n","exit_code":2}`)
	r = runCL(t, "status", "--state", state, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	valid(t, s["status"], r.stdout)
	var st struct{ Parks []map[string]any }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Len(t, st.Parks, 3, r.stdout)
	assert.Equal(t, 3.0, st.Parks[0]["exit_code"], "exited: %v", st.Parks[0])
	assert.Equal(t, 1.0, st.Parks[0]["attempts"], "the one respawn the budget allowed")
	assert.Equal(t, formatTime(parseTime(t, st.Parks[0]["since"]).Add(time.Hour)), st.Parks[0]["next_probe"], "--probe-after 1h")
	assert.NotContains(t, st.Parks[1], "next_probe", "probes off")
	assert.Equal(t, "KILL", st.Parks[1]["signal"], "killed: %v", st.Parks[1])
	assert.NotContains(t, st.Parks[1], "exit_code")
	assert.Equal(t, map[string]any{"key": "unhealthy", "reason": "respawn_budget_exhausted", "since": st.Parks[2]["since"], "attempts": 0.0,
		"last_error": "sh stopped as unhealthy (1 failed health check in a row: db down), killed by signal TERM", "signal": "TERM",
		"stderr_tail": "fatal: no db\n"}, st.Parks[2])
	empty := filepath.Join(dir, "empty.json")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	r = runCL(t, "status", "--state", empty, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	valid(t, s["status"], r.stdout)
	assert.JSONEq(t, `{"source": "state", "where": "`+empty+`", "parks": []}`, r.stdout)

	// status --redis --json, with a park and the fleet breaker.
	srv := redistest.Start(t)
	r = runCL(t, with("--redis", srv.URL(), "--log-format=json", "--max-respawns=1", "--key=web", "--", helper, "exit=2")...)
	require.Equal(t, exitParked, r.code, r.stderr)
	logs["park on Redis"] = r.stderr
	r = runCL(t, "status", "--redis", srv.URL(), "--json")
	require.Equal(t, 0, r.code, r.stderr)
	valid(t, s["status"], r.stdout)
	var rst struct {
		Parks []map[string]any
		Fleet map[string]any
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rst))
	require.Len(t, rst.Parks, 1, r.stdout)
	assert.Equal(t, 1.0, rst.Parks[0]["attempts"], "the same count as of a state file's park")
	assert.Contains(t, rst.Fleet, "total_keys")

	// GET /status of a crashloop waiting on a park, then running.
	token := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(token, []byte("t0ken"), 0o600))
	c := startCL(t, with("--log-format=json", "--on-park=wait", "--max-respawns=0", "--metrics-addr=127.0.0.1:0", "--admin-token-file", token,
		"--probe-after=1h", "--key=live", "--", helper, "exit=4")...)
	addr := metricsAddr(t, c)
	var live string
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		_, live = get(ct, http.MethodGet, "http://"+addr+"/status")
		assert.Contains(ct, live, `"park"`)
		assert.Contains(ct, live, `"exit_code"`)
	}, patience, tick, "the park in /status, with how the last run ended")
	valid(t, s["live"], live)
	var ld struct {
		Keys []struct {
			Park map[string]any
		}
		ProgramStatus string `json:"program_status"`
	}
	require.NoError(t, json.Unmarshal([]byte(live), &ld))
	require.Len(t, ld.Keys, 1, live)
	assert.Equal(t, map[string]any{"key": "live", "reason": "respawn_budget_exhausted", "since": ld.Keys[0].Park["since"],
		"attempts": 0.0, "last_error": helper + " exited with status 4", "exit_code": 4.0,
		"next_probe": formatTime(parseTime(t, ld.Keys[0].Park["since"]).Add(time.Hour))}, ld.Keys[0].Park)
	assert.Empty(t, ld.ProgramStatus, "no program runs: no status")
	c.signal(t, syscall.SIGTERM)
	assert.Equal(t, 0, c.wait(t), c.stderr.String())
	logs["waiting on a park"] = c.stderr.String()

	// GET /status of a run with a health check.
	c = startCL(t, with("--log-format=json", "--metrics-addr=127.0.0.1:0", "--key=checked", "--health-cmd=echo fine",
		"--health-interval=5ms", "--", helper, "hang")...)
	addr = metricsAddr(t, c)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		_, live = get(ct, http.MethodGet, "http://"+addr+"/status")
		assert.Contains(ct, live, `"health":{"status":"healthy"`)
	}, patience, tick, "the health in /status")
	valid(t, s["live"], live)
	var hd struct{ Health map[string]any }
	require.NoError(t, json.Unmarshal([]byte(live), &hd))
	assert.Equal(t, map[string]any{"status": "healthy", "failing_streak": 0.0, "last_check": hd.Health["last_check"], "last_output": "fine\n"}, hd.Health)
	assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$`, hd.Health["last_check"], "a time as every document writes it")
	c.signal(t, syscall.SIGTERM)
	assert.Equal(t, 128+int(syscall.SIGTERM), c.wait(t), c.stderr.String())
	logs["a healthy run"] = c.stderr.String()

	// replay --json of crashloop's own log and of a CSV history with a
	// malformed line.
	logFile := filepath.Join(dir, "log.json")
	require.NoError(t, os.WriteFile(logFile, []byte(logs["park with --state"]), 0o644))
	r = runCL(t, "replay", "--json", "--max-respawns=1", "--initial-backoff=1ms", "--max-backoff=3ms", "--window=10s", "--healthy-after=10s", logFile)
	require.Equal(t, 0, r.code, r.stderr)
	valid(t, s["replay"], r.stdout)
	assert.Contains(t, r.stdout, `"last_park": {`)
	history := filepath.Join(dir, "h.csv")
	require.NoError(t, os.WriteFile(history, []byte("time,key,event,code\n"+
		"1714557600,a,start\n1714557601,a,exit,1\n1714557601.2,a,start\n1714557602,a,exit,1\n"+
		"1714557602.5,a,start\n1714557603,a,exit,1\n1714557603.5,a,start\n1714557604,a,exit,1\n"+
		"1714557604.5,a,start\n1714557605,a,exit,1\nbad line\n"), 0o644))
	r = runCL(t, "replay", "--json", "--defaults", "--config", empty, history)
	require.Equal(t, exitUsage, r.code, "an empty --config is not a configuration: %s", r.stderr)
	cfg := filepath.Join(dir, "wide.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"budget": {"max_respawns": 10}}`), 0o644))
	r = runCL(t, "replay", "--json", "--defaults", "--config", cfg, history)
	require.Equal(t, 0, r.code, r.stderr)
	valid(t, s["replay"], r.stdout)
	assert.Contains(t, r.stdout, `"errors": [`)
	assert.NotContains(t, r.stdout, "0001-01-01", "no zero time")
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	for _, r := range rep["reports"].([]any) {
		delete(r.(map[string]any), "config") // the format of --config, where null turns a guard off
	}
	data, err := json.Marshal(rep)
	require.NoError(t, err)
	assert.NotContains(t, string(data), "null", "absent values are left out")

	// tune --json of a history with real crash loops, compared with a
	// --config, and of one with none (no time to park).
	for _, args := range [][]string{{"tune", "--json", "--config", cfg, tuneHistory}, {"tune", "--json", "--max-false-parks=1", history},
		{"tune", "--json", "../../replay/testdata/real/docker-stop-deck-chores-2019.jsonl"}} {
		r = runCL(t, args...)
		require.Equal(t, 0, r.code, r.stderr)
		valid(t, s["tune"], r.stdout)
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
		data, err := json.Marshal(dropConfigs(doc))
		require.NoError(t, err)
		assert.NotContains(t, string(data), "null", "absent values are left out: %v", args)
		assert.NotContains(t, string(data), "0001-01-01", "no zero time")
	}

	// simulate --json, the table's programs and programs of one's own.
	// An outage of 10 keys under the hold on a shared cause and a probe:
	// every field of an outage (the fleet breaker trips beside the hold).
	hold := filepath.Join(t.TempDir(), "hold.json")
	require.NoError(t, os.WriteFile(hold, []byte(`{"fleet": {"restarts_per_hour": 3, "shared_cause": {"keys": 5}}}`), 0o600))
	for _, args := range [][]string{{"simulate", "--json"}, {"simulate", "--json", "--crash-after=30s", "--outage=2m", "--max-respawns=5"},
		{"simulate", "--json", "--reference=false", "--probe-after=30s", "--config", hold, "--outage=1m", "--keys=10"}} {
		r = runCL(t, args...)
		require.Equal(t, 0, r.code, r.stderr)
		valid(t, s["simulate"], r.stdout)
		assert.NotContains(t, r.stdout, "null", "absent values are left out")
	}
	assert.Contains(t, r.stdout, `"cause_released_after"`)
	assert.Contains(t, r.stdout, `"fleet_tripped_after"`)

	// plan --json: the defaults, and a policy with a jittered curve, every
	// limit and warning, and an outage that does not park.
	for _, args := range [][]string{{"plan", "--json"}, {"plan", "--json", "--jitter=full", "--guard=5/2s", "--hourly-cap=10",
		"--chain-gap=5s", "--on-exit=3=park", "--outage=1s", "--outage=1h"}} {
		r = runCL(t, args...)
		require.Equal(t, 0, r.code, r.stderr)
		valid(t, s["plan"], r.stdout)
		assert.NotContains(t, r.stdout, "null", "absent values are left out")
	}

	// A stop rule's line.
	r = runCL(t, with("--log-format=json", "--key=stopped", "--on-exit=5=stop", "--", helper, "exit=5")...)
	require.Equal(t, 5, r.code, r.stderr)
	logs["a stop rule"] = r.stderr

	// Every line of the JSON log, and the park in each log the same.
	for name, log := range logs {
		lines := strings.Split(strings.TrimSpace(log), "\n")
		require.NotEmpty(t, lines, name)
		for _, line := range lines {
			valid(t, s["log"], line)
		}
	}
	assert.Contains(t, logs["park by a signal"], `"signal":"KILL"`)
	assert.Contains(t, logs["park with --state"], `"next_probe":"`)
	assert.Contains(t, logs["park with --state"], `"exit_code":3`)
}

// dropConfigs returns v without its "config" values (the format of
// --config, where null turns a guard off), at every depth.
func dropConfigs(v any) any {
	switch v := v.(type) {
	case map[string]any:
		delete(v, "config")
		for k, x := range v {
			v[k] = dropConfigs(x)
		}
	case []any:
		for i, x := range v {
			v[i] = dropConfigs(x)
		}
	}
	return v
}

// parseTime reads a time of a JSON document, such as a park's since.
func parseTime(t *testing.T, v any) time.Time {
	t.Helper()
	s, ok := v.(string)
	require.True(t, ok, "%v is no time", v)
	at, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return at
}
