//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/crashloopguard/crashloop/replay"
)

const tuneHelp = `Usage: crashloop tune [--config FILE]... [flags] HISTORY...

Searches the policies the library offers (healthy_after, the budget's
size and window, the chain, the per-key guard, the hourly cap, the backoff
curve) for those on the Pareto front of three measures on this history:
restarts spent on real crash loops (keys that end parked anyway), the
time from a loop's first failure to its park, and false parks (a key
healthy again within the horizon, with no resume). It prints the front, the
recommended policy, what each of its settings buys on this history, and
how it compares with the defaults, with each --config, and with itself
plus a probe after a park (probe_after 30s: compared, not searched, as
docs/tune.md says). Each candidate is judged as crashloop replay judges
it, without the fleet breaker.

A real crash loop is a key's failures (two or more) with no run of
--sound-run without failing within --horizon of the first; failures
followed by such a run sooner stopped on their own, and a park of them is
false. The history is read once and kept (at most 4,000,000 records);
the candidates are judged on every core.

HISTORY is a file, or - for standard input, in any format crashloop
replay reads.

Flags:
  --config FILE          a configuration to compare the recommended policy
                         with (repeatable); the policy flags of crashloop
                         apply over each, as in crashloop replay
  --write FILE           write the recommended policy to FILE, a --config
                         file crashloop, crashloop replay and crashloop
                         tune take as it is (without "fleet": crashloop
                         keeps its own default for the fleet breaker)
  --max-false-parks N    the most false parks the recommended policy may
                         make (default 0)
  --horizon DURATION     a healthy run this long after a park makes it
                         false (default 24h)
  --sound-run DURATION   a run this long without failing ends a key's
                         failures (default 1h)
  --format FORMAT        force the format: journald, kubernetes, docker,
                         crashloop, csv or jsonl (default: detect)
  --reorder DURATION     records up to this much out of time order are put
                         back in order (default 1m)
  --json                 print a JSON document instead of the tables

Progress goes to stderr when the search takes longer than two seconds.
`

// progressAfter is how long a search runs before tune shows its progress,
// and then how often.
const progressAfter = 2 * time.Second

// tuneCmd is "crashloop tune".
func tuneCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tune")
	var configs listFlag
	s, candidates := candidateFlags(fs, &configs)
	var format, write string
	var horizon, reorder, sound time.Duration
	var maxFalse int
	var asJSON bool
	fs.String(&format, "format", "auto", "")
	fs.String(&write, "write", "", "")
	fs.Int(&maxFalse, "max-false-parks", 0, "")
	fs.Duration(&horizon, "horizon", 24*time.Hour, "")
	fs.Duration(&sound, "sound-run", replay.DefaultSoundRun, "")
	fs.Duration(&reorder, "reorder", time.Minute, "")
	fs.Bool(&asJSON, "json", false, "")
	f, help, err := parseHistories(fs, args, stdout, tuneHelp, "tune", &format)
	switch {
	case help || err != nil:
		return err
	case maxFalse < 0:
		return usagef("%s %d: must be >= 0", typedAs(args, "max-false-parks"), maxFalse)
	case horizon <= 0:
		return usagef("%s %v: must be > 0", typedAs(args, "horizon"), horizon)
	case sound <= 0:
		return usagef("%s %v: must be > 0", typedAs(args, "sound-run"), sound)
	case reorder <= 0:
		return usagef("%s %v: must be > 0", typedAs(args, "reorder"), reorder)
	}
	cands, perm, err := candidates()
	if err != nil {
		return err
	}
	var compare []replay.Candidate // Tune compares with the defaults of its own
	switch {
	case len(configs) > 0 && len(cands) > len(configs): // and --defaults, which adds them first
		compare = cands[1:]
	case len(configs) > 0 || len(s.fs.given) > 0:
		compare = cands
	}
	if write != "" { // fail before the search, not after it
		if err := checkWritable(write); err != nil {
			return err
		}
	}
	sources, closeAll, err := openHistories(fs.Args(), f)
	if err != nil {
		return err
	}
	defer closeAll()
	h, err := replay.LoadHistory(sources, reorder)
	switch {
	case errors.Is(err, replay.ErrNoHistory), errors.Is(err, replay.ErrHistoryTooLong):
		return usagef("%s", strings.TrimPrefix(err.Error(), "replay: "))
	case err != nil:
		return fail(exitError, "%s", strings.TrimPrefix(err.Error(), "replay: "))
	}
	show, end := progress(stderr, time.Now, progressAfter)
	opts := replay.TuneOptions{Horizon: horizon, SoundRun: sound, MaxFalseParks: maxFalse, PermanentCodes: perm, Compare: compare,
		Progress: show}
	t, err := replay.Tune(h, opts)
	end()
	if err != nil {
		return s.explain(err)
	}
	if write != "" {
		if err := writeConfig(write, t.Recommended); err != nil {
			return err
		}
	}
	if asJSON {
		return printJSON(stdout, t)
	}
	if err := replay.WriteTune(stdout, t); err != nil {
		return err
	}
	if write != "" {
		fmt.Fprintf(stdout, "\nThe recommended policy is in %s: crashloop --config %s, crashloop replay --config %s.\n", write, write, write)
	}
	return nil
}

// checkWritable fails with an error naming --write if path cannot be
// written.
func checkWritable(path string) error {
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return usagef("--write %s: %v", path, unwrapPath(err))
	}
	return file.Close()
}

// writeConfig writes the configuration of v to path, as a --config file
// holds it, without "fleet": tune judges without the fleet breaker, as
// crashloop runs one key alone, and leaves crashloop its own default for
// it (on with --redis, where the keys of a fleet meet).
func writeConfig(path string, v replay.Verdict) error {
	v.Config.Fleet = nil
	data, err := json.Marshal(v.Config)
	if err != nil {
		return fail(exitError, "--write %s: %v", path, err)
	}
	data = bytes.Replace(data, []byte(`"fleet":null,`), nil, 1)
	var out bytes.Buffer
	if err := json.Indent(&out, data, "", "  "); err != nil {
		return fail(exitError, "--write %s: %v", path, err)
	}
	out.WriteByte('\n')
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		return fail(exitError, "--write %s: %v", path, unwrapPath(err))
	}
	return nil
}

// progress returns a TuneOptions.Progress that writes to w how many
// policies were judged, once a search has run for after and then at most
// once each after, and a function that ends the search: a last line, if
// any was written.
func progress(w io.Writer, now func() time.Time, after time.Duration) (func(done, total int), func()) {
	start := now()
	last, shown, judged := start, false, 0
	show := func(done, total int) {
		t := now()
		judged = done
		if t.Sub(last) < after {
			return
		}
		last, shown = t, true
		fmt.Fprintf(w, "crashloop tune: %d of %d policies judged (%d%%), %s\n", done, total, done*100/max(total, 1), replay.Duration(t.Sub(start).Round(time.Second)))
	}
	end := func() {
		if shown {
			fmt.Fprintf(w, "crashloop tune: %d policies judged in %s\n", judged, replay.Duration(now().Sub(start).Round(time.Second)))
		}
	}
	return show, end
}
