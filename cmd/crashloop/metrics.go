//go:build unix

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/promcrashloop"
	"github.com/prometheus/client_golang/prometheus"
)

// metricsServer serves --metrics-addr: /metrics (the Supervisor's series,
// its events, counted, and the program's last exit status), /status (its
// live status, with the program's last sd_notify STATUS= text), /healthz
// and /readyz, and with --admin-token-file POST /resume. Read-only
// otherwise; it binds the address it was given and nothing else.
type metricsServer struct {
	srv *http.Server
	ln  net.Listener
}

// listenMetrics binds addr at once, so that a busy or bad address is an
// error before the program starts.
func listenMetrics(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, unwrapOp(err))
	}
	return ln, nil
}

// unwrapOp drops the "listen tcp ADDR:" prefix the address already says.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

// serveMetrics serves the endpoints on ln until close, and ep's own
// (/readyz, /resume) in front of them.
func serveMetrics(ln net.Listener, sup *crashloop.Supervisor, events *promcrashloop.Events, r *runner, log *slog.Logger, ep *endpoints) *metricsServer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(promcrashloop.NewCollector(sup), events, lastExit{r}, healthGauges{r})
	m := &metricsServer{ln: ln, srv: &http.Server{
		ReadHeaderTimeout: 5 * time.Second,
		MaxHeaderBytes:    maxHeaderSize,
		Handler:           ep,
	}}
	ep.sup = sup
	ep.next = &promcrashloop.Handler{Supervisor: sup, Gatherer: reg} // /metrics and /healthz; ep serves /status
	go func() {
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("the metrics server stopped: "+err.Error(), "addr", ln.Addr().String())
		}
	}()
	paths := "/metrics, /status, /healthz and /readyz"
	if ep.token != nil {
		paths = "/metrics, /status, /healthz, /readyz and POST /resume"
	}
	log.Info("serving "+paths+" on http://"+ln.Addr().String(), "addr", ln.Addr().String())
	return m
}

func (m *metricsServer) close() { _ = m.srv.Close() }

var lastExitDesc = prometheus.NewDesc("crashloop_last_exit_code",
	"How the program's last run ended: its exit status, or 128+N when signal N killed it, with the signal's name (empty when it exited by itself).",
	[]string{"key", "signal"}, nil)

// lastExit exports crashloop_last_exit_code{key,signal}: the exit status of
// the program's last run, once a run has ended.
type lastExit struct{ r *runner }

func (l lastExit) Describe(ch chan<- *prometheus.Desc) { ch <- lastExitDesc }

func (l lastExit) Collect(ch chan<- prometheus.Metric) {
	l.r.mu.Lock()
	ended, status, signal := l.r.ended, l.r.status, l.r.signal
	l.r.mu.Unlock()
	if ended {
		ch <- prometheus.MustNewConstMetric(lastExitDesc, prometheus.GaugeValue, float64(status), l.r.key, signal)
	}
}

var (
	healthDesc = prometheus.NewDesc("crashloop_health_status",
		"With --health-cmd, the health of the run under way: 1 for its state (starting, healthy or unhealthy), 0 for the others; absent between runs.",
		[]string{"key", "status"}, nil)
	streakDesc = prometheus.NewDesc("crashloop_health_failing_streak",
		"With --health-cmd, the health checks of the run under way that failed in a row.",
		[]string{"key"}, nil)
)

// healthGauges exports crashloop_health_status{key,status} and
// crashloop_health_failing_streak{key} while a run with health checks is
// under way.
type healthGauges struct{ r *runner }

func (h healthGauges) Describe(ch chan<- *prometheus.Desc) { ch <- healthDesc; ch <- streakDesc }

func (h healthGauges) Collect(ch chan<- prometheus.Metric) {
	st := h.r.healthNow()
	if st == nil {
		return
	}
	for _, state := range healthStates {
		v := 0.0
		if state == st.Status {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(healthDesc, prometheus.GaugeValue, v, h.r.key, state)
	}
	ch <- prometheus.MustNewConstMetric(streakDesc, prometheus.GaugeValue, float64(st.FailingStreak), h.r.key)
}
