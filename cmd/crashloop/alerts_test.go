//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
)

// TestReplicasRaiseOneAlertEach runs two crashloop --redis replicas of one
// key, each with a healthy program, and a real Prometheus that scrapes
// both with a test copy of deploy/prometheus/alerts.yml (its for: waits
// cut to 2s). A third replica of the deployment, this test through the
// library, parks the key and then trips the shared fleet breaker with 40
// restarts of other keys. Both crashloops export the park and the tripped
// breaker (Prometheus holds two series of each), and Prometheus fires
// exactly one CrashloopParked and one CrashloopFleetBreakerTripped, and
// nothing else.
func TestReplicasRaiseOneAlertEach(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const prefix = "alerts"
	var addrs []string
	for range 2 {
		c := startCL(t, "--log-format=json", "--metrics-addr=127.0.0.1:0", "--redis="+srv.URL(), "--redis-prefix="+prefix,
			"--key=shared", "--grace=2s", "--", helper, "notify=READY=1", "hang")
		addrs = append(addrs, metricsAddr(t, c))
		t.Cleanup(func() { c.signal(t, syscall.SIGTERM); c.wait(t) })
	}
	prom := startPrometheus(t, addrs)
	prom.waitFor(t, `count(up{job="crashloop"} == 1)`, "2")

	// The third replica: the library on the same deployment.
	client, err := redisstore.NewClient(srv.URL(), "", redisstore.DefaultTimeout)
	require.NoError(t, err)
	store := redisstore.New(client, redisstore.Options{Prefix: prefix})
	t.Cleanup(func() { _ = store.Close(); _ = client.Close() })
	sup, err := crashloop.NewSharedSupervisor(crashloop.DefaultSupervisorConfig(), store)
	require.NoError(t, err)
	ctx := context.Background()

	d := sup.Decide(ctx, "shared", crashloop.RunResult{Err: crashloop.Permanent(errors.New("bad config"))})
	require.ErrorIs(t, d.Err, crashloop.ErrParked)
	prom.waitFor(t, `count(crashloop_parked{key="shared",reason="permanent_error"} == 1)`, "2") // one per replica
	prom.waitFor(t, `count(crashloop_parked_since_timestamp_seconds{key="shared"} > 0)`, "2")

	for i := range crashloop.DefaultFleetConfig().RestartsPerHour {
		d := sup.Decide(ctx, "other-"+strconv.Itoa(i), crashloop.RunResult{Err: crashloop.Restart(nil)})
		require.Equal(t, i == 39, d.Action == crashloop.ActionHold, "restart %d", i+1)
	}
	prom.waitFor(t, `count(crashloop_fleet_breaker_tripped == 1)`, "2") // one per replica
	// The fleet's keys are the deployment's, as the ledger counts them, on
	// both replicas (they read 0 under --redis before any park).
	fleet := sup.Status(ctx).Fleet
	require.NotNil(t, fleet)
	require.Positive(t, fleet.TotalChannels)
	prom.waitFor(t, `count(crashloop_fleet_keys == `+strconv.Itoa(fleet.TotalChannels)+`)`, "2")

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		alerts := prom.alerts(c)
		assert.Equal(c, []string{
			"CrashloopFleetBreakerTripped firing {job=crashloop,severity=warning}",
			"CrashloopParked firing {job=crashloop,key=shared,reason=permanent_error,severity=critical}",
		}, alerts)
	}, patience, 100*time.Millisecond, "one alert for the park and one for the trip")
}

// promServer is a Prometheus server of a test.
type promServer struct {
	url string
}

// startPrometheus runs /usr/bin/prometheus (or the one on PATH) scraping
// targets as job crashloop every second, with a copy of the alert rules
// whose for: waits are 2s, evaluated every second. It is killed when the
// test ends.
func startPrometheus(t *testing.T, targets []string) *promServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	require.NoError(t, err, "prometheus is missing: run ./test.sh, which installs it (Debian's package prometheus)")
	dir := t.TempDir()
	rules, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	require.NoError(t, err)
	text := string(rules)
	for _, wait := range []string{"1m", "5m", "15m"} {
		require.Contains(t, text, "for: "+wait)
		text = strings.ReplaceAll(text, "for: "+wait, "for: 2s")
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "alerts.yml"), []byte(text), 0o644))
	quoted := make([]string, len(targets))
	for i, a := range targets {
		quoted[i] = strconv.Quote(a)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [alerts.yml]
scrape_configs:
  - job_name: crashloop
    static_configs:
      - targets: [%s]
`, strings.Join(quoted, ", "))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644))

	for attempt := 1; ; attempt++ {
		port := freePort(t)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
			"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		log := &buffer{}
		cmd.Stdout, cmd.Stderr = log, log
		require.NoError(t, cmd.Start())
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
		p := &promServer{url: "http://" + addr}
		ready := false
		require.Eventually(t, func() bool {
			select {
			case <-done:
				return true
			default:
			}
			resp, err := http.Get(p.url + "/-/ready")
			if err != nil {
				return false
			}
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
			return ready
		}, patience, 50*time.Millisecond, "prometheus ready")
		if ready {
			return p
		}
		// It exited: another process took the port between the pick and
		// the bind, or something else is wrong.
		if !strings.Contains(log.String(), "address already in use") || attempt == 5 {
			t.Fatalf("prometheus exited:\n%s", log.String())
		}
	}
}

// freePort returns a TCP port on 127.0.0.1 that the kernel chose among the
// free ones.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
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
	p.get(t, "/api/v1/query?query="+url.QueryEscape(q), &doc)
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

// alerts returns every alert Prometheus holds, pending or firing, as
// "NAME STATE {label=value,...}" (without alertname), sorted.
func (p *promServer) alerts(t tb) []string {
	t.Helper()
	var doc struct {
		Status string
		Data   struct {
			Alerts []struct {
				Labels map[string]string
				State  string
			}
		}
	}
	p.get(t, "/api/v1/alerts", &doc)
	require.Equal(t, "success", doc.Status)
	out := []string{}
	for _, a := range doc.Data.Alerts {
		var labels []string
		for k, v := range a.Labels {
			if k != "alertname" {
				labels = append(labels, k+"="+v)
			}
		}
		slices.Sort(labels)
		out = append(out, a.Labels["alertname"]+" "+a.State+" {"+strings.Join(labels, ",")+"}")
	}
	slices.Sort(out)
	return out
}

// get decodes the JSON document at path.
func (p *promServer) get(t tb, path string, doc any) {
	t.Helper()
	resp, err := http.Get(p.url + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.NoError(t, json.NewDecoder(resp.Body).Decode(doc))
}
