package promcrashloop_test

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// promtool runs promtool with args and stdin, and returns its combined
// output. A missing promtool fails the test: ./test.sh installs it.
func promtool(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not installed: run ./test.sh, which installs it (Debian package prometheus): %v", err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = "../deploy/prometheus"
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestAlertRules checks deploy/prometheus/alerts.yml with promtool and runs
// its unit tests, alerts_test.yml.
func TestAlertRules(t *testing.T) {
	if out, err := promtool(t, "", "check", "rules", "alerts.yml"); err != nil {
		t.Errorf("promtool check rules alerts.yml: %v\n%s", err, out)
	}
	if out, err := promtool(t, "", "test", "rules", "alerts_test.yml"); err != nil {
		t.Errorf("promtool test rules alerts_test.yml: %v\n%s", err, out)
	}
}

// TestPromtoolCheckMetrics lints a real scrape of /metrics, with a parked
// key and the fleet breaker on, with promtool check metrics: it must find
// nothing to say.
func TestPromtoolCheckMetrics(t *testing.T) {
	s := serve(t)
	resp, body := s.do(t, http.MethodGet, "/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	for _, name := range []string{"crashloop_parked{", "crashloop_fleet_breaker_tripped ", "crashloop_events_total{"} {
		if !strings.Contains(body, "\n"+name) {
			t.Fatalf("the scrape has no %s series:\n%s", name, body)
		}
	}
	if out, err := promtool(t, body, "check", "metrics"); err != nil || out != "" {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
