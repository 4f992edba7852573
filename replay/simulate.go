package replay

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/crashloopguard/crashloop"
)

// Restarter is the restart policy of one supervised program during a
// simulation: told of each failed run, it says how long to wait before
// the next start, or gives up. A Restarter is used by one simulation at a
// time.
type Restarter interface {
	// Failed is told that the run that started at start failed at end. It
	// returns the wait before the next start, or false to give up.
	Failed(start, end time.Time) (wait time.Duration, ok bool)
}

// Policy is a restart policy to simulate: a crashloop configuration
// (CandidatePolicy) or the policy of another system (ReferencePolicies).
// It is a plain value; its zero value is not usable.
type Policy struct {
	Name string
	// Curve describes the policy as its documentation states it.
	Curve string
	// New returns a fresh Restarter for one simulation.
	New func() Restarter
}

// CandidatePolicy returns the policy of a crashloop configuration: a
// Supervisor of c.Config judges each failed run at its end. It returns
// the Supervisor's *crashloop.ConfigError for a configuration it rejects.
func CandidatePolicy(c Candidate) (Policy, error) {
	if _, err := crashloop.NewSupervisor(c.Config); err != nil {
		return Policy{}, err
	}
	name := c.Name
	if name == "" {
		name = "crashloop"
	}
	return Policy{Name: name, Curve: "crashloop " + describe(c.Config), New: func() Restarter {
		s, _ := crashloop.NewSupervisor(c.Config) // validated above
		return &supervised{s: s}
	}}, nil
}

// describe says what a configuration's budget, curve and chain are.
func describe(c crashloop.SupervisorConfig) string {
	s := fmt.Sprintf("budget %d in %s", c.Budget.MaxRespawns, Duration(c.Budget.Window))
	if c.Backoff == nil {
		s += fmt.Sprintf(", linear %s to %s", Duration(c.Budget.InitialBackoff), Duration(c.Budget.MaxBackoff))
	}
	if c.Chain != nil {
		s += fmt.Sprintf(", chain %d within %s", c.Chain.MaxChain, Duration(c.Chain.ResetGap))
	}
	return s
}

// errCrash is the failure of a simulated run.
var errCrash = errors.New("simulated crash")

// simKey is the key of the simulated program.
const simKey = "program"

// supervised is the Restarter of a crashloop Supervisor.
type supervised struct{ s *crashloop.Supervisor }

func (p *supervised) Failed(start, end time.Time) (time.Duration, bool) {
	d := p.s.DecideAt(noWait, simKey, crashloop.RunResult{Err: errCrash, Started: start}, end)
	wait := time.Duration(0)
	for range 1000 { // a hold ends when the breaker re-arms; Proceed says when
		switch d.Action {
		case crashloop.ActionRestart:
			return wait + d.Wait, true
		case crashloop.ActionHold:
			wait += d.Wait
			d = p.s.ProceedAt(noWait, simKey, end.Add(wait))
		default:
			return 0, false
		}
	}
	return 0, false
}

// ReferencePolicies returns the restart policies of other systems, built
// from their documentation, in this order:
//
//   - "kubelet": Kubernetes' CrashLoopBackOff: 10s, doubling to 300s; reset
//     once a container ran 10 minutes; never gives up.
//   - "KEP-4603": the same with 1s doubling to 60s.
//   - "systemd": Restart=on-failure with the defaults RestartSec=100ms and
//     StartLimitBurst=5 in StartLimitIntervalSec=10s: the 6th start in an
//     interval is refused and the unit fails (gives up).
//   - "docker": 100ms, doubling to 1 minute; reset once a container ran
//     10s; never gives up.
//   - "pm2": exp_backoff_restart_delay of 100ms: x1.5 to 15s, reset once
//     the app ran 30s; 16 unstable restarts in a row (runs shorter than
//     min_uptime, 1s) stop it.
func ReferencePolicies() []Policy {
	return []Policy{
		{Name: "kubelet", Curve: "10s doubling to 300s, reset after 10m running, never gives up",
			New: func() Restarter {
				return &doubling{initial: 10 * time.Second, factor: 2, max: 300 * time.Second, reset: 10 * time.Minute}
			}},
		{Name: "KEP-4603", Curve: "1s doubling to 60s, reset after 10m running, never gives up",
			New: func() Restarter {
				return &doubling{initial: time.Second, factor: 2, max: 60 * time.Second, reset: 10 * time.Minute}
			}},
		{Name: "systemd", Curve: "RestartSec=100ms; the 6th start in StartLimitIntervalSec=10s fails the unit",
			New: func() Restarter { return &systemd{wait: 100 * time.Millisecond, burst: 5, interval: 10 * time.Second} }},
		{Name: "docker", Curve: "100ms doubling to 1m, reset after 10s running, never gives up",
			New: func() Restarter {
				return &doubling{initial: 100 * time.Millisecond, factor: 2, max: time.Minute, reset: 10 * time.Second}
			}},
		{Name: "pm2", Curve: "100ms x1.5 to 15s, reset after 30s running; 16 runs under 1s in a row stop it",
			New: func() Restarter {
				return &doubling{initial: 100 * time.Millisecond, factor: 1.5, max: 15 * time.Second, reset: 30 * time.Second,
					unstable: time.Second, maxUnstable: 16}
			}},
	}
}

// doubling is a backoff that grows by factor from initial to max, back to
// initial after a run of at least reset; with maxUnstable, that many runs
// in a row shorter than unstable give up.
type doubling struct {
	initial, max, reset time.Duration
	factor              float64
	unstable            time.Duration
	maxUnstable         int
	n                   int // restarts since the last reset
	unstables           int
}

func (d *doubling) Failed(start, end time.Time) (time.Duration, bool) {
	ran := end.Sub(start)
	if ran >= d.reset {
		d.n = 0
	}
	if d.maxUnstable > 0 {
		if ran < d.unstable {
			d.unstables++
			if d.unstables > d.maxUnstable {
				return 0, false
			}
		} else {
			d.unstables = 0
		}
	}
	wait := time.Duration(math.Min(float64(d.initial)*math.Pow(d.factor, float64(d.n)), float64(d.max)))
	d.n++
	return wait, true
}

// systemd is Restart=on-failure under systemd's start rate limit: a start
// is allowed while fewer than burst starts happened since the interval
// began (it begins anew at the first start after it ended).
type systemd struct {
	wait, interval time.Duration
	burst          int
	begin          time.Time
	starts         int
	started        bool
}

func (s *systemd) Failed(start, end time.Time) (time.Duration, bool) {
	if !s.started { // the first start counts
		s.started, s.begin, s.starts = true, start, 1
	}
	next := end.Add(s.wait)
	if next.Sub(s.begin) > s.interval {
		s.begin, s.starts = next, 0
	}
	if s.starts >= s.burst {
		return 0, false // start-limit-hit
	}
	s.starts++
	return s.wait, true
}

// Program is a synthetic supervised program. It is a plain value; set one
// of its fields.
type Program struct {
	// CrashAfter: every run lasts this long, then crashes, forever.
	CrashAfter time.Duration
	// Outage: every start fails at once while a dependency is out, from
	// the first start for this long; a start after that runs healthy for
	// good.
	Outage time.Duration
}

// String names the program: "10s crasher" or "5m outage".
func (p Program) String() string {
	if p.Outage > 0 {
		return Duration(p.Outage) + " outage"
	}
	return Duration(p.CrashAfter) + " crasher"
}

// Simulation is what a policy did with a program. It is a plain value.
type Simulation struct {
	// Starts are the times of the program's starts, from the first (0).
	Starts []time.Duration
	// GaveUp reports that the policy gave up, at GaveUpAt.
	GaveUp   bool
	GaveUpAt time.Duration
	// Recovered reports that an outage program started after its outage
	// (at its last start); ExtraDelay is how long after the outage's end.
	Recovered  bool
	ExtraDelay time.Duration
}

// Restarts returns how many starts after the first came within d of it.
func (s Simulation) Restarts(d time.Duration) int {
	n := 0
	for _, t := range s.Starts[1:] {
		if t <= d {
			n++
		}
	}
	return n
}

// Simulate runs prog under a fresh Restarter of pol for horizon (the
// simulated time; a policy that has not given up by then never does) and
// returns its starts. It returns an error for a Program with neither or
// both fields set, or a horizon <= 0. It is safe for concurrent use.
func Simulate(pol Policy, prog Program, horizon time.Duration) (Simulation, error) {
	switch {
	case (prog.CrashAfter > 0) == (prog.Outage > 0):
		return Simulation{}, errors.New("replay: a program crashes after a time (CrashAfter > 0) or waits out an outage (Outage > 0)")
	case horizon <= 0:
		return Simulation{}, fmt.Errorf("replay: horizon %v: must be > 0", horizon)
	}
	r := pol.New()
	var sim Simulation
	base := time.Unix(1<<30, 0).UTC() // any fixed time: every policy reads durations
	t := time.Duration(0)
	for t <= horizon {
		sim.Starts = append(sim.Starts, t)
		if prog.Outage > 0 && t >= prog.Outage {
			sim.Recovered, sim.ExtraDelay = true, t-prog.Outage
			return sim, nil
		}
		end := t + prog.CrashAfter
		wait, ok := r.Failed(base.Add(t), base.Add(end))
		if !ok {
			sim.GaveUp, sim.GaveUpAt = true, end
			return sim, nil
		}
		t = end + wait
	}
	return sim, nil
}

// KEPRow is one policy's row of the table of SimulateKEP. It is a plain
// value.
type KEPRow struct {
	Policy      string
	Curve       string
	Restarts5m  int           // restarts in the first 5 minutes of a 10s crasher
	Restarts30m int           // in its first 30 minutes
	GivesUp     time.Duration // when it gives up on the 10s crasher; < 0: never (within a day)
	// Outages are the extra delays before recovery after an outage of
	// 30s, 5m and 1h; < 0: it gave up (an operator must start it).
	Outages [3]time.Duration
}

// KEPOutages are the outages of the table of SimulateKEP.
var KEPOutages = [3]time.Duration{30 * time.Second, 5 * time.Minute, time.Hour}

// SimulateKEP returns the table a KEP would publish for each policy:
// restarts in the first 5 and 30 minutes of a program that crashes after
// 10s, forever; the extra delay before recovery after an outage of 30s, 5
// minutes and 1 hour; and the time until it gives up on the crasher.
func SimulateKEP(policies []Policy) []KEPRow {
	rows := make([]KEPRow, 0, len(policies))
	for _, p := range policies {
		row := KEPRow{Policy: p.Name, Curve: p.Curve, GivesUp: -1}
		crash, _ := Simulate(p, Program{CrashAfter: 10 * time.Second}, 24*time.Hour)
		row.Restarts5m, row.Restarts30m = crash.Restarts(5*time.Minute), crash.Restarts(30*time.Minute)
		if crash.GaveUp {
			row.GivesUp = crash.GaveUpAt
		}
		for i, o := range KEPOutages {
			sim, _ := Simulate(p, Program{Outage: o}, o+24*time.Hour)
			row.Outages[i] = -1
			if sim.Recovered {
				row.Outages[i] = sim.ExtraDelay
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// WriteKEPTable writes rows as a Markdown table.
func WriteKEPTable(w io.Writer, rows []KEPRow) error {
	var b strings.Builder
	b.WriteString("| policy | restarts, 10s crasher, first 5m | first 30m | gives up on it after | extra delay after a 30s outage | 5m outage | 1h outage |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %d | %s |", r.Policy, r.Restarts5m, r.Restarts30m, never(r.GivesUp, "never"))
		for _, o := range r.Outages {
			fmt.Fprintf(&b, " %s |", never(o, "gave up"))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// never writes d, or word for a negative d.
func never(d time.Duration, word string) string {
	if d < 0 {
		return word
	}
	return Duration(d)
}

// WriteSimulations simulates each program under each policy for horizon
// and writes a table: one row per policy; for a crasher, its restarts in
// the first 5 and 30 minutes and when the policy gives up ("never" within
// the horizon); for an outage, the extra delay before recovery, or when
// the policy gave up.
func WriteSimulations(w io.Writer, policies []Policy, programs []Program, horizon time.Duration) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "policy")
	for _, p := range programs {
		if p.Outage > 0 {
			fmt.Fprintf(tw, "\t%s: extra delay", p)
		} else {
			fmt.Fprintf(tw, "\t%s: restarts in 5m\tin 30m\tgives up after", p)
		}
	}
	fmt.Fprintln(tw)
	for _, pol := range policies {
		fmt.Fprint(tw, pol.Name)
		for _, p := range programs {
			sim, err := Simulate(pol, p, horizon)
			if err != nil {
				return err
			}
			switch {
			case p.Outage > 0 && sim.Recovered:
				fmt.Fprintf(tw, "\t%s", Duration(sim.ExtraDelay))
			case p.Outage > 0 && sim.GaveUp:
				fmt.Fprintf(tw, "\tgave up after %s", Duration(sim.GaveUpAt))
			case p.Outage > 0:
				fmt.Fprint(tw, "\tnot within the horizon")
			case sim.GaveUp:
				fmt.Fprintf(tw, "\t%d\t%d\t%s", sim.Restarts(5*time.Minute), sim.Restarts(30*time.Minute), Duration(sim.GaveUpAt))
			default:
				fmt.Fprintf(tw, "\t%d\t%d\tnever", sim.Restarts(5*time.Minute), sim.Restarts(30*time.Minute))
			}
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
