package promcrashloop_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/promcrashloop"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// served is a Handler on a real HTTP server, over a Supervisor that knows
// two keys: "batch" (ran and exited cleanly) and "web" (parked by a
// permanent error).
type served struct {
	sup *crashloop.Supervisor
	srv *httptest.Server
}

// serve starts the server; it is closed when the test ends.
func serve(t *testing.T) served {
	t.Helper()
	var events promcrashloop.Events
	sup, err := crashloop.NewSupervisor(crashloop.DefaultSupervisorConfig(),
		crashloop.WithClock(mockAt()), crashloop.WithEventHandler(&events))
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Run(context.Background(), "batch", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	park(t, sup, "web")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promcrashloop.NewCollector(sup), &events)
	srv := httptest.NewServer(&promcrashloop.Handler{
		Supervisor: sup,
		Gatherer:   reg,
		Info:       func() any { return map[string]string{"status_text": "Listening on :8080"} },
	})
	t.Cleanup(srv.Close)
	return served{sup, srv}
}

// do requests path with method and returns the response and its body.
func (s served) do(t *testing.T, method, path string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// TestHandlerMetrics scrapes /metrics over HTTP, parses the response with
// the exposition-format parser, and checks every series.
func TestHandlerMetrics(t *testing.T) {
	s := serve(t)
	resp, body := s.do(t, http.MethodGet, "/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	want := complete(series{
		`crashloop_restarts_total{key="batch"}`:                  0,
		`crashloop_key_state{key="batch",state="exited"}`:        1,
		`crashloop_restarts_total{key="web"}`:                    0,
		`crashloop_key_state{key="web",state="parked"}`:          1,
		`crashloop_parked{key="web",reason="permanent_error"}`:   1,
		`crashloop_parked_since_timestamp_seconds{key="web"}`:    float64(t0.Unix()),
		`crashloop_fleet_breaker_tripped`:                        0,
		`crashloop_fleet_restarts_in_hour`:                       0,
		`crashloop_fleet_failing_keys`:                           1,
		`crashloop_fleet_keys`:                                   1, // batch exited: no fleet member
		`crashloop_events_total{kind="agent.startup_exhausted"}`: 1,
	})
	if d := diff(parse(t, strings.NewReader(body)), want); d != "" {
		t.Errorf("GET /metrics:\n%s", d)
	}
}

// TestHandlerStatus checks that /status is the Supervisor's Status, as it
// marshals, with the Info hook's value beside it.
func TestHandlerStatus(t *testing.T) {
	s := serve(t)
	resp, body := s.do(t, http.MethodGet, "/status")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /status: %s, Content-Type %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	st, err := json.Marshal(s.sup.Status(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]json.RawMessage
	if err := json.Unmarshal(st, &want); err != nil {
		t.Fatal(err)
	}
	want["info"] = json.RawMessage(`{"status_text":"Listening on :8080"}`)
	if len(got) != len(want) {
		t.Errorf("GET /status has members %v, want those of %v", keysOf(got), keysOf(want))
	}
	for k, w := range want {
		if string(got[k]) != string(w) {
			t.Errorf("GET /status: %q is %s, want %s", k, got[k], w)
		}
	}
}

// TestHandlerReadOnly checks each endpoint's answer to every method: GET
// and HEAD are served (HEAD without a body), the others get 405 with an
// Allow header, and none of them changes the Supervisor.
func TestHandlerReadOnly(t *testing.T) {
	s := serve(t)
	before, err := json.Marshal(s.sup.Status(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/metrics", "/status", "/healthz"} {
		if resp, body := s.do(t, http.MethodHead, path); resp.StatusCode != http.StatusOK || body != "" {
			t.Errorf("HEAD %s: %s with %d bytes of body, want 200 and none", path, resp.Status, len(body))
		}
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
			resp, _ := s.do(t, m, path)
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %s, Allow %q; want 405 and \"GET, HEAD\"", m, path, resp.Status, resp.Header.Get("Allow"))
			}
		}
	}
	if resp, body := s.do(t, http.MethodGet, "/healthz"); resp.StatusCode != http.StatusOK || body != "ok\n" {
		t.Errorf("GET /healthz: %s %q, want 200 \"ok\\n\"", resp.Status, body)
	}
	for _, path := range []string{"/", "/resume", "/metrics/", "/status/web"} {
		if resp, _ := s.do(t, http.MethodGet, path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", path, resp.Status)
		}
	}
	after, err := json.Marshal(s.sup.Status(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Errorf("the requests changed the Supervisor:\nbefore %s\nafter  %s", before, after)
	}
}

// TestHandlerZero checks the zero Handler: the default registry's series
// on /metrics and a status with no keys.
func TestHandlerZero(t *testing.T) {
	s := served{srv: httptest.NewServer(&promcrashloop.Handler{})}
	defer s.srv.Close()
	if resp, body := s.do(t, http.MethodGet, "/status"); resp.StatusCode != http.StatusOK || body != "{\"keys\":{}}\n" {
		t.Errorf("GET /status: %s %q, want 200 {\"keys\":{}}", resp.Status, body)
	}
	resp, body := s.do(t, http.MethodGet, "/metrics")
	if _, ok := parse(t, strings.NewReader(body))["go_goroutines"]; resp.StatusCode != http.StatusOK || !ok {
		t.Errorf("GET /metrics: %s, go_goroutines there: %v; want 200 and the default registry", resp.Status, ok)
	}
}

// TestHandlerInfoError checks that an Info value JSON cannot encode makes
// /status a 500 that says why.
func TestHandlerInfoError(t *testing.T) {
	s := served{srv: httptest.NewServer(&promcrashloop.Handler{Info: func() any { return func() {} }})}
	defer s.srv.Close()
	resp, body := s.do(t, http.MethodGet, "/status")
	if want := "status: json: unsupported type: func()\n"; resp.StatusCode != http.StatusInternalServerError || body != want {
		t.Errorf("GET /status: %s %q, want 500 %q", resp.Status, body, want)
	}
}

// parse reads a text exposition into series.
func parse(tb testing.TB, text io.Reader) series {
	tb.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(text)
	if err != nil {
		tb.Fatal(err)
	}
	return flatten(slices.Collect(maps.Values(fams)))
}

// keysOf returns the sorted keys of m.
func keysOf[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// TestHandlerOpenMetrics checks that /metrics speaks OpenMetrics to a
// scraper that asks for it (as Prometheus does first), with the same
// series, and the classic text format to one that does not.
func TestHandlerOpenMetrics(t *testing.T) {
	s := serve(t)
	get := func(accept string) (string, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, s.srv.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := s.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Get("Content-Type"), string(body)
	}

	// Prometheus 2.x's and 3.x's scrape Accept header.
	ctype, body := get("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
	if want := "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores"; ctype != want {
		t.Errorf("OpenMetrics: Content-Type %q, want %q", ctype, want)
	}
	if !strings.HasSuffix(body, "\n# EOF\n") {
		t.Errorf("OpenMetrics: the body does not end with # EOF:\n%s", body)
	}
	for _, line := range []string{
		"# TYPE crashloop_restarts counter",
		`crashloop_restarts_total{key="web"} 0.0`,
		`crashloop_parked{key="web",reason="permanent_error"} 1.0`,
		`crashloop_fleet_keys 1.0`,
	} {
		if !strings.Contains(body, "\n"+line+"\n") {
			t.Errorf("OpenMetrics: no line %q in:\n%s", line, body)
		}
	}

	ctype, body = get("")
	if want := "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"; ctype != want {
		t.Errorf("no Accept: Content-Type %q, want %q", ctype, want)
	}
	if strings.Contains(body, "# EOF") {
		t.Errorf("no Accept: an OpenMetrics body:\n%s", body)
	}
}
