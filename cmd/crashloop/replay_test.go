//go:build unix

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// replayed is the part of crashloop replay --json that the tests read.
type replayed struct {
	Sources []struct {
		Format    string
		Records   int
		Malformed int
	}
	Reports []struct {
		Name   string
		Totals struct {
			Allowed, Parks, Spared int
			NeedsHuman             int `json:"needs_human"`
		}
		Keys []struct {
			Key      string
			LastPark struct{ Reason string } `json:"last_park"`
		}
		Log struct {
			Matched, Mismatched int
			Mismatches          []any
		}
	}
}

// TestReplayReproducesItsOwnLog runs crashloop against real crashing
// children with --log-format json, then replays the log under the
// configuration it ran with: every decision it logged, park for park and
// backoff for backoff, comes out the same.
func TestReplayReproducesItsOwnLog(t *testing.T) {
	t.Parallel()
	policy := []string{"--initial-backoff=1ms", "--max-backoff=3ms", "--window=10s", "--healthy-after=10s"}
	for _, c := range []struct {
		name      string
		flags     []string
		program   []string
		code      int
		decisions int // decisions logged
		allowed   int
		parks     int
		human     int
		reason    string
	}{
		{"budget", []string{"--max-respawns=3"}, []string{"exit=1"}, exitParked, 4, 3, 1, 0, "respawn_budget_exhausted"},
		{"chain", []string{"--healthy-after=0", "--chain-max=3"}, []string{"notify=READY=1", "exit=1"}, exitParked, 4, 3, 0, 1, "needs_human"},
		{"permanent", []string{"--permanent-exit-codes=3"}, []string{"exit=3"}, exitParked, 1, 0, 1, 0, "permanent_error"},
		{"exit rule", []string{"--on-exit=3=park"}, []string{"exit=3"}, exitParked, 1, 0, 1, 0, "permanent_error"},
		{"planned rule", []string{"--on-exit=2=planned", "--guard=2/10s", "--max-respawns=5"}, []string{"exit=2"}, exitParked, 3, 2, 1, 0, "restart_loop_guard"},
		{"guard", []string{"--guard=2/10s", "--max-respawns=5"}, []string{"exit=1"}, exitParked, 3, 2, 1, 0, "restart_loop_guard"},
		{"signal", []string{"--max-respawns=1", "--backoff=exponential"}, []string{"kill=TERM", "hang"}, exitParked, 2, 1, 1, 0, "respawn_budget_exhausted"},
		{"hourly", []string{"--hourly-cap=2", "--max-respawns=4"}, []string{"exit=2"}, exitParked, 3, 2, 1, 0, "hourly_restart_cap"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			flags := append(append([]string(nil), policy...), c.flags...)
			args := append(append(append([]string{"--log-format=json", "--grace=2s", "--key=" + c.name}, flags...), "--", helper), c.program...)
			r := runCL(t, args...)
			require.Equal(t, c.code, r.code, r.stderr)
			log := filepath.Join(t.TempDir(), "log.json")
			require.NoError(t, os.WriteFile(log, []byte(r.stderr), 0o644))
			logged := strings.Count(r.stderr, `"event":"agent.`) + strings.Count(r.stderr, `"event":"rescue.`) +
				strings.Count(r.stderr, `"event":"channel.`)
			require.Equal(t, c.decisions, logged, r.stderr)
			var stop map[string]any // the line of the event that stopped the key
			for _, line := range strings.Split(r.stderr, "\n") {
				var m map[string]any
				if json.Unmarshal([]byte(line), &m) == nil && (m["event"] == "agent.startup_exhausted" ||
					m["event"] == "rescue.needs_human" || m["event"] == "channel.crash_loop_tripped") {
					require.Nil(t, stop, "one stop: %s", r.stderr)
					stop = m
				}
			}
			require.NotNil(t, stop, r.stderr)
			assert.Equal(t, c.reason, stop["reason"], "the stop's reason attribute is the park's code")

			rr := runCL(t, append(append([]string{"replay", "--json"}, flags...), log)...)
			require.Equal(t, 0, rr.code, rr.stderr)
			var got replayed
			require.NoError(t, json.Unmarshal([]byte(rr.stdout), &got), rr.stdout)
			require.Len(t, got.Sources, 1)
			assert.Equal(t, "crashloop", got.Sources[0].Format)
			assert.Equal(t, 0, got.Sources[0].Malformed)
			require.Len(t, got.Reports, 1)
			rep := got.Reports[0]
			assert.Equal(t, "flags", rep.Name)
			assert.Equal(t, c.decisions, rep.Log.Matched, "%v\n%s", rep.Log.Mismatches, r.stderr)
			assert.Equal(t, 0, rep.Log.Mismatched, "%v\n%s", rep.Log.Mismatches, r.stderr)
			assert.Equal(t, c.allowed, rep.Totals.Allowed)
			assert.Equal(t, c.parks, rep.Totals.Parks)
			assert.Equal(t, c.human, rep.Totals.NeedsHuman)
			require.Len(t, rep.Keys, 1)
			assert.Equal(t, c.name, rep.Keys[0].Key)
			assert.Equal(t, c.reason, rep.Keys[0].LastPark.Reason)
		})
	}
}

// TestReplayTable: the table for people, with two candidates, a key of its
// own, and a malformed line named by number.
func TestReplayTable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	history := filepath.Join(dir, "h.csv")
	require.NoError(t, os.WriteFile(history, []byte("time,key,event,code\n"+
		"1714557600,a,start\n1714557601,a,exit,1\n1714557601.2,a,start\n1714557602,a,exit,1\n"+
		"1714557602.5,a,start\n1714557603,a,exit,1\n1714557603.5,a,start\n1714557604,a,exit,1\n"+
		"1714557604.5,a,start\n1714557605,a,exit,1\n1714557606,a,start\n1714557606.5,a,ready\n"+
		"1714558200,a,exit,1\n1714558190,b,start\nbad line\n"), 0o644))
	wide := filepath.Join(dir, "wide.json")
	require.NoError(t, os.WriteFile(wide, []byte(`{"budget": {"max_respawns": 10}}`), 0o644))
	network := filepath.Join(dir, "network.json")
	require.NoError(t, os.WriteFile(network, []byte(`{"Type":"network","Action":"connect","Actor":{"ID":"n"},"timeNano":1714557601000000000}`+"\n"), 0o644))
	def := filepath.Join(dir, "default.json")
	require.NoError(t, os.WriteFile(def, []byte(`{}`), 0o644))

	r := runCL(t, "replay", "--config", def, "--config", wide, "--key", "a", history)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, history+`: csv, 16 lines, 14 records, 1 malformed
  malformed: `+history+`:16: 1 fields, want time,key,event[,code]
history: 2024-05-01T10:00:00Z to 2024-05-01T10:10:00Z (10m)

                                     default               wide
keys                                 2                     2
runs                                 7                     7
failures                             6                     6
restarts in the history              5                     5
restarts it would allow              3                     6
restarts spared                      2                     0
keys parked or needs-human           1                     0
parks                                1                     0
needs-human                          0                     0
first failure to park (median/max)   3s / 3s               -
false parks (healthy within 1d)      1                     0
extra delay over the history's gaps  1.8s over 3 restarts  4.8s over 5 restarts
fleet trips                          0                     0
fleet held restarts for              0s                    0s
restarts held                        0                     0

key a
                                     default               wide
runs                                 6                     6
failures                             6                     6
restarts in the history              5                     5
restarts it would allow              3                     6
restarts spared                      2                     0
keys parked or needs-human           1                     0
parks                                1                     0
needs-human                          0                     0
first failure to park (median/max)   3s / 3s               -
false parks (healthy within 1d)      1                     0
extra delay over the history's gaps  1.8s over 3 restarts  4.8s over 5 restarts
`, r.stdout)

	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"replay"}, "crashloop: replay needs a HISTORY file (or - for standard input)\n"},
		{[]string{"replay", "--format=syslog", history}, `crashloop: --format: "syslog" is not auto, journald, kubernetes, docker, crashloop, csv or jsonl` + "\n"},
		{[]string{"replay", "--window=1s", history}, "crashloop: --window: must be >= the sum of the first 3 backoffs (3s), or a crash loop never parks\n"},
		{[]string{"replay", filepath.Join(dir, "none")}, "crashloop: " + filepath.Join(dir, "none") + ": no such file or directory\n"},
		{[]string{"replay", "--format=docker", network}, "crashloop: no record could be read: " + network +
			": 1 lines read as docker, none of them a start or an end of a run\n"},
		{[]string{"replay", wide}, "crashloop: no record could be read from " + wide + ": 1 malformed lines, the first: " + wide +
			":1: unknown format: not journalctl -o json, kubectl -o json, docker events, crashloop's JSON log, CSV (time,key,event,code) or JSON lines\n"},
	} {
		r := runCL(t, c.args...)
		assert.Equal(t, exitUsage, r.code, c.args)
		assert.Equal(t, c.msg, r.stderr, c.args)
	}
}

// TestSimulate: the table of a crasher and an outage, the Markdown table
// of docs/policies.md, and the help.
func TestSimulate(t *testing.T) {
	t.Parallel()
	r := runCL(t, "simulate", "--reference=false", "--defaults", "--config", "/dev/null", "--crash-after", "10s", "--outage", "30s")
	assert.Equal(t, exitUsage, r.code, "an empty file is no configuration")
	assert.Equal(t, "crashloop: /dev/null:1:1: unexpected end of JSON input\n", r.stderr)

	r = runCL(t, "simulate", "--reference=false", "--max-respawns=5", "--crash-after", "10s", "--outage", "30s")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "policy  10s crasher: restarts in 5m  in 30m  gives up after  30s outage: keys parked  restarts (probes)  back after\n"+
		"flags   3                            3       41.5s           1                        5                  gave up after 7.5s\n", r.stdout)

	// A probe after the park, and the outage shared by 10 keys held for
	// their cause (docs/policies.md has the numbers' argument).
	hold := filepath.Join(t.TempDir(), "hold.json")
	require.NoError(t, os.WriteFile(hold, []byte(`{"fleet": {"shared_cause": {}}}`), 0o600))
	r = runCL(t, "simulate", "--reference=false", "--defaults", "--config", hold, "--probe-after=30s", "--outage", "5m", "--keys", "10")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "policy              5m outage over 10 keys: keys parked  restarts (probes)  back after\n"+
		"crashloop defaults  10                                   30                 gave up after 3s\n"+
		"hold                0                                    21 (10 probes)     0s to 36.667s\n", r.stdout)
	r = runCL(t, "simulate", "--reference=false", "--probe-after=30s", "--outage", "5m", "--keys", "10")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "policy  5m outage over 10 keys: keys parked  restarts (probes)  back after\n"+
		"flags   10                                   70 (40 probes)     2m33s\n", r.stdout)

	r = runCL(t, "simulate")
	require.Equal(t, 0, r.code, r.stderr)
	doc, err := os.ReadFile("../../docs/policies.md")
	require.NoError(t, err)
	assert.Contains(t, string(doc), "\n"+r.stdout+"\n")
	assert.Equal(t, 18, strings.Count(r.stdout, "\n"), "a header, a rule, the defaults and seven reference policies; a blank line; a header, a rule and the defaults' five variants")

	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"simulate", "--crash-after", "-1s"}, `crashloop: --crash-after: "-1s" must be a duration > 0, such as 10s` + "\n"},
		{[]string{"simulate", "--horizon", "0s"}, "crashloop: --horizon: must be > 0\n"},
		{[]string{"simulate", "now"}, "crashloop: simulate takes no arguments, got \"now\"\n"},
		{[]string{"simulate", "--keys", "0"}, "crashloop: --keys: must be >= 1 and <= 10000\n"},
		// 10000 keys probed every second for a day: bounded, refused.
		{[]string{"simulate", "--reference=false", "--probe-after=1s", "--probe-max=1s", "--healthy-after=1s", "--outage=24h", "--keys=10000"},
			"crashloop: 1d outage over 10000 keys takes more than 5000000 decisions within the horizon: simulate fewer keys, a shorter outage or a shorter horizon\n"},
		{[]string{"simulate", "--probe-after", "1m", "--probe-max", "30s"}, "crashloop: --probe-max: must be >= --probe-after (0: 16 x --probe-after)\n"},
		{[]string{"simulate", "--chain-max=-1"}, "crashloop: --chain-max: must be >= 0 (0: off)\n"},
	} {
		r := runCL(t, c.args...)
		assert.Equal(t, exitUsage, r.code, c.args)
		assert.Equal(t, c.msg, r.stderr, c.args)
	}
	r = runCL(t, "simulate", "--help")
	assert.Equal(t, 0, r.code)
	assert.Equal(t, simulateHelp, r.stdout)
	r = runCL(t, "replay", "--help")
	assert.Equal(t, 0, r.code)
	assert.Equal(t, replayHelp, r.stdout)
}

// TestReplayOfItsOwnLogUnderItsDefaults: crashloop's log under its own
// defaults but the budget (no --config: the fleet breaker off, as crashloop
// runs), 51 runs of a program that writes to stderr before crashloop's
// first line, replays to the same 51 decisions; the program's lines are
// counted as its own, neither records nor malformed.
func TestReplayOfItsOwnLogUnderItsDefaults(t *testing.T) {
	t.Parallel()
	flags := []string{"--max-respawns=50", "--initial-backoff=1ms", "--max-backoff=2ms"}
	r := runCL(t, append(append([]string{"--log-format=json", "--key=k"}, flags...), "--", "/bin/sh", "-c", "echo 'boom: cannot connect' >&2; exit 1")...)
	require.Equal(t, exitParked, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stderr, "boom: cannot connect\n"), "the program's line comes first: %s", r.stderr)
	log := filepath.Join(t.TempDir(), "log.json")
	require.NoError(t, os.WriteFile(log, []byte(r.stderr), 0o644))

	rr := runCL(t, append(append([]string{"replay", "--json"}, flags...), log)...)
	require.Equal(t, 0, rr.code, rr.stderr)
	var got struct {
		Sources []struct {
			Format     string
			Records    int
			Malformed  int
			OtherLines int `json:"other_lines"`
		}
		Reports []struct {
			Totals struct {
				Allowed, Held, Parks int
				FleetTrips           int `json:"fleet_trips"`
			}
			Log struct{ Matched, Mismatched int }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(rr.stdout), &got), rr.stdout)
	require.Len(t, got.Sources, 1)
	assert.Equal(t, "crashloop", got.Sources[0].Format)
	assert.Equal(t, 0, got.Sources[0].Malformed)
	assert.Equal(t, 51, got.Sources[0].OtherLines, "one line of the program's per run")
	require.Len(t, got.Reports, 1)
	rep := got.Reports[0]
	assert.Equal(t, 51, rep.Log.Matched)
	assert.Equal(t, 0, rep.Log.Mismatched)
	assert.Equal(t, 50, rep.Totals.Allowed)
	assert.Equal(t, 0, rep.Totals.Held, "no fleet breaker: crashloop runs without one")
	assert.Equal(t, 0, rep.Totals.FleetTrips)
	assert.Equal(t, 1, rep.Totals.Parks)
}

// TestReplayColumnsFromStdin: a history on standard input ("-"); the
// policy flags apply over each --config file, --defaults adds a column of
// the defaults themselves beside the files or beside the flags' column,
// --key all adds the rows of every key, and the operator stops' row shows
// when the history has any.
func TestReplayColumnsFromStdin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wide := filepath.Join(dir, "wide.json")
	require.NoError(t, os.WriteFile(wide, []byte(`{"budget": {"max_respawns": 10}}`), 0o644))
	history := "1714557600,a,start\n1714557601,a,exit,1\n1714557602,a,start\n1714557603,a,exit,1\n" +
		"1714557604,a,start\n1714557605,a,exit,1\n1714557606,a,start\n1714557607,a,exit,1\n" +
		"1714557610,b,start\n1714557620,b,stop\n"
	run := func(args ...string) result {
		cmd := command(append([]string{"replay"}, args...)...)
		cmd.Stdin = strings.NewReader(history)
		return runCmd(t, cmd)
	}
	row := func(out, name string) string {
		for line := range strings.SplitSeq(out, "\n") {
			if strings.HasPrefix(line, name+"  ") {
				return strings.Join(strings.Fields(strings.TrimPrefix(line, name)), " ")
			}
		}
		return "no row " + name
	}

	r := run("--defaults", "--config", wide, "--max-respawns", "1", "--key", "all", "-")
	require.Equal(t, 0, r.code, r.stderr)
	assert.True(t, strings.HasPrefix(r.stdout, "stdin: csv, 10 lines, 10 records\n"), r.stdout)
	assert.Equal(t, "defaults wide", row(r.stdout, ""), "the columns")
	assert.Equal(t, "1 1", row(r.stdout, "parks"), "the defaults park at the 4th failure; wide, with --max-respawns 1 over its 10, at the 2nd")
	assert.Equal(t, "3 1", row(r.stdout, "restarts it would allow"))
	assert.Equal(t, "1 1", row(r.stdout, "operator stops (not failures)"))
	assert.Contains(t, r.stdout, "\nkey a\n")
	assert.Contains(t, r.stdout, "\nkey b\n")

	r = run("--defaults", "--max-respawns", "1", "-")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "defaults flags", row(r.stdout, ""), "the defaults beside the flags' column")
	assert.Equal(t, "3 1", row(r.stdout, "restarts it would allow"))
	assert.NotContains(t, r.stdout, "\nkey ")
}

// TestReplayProbeAndHold: replay takes --probe-after and a --config's
// fleet.shared_cause; the table shows the probes and the holds, and the
// JSON follows docs/schema/replay.json. The history: four keys fail at
// once with one status at 1s and 2s (a hold under fleet.shared_cause);
// a fails twice more (parked at 4s under the defaults' budget), is
// started at 40s (the probe, which fails) and at 110s, ready, until 700s.
func TestReplayProbeAndHold(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	history := filepath.Join(dir, "h.csv")
	require.NoError(t, os.WriteFile(history, []byte(`time,key,event,code
1714557600,a,start
1714557600,b,start
1714557600,c,start
1714557600,d,start
1714557601,a,exit,1
1714557601,b,exit,1
1714557601,c,exit,1
1714557601,d,exit,1
1714557601.5,a,start
1714557602,a,exit,1
1714557602.5,a,start
1714557603,a,exit,1
1714557603.5,a,start
1714557604,a,exit,1
1714557640,a,start
1714557641,a,exit,1
1714557710,a,start
1714557711,a,ready
1714558300,a,exit,1
`), 0o644))
	hold := filepath.Join(dir, "hold.json")
	require.NoError(t, os.WriteFile(hold, []byte(`{"fleet": {"shared_cause": {"keys": 4}}}`), 0o644))
	r := runCL(t, "replay", "--probe-after=30s", history)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "\nprobes of a park (resumed it)        2 (1)\n")
	assert.NotContains(t, r.stdout, "holds on a shared cause")

	r = runCL(t, "replay", "--defaults", "--config", hold, history)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "\nrestarts held                        0                     5\n")
	assert.Contains(t, r.stdout, "\nholds on a shared cause              0                     1\n")
	assert.NotContains(t, r.stdout, "probes of a park")

	// Under both, a is held, not parked: nothing to probe.
	s := schemas(t, "replay")
	r = runCL(t, "replay", "--json", "--probe-after=30s", "--config", hold, history)
	require.Equal(t, 0, r.code, r.stderr)
	valid(t, s["replay"], r.stdout)
	assert.Contains(t, r.stdout, `"cause": "exited with status N"`)
	assert.Contains(t, r.stdout, `"cause_holds": 1`)
	assert.NotContains(t, r.stdout, `"probes"`)
	r = runCL(t, "replay", "--json", "--probe-after=30s", history)
	require.Equal(t, 0, r.code, r.stderr)
	valid(t, s["replay"], r.stdout)
	assert.Contains(t, r.stdout, `"probes": 2,
        "probe_resumes": 1`)

	r = runCL(t, "replay", "--probe-after=1m", "--probe-max=30s", history)
	assert.Equal(t, exitUsage, r.code)
	assert.Equal(t, "crashloop: --probe-max: must be >= --probe-after (0: 16 x --probe-after)\n", r.stderr)
}
