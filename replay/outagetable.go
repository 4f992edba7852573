package replay

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/crashloopguard/crashloop"
)

// OutageTableOutages and OutageTableKeys are the outages of a shared
// dependency, and the keys sharing it, of the table of docs/policies.md
// that crashloop simulate prints beside the KEP table.
var (
	OutageTableOutages = []time.Duration{30 * time.Second, 5 * time.Minute, time.Hour}
	OutageTableKeys    = 10
)

// OutageVariants returns c and what the probe and the hold on a shared
// cause would change of it, for the outage table: c with probe_after 30s
// (if it has no probe), with the fleet breaker at its defaults (if it has
// none), with the hold on a shared cause at its defaults (over its fleet
// breaker, or the default one), and with both the probe and the hold.
// Each variant's name says what it adds to c's.
func OutageVariants(c Candidate) []Candidate {
	name := c.Name
	if name == "" {
		name = "crashloop"
	}
	out := []Candidate{{Name: name, Config: c.Config}}
	add := func(suffix string, change func(*crashloop.SupervisorConfig)) {
		cfg := c.Config
		if cfg.Fleet != nil {
			f := *cfg.Fleet
			cfg.Fleet = &f
		}
		change(&cfg)
		out = append(out, Candidate{Name: name + " + " + suffix, Config: cfg})
	}
	probe := func(cfg *crashloop.SupervisorConfig) { cfg.ProbeAfter = 30 * time.Second }
	hold := func(cfg *crashloop.SupervisorConfig) {
		if cfg.Fleet == nil {
			f := crashloop.DefaultFleetConfig()
			cfg.Fleet = &f
		}
		cfg.Fleet.SharedCause = &crashloop.SharedCauseConfig{}
	}
	noProbe, noFleet := c.Config.ProbeAfter == 0, c.Config.Fleet == nil
	noHold := noFleet || c.Config.Fleet.SharedCause == nil
	if noProbe {
		add("probe_after 30s", probe)
	}
	if noFleet {
		add("fleet", func(cfg *crashloop.SupervisorConfig) { f := crashloop.DefaultFleetConfig(); cfg.Fleet = &f })
	}
	if noHold {
		add("fleet.shared_cause", hold)
	}
	if noProbe && noHold {
		add("both", func(cfg *crashloop.SupervisorConfig) { probe(cfg); hold(cfg) })
	}
	return out
}

// OutageRow is one policy's row of the outage table: what it did with
// each outage. It is a plain value.
type OutageRow struct {
	Policy   string
	Outcomes []Outcome // one per outage, in the table's order
}

// SimulateOutages simulates each outage, shared by keys keys, under each
// policy, for horizon after each outage's end.
func SimulateOutages(policies []Policy, outages []time.Duration, keys int, horizon time.Duration) ([]OutageRow, error) {
	rows := make([]OutageRow, 0, len(policies))
	for _, p := range policies {
		row := OutageRow{Policy: p.Name}
		for _, o := range outages {
			out, err := SimulateOutage(p, SharedOutage{Outage: o, Keys: keys}, horizon)
			if err != nil {
				return nil, err
			}
			row.Outcomes = append(row.Outcomes, out)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// WriteOutageTable writes rows, of outages shared by keys keys, as a
// Markdown table: for each outage, the keys parked, the restarts (probes
// among them) and when the keys were back after the outage's end.
func WriteOutageTable(w io.Writer, outages []time.Duration, keys int, rows []OutageRow) error {
	var b strings.Builder
	b.WriteString("| policy |")
	for i, o := range outages {
		what := fmt.Sprintf("%s outage over %d keys", Duration(o), keys)
		if i > 0 {
			what = Duration(o)
		}
		fmt.Fprintf(&b, " %s: keys parked | restarts (probes) | back after |", what)
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---:|---:|---|", len(outages)))
	b.WriteString("\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s |", r.Policy)
		for _, out := range r.Outcomes {
			fmt.Fprintf(&b, " %d | %s | %s |", out.Parked(), restartsCell(out), backCell(out))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// restartsCell says an outcome's restarts, with its probes.
func restartsCell(out Outcome) string {
	restarts, probes, _ := out.Totals()
	switch probes {
	case 0:
		return fmt.Sprint(restarts)
	case 1:
		return fmt.Sprintf("%d (1 probe)", restarts)
	}
	return fmt.Sprintf("%d (%d probes)", restarts, probes)
}

// backCell says when an outcome's keys were back after the outage's end:
// "3s", "0s to 36.667s", "gave up after 3s" (on every key, the last
// parked then: an operator must resume them), "never" (within the
// horizon), with how many of them when not all were back.
func backCell(out Outcome) string {
	n, first, last := out.Back()
	s := "never"
	switch gaveUp, at := out.GaveUp(); {
	case gaveUp == len(out.Keys):
		s = "gave up after " + Duration(at)
	case n > 0 && first == last:
		s = Duration(first)
	case n > 0:
		s = Duration(first) + " to " + Duration(last)
	}
	if n > 0 && n < len(out.Keys) {
		s += fmt.Sprintf(" (%d of %d)", n, len(out.Keys))
	}
	return s
}
