//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tuneHistory is the generated history of docs/tune.md.
const tuneHistory = "../../replay/testdata/tune.csv"

// tuned is the part of crashloop tune --json that the tests read.
type tuned struct {
	Loops       int
	Recommended struct {
		Name         string
		Config       json.RawMessage
		LoopsParked  int `json:"loops_parked"`
		Spent        int `json:"restarts_spent"`
		FalseParks   int `json:"false_parks"`
		Totals       json.RawMessage
		ToParkMean   string `json:"to_park_mean"`
		ToParkMaxStr string `json:"to_park_max"`
	}
	Compared []struct {
		Name string
	}
	NeverPark struct {
		Spent int `json:"restarts_spent"`
	} `json:"never_park"`
}

// TestTuneWritesAConfigEveryCommandTakes: --write writes the recommended
// policy as a --config file that crashloop replay replays to the same
// verdict (the same totals, the same keys parked, no false park), that
// crashloop tune takes as a configuration to compare (the same verdict as
// the recommended one), and that crashloop runs a program with.
func TestTuneWritesAConfigEveryCommandTakes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "tuned.json")
	r := runCL(t, "tune", "--json", "--write", file, tuneHistory)
	require.Equal(t, 0, r.code, r.stderr)
	var got tuned
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	assert.Equal(t, 5, got.Loops)
	assert.Equal(t, 5, got.Recommended.LoopsParked)
	assert.Zero(t, got.Recommended.FalseParks)
	assert.Equal(t, 45, got.Recommended.Spent)
	assert.Equal(t, 2337, got.NeverPark.Spent)
	written, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.JSONEq(t, `{"budget": {"max_respawns": 8, "window": "1h", "initial_backoff": "500ms", "max_backoff": "5s"}, "healthy_after": "15m",
		"backoff": null, "chain": {"max_chain": 3, "reset_gap": "20m"}, "guard": null, "hourly_cap": 0, "restart_on_clean_exit": false, "exit_rules": [],
		"probe_after": "0s", "probe_max": "0s"}`, string(written),
		"no fleet: crashloop keeps its own default for it")
	var judged map[string]any
	require.NoError(t, json.Unmarshal(got.Recommended.Config, &judged))
	assert.Nil(t, judged["fleet"], "judged without the fleet breaker")
	delete(judged, "fleet")
	data, err := json.Marshal(judged)
	require.NoError(t, err)
	assert.JSONEq(t, string(data), string(written), "the policy tune judged")

	rr := runCL(t, "replay", "--json", "--config", file, tuneHistory)
	require.Equal(t, 0, rr.code, rr.stderr)
	var rep struct {
		Reports []struct {
			Name   string
			Config json.RawMessage
			Totals json.RawMessage
			Keys   []struct {
				Key      string
				LastPark *struct{ Reason string } `json:"last_park"`
			}
		}
	}
	require.NoError(t, json.Unmarshal([]byte(rr.stdout), &rep), rr.stdout)
	require.Len(t, rep.Reports, 1)
	assert.Equal(t, "tuned", rep.Reports[0].Name)
	assert.JSONEq(t, string(got.Recommended.Config), string(rep.Reports[0].Config), "replay runs it as tune judged it: without the fleet breaker")
	assert.JSONEq(t, string(got.Recommended.Totals), string(rep.Reports[0].Totals), "the same verdict")
	var parked []string
	for _, k := range rep.Reports[0].Keys {
		if k.LastPark != nil {
			parked = append(parked, k.Key)
		}
	}
	assert.Equal(t, []string{"fast-1", "fast-2", "fast-3", "slow-1", "slow-2"}, parked, "the loops, and no other key")

	rt := runCL(t, "tune", "--config", file, tuneHistory)
	require.Equal(t, 0, rt.code, rt.stderr)
	assert.Contains(t, rt.stdout, "\nBeside tuned (healthy_after 15m0s, budget.max_respawns 8, budget.window 1h0m0s): the same verdict on this history.\n")

	rc := runCL(t, with("--config", file, "--key=tuned", "--", helper, "exit=0")...)
	assert.Equal(t, 0, rc.code, "crashloop runs a program with it: %s", rc.stderr)
}

// TestTuneTable: the table for people, whole, on the docs' history:
// what the history shows, the front, the recommended policy and why, and
// the comparison with the defaults, a --config and a policy that never
// parks. The same history gives the same output, every time.
func TestTuneTable(t *testing.T) {
	t.Parallel()
	r := runCL(t, "tune", "--config", "../../replay/testdata/loose.json", tuneHistory)
	require.Equal(t, 0, r.code, r.stderr)
	doc, err := os.ReadFile("../../docs/tune.md")
	require.NoError(t, err)
	want := strings.ReplaceAll(r.stdout, "../../replay/testdata/tune.csv", "replay/testdata/tune.csv")
	want = strings.ReplaceAll(want, "../../replay/testdata/loose.json", "replay/testdata/loose.json")
	assert.Contains(t, string(doc), "```\n$ crashloop tune --config replay/testdata/loose.json replay/testdata/tune.csv\n"+want+"```\n",
		"docs/tune.md shows the command's output")
	again := runCL(t, "tune", "--config", "../../replay/testdata/loose.json", tuneHistory)
	assert.Equal(t, r.stdout, again.stdout, "deterministic")
	for _, line := range strings.SplitAfter(r.stderr+again.stderr, "\n") {
		if line != "" {
			assert.Regexp(t, `^crashloop tune: \d+ (of \d+ policies judged \(\d+%\), |policies judged in )\S+\n$`, line,
				"stderr has progress alone (a slow run, under the race detector, shows it)")
		}
	}
}

// TestTuneBadInput: bad input is refused with exit status 2 and one line
// naming the flag as it was typed, before any search.
func TestTuneBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.csv")
	require.NoError(t, os.WriteFile(empty, []byte("time,key,event,code\n"), 0o644))
	garbage := filepath.Join(dir, "garbage.txt")
	require.NoError(t, os.WriteFile(garbage, []byte("not a history\nat all\n"), 0o644))
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"tune"}, "tune needs a HISTORY file (or - for standard input)"},
		{[]string{"tune", "--max-false-parks", "-1", tuneHistory}, "--max-false-parks -1: must be >= 0"},
		{[]string{"tune", "-max-false-parks=-2", tuneHistory}, "-max-false-parks -2: must be >= 0"},
		{[]string{"tune", "-horizon", "0s", tuneHistory}, "-horizon 0s: must be > 0"},
		{[]string{"tune", "--sound-run=-1m", tuneHistory}, "--sound-run -1m0s: must be > 0"},
		{[]string{"tune", "--horizon", "soon", tuneHistory}, `--horizon: "soon" is not a duration`},
		{[]string{"tune", "--format", "xml", tuneHistory}, `--format: "xml" is not auto, journald, kubernetes, docker, crashloop, csv or jsonl`},
		{[]string{"tune", "--write", filepath.Join(dir, "no", "such", "dir.json"), tuneHistory}, "--write " + filepath.Join(dir, "no", "such", "dir.json") + ": no such file or directory"},
		{[]string{"tune", filepath.Join(dir, "missing.csv")}, filepath.Join(dir, "missing.csv") + ": no such file or directory"},
		{[]string{"tune", empty}, "no record could be read: " + empty + ": 1 lines read as csv, none of them a start or an end of a run"},
		{[]string{"tune", "--config", filepath.Join(dir, "missing.json"), tuneHistory}, "--config " + filepath.Join(dir, "missing.json") + ": no such file or directory"},
		{[]string{"tune", "--max-respawns=-1", tuneHistory}, "--max-respawns: must be >= 0"},
	} {
		r := runCL(t, c.args...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.msg, c.args)
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(r.stderr), "\n")+1, "one line: %s", r.stderr)
		assert.Empty(t, r.stdout, c.args)
	}
	r := runCL(t, "tune", garbage)
	assert.Equal(t, exitUsage, r.code, r.stderr)
	assert.Contains(t, r.stderr, "no record could be read")
}

// TestTuneProgress: nothing before the search has run for progressAfter;
// then a line at most each progressAfter, and a last one at the end.
func TestTuneProgress(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	show, end := progress(&out, func() time.Time { return now }, 2*time.Second)
	step := func(d time.Duration, done, total int) {
		now = now.Add(d)
		show(done, total)
	}
	step(time.Second, 16, 100)
	step(900*time.Millisecond, 32, 100)
	assert.Empty(t, out.String(), "not before 2s")
	step(100*time.Millisecond, 48, 100)
	step(time.Second, 64, 100)
	step(time.Second, 80, 120)
	step(100*time.Millisecond, 120, 120)
	now = now.Add(time.Second)
	end()
	assert.Equal(t, "crashloop tune: 48 of 100 policies judged (48%), 2s\n"+
		"crashloop tune: 80 of 120 policies judged (66%), 4s\n"+
		"crashloop tune: 120 policies judged in 5s\n", out.String())

	out.Reset()
	show, end = progress(&out, func() time.Time { return now }, 2*time.Second)
	step(time.Second, 100, 100)
	end()
	assert.Empty(t, out.String(), "a search that ends quickly says nothing")
}

// TestTuneDocsFiles: replay/testdata/tuned.json is what tune --write
// writes for the history of docs/tune.md, and docs/tune-timeline.svg is
// replay's picture of it beside the defaults, as docs/tune.md makes them.
func TestTuneDocsFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file, svg := filepath.Join(dir, "tuned.json"), filepath.Join(dir, "tune.svg")
	r := runCL(t, "tune", "--write", file, tuneHistory)
	require.Equal(t, 0, r.code, r.stderr)
	got, err := os.ReadFile(file)
	require.NoError(t, err)
	want, err := os.ReadFile("../../replay/testdata/tuned.json")
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
	r = runCL(t, "replay", "--defaults", "--config", "../../replay/testdata/tuned.json", "--svg", svg, tuneHistory)
	require.Equal(t, 0, r.code, r.stderr)
	got, err = os.ReadFile(svg)
	require.NoError(t, err)
	want, err = os.ReadFile("../../docs/tune-timeline.svg")
	require.NoError(t, err)
	assert.True(t, string(want) == string(got), "regenerate with the command in docs/tune.md")
}

// TestTuneRealExports: the command runs on every real export of replay's
// corpus, with exit status 0, a recommendation and a --write file that
// crashloop replay takes.
func TestTuneRealExports(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../replay/testdata/real/*")
	require.NoError(t, err)
	dir := t.TempDir()
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "README.md") {
			continue
		}
		n++
		file := filepath.Join(dir, filepath.Base(f)+".json")
		r := runCL(t, "tune", "--write", file, f)
		require.Equal(t, 0, r.code, "%s: %s", f, r.stderr)
		assert.Contains(t, r.stdout, "\nRecommended (tuned): ", f)
		rr := runCL(t, "replay", "--config", file, f)
		assert.Equal(t, 0, rr.code, "%s: %s", f, rr.stderr)
	}
	assert.Equal(t, 18, n, "the eighteen exports of the corpus")
}
