//go:build unix

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crashAfterReady returns a shell script that records each start in rec,
// becomes healthy (READY=1) and crashes (exit 1, or kill -KILL itself with
// kill set), until it has started n times; the nth start touches ready and
// stays up.
func crashAfterReady(rec, ready string, n int, kill bool) string {
	crash := "exit 1"
	if kill {
		crash = "kill -KILL $$"
	}
	return helper + " record=" + rec + " notify=READY=1; [ $(wc -l < " + rec + ") -ge " + strconv.Itoa(n) + " ] && exec " + helper +
		" touch=" + ready + " hang; " + crash
}

// One crashloop supervises one key, and one key is no fleet: without
// --redis the fleet breaker is off, so 50 restarts within a minute (more
// than its 40 an hour) are never held, and /metrics has no fleet gauges.
// The last run was killed by KILL: crashloop_last_exit_code says 137 and
// names the signal.
func TestSingleKeyIsNeverHeldByTheFleetBreaker(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec, ready := recordFile(t, dir), filepath.Join(dir, "ready")
	c := startCL(t, with("--log-format=json", "--metrics-addr=127.0.0.1:0", "--key=solo", "--chain-max=0", "--healthy-after=0",
		"--", "sh", "-c", crashAfterReady(rec, ready, 51, true))...)
	addr := metricsAddr(t, c)
	require.Eventually(t, func() bool { return exists(ready) }, patience, tick, "the 51st start")
	assert.Len(t, lines(t, rec), 51)
	assert.NotContains(t, c.stderr.String(), "fleet.breaker_tripped")
	assert.Equal(t, 50, strings.Count(c.stderr.String(), `"event":"agent.restart_scheduled"`), c.stderr.String())

	fams, _ := scrape(t, addr)
	assert.Equal(t, 1.0, value(t, fams, "crashloop_key_state", map[string]string{"key": "solo", "state": "running"}))
	assert.Equal(t, 50.0, value(t, fams, "crashloop_restarts_total", map[string]string{"key": "solo"}))
	assert.Equal(t, 137.0, value(t, fams, "crashloop_last_exit_code", map[string]string{"key": "solo", "signal": "KILL"}))
	for name := range fams {
		assert.False(t, strings.HasPrefix(name, "crashloop_fleet_"), "%s without --redis", name)
	}
	c.signal(t, syscall.SIGTERM)
	c.wait(t)
}

// A "fleet" in --config is what the user asked for: the breaker is on, and
// its 5th restart in the hour trips it and holds the key.
func TestConfigFleetTurnsTheBreakerOn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec, ready := recordFile(t, dir), filepath.Join(dir, "ready")
	config := filepath.Join(dir, "config.json")
	require.NoError(t, os.WriteFile(config, []byte(`{"fleet": {"restarts_per_hour": 5, "failing_fraction": 1, "min_failing": 1, "cooldown": "1h"}}`), 0o644))
	c := startCL(t, with("--log-format=json", "--metrics-addr=127.0.0.1:0", "--key=solo", "--chain-max=0", "--healthy-after=0",
		"--config="+config, "--", "sh", "-c", crashAfterReady(rec, ready, 51, false))...)
	addr := metricsAddr(t, c)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		fams, _ := scrape(ct, addr)
		f, ok := fams["crashloop_key_state"]
		require.True(ct, ok)
		require.Len(ct, f.Metric, 1)
		assert.Contains(ct, f.Metric[0].String(), `value:"held"`)
	}, patience, tick, "the hold")
	fams, _ := scrape(t, addr)
	assert.Equal(t, 1.0, value(t, fams, "crashloop_fleet_breaker_tripped", nil))
	assert.Equal(t, 5.0, value(t, fams, "crashloop_fleet_restarts_in_hour", nil))
	assert.Equal(t, 1.0, value(t, fams, "crashloop_fleet_keys", nil))
	assert.Equal(t, 0.0, value(t, fams, "crashloop_fleet_failing_keys", nil))
	assert.Equal(t, 1.0, value(t, fams, "crashloop_last_exit_code", map[string]string{"key": "solo", "signal": ""}))
	assert.Len(t, lines(t, rec), 5, "the first start and the 4 restarts before the trip")
	assert.Equal(t, 1, strings.Count(c.stderr.String(), `"event":"fleet.breaker_tripped"`), c.stderr.String())
	for _, line := range strings.Split(c.stderr.String(), "\n") {
		if strings.Contains(line, `"event":"fleet.breaker_tripped"`) { // the reason is the code; the sentence is in msg
			var got map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &got))
			assert.Equal(t, []any{"ERROR", "fleet crash-loop breaker TRIPPED: 5 restarts in 1h; holding restarts (0/1 failing, 5 restarts in the hour); backing off for 1h",
				"fleet_restart_rate", 5.0}, []any{got["level"], got["msg"], got["reason"], got["attempts"]}, line)
		}
	}
	assert.False(t, exists(ready))
	c.signal(t, syscall.SIGTERM)
	c.wait(t)
}
