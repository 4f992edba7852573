//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crashloopguard/crashloop/redisstore/redistest"
)

// TestASharedCauseIsHeldAndReleased runs five crashloops of five keys on
// one redis-server, with fleet.shared_cause in --config. Four programs fail
// alike while a flag file exists (exit 1, "connect 10.0.0.N:5432 refused"
// on stderr, N their pid: the cause normalizes it), the fifth with another
// cause, always. Each program's first start waits until all five have
// started, so that their failures come together. The fleet holds the four
// (fleet.cause_held, announced once across the five crashloops): they spend
// no budget and none parks, while the fifth parks beside them (exit 86).
// Once the flag file is gone, a held key's probe runs healthy and the four
// are released by themselves (fleet.cause_released, once) and run.
func TestASharedCauseIsHeldAndReleased(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	flag, gate, starts := filepath.Join(dir, "down"), filepath.Join(dir, "gate"), filepath.Join(dir, "starts")
	touch(t, flag)
	config := filepath.Join(dir, "config.json")
	require.NoError(t, os.WriteFile(config, []byte(`{"fleet": {"shared_cause": {"keys": 3, "window": "1m", "probe_every": "4s"}}}`), 0o644))
	// Backoffs long enough that no key spends its budget before the
	// others' first failures are judged.
	common := []string{"--log-format=json", "--redis=" + srv.URL(), "--config=" + config, "--initial-backoff=200ms", "--max-backoff=500ms",
		"--window=10s", "--healthy-after=3s", "--grace=2s", "--metrics-addr=127.0.0.1:0"}
	// The first start records itself and waits at the gate.
	const first = `test -e "$2" || "$0" record="$1" wait="$2"; `
	dbDown := first + `if [ -e "$3" ]; then echo "connect 10.0.0.$(($$ % 256)):5432 refused" >&2; exit 1; fi; exec "$0" record="$4" notify=READY=1 hang`
	badConfig := first + `echo "permission denied: /etc/app/$$.conf" >&2; exit 1`

	keys := []string{"k1", "k2", "k3", "k4"}
	cls := map[string]*bg{}
	running := map[string]string{}
	for _, key := range keys {
		running[key] = filepath.Join(dir, "running-"+key)
		cls[key] = startCL(t, append(common, "--key="+key, "--", "sh", "-c", dbDown, helper, starts, gate, flag, running[key])...)
	}
	cls["k5"] = startCL(t, append(common, "--key=k5", "--", "sh", "-c", badConfig, helper, starts, gate)...)
	t.Cleanup(func() {
		if t.Failed() {
			for _, key := range append(keys, "k5") {
				t.Logf("%s:\n%s", key, cls[key].stderr.String())
			}
		}
	})
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.Len(ct, lines(ct, starts), 5) }, patience, tick, "the five first starts")
	touch(t, gate)

	const cause = "exit status N: connect N.N.N.N:N refused"
	count := func(event string) (n int) {
		for _, c := range cls {
			n += strings.Count(c.stderr.String(), `"event":"`+event+`"`)
		}
		return n
	}
	// Held: each of the four has a restart held for the cause; the fifth
	// parks (86).
	heldFor := func(key string) (causes []any) {
		for _, ev := range logEvents(cls[key].stderr.String()) {
			if ev["event"] == "agent.restart_scheduled" && ev["key"] == key && ev["held"] == true {
				causes = append(causes, []any{ev["reason"], ev["cause"]})
			}
		}
		return causes
	}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		for _, key := range keys {
			assert.NotEmpty(ct, heldFor(key), key)
		}
		assert.True(ct, cls["k5"].exited())
	}, patience, tick, "the four held, the fifth parked")
	for _, key := range keys {
		for _, held := range heldFor(key) {
			assert.Equal(t, []any{"shared_cause", cause}, held, key)
		}
	}
	assert.Equal(t, exitParked, cls["k5"].wait(t), cls["k5"].stderr.String())
	assert.Equal(t, 1, strings.Count(cls["k5"].stderr.String(), `"event":"agent.startup_exhausted"`), cls["k5"].stderr.String())
	assert.Equal(t, 1, count("fleet.cause_held"), "the hold is announced once across the crashloops")
	for _, c := range cls {
		for _, ev := range logEvents(c.stderr.String()) {
			if ev["event"] == "fleet.cause_held" {
				assert.Equal(t, []any{"fleet", "shared_cause", cause, 3.0, 3.0, "4s"},
					[]any{ev["key"], ev["reason"], ev["cause"], ev["attempts"], ev["limit"], ev["window"]}, ev)
			}
		}
	}

	// /status of a held key: held, its cause; the fleet holds the cause;
	// and status --redis.
	s := schemas(t, "live", "status")
	var live string
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		_, live = get(ct, http.MethodGet, "http://"+metricsAddr(t, cls["k4"])+"/status")
		var ld struct {
			Keys  []map[string]any
			Fleet map[string]any
		}
		require.NoError(ct, json.Unmarshal([]byte(live), &ld))
		require.Len(ct, ld.Keys, 1, live)
		assert.Equal(ct, []any{"held", cause}, []any{ld.Keys[0]["state"], ld.Keys[0]["cause"]}, live)
		assert.Equal(ct, []any{cause}, ld.Fleet["held_causes"], live)
	}, patience, tick, "the hold in /status")
	valid(t, s["live"], live)
	r := runCL(t, "status", "--redis", srv.URL(), "--json")
	require.Equal(t, 0, r.code, r.stderr)
	valid(t, s["status"], r.stdout)
	var held struct {
		Fleet struct {
			HeldCauses []string `json:"held_causes"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &held))
	assert.Equal(t, []string{cause}, held.Fleet.HeldCauses, r.stdout)
	r = runCL(t, "status", "--redis", srv.URL())
	require.Equal(t, 0, r.code, r.stderr)
	assert.True(t, strings.HasSuffix(r.stdout, "\nrestarts held for a shared cause: "+cause+"\n"), r.stdout)

	// Released by themselves once the cause is gone.
	require.NoError(t, os.Remove(flag))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		for _, key := range keys {
			assert.Equal(ct, 1, written(running[key]), key)
		}
		assert.Equal(ct, 1, count("fleet.cause_released"))
	}, patience, tick, "the four running, released once")
	for _, key := range keys {
		c := cls[key]
		assert.False(t, c.exited(), key)
		assert.NotContains(t, c.stderr.String(), `"event":"agent.startup_exhausted"`, "%s parked", key)
	}
	for _, c := range cls {
		for _, ev := range logEvents(c.stderr.String()) {
			if ev["event"] == "fleet.cause_released" {
				assert.Equal(t, []any{"shared_cause", cause}, []any{ev["reason"], ev["cause"]}, ev)
			}
		}
	}
	r = runCL(t, "status", "--redis", srv.URL(), "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var st redisStatus
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	assert.Equal(t, []string{"k5"}, keysOf(st.Parked), "the fifth alone is parked")
	assert.Contains(t, st.Parked["k5"].StderrTail, "permission denied: /etc/app/", "parked for its own cause")
	for _, key := range keys {
		cls[key].signal(t, syscall.SIGTERM)
		assert.Equal(t, 128+int(syscall.SIGTERM), cls[key].wait(t), fmt.Sprintf("%s: %s", key, cls[key].stderr.String()))
	}
}

// logEvents returns the lines of crashloop's JSON log on stderr that carry
// an event, skipping the program's own lines.
func logEvents(stderr string) []map[string]any {
	var out []map[string]any
	for line := range strings.Lines(stderr) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["event"] != nil {
			out = append(out, m)
		}
	}
	return out
}
