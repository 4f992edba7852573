package promcrashloop_test

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
)

// metricName matches the name of a crashloop series in a query or a text.
var metricName = regexp.MustCompile(`\bcrashloop_[a-z_]*[a-z]\b`)

// TestDeployNamesExported checks that the alert rules, their tests, the
// dashboard and the monitoring docs name only series a scrape has, so that
// none of them silently watches a name that is not there.
func TestDeployNamesExported(t *testing.T) {
	s := serve(t)
	_, body := s.do(t, http.MethodGet, "/metrics")
	// The crashloop command's own series, which its tests check it exports.
	exported := map[string]bool{"crashloop_last_exit_code": true, "crashloop_health_status": true, "crashloop_health_failing_streak": true}
	for name := range parse(t, strings.NewReader(body)) {
		exported[metricName.FindString(name)] = true
	}
	for _, file := range []string{
		"../deploy/prometheus/alerts.yml",
		"../deploy/prometheus/alerts_test.yml",
		"../deploy/grafana/crashloop.json",
		"../docs/monitoring.md",
	} {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		names := metricName.FindAllString(string(text), -1)
		if len(names) == 0 {
			t.Errorf("%s names no crashloop series", file)
		}
		for _, name := range names {
			if !exported[name] {
				t.Errorf("%s names %s, which no scrape has", file, name)
			}
		}
	}
}

// TestDashboardJSON checks that the Grafana dashboard is JSON with a query
// in each panel, and panels for restarts, parked keys and the breaker.
func TestDashboardJSON(t *testing.T) {
	text, err := os.ReadFile("../deploy/grafana/crashloop.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(text, &dash); err != nil {
		t.Fatal(err)
	}
	watched := map[string]bool{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			for _, name := range metricName.FindAllString(q.Expr, -1) {
				watched[name] = true
			}
		}
	}
	for _, name := range []string{"crashloop_restarts_total", "crashloop_parked", "crashloop_fleet_breaker_tripped"} {
		if !watched[name] {
			t.Errorf("no panel queries %s", name)
		}
	}
}
