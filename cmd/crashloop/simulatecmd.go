//go:build unix

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/crashloopguard/crashloop/replay"
)

const simulateHelp = `Usage: crashloop simulate [--config FILE]... [policy flags] [--crash-after D]... [--outage D]...

Runs synthetic programs under candidate configurations (each --config
FILE, or the policy flags over the defaults) and under the reference
policies of other systems (kubelet, KEP-4603, systemd, systemd with
RestartSteps, docker, pm2, nomad), and prints what each policy did with
each program:

  --crash-after D    a program that runs D, then crashes, forever: its
                     restarts in the first 5 and 30 minutes, and when the
                     policy gives up (repeatable)
  --outage D         a program whose every start fails during a
                     dependency outage of D, then runs healthy: the extra
                     delay before it runs again, or when the policy gave up
                     (repeatable)
  --horizon D        how long to simulate (default 24h)
  --reference=false  leave out the reference policies
  --json             print a JSON document instead of the table: with
                     neither --crash-after nor --outage, of the programs of
                     the table below

With neither --crash-after nor --outage it prints the table of
docs/policies.md in Markdown: a 10s crasher, and outages of 30s, 5m and 1h.
`

// durationsFlag is a repeatable duration flag.
type durationsFlag []time.Duration

func (d *durationsFlag) String() string { return fmt.Sprint([]time.Duration(*d)) }
func (d *durationsFlag) Set(v string) error {
	x, err := time.ParseDuration(v)
	if err != nil || x <= 0 {
		return errors.New("must be a duration > 0, such as 10s")
	}
	*d = append(*d, x)
	return nil
}

// simulateCmd is "crashloop simulate".
func simulateCmd(args []string, stdout io.Writer) error {
	fs := newFlagSet("simulate")
	var configs listFlag
	var crashes, outages durationsFlag
	_, candidates := candidateFlags(fs, &configs)
	fs.Var(&crashes, "crash-after", "", repeatable)
	fs.Var(&outages, "outage", "", repeatable)
	var horizon time.Duration
	var reference, asJSON bool
	fs.Duration(&horizon, "horizon", 24*time.Hour, "")
	fs.Bool(&reference, "reference", true, "")
	fs.Bool(&asJSON, "json", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, simulateHelp)
			return nil
		}
		return flagError(fs.FlagSet, args, err)
	}
	switch {
	case fs.NArg() > 0:
		return usagef("simulate takes no arguments, got %q", fs.Arg(0))
	case horizon <= 0:
		return usagef("--horizon: must be > 0")
	}
	cands, _, err := candidates()
	if err != nil {
		return err
	}
	var policies []replay.Policy
	for _, c := range cands {
		if c.Name == "defaults" {
			c.Name = "crashloop defaults"
		}
		p, err := replay.CandidatePolicy(c)
		if err != nil {
			return usagef("%v", err) // validated by candidates
		}
		policies = append(policies, p)
	}
	if reference {
		policies = append(policies, replay.ReferencePolicies()...)
	}
	kep := len(crashes)+len(outages) == 0
	if kep && !asJSON {
		return replay.WriteKEPTable(stdout, replay.SimulateKEP(policies))
	}
	var programs []replay.Program
	if kep { // the programs of the KEP table
		programs = append(programs, replay.Program{CrashAfter: 10 * time.Second})
		for _, o := range replay.KEPOutages {
			programs = append(programs, replay.Program{Outage: o})
		}
	}
	for _, d := range crashes {
		programs = append(programs, replay.Program{CrashAfter: d})
	}
	for _, d := range outages {
		programs = append(programs, replay.Program{Outage: d})
	}
	if asJSON {
		doc, err := simulations(policies, programs, horizon)
		if err != nil {
			return err
		}
		return printJSON(stdout, doc)
	}
	return replay.WriteSimulations(stdout, policies, programs, horizon)
}

// simulationsDoc is the document of crashloop simulate --json
// (docs/schema/simulate.json): what each policy did with each program
// within the horizon (an outage program gets its outage on top).
type simulationsDoc struct {
	Horizon  jsonDuration `json:"horizon"`
	Policies []policyDoc  `json:"policies"`
}

// policyDoc is a policy and what it did with each program.
type policyDoc struct {
	Name     string       `json:"name"`
	Curve    string       `json:"curve,omitempty"`
	Programs []programDoc `json:"programs"`
}

// programDoc is what a policy did with a program: one that crashes after
// crash_after, or one whose starts fail during an outage; its starts, its
// restarts in the first 5 and 30 minutes, when the policy gave up, and
// for an outage, how long after its end the program ran again.
type programDoc struct {
	CrashAfter  *jsonDuration `json:"crash_after,omitempty"`
	Outage      *jsonDuration `json:"outage,omitempty"`
	Starts      int           `json:"starts"`
	Restarts5m  int           `json:"restarts_5m"`
	Restarts30m int           `json:"restarts_30m"`
	GaveUpAfter *jsonDuration `json:"gave_up_after,omitempty"`
	ExtraDelay  *jsonDuration `json:"extra_delay,omitempty"`
}

// simulations simulates each program under each policy.
func simulations(policies []replay.Policy, programs []replay.Program, horizon time.Duration) (simulationsDoc, error) {
	doc := simulationsDoc{Horizon: jsonDuration(horizon), Policies: []policyDoc{}}
	dur := func(d time.Duration) *jsonDuration { j := jsonDuration(d); return &j }
	for _, pol := range policies {
		pd := policyDoc{Name: pol.Name, Curve: pol.Curve, Programs: []programDoc{}}
		for _, prog := range programs {
			sim, err := replay.Simulate(pol, prog, horizon+prog.Outage)
			if err != nil {
				return doc, err
			}
			p := programDoc{Starts: len(sim.Starts), Restarts5m: sim.Restarts(5 * time.Minute), Restarts30m: sim.Restarts(30 * time.Minute)}
			if prog.Outage > 0 {
				p.Outage = dur(prog.Outage)
			} else {
				p.CrashAfter = dur(prog.CrashAfter)
			}
			if sim.GaveUp {
				p.GaveUpAfter = dur(sim.GaveUpAt)
			}
			if sim.Recovered {
				p.ExtraDelay = dur(sim.ExtraDelay)
			}
			pd.Programs = append(pd.Programs, p)
		}
		doc.Policies = append(doc.Policies, pd)
	}
	return doc, nil
}
