package promcrashloop_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/crashloopguard/crashloop"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// t0 is the time every test starts at.
var t0 = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)

// mockAt returns a mock clock set to t0.
func mockAt() *clock.Mock {
	m := clock.NewMock()
	m.Set(t0)
	return m
}

// parkedSupervisor returns a Supervisor (fleet breaker off) that knows n
// keys, key-00000 to key-<n-1>, each parked at once by a permanent error.
func parkedSupervisor(tb testing.TB, n int) *crashloop.Supervisor {
	tb.Helper()
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Fleet = nil
	sup, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(mockAt()))
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		park(tb, sup, fmt.Sprintf("key-%05d", i))
	}
	return sup
}

// park runs key on sup with a function that returns a permanent error, so
// the key is parked at once (reason "permanent_error").
func park(tb testing.TB, sup *crashloop.Supervisor, key string) {
	tb.Helper()
	err := sup.Run(context.Background(), key, func(context.Context) error {
		return crashloop.Permanent(errors.New("bad config"))
	})
	if !errors.Is(err, crashloop.ErrParked) {
		tb.Fatalf("Run(%q) = %v, want parked", key, err)
	}
}

// series is what collectors export: each series as
// `name{label="value",...}` (labels in name order) with its value.
type series map[string]float64

// collect returns the series of cs, gathered by a pedantic registry (which
// also checks them against their descriptors).
func collect(tb testing.TB, cs ...prometheus.Collector) series {
	tb.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(cs...)
	fams, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	return flatten(fams)
}

// flatten returns the series of fams.
func flatten(fams []*dto.MetricFamily) series {
	out := series{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			out[f.GetName()+labels(m)] = value(f.GetType(), m)
		}
	}
	return out
}

// labels formats the labels of m as {a="x",b="y"}, or "" if none.
func labels(m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return ""
	}
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// value returns the value of m, a counter or a gauge.
func value(t dto.MetricType, m *dto.Metric) float64 {
	if t == dto.MetricType_COUNTER {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// without returns s less the series whose name starts with one of prefixes.
func (s series) without(prefixes ...string) series {
	out := maps.Clone(s)
	maps.DeleteFunc(out, func(k string, _ float64) bool {
		return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(k, p) })
	})
	return out
}

// only returns the series of s whose name starts with prefix.
func (s series) only(prefix string) series {
	out := maps.Clone(s)
	maps.DeleteFunc(out, func(k string, _ float64) bool { return !strings.HasPrefix(k, prefix) })
	return out
}

// diff returns "" when got and want hold the same series with the same
// values, else a line per difference.
func diff(got, want series) string {
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			lines = append(lines, fmt.Sprintf("missing %s %v", k, want[k]))
		} else if g != want[k] {
			lines = append(lines, fmt.Sprintf("%s = %v, want %v", k, g, want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			lines = append(lines, fmt.Sprintf("unexpected %s %v", k, got[k]))
		}
	}
	return strings.Join(lines, "\n")
}

// kinds are the dotted names of every event kind the library names.
var kinds = []string{
	"agent.respawn_scheduled", "agent.startup_exhausted", "agent.resumed",
	"rescue.needs_human", "channel.crash_loop_tripped", "fleet.breaker_tripped",
	"fleet.breaker_rearmed", "agent.restart_scheduled", "store.unavailable",
	"store.recovered",
	"store.state_lost",
	"store.misconfigured",
	"fleet.cause_held",
	"fleet.cause_released",
}

// keyState matches a crashloop_key_state series and captures its state.
var keyState = regexp.MustCompile(`^crashloop_key_state\{key=".*",state="(\w+)"\}$`)

// complete returns want with the series every scrape of a Collector and an
// Events has beside it: crashloop_keys for every state, counted from the
// crashloop_key_state series of want, and crashloop_events_total at 0 for
// each kind that want does not count.
func complete(want series) series {
	out := maps.Clone(want)
	for _, s := range []string{"running", "backoff", "held", "parked", "needs_human", "exited"} {
		out[`crashloop_keys{state="`+s+`"}`] = 0
	}
	for k, v := range want {
		if m := keyState.FindStringSubmatch(k); m != nil {
			out[`crashloop_keys{state="`+m[1]+`"}`] += v
		}
	}
	for _, kind := range kinds {
		k := `crashloop_events_total{kind="` + kind + `"}`
		if _, ok := out[k]; !ok {
			out[k] = 0
		}
	}
	return out
}
