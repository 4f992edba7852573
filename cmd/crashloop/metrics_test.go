//go:build unix

package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// metricsAddr waits for crashloop's line saying where it serves, and
// returns the address.
func metricsAddr(t *testing.T, c *bg) string {
	t.Helper()
	var addr string
	require.Eventually(t, func() bool {
		for _, l := range strings.Split(c.stderr.String(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(l), &rec) == nil && rec["addr"] != nil {
				addr = rec["addr"].(string)
				return true
			}
		}
		return false
	}, patience, tick, "the metrics server's address")
	return addr
}

func get(t tb, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// scrape parses a /metrics response with the exposition format's parser.
func scrape(t tb, addr string) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	code, body := get(t, http.MethodGet, "http://"+addr+"/metrics")
	require.Equal(t, http.StatusOK, code)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(t, err)
	return fams, body
}

// value returns the value of the series of family name with labels.
func value(t require.TestingT, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	fam, ok := fams[name]
	require.True(t, ok, "no family %s", name)
	for _, m := range fam.Metric {
		match := true
		for _, l := range m.Label {
			if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
				match = false
			}
		}
		if match {
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Counter != nil:
				return m.Counter.GetValue()
			}
		}
	}
	require.Failf(t, "no series", "%s%v", name, labels)
	return 0
}

// A running program: /metrics, /status (with the program's STATUS= text)
// and /healthz answer over HTTP, read-only, and promtool finds the scrape
// clean.
func TestMetricsOfARunningProgram(t *testing.T) {
	t.Parallel()
	c := startCL(t, with("--log-format=json", "--metrics-addr=127.0.0.1:0", "--key=api", "--",
		helper, "notify=STATUS=serving requests", "notify=READY=1", "hang")...)
	addr := metricsAddr(t, c)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, body := get(c, http.MethodGet, "http://"+addr+"/status")
		assert.Contains(c, body, "serving requests")
	}, patience, tick, "the program's status")

	fams, body := scrape(t, addr)
	assert.Equal(t, 1.0, value(t, fams, "crashloop_key_state", map[string]string{"key": "api", "state": "running"}))
	assert.Equal(t, 0.0, value(t, fams, "crashloop_restarts_total", map[string]string{"key": "api"}))
	assert.NotContains(t, fams, "crashloop_fleet_breaker_tripped", "no fleet breaker without --redis")
	assert.NotContains(t, fams, "crashloop_parked")
	assert.NotContains(t, fams, "crashloop_last_exit_code", "no run has ended")

	var st struct {
		Keys []struct {
			Key   string `json:"key"`
			State string `json:"state"`
		} `json:"keys"`
		ProgramStatus string `json:"program_status"`
	}
	_, doc := get(t, http.MethodGet, "http://"+addr+"/status")
	require.NoError(t, json.Unmarshal([]byte(doc), &st), doc)
	require.Len(t, st.Keys, 1, doc)
	assert.Equal(t, "api", st.Keys[0].Key)
	assert.Equal(t, "running", st.Keys[0].State)
	assert.Equal(t, "serving requests", st.ProgramStatus)

	code, ok := get(t, http.MethodGet, "http://"+addr+"/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", ok)
	code, _ = get(t, http.MethodPost, "http://"+addr+"/metrics")
	assert.Equal(t, http.StatusMethodNotAllowed, code, "read-only")

	// promtool's own check of a real scrape.
	promtool, err := exec.LookPath("promtool")
	require.NoError(t, err, "promtool is missing: run ./test.sh, which installs it (Debian's package prometheus)")
	file := filepath.Join(t.TempDir(), "scrape.txt")
	require.NoError(t, os.WriteFile(file, []byte(body), 0o644))
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = strings.NewReader(body)
	out, err := check.CombinedOutput()
	assert.NoError(t, err, string(out))
	assert.Empty(t, strings.TrimSpace(string(out)), "promtool check metrics finds nothing to say")

	c.signal(t, syscall.SIGTERM)
	c.wait(t)
}

// A program that failed and waits out its backoff: the restart, the key's
// state and the event are in the scrape.
func TestMetricsOfARestart(t *testing.T) {
	t.Parallel()
	c := startCL(t, "--log-format=json", "--metrics-addr=127.0.0.1:0", "--key=job", "--max-respawns=1",
		"--initial-backoff=1h", "--max-backoff=1h", "--window=10h", "--grace=2s", "--", helper, "exit=3")
	addr := metricsAddr(t, c)
	var fams map[string]*dto.MetricFamily
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		fams, _ = scrape(c, addr)
		f, ok := fams["crashloop_key_state"]
		require.True(c, ok, "no crashloop_key_state")
		require.Len(c, f.Metric, 1)
		assert.Contains(c, f.Metric[0].String(), `value:"backoff"`)
		// The event is counted after the state it announces is committed:
		// wait for the count itself, not for the state.
		assert.Equal(c, 1.0, value(c, fams, "crashloop_events_total", map[string]string{"kind": "agent.respawn_scheduled"}))
	}, patience, tick, "the backoff and its event")
	assert.Equal(t, 1.0, value(t, fams, "crashloop_key_state", map[string]string{"key": "job", "state": "backoff"}))
	assert.Equal(t, 1.0, value(t, fams, "crashloop_restarts_total", map[string]string{"key": "job"}))
	assert.Equal(t, 1.0, value(t, fams, "crashloop_events_total", map[string]string{"kind": "agent.respawn_scheduled"}))
	assert.Equal(t, 0.0, value(t, fams, "crashloop_events_total", map[string]string{"kind": "agent.startup_exhausted"}))
	assert.Equal(t, 3.0, value(t, fams, "crashloop_last_exit_code", map[string]string{"key": "job", "signal": ""}))
	c.signal(t, syscall.SIGTERM)
	assert.Equal(t, 128+int(syscall.SIGTERM), c.wait(t), "stopped in the backoff: 128+TERM")
}

// An address that cannot be bound is one line and exit status 1, before
// the program starts.
func TestMetricsAddressInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	started := filepath.Join(t.TempDir(), "started")
	r := runCL(t, with("--metrics-addr="+ln.Addr().String(), "--", helper, "touch="+started, "exit=0")...)
	assert.Equal(t, exitError, r.code)
	assert.Equal(t, "crashloop: --metrics-addr "+ln.Addr().String()+": bind: address already in use\n", r.stderr)
	assert.NoFileExists(t, started)
}
