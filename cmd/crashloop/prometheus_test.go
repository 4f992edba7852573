//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A real Prometheus for the tests: started on a free loopback port with a
// configuration that scrapes one target every second and evaluates a test
// copy of deploy/prometheus/alerts.yml every second.

// promServer is a Prometheus that a test started.
type promServer struct {
	url string // http://127.0.0.1:PORT
}

// testRules returns the alert rules of deploy/prometheus/alerts.yml made
// quick for a test, whatever their expressions say: every "for:" becomes
// 1s, every "keep_firing_for:" 0s, and every range of a selector or a
// subquery ("[15m]", "[1h:1m]") 5s, so that an alert fires within seconds
// of its condition and resolves within seconds of its end.
func testRules(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	require.NoError(t, err)
	rules := string(data)
	forLine := regexp.MustCompile(`(?m)^(\s*)for:\s*\S+\s*$`)
	require.True(t, forLine.MatchString(rules), "alerts.yml has a for: to shorten")
	rules = forLine.ReplaceAllString(rules, "${1}for: 1s")
	rules = regexp.MustCompile(`(?m)^(\s*)keep_firing_for:\s*\S+\s*$`).ReplaceAllString(rules, "${1}keep_firing_for: 0s")
	rules = regexp.MustCompile(`\[\s*\d+[smhdwy][0-9smhdwy]*\s*(:[^\]]*)?\]`).ReplaceAllString(rules, "[5s]")
	require.Contains(t, rules, "alert: CrashloopParked")
	return rules
}

// startPrometheus starts prometheus scraping targets (host:port) as job
// crashloop every second with the rules of testRules, and returns once it
// is ready. The test's cleanup stops it. A port another process took
// between the pick and the bind is retried on a new one.
func startPrometheus(t *testing.T, targets ...string) *promServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	require.NoError(t, err, "prometheus is missing: run ./test.sh, which installs it (Debian's package prometheus)")
	dir := t.TempDir()
	rules := filepath.Join(dir, "alerts.yml")
	require.NoError(t, os.WriteFile(rules, []byte(testRules(t)), 0o644))
	quoted := make([]string, len(targets))
	for i, a := range targets {
		quoted[i] = strconv.Quote(a)
	}
	config := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: crashloop
    static_configs:
      - targets: [%s]
`, rules, strings.Join(quoted, ", "))), 0o644))
	for attempt := 1; ; attempt++ {
		port := freePort(t)
		out := &buffer{}
		cmd := exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, fmt.Sprint("data", attempt)),
			"--web.listen-address=127.0.0.1:"+strconv.Itoa(port), "--log.level=warn")
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		require.NoError(t, cmd.Start())
		exited := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(exited)
		}()
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-exited
		})
		p := &promServer{url: "http://127.0.0.1:" + strconv.Itoa(port)}
		up := false
		require.Eventually(t, func() bool {
			select {
			case <-exited:
				return true
			default:
			}
			resp, err := http.Get(p.url + "/-/ready")
			if err != nil {
				return false
			}
			resp.Body.Close()
			up = resp.StatusCode == http.StatusOK
			return up
		}, patience, 20*tick, "prometheus to be ready")
		if up {
			return p
		}
		if !strings.Contains(out.String(), "address already in use") || attempt == 5 {
			t.Fatalf("prometheus exited:\n%s", out.String())
		}
	}
}

// freePort returns a TCP port on 127.0.0.1 that the kernel found free.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// promAlert is an alert as Prometheus's /api/v1/alerts lists it.
type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"` // pending or firing
}

// alerts returns the active alerts (pending or firing) of Prometheus's own
// alerts API.
func (p *promServer) alerts(t tb) []promAlert {
	t.Helper()
	code, body := get(t, http.MethodGet, p.url+"/api/v1/alerts")
	require.Equal(t, http.StatusOK, code, body)
	var doc struct {
		Status string `json:"status"`
		Data   struct {
			Alerts []promAlert `json:"alerts"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &doc), body)
	require.Equal(t, "success", doc.Status, body)
	return doc.Data.Alerts
}

// alert returns the state of the alert name for key ("pending", "firing"),
// "" when it is not active.
func (p *promServer) alert(t tb, name, key string) string {
	t.Helper()
	state := ""
	for _, a := range p.alerts(t) {
		if a.Labels["alertname"] == name && a.Labels["key"] == key {
			if state != "" {
				t.Errorf("%s for %s is listed twice", name, key)
			}
			state = a.State
		}
	}
	return state
}

// TestTestRules: the test copy of the rules has every for: at 1s and no
// long range left, and promtool finds it valid.
func TestTestRules(t *testing.T) {
	t.Parallel()
	rules := testRules(t)
	fors := regexp.MustCompile(`(?m)^\s*for:\s*(\S+)\s*$`).FindAllStringSubmatch(rules, -1)
	require.NotEmpty(t, fors)
	for _, f := range fors {
		assert.Equal(t, "1s", f[1])
	}
	assert.NotRegexp(t, `\[\d+[mhdwy]`, rules, "no long range is left")
	file := filepath.Join(t.TempDir(), "alerts.yml")
	require.NoError(t, os.WriteFile(file, []byte(rules), 0o644))
	out, err := exec.Command("promtool", "check", "rules", file).CombinedOutput()
	require.NoError(t, err, string(out))
}

// query returns the value of the instant query q, as Prometheus formats
// it, or "" when the result is empty. It expects one series at most.
func (p *promServer) query(t tb, q string) string {
	t.Helper()
	var doc struct {
		Status string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	code, body := get(t, http.MethodGet, p.url+"/api/v1/query?query="+url.QueryEscape(q))
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &doc), body)
	require.Equal(t, "success", doc.Status)
	require.LessOrEqual(t, len(doc.Data.Result), 1, "query %s", q)
	if len(doc.Data.Result) == 0 {
		return ""
	}
	return doc.Data.Result[0].Value[1].(string)
}

// waitFor waits until the query q has the value want.
func (p *promServer) waitFor(t *testing.T, q, want string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, want, p.query(c, q)) }, patience, 100*time.Millisecond, "%s == %s", q, want)
}
