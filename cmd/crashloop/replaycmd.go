//go:build unix

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/replay"
)

const replayHelp = `Usage: crashloop replay [--config FILE]... [policy flags] [flags] HISTORY...

Replays restart history that already happened under candidate
configurations, and prints what each would have done: one column per
candidate, one row per measure (restarts it would have allowed and spared,
keys parked and the time from the first failure to the park, false parks,
fleet trips, the delay its backoffs would have added). Each --config FILE
is a candidate (the format of crashloop --config); the policy flags
(--max-respawns, --window, ... as crashloop takes them, and
--probe-after D and --probe-max D: a probe after a park) apply over every
one, and with no --config they make the one candidate, over the defaults.
With a probe, the history's first start once a parked key's probe is due
is the probe, and its healthy run resumes the key; a --config's
fleet.shared_cause holds the restarts of keys failing with one cause
(from the history: the exit status, or the error text it records).
--defaults adds a first column for the defaults beside the --config ones
(or beside the policy flags' column).

HISTORY is a file, or - for standard input, in any of these formats,
detected from the content: journalctl -o json, kubectl get events -o json,
kubectl get pods -o json, docker events --format '{{json .}}', crashloop's
own --log-format json, and the plain CSV (time,key,event,code) or JSON
lines ({"time","key","event","code"}). Malformed lines are counted and
named by number; only a history with no readable line is an error.

Flags:
  --config FILE      a candidate configuration (repeatable)
  --format FORMAT    force the format: journald, kubernetes, docker,
                     crashloop, csv or jsonl (default: detect)
  --key KEY          also print the measures of KEY alone (repeatable;
                     "all" for every key)
  --horizon DURATION a healthy run this long after a park makes it false
                     (default 24h)
  --reorder DURATION records up to this much out of time order are put
                     back in order (default 1m)
  --svg FILE         draw the timeline of every candidate into FILE
  --svg-rows N       the most keys the timeline shows, busiest first
                     (default 40)
  --json             print a JSON document instead of the table
`

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// policyFlags are the flags of the supervisor's configuration that replay
// and simulate take as crashloop does (all of "When to give up" but
// --config, which they repeat).
func policyFlags() []string {
	var names []string
	for _, name := range helpSections[0].flags {
		if name != "config" {
			names = append(names, name)
		}
	}
	return names
}

// candidateFlags registers the policy flags of a fresh settings on fs, and
// returns the settings and a function that, once fs is parsed, builds the
// candidates: one per --config file, or one from the flags alone.
func candidateFlags(fs *flagSet, configs *listFlag) (*settings, func() ([]replay.Candidate, []int, error)) {
	s := newSettings()
	for _, name := range policyFlags() {
		f := s.fs.Lookup(name)
		fs.FlagSet.Var(f.Value, name, f.Usage) // s's own value: s knows it is set
	}
	fs.Var(configs, "config", "a candidate configuration FILE (repeatable)", repeatable)
	var defaults bool
	fs.Bool(&defaults, "defaults", false, "")
	build := func() ([]replay.Candidate, []int, error) {
		if err := s.check(); err != nil {
			return nil, nil, err
		}
		codes, _ := parseExitCodes(s.permanentExitCodes) // checked by check
		perm := slices.Sorted(func(yield func(int) bool) {
			for c := range codes {
				if !yield(c) {
					return
				}
			}
		})
		files := []string(*configs)
		if len(files) == 0 {
			files = []string{""}
		}
		var cands []replay.Candidate
		if defaults && (len(*configs) > 0 || len(s.fs.given) > 0) {
			// Beside the files, or beside the flags' own column: a column
			// named defaults is the defaults.
			cfg := crashloop.DefaultSupervisorConfig()
			cfg.Fleet = nil // as crashloop runs: see settings.fleetOf
			cands = append(cands, replay.Candidate{Name: "defaults", Config: cfg})
		}
		for _, file := range files {
			s.config = file
			cfg, err := s.configuration()
			if err != nil {
				return nil, nil, err
			}
			// The fleet breaker as crashloop itself runs it: off unless the
			// configuration file sets "fleet" (one crashloop is one key, not
			// a fleet), so that a replay of its own log decides as it did.
			s.fleetOf(&cfg)
			name := "defaults"
			switch {
			case file != "":
				name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
			case len(s.fs.given) > 0:
				name = "flags"
			}
			if _, err := crashloop.NewSupervisor(cfg); err != nil {
				return nil, nil, s.explain(err)
			}
			cands = append(cands, replay.Candidate{Name: name, Config: cfg})
		}
		return cands, perm, nil
	}
	return s, build
}

// replayCmd is "crashloop replay".
func replayCmd(args []string, stdout io.Writer) error {
	fs := newFlagSet("replay")
	var configs, keys listFlag
	s, candidates := candidateFlags(fs, &configs)
	var format, svg string
	var horizon, reorder time.Duration
	var svgRows int
	var asJSON bool
	fs.String(&format, "format", "auto", "")
	fs.Var(&keys, "key", "", repeatable)
	fs.Duration(&horizon, "horizon", 24*time.Hour, "")
	fs.Duration(&reorder, "reorder", time.Minute, "")
	fs.String(&svg, "svg", "", "")
	fs.Int(&svgRows, "svg-rows", 40, "")
	fs.Bool(&asJSON, "json", false, "")
	f, help, err := parseHistories(fs, args, stdout, replayHelp, "replay", &format)
	switch {
	case help || err != nil:
		return err
	case horizon <= 0:
		return usagef("--horizon: must be > 0")
	case reorder <= 0:
		return usagef("--reorder: must be > 0")
	case svgRows < 1:
		return usagef("--svg-rows: must be >= 1")
	}
	cands, perm, err := candidates()
	if err != nil {
		return err
	}
	sources, closeAll, err := openHistories(fs.Args(), f)
	if err != nil {
		return err
	}
	defer closeAll()
	opts := replay.Options{Horizon: horizon, Reorder: reorder, PermanentCodes: perm}
	var tl *replay.Timeline
	if svg != "" {
		tl = replay.NewTimeline()
		opts.Timeline = tl
	}
	res, err := replay.Replay(sources, cands, opts)
	if err != nil {
		if errors.Is(err, replay.ErrNoHistory) {
			return usagef("%s", strings.TrimPrefix(err.Error(), "replay: "))
		}
		return s.explain(err)
	}
	if tl != nil {
		if err := writeSVG(svg, tl, res, svgRows); err != nil {
			return err
		}
	}
	if asJSON {
		return printJSON(stdout, res)
	}
	if slices.Contains(keys, "all") {
		keys = keys[:0]
		for _, k := range res.Reports[0].Keys {
			keys = append(keys, k.Key)
		}
	}
	return replay.WriteTable(stdout, res, keys, horizon)
}

// writeSVG draws the timeline into path.
func writeSVG(path string, tl *replay.Timeline, res *replay.Result, rows int) error {
	file, err := os.Create(path)
	if err != nil {
		return fail(exitError, "--svg %s: %v", path, err)
	}
	err = tl.WriteSVG(file, res.Reports, rows)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(exitError, "--svg %s: %v", path, err)
	}
	return nil
}

// parseHistories parses the flags of replay or tune (cmd), printing help
// on --help (help true), and returns the --format parsed into format, or
// an error for a bad one or no HISTORY argument.
func parseHistories(fs *flagSet, args []string, stdout io.Writer, helpText, cmd string, format *string) (replay.Format, bool, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, helpText)
			return 0, true, nil
		}
		return 0, false, flagError(fs.FlagSet, args, err)
	}
	f, err := replay.ParseFormat(*format)
	switch {
	case err != nil:
		return 0, false, badValue("format", *format, "is not auto, journald, kubernetes, docker, crashloop, csv or jsonl")
	case fs.NArg() == 0:
		return 0, false, usagef("%s needs a HISTORY file (or - for standard input)", cmd)
	}
	return f, false, nil
}
