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
	// config is a crashloop policy's configuration (nil for another
	// system's): SimulateOutage judges every key with one Supervisor.
	config *crashloop.SupervisorConfig
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
	cfg := c.Config
	return Policy{Name: name, Curve: "crashloop " + describe(c.Config), config: &cfg, New: func() Restarter {
		s, _ := crashloop.NewSupervisor(cfg) // validated above
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
	if c.ProbeAfter > 0 {
		s += fmt.Sprintf(", probe after %s up to every %s", Duration(c.ProbeAfter), Duration(probeMax(c)))
	}
	if c.Fleet != nil && c.Fleet.SharedCause != nil {
		sc := sharedCause(c)
		s += fmt.Sprintf(", hold a cause of %d keys within %s, probe every %s", sc.Keys, Duration(sc.Window), Duration(sc.ProbeEvery))
	}
	return s
}

// errCrash is the failure of a simulated run.
var errCrash = errors.New("simulated crash")

// simKey is the key of the simulated program.
const simKey = "program"

// supervised is the Restarter of a crashloop Supervisor.
type supervised struct {
	s     *crashloop.Supervisor
	probe bool // the start Failed scheduled last is a probe of a park
}

func (p *supervised) Failed(start, end time.Time) (time.Duration, bool) {
	d := p.s.DecideAt(noWait, simKey, crashloop.RunResult{Err: errCrash, Started: start}, end)
	wait, parked := time.Duration(0), false
	p.probe = false
	for range 1000 { // a hold ends when the breaker re-arms, a park at its probe; Proceed says when
		switch d.Action {
		case crashloop.ActionRestart:
			p.probe = parked
			return wait + d.Wait, true
		case crashloop.ActionStop:
			if d.Wait <= 0 || d.Err == nil { // parked with no probe to come
				return 0, false
			}
			parked = true
			fallthrough
		case crashloop.ActionHold:
			wait += d.Wait
			d = p.s.ProceedAt(noWait, simKey, end.Add(wait))
		}
	}
	return 0, false
}

// probing reports whether the start Failed scheduled last is a probe.
func (p *supervised) probing() bool { return p.probe }

// ReferencePolicies returns the restart policies of other systems, as
// their code behaves (where it is Go: client-go's flowcontrol.Backoff and
// moby's restartmanager, checked in the module replay/refcheck) or as
// their code and documentation state it, in this order:
//
//   - "kubelet": Kubernetes' CrashLoopBackOff, client-go's
//     flowcontrol.Backoff as kubelet sets it up: the first restart at once;
//     then 10s, doubling to 300s; a run of more than 10 minutes (from the
//     start kubelet let go to the exit) makes the next restart immediate
//     again; never gives up.
//   - "KEP-4603": the same with 1s doubling to 60s (kubelet's
//     ReduceDefaultCrashLoopBackOffDecay).
//   - "systemd": Restart=on-failure with the defaults RestartSec=100ms and
//     StartLimitBurst=5 in StartLimitIntervalSec=10s: the 6th start in an
//     interval is refused and the unit fails (gives up).
//   - "systemd-steps": systemd 254's RestartSteps=5 and
//     RestartMaxDelaySec=1min over RestartSec=1s: the n-th restart waits
//     RestartSec x (RestartMaxDelaySec/RestartSec)^((n-1)/RestartSteps), the
//     start limit as above; only an operator's start resets the count.
//   - "docker": moby's restartmanager: 100ms, doubling to 1 minute; back to
//     100ms after a run of 10s; never gives up.
//   - "pm2": PM2 7's exp_backoff_restart_delay of 100ms: x1.5 (to the
//     millisecond, down) to 15s, back to 100ms after 30s of uptime; an
//     exit is unstable when the run was under min_uptime (1s) and the app
//     was created less than min_uptime x max_restarts (16s) before, and
//     max_restarts (16) unstable exits stop it; the count never resets.
//   - "nomad": Nomad's restart block of a service job by default:
//     attempts 2 in an interval of 30m from the first start, delay 15s
//     (Nomad adds up to 25% of jitter, left out), mode "fail": the 3rd
//     failure in the interval fails the task.
func ReferencePolicies() []Policy {
	return []Policy{
		{Name: "kubelet", Curve: "at once, then 10s doubling to 300s; at once again after a run of 10m; never gives up",
			New: func() Restarter {
				return &kubeletBackoff{initial: 10 * time.Second, max: 300 * time.Second, reset: 10 * time.Minute}
			}},
		{Name: "KEP-4603", Curve: "at once, then 1s doubling to 60s; at once again after a run of 10m; never gives up",
			New: func() Restarter {
				return &kubeletBackoff{initial: time.Second, max: 60 * time.Second, reset: 10 * time.Minute}
			}},
		{Name: "systemd", Curve: "RestartSec=100ms; the 6th start in StartLimitIntervalSec=10s fails the unit",
			New: func() Restarter { return &systemd{wait: 100 * time.Millisecond, burst: 5, interval: 10 * time.Second} }},
		{Name: "systemd-steps", Curve: "RestartSec=1s, RestartSteps=5 to RestartMaxDelaySec=1min; the 6th start in 10s fails the unit",
			New: func() Restarter {
				return &systemd{wait: time.Second, burst: 5, interval: 10 * time.Second, steps: 5, maxDelay: time.Minute}
			}},
		{Name: "docker", Curve: "100ms doubling to 1m, reset after 10s running, never gives up",
			New: func() Restarter {
				return &doubling{initial: 100 * time.Millisecond, factor: 2, max: time.Minute, reset: 10 * time.Second}
			}},
		{Name: "pm2", Curve: "100ms x1.5 to 15s, reset after 30s up; 16 runs under 1s within 16s of its creation stop it",
			New: func() Restarter {
				return &pm2{first: 100 * time.Millisecond, max: 15 * time.Second, reset: 30 * time.Second, minUptime: time.Second, maxRestarts: 16}
			}},
		{Name: "nomad", Curve: "15s; a 3rd failure within 30m of the first start fails the task",
			New: func() Restarter { return &nomad{delay: 15 * time.Second, attempts: 2, interval: 30 * time.Minute} }},
	}
}

// kubeletBackoff is kubelet's back-off of one container's restarts:
// client-go's flowcontrol.Backoff, whose entry kubelet reads when the
// container exited (IsInBackOffSince its finish) and advances (Next) when
// it lets the restart go. A new entry, or one whose last update is more
// than reset before the exit (kubelet's HasExpiredFunc), restarts at once
// and starts the back-off at initial; otherwise the restart waits the
// entry's back-off, which then doubles, up to max.
type kubeletBackoff struct {
	initial, max, reset time.Duration
	backoff             time.Duration // the entry's; 0: no entry
	last                time.Time     // the entry's lastUpdate: when the last restart was let go
}

func (k *kubeletBackoff) Failed(_, end time.Time) (time.Duration, bool) {
	if k.backoff == 0 || end.Sub(k.last) > k.reset {
		k.backoff, k.last = k.initial, end
		return 0, true
	}
	wait := k.backoff
	k.backoff = min(2*k.backoff, k.max)
	k.last = end.Add(wait)
	return wait, true
}

// pm2 is PM2's exp_backoff_restart_delay and its unstable restarts
// (lib/God.js handleExit, lib/Worker.js): the delay starts at first and
// grows x1.5, floored to the millisecond, up to max; the worker sets it
// back once the app has been up more than reset (it looks every 30s: the
// earliest is modelled). An exit is unstable when its run was shorter than
// minUptime and the app was created less than minUptime x maxRestarts
// before it; maxRestarts unstable exits stop the app. Nothing resets
// their count.
type pm2 struct {
	first, max, reset, minUptime time.Duration
	maxRestarts                  int
	created                      time.Time
	started                      bool
	unstable                     int
	prev                         time.Duration
}

func (p *pm2) Failed(start, end time.Time) (time.Duration, bool) {
	if !p.started {
		p.started, p.created = true, start
	}
	ran := end.Sub(start)
	if ran > p.reset {
		p.prev = 0
	}
	if end.Sub(p.created) < p.minUptime*time.Duration(p.maxRestarts) && ran < p.minUptime {
		p.unstable++
	}
	if p.unstable >= p.maxRestarts {
		return 0, false // errored: "too many unstable restarts"
	}
	if p.prev == 0 {
		p.prev = p.first
	} else {
		p.prev = min(p.max, p.prev*3/2).Truncate(time.Millisecond)
	}
	return p.prev, true
}

// nomad is Nomad's restart block (its RestartTracker, client/allocrunner/
// taskrunner/restarts): an interval begins when the task is first started;
// a failure after the interval's end begins a new one at the failure. Each
// failure counts in its interval; up to attempts of them restart after
// delay, and the next one fails the task in mode "fail", or in mode
// "delay" (delayMode) waits for the interval's end, whose next failure
// begins a new interval.
type nomad struct {
	delay, interval time.Duration
	attempts        int
	delayMode       bool
	begin           time.Time
	started         bool
	count           int
}

func (n *nomad) Failed(start, end time.Time) (time.Duration, bool) {
	if !n.started {
		n.started, n.begin = true, start
	}
	if end.After(n.begin.Add(n.interval)) {
		n.count, n.begin = 0, end
	}
	n.count++
	if n.count > n.attempts {
		if !n.delayMode {
			return 0, false
		}
		return n.begin.Add(n.interval).Sub(end), true
	}
	return n.delay, true
}

// doubling is a backoff that grows by factor from initial to max, back to
// initial after a run of at least reset (moby's restartmanager).
type doubling struct {
	initial, max, reset time.Duration
	factor              float64
	n                   int // restarts since the last reset
}

func (d *doubling) Failed(start, end time.Time) (time.Duration, bool) {
	if end.Sub(start) >= d.reset {
		d.n = 0
	}
	wait := time.Duration(math.Min(float64(d.initial)*math.Pow(d.factor, float64(d.n)), float64(d.max)))
	d.n++
	return wait, true
}

// systemd is Restart=on-failure under systemd's start rate limit: a start
// is allowed while fewer than burst starts happened since the interval
// began (it begins anew at the first start after it ended). With steps,
// the n-th restart waits wait x (maxDelay/wait)^((n-1)/steps), maxDelay
// after the steps-th (service_restart_usec_next, systemd 254).
type systemd struct {
	wait, interval time.Duration
	burst          int
	steps          int
	maxDelay       time.Duration
	begin          time.Time
	starts         int
	restarts       int
	started        bool
}

// next returns the wait of the n-th restart.
func (s *systemd) next(n int) time.Duration {
	switch {
	case n <= 1 || s.steps == 0 || s.wait >= s.maxDelay:
		return s.wait
	case n > s.steps:
		return s.maxDelay
	}
	r := math.Pow(float64(s.maxDelay)/float64(s.wait), float64(n-1)/float64(s.steps))
	return time.Duration(float64(s.wait) * r).Truncate(time.Microsecond)
}

func (s *systemd) Failed(start, end time.Time) (time.Duration, bool) {
	if !s.started { // the first start counts
		s.started, s.begin, s.starts = true, start, 1
	}
	wait := s.next(s.restarts + 1)
	next := end.Add(wait)
	if next.Sub(s.begin) > s.interval {
		s.begin, s.starts = next, 0
	}
	if s.starts >= s.burst {
		return 0, false // start-limit-hit
	}
	s.starts++
	s.restarts++
	return wait, true
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
	// Keys is how many keys share the outage's dependency (0 is 1):
	// WriteSimulations simulates them together (SimulateOutage); Simulate
	// takes one.
	Keys int
}

// String names the program: "10s crasher", "5m outage" or "5m outage
// over 10 keys".
func (p Program) String() string {
	if p.Outage > 0 {
		return SharedOutage{Outage: p.Outage, Keys: p.Keys}.String()
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
	// Probes counts the starts that were probes of a park (a crashloop
	// policy with probe_after): the policy parked the program, and
	// GaveUp is false while a probe is to come.
	Probes int
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
	case prog.Keys > 1:
		return Simulation{}, fmt.Errorf("replay: an outage of %d keys: simulate it with SimulateOutage", prog.Keys)
	case horizon <= 0:
		return Simulation{}, fmt.Errorf("replay: horizon %v: must be > 0", horizon)
	}
	r := pol.New()
	pr, _ := r.(interface{ probing() bool })
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
		if pr != nil && pr.probing() {
			sim.Probes++
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
	// Probes are the probes of a park made during each outage (a
	// crashloop policy with probe_after).
	Probes [3]int
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
			row.Probes[i] = sim.Probes
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
		for i, o := range r.Outages {
			cell := never(o, "gave up")
			switch {
			case r.Probes[i] == 1:
				cell += " (parked, 1 probe)"
			case r.Probes[i] > 1:
				cell += fmt.Sprintf(" (parked, %d probes)", r.Probes[i])
			}
			fmt.Fprintf(&b, " %s |", cell)
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
// the horizon); for an outage, shared by Program.Keys keys (1 if 0), the
// keys parked, the restarts with the probes among them, and when the keys
// ran again after its end (see SimulateOutage), within horizon of it.
func WriteSimulations(w io.Writer, policies []Policy, programs []Program, horizon time.Duration) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "policy")
	for _, p := range programs {
		if p.Outage > 0 {
			fmt.Fprintf(tw, "\t%s: keys parked\trestarts (probes)\tback after", p)
		} else {
			fmt.Fprintf(tw, "\t%s: restarts in 5m\tin 30m\tgives up after", p)
		}
	}
	fmt.Fprintln(tw)
	for _, pol := range policies {
		fmt.Fprint(tw, pol.Name)
		for _, p := range programs {
			if p.Outage > 0 {
				out, err := SimulateOutage(pol, SharedOutage{Outage: p.Outage, Keys: max(p.Keys, 1)}, horizon)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "\t%d\t%s\t%s", out.Parked(), restartsCell(out), backCell(out))
				continue
			}
			sim, err := Simulate(pol, p, horizon)
			if err != nil {
				return err
			}
			if sim.GaveUp {
				fmt.Fprintf(tw, "\t%d\t%d\t%s", sim.Restarts(5*time.Minute), sim.Restarts(30*time.Minute), Duration(sim.GaveUpAt))
			} else {
				fmt.Fprintf(tw, "\t%d\t%d\tnever", sim.Restarts(5*time.Minute), sim.Restarts(30*time.Minute))
			}
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
