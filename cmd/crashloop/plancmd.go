//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/replay"
)

const planHelp = `Usage: crashloop plan [policy flags] [--config FILE] [--outage D]... [--json]

Shows what a policy (the policy flags of crashloop --help over the
defaults, or --config FILE with the flags over it) does before you deploy
it, as crashloop's own guards decide it on a simulated clock:

  - the schedule of a program whose every start fails at once: each
    restart's wait and the running total, until the park;
  - when the budget refills: how long after the last of those failures
    the whole schedule is back, and the run that clears it at once;
  - what an outage costs: a program whose every start fails until a
    dependency is back after D, then runs: parked or not, the restarts
    it spent, and when it runs again (--outage D, repeatable; default 10s,
    30s, 1m and 5m);
  - with --probe-after: the probes of that park, each one's time and the
    interval since the last, until the interval is --probe-max; and what
    the probes change of each outage (when a probe finds it back);
  - warnings: a policy that parks on an outage shorter than a minute, a
    limit (guard, hourly cap, chain) that never trips in the fastest
    loop it judges, and a probe that only READY=1 can pass
    (--probe-after with --healthy-after 0).

A jittered curve is shown without its jitter. Everything is simulated
over at most 24h.

  --json   print the plan as JSON (docs/schema/plan.json)
`

// planHorizon bounds every simulation of a plan.
const planHorizon = 24 * time.Hour

// defaultPlanOutages are the outages a plan costs without --outage.
var defaultPlanOutages = []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute}

// planDoc is the document of crashloop plan --json (docs/schema/plan.json).
type planDoc struct {
	Policy   string        `json:"policy"`           // the budget, curve and chain in words
	Jitter   string        `json:"jitter,omitempty"` // the jitter left out of the schedule
	Schedule []planStep    `json:"schedule"`         // the restarts of a program whose every start fails at once
	Park     *planPark     `json:"park,omitempty"`   // how that program parks; absent if it does not within 24h
	Probes   []planProbe   `json:"probes,omitempty"` // with probe_after: the probes of that park, until their interval is probe_max
	Refill   planRefill    `json:"refill"`
	Outages  []planOutage  `json:"outages"`
	Warnings []planWarning `json:"warnings"`
}

// planStep is one restart of the schedule: its wait, and the time from
// the first failure to the start it schedules.
type planStep struct {
	Restart int          `json:"restart"`
	Wait    jsonDuration `json:"wait"`
	Total   jsonDuration `json:"total"`
}

// planProbe is one probe of the schedule's park: when, from the park and
// from the first failure, and the interval since the park or the last
// probe.
type planProbe struct {
	Probe     int          `json:"probe"`
	AfterPark jsonDuration `json:"after_park"`
	Total     jsonDuration `json:"total"`
	Interval  jsonDuration `json:"interval"`
}

// planPark is the park that ends the schedule: when (from the first
// failure), why, and on which failed start.
type planPark struct {
	After        jsonDuration `json:"after"`
	Reason       string       `json:"reason"`
	FailedStarts int          `json:"failed_starts"`
}

// planRefill says when the budget is whole again: After the last failure
// of the schedule that did not park (absent if not within 24h), or at
// once after a run of HealthyAfter (absent when only READY=1 makes a run
// healthy).
type planRefill struct {
	After        *jsonDuration `json:"after,omitempty"`
	HealthyAfter *jsonDuration `json:"healthy_after,omitempty"`
}

// planOutage is what an outage costs: parked or not, the restarts spent,
// and when the program parked or runs again (from the first failure).
type planOutage struct {
	Outage       jsonDuration  `json:"outage"`
	Parked       bool          `json:"parked"`
	Restarts     int           `json:"restarts"`
	ParkedAfter  *jsonDuration `json:"parked_after,omitempty"`
	RunningAfter *jsonDuration `json:"running_after,omitempty"`
	Probes       int           `json:"probes,omitempty"` // with probe_after: the probes of the park, the one that runs among them
}

// planWarning is a warning: a stable code and a sentence.
type planWarning struct {
	Code    string `json:"code"`            // parks_on_short_outage, never_trips, never_escalates or probe_needs_ready
	Limit   string `json:"limit,omitempty"` // never_trips: guard or hourly_cap; never_escalates: chain
	Message string `json:"message"`
}

// planCmd is "crashloop plan".
func planCmd(args []string, stdout io.Writer) error {
	fs := newFlagSet("plan")
	s := newSettings()
	for _, name := range append(policyFlags(), "config") {
		f := s.fs.Lookup(name)
		fs.FlagSet.Var(f.Value, name, f.Usage) // s's own value: s knows it is set
	}
	var outages durationsFlag
	var asJSON bool
	fs.Var(&outages, "outage", "", repeatable)
	fs.Bool(&asJSON, "json", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, planHelp)
			return nil
		}
		return flagError(fs.FlagSet, args, err)
	}
	if fs.NArg() > 0 {
		return usagef("plan takes no arguments, got %q", fs.Arg(0))
	}
	if err := s.check(); err != nil {
		return err
	}
	cfg, err := s.configuration()
	if err != nil {
		return err
	}
	s.fleetOf(&cfg) // as crashloop runs it: one key is not a fleet
	if _, err := crashloop.NewSupervisor(cfg); err != nil {
		return s.explain(err)
	}
	if len(outages) == 0 {
		outages = defaultPlanOutages
	}
	doc, err := plan(cfg, outages)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, doc)
	}
	return writePlan(stdout, doc)
}

// plan computes the plan of cfg, a valid configuration.
func plan(cfg crashloop.SupervisorConfig, outages []time.Duration) (*planDoc, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	doc := &planDoc{Policy: policyText(cfg, raw), Schedule: []planStep{}, Warnings: []planWarning{}}
	if cfg, doc.Jitter, err = withoutJitter(cfg); err != nil {
		return nil, err
	}

	// The schedule: every start fails at once.
	sched := simulateLoop(cfg, failingUntil(planHorizon+time.Hour))
	for i, w := range sched.waits {
		doc.Schedule = append(doc.Schedule, planStep{Restart: i + 1, Wait: jsonDuration(w), Total: jsonDuration(sched.starts[i+1])})
	}
	if sched.parked {
		doc.Park = &planPark{After: jsonDuration(sched.end), Reason: sched.reason, FailedStarts: len(sched.starts)}
	}
	// Its probes, until their interval stops growing (it has reached
	// probe_max, or HealthyAfter holds it).
	last := sched.end
	for i, at := range sched.probes {
		every := at - last
		if i > 0 && every == time.Duration(doc.Probes[i-1].Interval) {
			break
		}
		doc.Probes = append(doc.Probes, planProbe{Probe: i + 1, AfterPark: jsonDuration(at - sched.end), Total: jsonDuration(at), Interval: jsonDuration(every)})
		last = at
	}

	// The refill: the schedule's failures short of the park, a quiet gap,
	// then the schedule again; the shortest gap after which it is whole.
	if sched.parked && len(sched.starts) > 1 {
		if gap, ok := refillGap(cfg, sched); ok {
			d := jsonDuration(gap)
			doc.Refill.After = &d
		}
	}
	if cfg.HealthyAfter > 0 {
		d := jsonDuration(cfg.HealthyAfter)
		doc.Refill.HealthyAfter = &d
	}

	for _, o := range outages {
		tr := simulateLoop(cfg, failingUntil(o))
		row := planOutage{Outage: jsonDuration(o), Parked: tr.parked, Restarts: len(tr.waits), Probes: len(tr.probes)}
		end, back := jsonDuration(tr.end), jsonDuration(tr.back)
		if tr.parked {
			row.ParkedAfter = &end
		}
		if tr.running {
			row.RunningAfter = &back
		}
		doc.Outages = append(doc.Outages, row)
	}
	doc.Warnings = planWarnings(cfg, sched)
	return doc, nil
}

// policyText says what cfg, whose JSON form is raw, is: its budget,
// curve, healthy run, chain, guard, hourly cap and exit rules.
func policyText(cfg crashloop.SupervisorConfig, raw []byte) string {
	parts := []string{fmt.Sprintf("budget %d in %s", cfg.Budget.MaxRespawns, replay.Duration(cfg.Budget.Window))}
	var doc struct {
		Backoff *struct {
			Kind, Initial, Max, Jitter string
			Factor                     float64
		}
	}
	_ = json.Unmarshal(raw, &doc) // our own JSON
	switch b := doc.Backoff; {
	case b == nil:
		parts = append(parts, fmt.Sprintf("linear %s to %s", replay.Duration(cfg.Budget.InitialBackoff), replay.Duration(cfg.Budget.MaxBackoff)))
	case b.Kind == "exponential":
		parts = append(parts, fmt.Sprintf("exponential %s x%g to %s", b.Initial, b.Factor, b.Max))
	default:
		parts = append(parts, fmt.Sprintf("%s %s to %s", b.Kind, b.Initial, b.Max))
	}
	if cfg.HealthyAfter > 0 {
		parts = append(parts, "healthy after "+replay.Duration(cfg.HealthyAfter))
	} else {
		parts = append(parts, "healthy on READY=1 only")
	}
	if cfg.Chain != nil {
		parts = append(parts, fmt.Sprintf("chain %d within %s", cfg.Chain.MaxChain, replay.Duration(cfg.Chain.ResetGap)))
	}
	if cfg.Guard != nil {
		parts = append(parts, fmt.Sprintf("guard %d in %s", cfg.Guard.MaxRestarts, replay.Duration(cfg.Guard.Window)))
	}
	if cfg.HourlyCap > 0 {
		parts = append(parts, fmt.Sprintf("hourly cap %d", cfg.HourlyCap))
	}
	if cfg.ProbeAfter > 0 {
		most := cfg.ProbeMax
		if most == 0 {
			most = 16 * cfg.ProbeAfter // the library's default, SupervisorConfig.ProbeMax
		}
		parts = append(parts, fmt.Sprintf("probe after %s doubling to %s", replay.Duration(cfg.ProbeAfter), replay.Duration(most)))
	}
	if len(cfg.ExitRules) > 0 {
		rules := make([]string, len(cfg.ExitRules))
		for i, r := range cfg.ExitRules {
			rules[i] = string(r)
		}
		parts = append(parts, "exit rules "+strings.Join(rules, " "))
	}
	return strings.Join(parts, "; ")
}

// withoutJitter returns cfg with its curve's jitter left out, and the
// jitter's name ("" for none).
func withoutJitter(cfg crashloop.SupervisorConfig) (crashloop.SupervisorConfig, string, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return cfg, "", err
	}
	var doc struct {
		Backoff map[string]any `json:"backoff"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return cfg, "", err
	}
	jitter, _ := doc.Backoff["jitter"].(string)
	if jitter == "" || jitter == "none" {
		return cfg, "", nil
	}
	if jitter == "decorrelated" { // no curve without jitter: its upper bound, exponential to max
		doc.Backoff["factor"] = 3
	}
	doc.Backoff["jitter"] = "none"
	data, err := json.Marshal(map[string]any{"backoff": doc.Backoff})
	if err != nil {
		return cfg, "", err
	}
	out := cfg
	if err := out.UnmarshalJSON(data); err != nil {
		return cfg, "", err
	}
	return out, jitter, nil
}

// planRun is how one run of a simulated program ends: after lasting For,
// with Err (nil: it runs for good, and the simulation ends), Ready if it
// said it was healthy.
type planRun struct {
	For   time.Duration
	Err   error
	Ready bool
}

// errSimulated is the failure of a simulated run.
var errSimulated = errors.New("simulated failure")

// failingUntil is a program whose every start fails at once until
// outage after the first start; a start after that runs for good.
func failingUntil(outage time.Duration) func(start time.Duration) planRun {
	return func(start time.Duration) planRun {
		if start >= outage {
			return planRun{}
		}
		return planRun{Err: errSimulated}
	}
}

// planTrace is what a Supervisor did with a simulated program: the times
// of its starts (from the first), the wait before each restart, and how
// it ended: parked (with its reason) at end, or running for good from
// back; neither when the horizon came first. A park may be probed
// (probe_after): probes are the probes' starts, and the one whose run
// stays up is the running one.
type planTrace struct {
	starts  []time.Duration
	waits   []time.Duration
	parked  bool
	reason  string
	running bool
	end     time.Duration
	back    time.Duration
	probes  []time.Duration
}

// planProbes bounds the probes of a park a plan follows: enough for the
// interval to double from probe_after to any probe_max of interest.
const planProbes = 64

// simulateLoop runs program under a fresh Supervisor of cfg on a mock
// clock that stands still, at explicit times: each run's end is judged by
// DecideAt, a held restart waits for ProceedAt. It ends at a park, when
// the program runs for good, or after planHorizon.
func simulateLoop(cfg crashloop.SupervisorConfig, program func(start time.Duration) planRun) planTrace {
	return simulateAfter(cfg, nil, 0, program)
}

// simulateAfter is simulateLoop after the failures of before short of its
// park (nil: none) and a quiet gap: the times of the trace are from the
// first start after the gap.
func simulateAfter(cfg crashloop.SupervisorConfig, before *planTrace, gap time.Duration, program func(start time.Duration) planRun) planTrace {
	mock := clock.NewMock()
	base := time.Unix(1<<30, 0).UTC()
	mock.Set(base)
	sup, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(mock))
	if err != nil {
		return planTrace{} // validated by the caller
	}
	ctx := context.Background()
	const key = "program"
	decide := func(at time.Duration, r crashloop.RunResult) crashloop.Decision {
		return sup.DecideAt(ctx, key, r, base.Add(at)) // explicit times: Mock.Set sleeps a millisecond each
	}
	offset := time.Duration(0)
	if before != nil { // replay the failures of before, then the gap
		for _, st := range before.starts[:len(before.starts)-1] {
			decide(st, crashloop.RunResult{Err: errSimulated, Started: base.Add(st)})
		}
		offset = before.starts[len(before.starts)-2] + gap
	}
	var tr planTrace
	// nextProbe follows the park d made or kept at end to the probe that
	// the library lets go: when, and false if there is none.
	nextProbe := func(d crashloop.Decision, end time.Duration) (time.Duration, bool) {
		for d.Action == crashloop.ActionStop && d.Wait > 0 && len(tr.probes) < planProbes && end <= planHorizon {
			end += d.Wait
			if d = sup.ProceedAt(ctx, key, base.Add(offset+end)); d.Action == crashloop.ActionRestart {
				tr.probes = append(tr.probes, end)
				return end, true
			}
		}
		return 0, false
	}
	var ok bool
	for t := time.Duration(0); t <= planHorizon; {
		if !tr.parked {
			tr.starts = append(tr.starts, t)
		}
		run := program(t)
		end := t + run.For
		if run.Err == nil {
			tr.running, tr.back = true, t
			if !tr.parked {
				tr.end = t
			}
			return tr
		}
		if tr.parked { // a probe that failed: parked until the next
			d := decide(offset+end, crashloop.RunResult{Err: run.Err, Started: base.Add(offset + t), Ready: run.Ready})
			if t, ok = nextProbe(d, end); !ok {
				return tr
			}
			continue
		}
		d := decide(offset+end, crashloop.RunResult{Err: run.Err, Started: base.Add(offset + t), Ready: run.Ready})
		wait := time.Duration(0)
		for d.Action == crashloop.ActionHold {
			wait += d.Wait
			d = sup.ProceedAt(ctx, key, base.Add(offset+end+wait))
		}
		if d.Action != crashloop.ActionRestart {
			var pe *crashloop.ParkedError
			if errors.As(d.Err, &pe) {
				tr.parked, tr.reason = true, pe.Reason
			}
			tr.end = end
			if t, ok = nextProbe(d, end); !ok {
				return tr
			}
			continue
		}
		wait += d.Wait
		tr.waits = append(tr.waits, wait)
		t = end + wait
	}
	return tr
}

// refillGap returns the shortest quiet gap after the failures of sched
// short of its park (found to the millisecond) after which the schedule
// is whole again: the same waits and the same park.
func refillGap(cfg crashloop.SupervisorConfig, sched planTrace) (time.Duration, bool) {
	whole := func(gap time.Duration) bool {
		tr := simulateAfter(cfg, &sched, gap, failingUntil(planHorizon+time.Hour))
		return tr.parked == sched.parked && tr.reason == sched.reason && slices.Equal(tr.waits, sched.waits)
	}
	lo, hi := time.Duration(0), planHorizon
	if !whole(hi) {
		return 0, false
	}
	for hi-lo > time.Millisecond {
		mid := lo + (hi-lo)/2
		if whole(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi.Round(time.Millisecond), true
}

// planWarnings are the warnings of cfg, whose schedule is sched.
func planWarnings(cfg crashloop.SupervisorConfig, sched planTrace) []planWarning {
	warnings := []planWarning{}
	if sched.parked && sched.end < time.Minute {
		until := "until an operator resumes each"
		if len(sched.probes) > 0 {
			until = fmt.Sprintf("until a probe finds it back (the first %s after the park)", replay.Duration(sched.probes[0]-sched.end))
		}
		warnings = append(warnings, planWarning{Code: "parks_on_short_outage", Message: fmt.Sprintf(
			"every outage longer than %s parks the key: its failed start at %s parks it (%s); a dependency down for a minute parks every key that needs it, %s",
			replay.Duration(sched.end), replay.Duration(sched.end), sched.reason, until)})
	}
	if cfg.ProbeAfter > 0 && cfg.HealthyAfter == 0 {
		warnings = append(warnings, planWarning{Code: "probe_needs_ready", Message: "probe_after is set but healthy_after is 0: " +
			"a probe's run becomes healthy, and resumes the key, only when the program sends READY=1; a program that never does is probed and never resumed"})
	}
	// The fastest loops each limit judges.
	healthyCrash := func(time.Duration) planRun {
		if cfg.HealthyAfter > 0 {
			return planRun{For: cfg.HealthyAfter, Err: errSimulated}
		}
		return planRun{Err: errSimulated, Ready: true}
	}
	loops := []struct {
		name string
		tr   planTrace
	}{{"failed starts", sched}, {"crashes right after healthy runs", simulateLoop(cfg, healthyCrash)}}
	if hasPlanned(cfg) {
		loops = append(loops, struct {
			name string
			tr   planTrace
		}{"planned restarts", simulateLoop(cfg, func(time.Duration) planRun { return planRun{Err: crashloop.Restart(errSimulated)} })})
	}
	limits := []struct {
		limit, reason, code string
		on                  bool
		loops               []int // the loops the limit judges
	}{
		{"guard", crashloop.ReasonRestartLoopGuard, "never_trips", cfg.Guard != nil, []int{0, 1, 2}},
		{"hourly_cap", crashloop.ReasonHourlyCap, "never_trips", cfg.HourlyCap > 0, []int{0, 1, 2}},
		{"chain", crashloop.ReasonNeedsHuman, "never_escalates", cfg.Chain != nil, []int{1}},
	}
	for _, l := range limits {
		if !l.on {
			continue
		}
		trips := false
		var instead []string
		for _, i := range l.loops {
			if i >= len(loops) {
				continue
			}
			tr := loops[i].tr
			if tr.parked && tr.reason == l.reason {
				trips = true
				break
			}
			if tr.parked {
				instead = append(instead, fmt.Sprintf("%s park with %s after %s", loops[i].name, tr.reason, replay.Duration(tr.end)))
			} else {
				instead = append(instead, fmt.Sprintf("%s never park within %s", loops[i].name, replay.Duration(planHorizon)))
			}
		}
		if !trips {
			verb := strings.ReplaceAll(l.code, "_", " ")
			warnings = append(warnings, planWarning{Code: l.code, Limit: l.limit, Message: fmt.Sprintf(
				"%s %s: in the fastest loops it judges, %s", limitText(cfg, l.limit), verb, strings.Join(instead, "; "))})
		}
	}
	return warnings
}

// hasPlanned reports whether a program can end in planned restarts: an
// exit rule says so, or a clean exit restarts.
func hasPlanned(cfg crashloop.SupervisorConfig) bool {
	for _, r := range cfg.ExitRules {
		if strings.HasSuffix(string(r), "=planned") {
			return true
		}
	}
	return cfg.RestartOnCleanExit
}

// limitText names a limit with its settings.
func limitText(cfg crashloop.SupervisorConfig, limit string) string {
	switch limit {
	case "guard":
		return fmt.Sprintf("the guard (%d restarts in %s)", cfg.Guard.MaxRestarts, replay.Duration(cfg.Guard.Window))
	case "hourly_cap":
		return fmt.Sprintf("the hourly cap (%d restarts an hour)", cfg.HourlyCap)
	}
	return fmt.Sprintf("the chain (%d crashes after healthy runs, each within %s of the last)", cfg.Chain.MaxChain, replay.Duration(cfg.Chain.ResetGap))
}

// writePlan prints the plan as text.
func writePlan(w io.Writer, doc *planDoc) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Policy: %s\n", doc.Policy)
	if doc.Jitter != "" {
		fmt.Fprintf(&b, "The waits are shown without the curve's %s jitter.\n", doc.Jitter)
	}
	b.WriteString("\nA program whose every start fails at once:\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  restart\twait\ttotal")
	for _, st := range doc.Schedule {
		fmt.Fprintf(tw, "  %d\t%s\t%s\n", st.Restart, replay.Duration(time.Duration(st.Wait)), replay.Duration(time.Duration(st.Total)))
	}
	tw.Flush()
	if p := doc.Park; p != nil {
		fmt.Fprintf(&b, "  parked at %s (%s), on failed start %d\n", replay.Duration(time.Duration(p.After)), p.Reason, p.FailedStarts)
		if len(doc.Probes) > 0 {
			b.WriteString("\nIts probes (probe_after), while every probe fails:\n")
			tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "  probe\tafter the park\ttotal\tinterval")
			for _, pr := range doc.Probes {
				fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", pr.Probe, replay.Duration(time.Duration(pr.AfterPark)), replay.Duration(time.Duration(pr.Total)),
					replay.Duration(time.Duration(pr.Interval)))
			}
			tw.Flush()
			fmt.Fprintf(&b, "  then one every %s; a probe whose run is healthy resumes the key\n", replay.Duration(time.Duration(doc.Probes[len(doc.Probes)-1].Interval)))
		}
	} else {
		fmt.Fprintf(&b, "  not parked within %s\n", replay.Duration(planHorizon))
	}
	b.WriteString("\nThe budget refills: ")
	var refill []string
	if r := doc.Refill.After; r != nil {
		refill = append(refill, fmt.Sprintf("the whole schedule is back %s after the last of those failures short of the park", replay.Duration(time.Duration(*r))))
	}
	if h := doc.Refill.HealthyAfter; h != nil {
		refill = append(refill, fmt.Sprintf("a run of %s (or READY=1) refills it at once", replay.Duration(time.Duration(*h))))
	} else {
		refill = append(refill, "a run that sends READY=1 refills it at once")
	}
	b.WriteString(strings.Join(refill, "; ") + ".\n")

	b.WriteString("\nOutages (every start fails until the dependency is back):\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  outage\tparked\trestarts\tthen")
	for _, o := range doc.Outages {
		then, parked := "", "no"
		switch {
		case o.ParkedAfter != nil && o.RunningAfter != nil:
			parked, then = "yes", fmt.Sprintf("parked at %s, running at %s (probe %d)", replay.Duration(time.Duration(*o.ParkedAfter)),
				replay.Duration(time.Duration(*o.RunningAfter)), o.Probes)
		case o.ParkedAfter != nil && o.Probes > 0:
			parked, then = "yes", fmt.Sprintf("parked at %s, %d probes failed within %s", replay.Duration(time.Duration(*o.ParkedAfter)), o.Probes,
				replay.Duration(planHorizon))
		case o.ParkedAfter != nil:
			parked, then = "yes", "parked at "+replay.Duration(time.Duration(*o.ParkedAfter))
		case o.RunningAfter != nil:
			then = "running at " + replay.Duration(time.Duration(*o.RunningAfter))
		default:
			then = "still failing after " + replay.Duration(planHorizon)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", replay.Duration(time.Duration(o.Outage)), parked, o.Restarts, then)
	}
	tw.Flush()
	if len(doc.Warnings) > 0 {
		b.WriteString("\nWarnings:\n")
		for _, wn := range doc.Warnings {
			fmt.Fprintf(&b, "  %s: %s\n", wn.Code, wn.Message)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
