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
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var configs listFlag
	var crashes, outages durationsFlag
	_, candidates := candidateFlags(fs, &configs)
	fs.Var(&crashes, "crash-after", "")
	fs.Var(&outages, "outage", "")
	horizon := fs.Duration("horizon", 24*time.Hour, "")
	reference := fs.Bool("reference", true, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, simulateHelp)
			return nil
		}
		return flagError(fs, args, err)
	}
	switch {
	case fs.NArg() > 0:
		return usagef("simulate takes no arguments, got %q", fs.Arg(0))
	case *horizon <= 0:
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
	if *reference {
		policies = append(policies, replay.ReferencePolicies()...)
	}
	if len(crashes)+len(outages) == 0 {
		return replay.WriteKEPTable(stdout, replay.SimulateKEP(policies))
	}
	var programs []replay.Program
	for _, d := range crashes {
		programs = append(programs, replay.Program{CrashAfter: d})
	}
	for _, d := range outages {
		programs = append(programs, replay.Program{Outage: d})
	}
	return replay.WriteSimulations(stdout, policies, programs, *horizon)
}
