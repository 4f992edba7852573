//go:build unix

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/crashloopguard/crashloop/replay"
)

const simulateHelp = `Usage: crashloop simulate [--config FILE]... [policy flags] [--crash-after D]... [--outage D]...

Runs synthetic programs under candidate configurations (each --config
FILE, or the policy flags over the defaults; --probe-after D and
--probe-max D set the probe after a park, a --config's
fleet.shared_cause the hold on a shared cause) and under the reference
policies of other systems (kubelet, KEP-4603, systemd, systemd with
RestartSteps, docker, pm2, nomad), and prints what each policy did with
each program:

  --crash-after D    a program that runs D, then crashes, forever: its
                     restarts in the first 5 and 30 minutes, and when the
                     policy gives up (repeatable)
  --outage D         a program whose every start fails during a
                     dependency outage of D, then runs healthy: the keys
                     the policy parked, its restarts (with the probes of
                     probe_after or fleet.shared_cause among them), and
                     how long after the outage's end the keys ran again
                     ("never": parked, an operator must resume them)
                     (repeatable)
  --keys N           the keys that share each --outage's dependency
                     (default 1): a crashloop policy judges them all with
                     one Supervisor, so its fleet breaker, its hold on a
                     shared cause and its probes see them together
  --horizon D        how long to simulate (default 24h)
  --reference=false  leave out the reference policies
  --json             print a JSON document instead of the table: with
                     neither --crash-after nor --outage, of the programs of
                     the table below

With neither --crash-after nor --outage it prints the tables of
docs/policies.md in Markdown: a 10s crasher, and outages of 30s, 5m and
1h; then those outages shared by 10 keys, under each crashloop policy
and what probe_after 30s, the fleet breaker and fleet.shared_cause (at
their defaults) change of it.
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
	var keys int
	var reference, asJSON bool
	fs.Int(&keys, "keys", 1, "")
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
	case keys < 1 || keys > maxSimulatedKeys:
		return usagef("--keys: must be >= 1 and <= %d", maxSimulatedKeys)
	}
	cands, _, err := candidates()
	if err != nil {
		return err
	}
	var policies, variants []replay.Policy
	for _, c := range cands {
		if c.Name == "defaults" {
			c.Name = "crashloop defaults"
		}
		p, err := replay.CandidatePolicy(c)
		if err != nil {
			return usagef("%v", err) // validated by candidates
		}
		policies = append(policies, p)
		for _, v := range replay.OutageVariants(c) {
			p, err := replay.CandidatePolicy(v)
			if err != nil {
				return usagef("%v", err)
			}
			variants = append(variants, p)
		}
	}
	if reference {
		policies = append(policies, replay.ReferencePolicies()...)
	}
	kep := len(crashes)+len(outages) == 0
	if kep && !asJSON {
		if err := replay.WriteKEPTable(stdout, replay.SimulateKEP(policies)); err != nil {
			return err
		}
		rows, err := replay.SimulateOutages(variants, replay.OutageTableOutages, replay.OutageTableKeys, horizon)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout)
		return replay.WriteOutageTable(stdout, replay.OutageTableOutages, replay.OutageTableKeys, rows)
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
	for i := range programs {
		if programs[i].Outage > 0 {
			programs[i].Keys = keys
		}
	}
	for _, d := range outages {
		programs = append(programs, replay.Program{Outage: d, Keys: keys})
	}
	if asJSON {
		doc, err := simulations(policies, programs, horizon)
		if err != nil {
			return usagef("%s", strings.TrimPrefix(err.Error(), "replay: "))
		}
		return printJSON(stdout, doc)
	}
	if err := replay.WriteSimulations(stdout, policies, programs, horizon); err != nil {
		return usagef("%s", strings.TrimPrefix(err.Error(), "replay: ")) // a simulation too large: bad input
	}
	return nil
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
// crash_after, or one whose starts fail during an outage shared by keys
// keys; its starts, its restarts in the first 5 and 30 minutes, when the
// policy gave up, and for an outage, how long after its end the program
// ran again. Of an outage, every count is of all its keys together;
// gave_up_after is, when it gave up on every key (parked, no probe to
// come), when it did on the last; extra_delay is when the last key was
// back, first_back_after the first; keys_parked
// counts the keys parked (a probe may have resumed them since), keys_back
// those that ran again, probes the starts that were probes of a park or
// of a hold on the shared cause, held the restarts the fleet held, and
// cause_held_after and cause_released_after when the hold on the shared
// cause began and last ended, fleet_tripped_after when the fleet breaker
// first tripped.
type programDoc struct {
	CrashAfter         *jsonDuration `json:"crash_after,omitempty"`
	Outage             *jsonDuration `json:"outage,omitempty"`
	Keys               int           `json:"keys,omitempty"`
	Starts             int           `json:"starts"`
	Restarts5m         int           `json:"restarts_5m"`
	Restarts30m        int           `json:"restarts_30m"`
	GaveUpAfter        *jsonDuration `json:"gave_up_after,omitempty"`
	ExtraDelay         *jsonDuration `json:"extra_delay,omitempty"`
	FirstBackAfter     *jsonDuration `json:"first_back_after,omitempty"`
	KeysParked         *int          `json:"keys_parked,omitempty"`
	KeysBack           *int          `json:"keys_back,omitempty"`
	Probes             *int          `json:"probes,omitempty"`
	Held               *int          `json:"held,omitempty"`
	CauseHeldAfter     *jsonDuration `json:"cause_held_after,omitempty"`
	CauseReleasedAfter *jsonDuration `json:"cause_released_after,omitempty"`
	FleetTrippedAfter  *jsonDuration `json:"fleet_tripped_after,omitempty"`
}

// maxSimulatedKeys bounds --keys: a simulation keeps every key's starts.
const maxSimulatedKeys = 10000

// dur is d for a document.
func dur(d time.Duration) *jsonDuration { j := jsonDuration(d); return &j }

// outageDoc is what a policy did with an outage program, out.
func outageDoc(prog replay.Program, out replay.Outcome) programDoc {
	p := programDoc{Outage: dur(prog.Outage), Keys: len(out.Keys)}
	_, probes, held := out.Totals()
	for _, k := range out.Keys {
		p.Starts += len(k.Starts)
		for _, t := range k.Starts[1:] {
			if t <= 5*time.Minute {
				p.Restarts5m++
			}
			if t <= 30*time.Minute {
				p.Restarts30m++
			}
		}
	}
	parked := out.Parked()
	back, first, last := out.Back()
	if n, at := out.GaveUp(); n == len(out.Keys) {
		p.GaveUpAfter = dur(at)
	}
	if back > 0 {
		p.FirstBackAfter, p.ExtraDelay = dur(first), dur(last)
	}
	p.KeysParked, p.KeysBack, p.Probes, p.Held = &parked, &back, &probes, &held
	for _, at := range []struct {
		d   time.Duration
		set **jsonDuration
	}{{out.CauseHeld, &p.CauseHeldAfter}, {out.CauseReleased, &p.CauseReleasedAfter}, {out.Tripped, &p.FleetTrippedAfter}} {
		if at.d >= 0 {
			*at.set = dur(at.d)
		}
	}
	return p
}

// simulations simulates each program under each policy.
func simulations(policies []replay.Policy, programs []replay.Program, horizon time.Duration) (simulationsDoc, error) {
	doc := simulationsDoc{Horizon: jsonDuration(horizon), Policies: []policyDoc{}}
	for _, pol := range policies {
		pd := policyDoc{Name: pol.Name, Curve: pol.Curve, Programs: []programDoc{}}
		for _, prog := range programs {
			if prog.Outage > 0 {
				out, err := replay.SimulateOutage(pol, replay.SharedOutage{Outage: prog.Outage, Keys: max(prog.Keys, 1)}, horizon)
				if err != nil {
					return doc, err
				}
				pd.Programs = append(pd.Programs, outageDoc(prog, out))
				continue
			}
			sim, err := replay.Simulate(pol, prog, horizon)
			if err != nil {
				return doc, err
			}
			p := programDoc{CrashAfter: dur(prog.CrashAfter), Starts: len(sim.Starts), Restarts5m: sim.Restarts(5 * time.Minute),
				Restarts30m: sim.Restarts(30 * time.Minute)}
			if sim.GaveUp {
				p.GaveUpAfter = dur(sim.GaveUpAt)
			}
			pd.Programs = append(pd.Programs, p)
		}
		doc.Policies = append(doc.Policies, pd)
	}
	return doc, nil
}
