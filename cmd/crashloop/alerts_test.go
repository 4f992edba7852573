//go:build unix

package main

import (
	"context"
	"errors"
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
	"github.com/crashloopguard/crashloop/share"
)

// TestReplicasRaiseOneAlertEach runs two crashloop --redis replicas of one
// key, each with a healthy program, and a real Prometheus that scrapes
// both with a test copy of deploy/prometheus/alerts.yml (its for: waits
// cut to 1s). A third replica of the deployment, this test through the
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
	prom := startPrometheus(t, addrs...)
	prom.waitFor(t, `count(up{job="crashloop"} == 1)`, "2")

	// The third replica: the library on the same deployment.
	client, err := redisstore.NewClient(srv.URL(), "", redisstore.DefaultTimeout)
	require.NoError(t, err)
	store := redisstore.New(client, redisstore.Options{Prefix: prefix})
	t.Cleanup(func() { _ = store.Close(); _ = client.Close() })
	sup, err := crashloop.NewSupervisor(crashloop.DefaultSupervisorConfig(), crashloop.WithSharing(share.New(store)))
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
	require.Positive(t, fleet.Keys)
	prom.waitFor(t, `count(crashloop_fleet_keys == `+strconv.Itoa(fleet.Keys)+`)`, "2")

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		alerts := alertLines(c, prom)
		assert.Equal(c, []string{
			"CrashloopFleetBreakerTripped firing {job=crashloop,severity=warning}",
			"CrashloopParked firing {job=crashloop,key=shared,reason=permanent_error,severity=critical}",
		}, alerts)
	}, patience, 100*time.Millisecond, "one alert for the park and one for the trip")
}

// alertLines returns every alert p holds, pending or firing, as
// "NAME STATE {label=value,...}" (without alertname), sorted.
func alertLines(t tb, p *promServer) []string {
	t.Helper()
	out := []string{}
	for _, a := range p.alerts(t) {
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
