//go:build unix

package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crashloopguard/crashloop/redisstore/redistest"
)

// failsUntil returns the argv of a program that appends the time of each
// start (Unix nanoseconds) to starts, fails (exit 1, a line on stderr)
// on its first n-1 starts, and from its nth on records its pid in running,
// says READY=1 and runs until killed.
func failsUntil(n int, starts, running string) []string {
	return []string{"sh", "-c", `date +%s%N >> "$1"; test "$(wc -l < "$1")" -ge ` + strconv.Itoa(n) +
		` || { echo "not yet" >&2; exit 1; }; exec "$0" record="$2" notify=READY=1 hang`, helper, starts, running}
}

// startTimes returns the start times a failsUntil program wrote.
func startTimes(t *testing.T, starts string) []time.Time {
	t.Helper()
	var out []time.Time
	for _, l := range lines(t, starts) {
		ns, err := strconv.ParseInt(l, 10, 64)
		require.NoError(t, err, l)
		out = append(out, time.Unix(0, ns))
	}
	return out
}

// logLine is a JSON log line of crashloop, as a probe test reads it.
type logLine struct {
	Msg       string    `json:"msg"`
	Event     string    `json:"event"`
	Key       string    `json:"key"`
	Reason    string    `json:"reason"`
	Since     time.Time `json:"since"`
	NextProbe time.Time `json:"next_probe"`
}

// probeSteps returns the steps of a probe in crashloop's JSON log on
// stderr: each event of the library ("event:KIND/REASON"), and the lines
// of crashloop that park, wait, start a probe or report a failed one,
// each named; and the lines themselves, in the same order.
func probeSteps(t *testing.T, stderr string) ([]string, []logLine) {
	t.Helper()
	var steps []string
	var got []logLine
	for line := range strings.Lines(stderr) {
		var l logLine
		if json.Unmarshal([]byte(line), &l) != nil {
			continue // a line of the program's stderr
		}
		var step string
		switch {
		case l.Event != "":
			step = "event:" + l.Event + "/" + l.Reason
		case strings.HasPrefix(l.Msg, "giving up on "):
			step = "gave up"
		case strings.HasPrefix(l.Msg, "--on-park wait: the program stays stopped until it is resumed, or until its probe at "):
			step = "waits for the probe"
		case strings.HasSuffix(l.Msg, "'s probe is due: starting it once; a healthy run resumes it"):
			step = "probe starts"
		case strings.HasPrefix(l.Msg, "the probe of ") && strings.Contains(l.Msg, " failed ("):
			step = "probe failed"
		case strings.Contains(l.Msg, " is parked since "):
			step = "refused"
		default:
			continue
		}
		steps, got = append(steps, step), append(got, l)
	}
	return steps, got
}

// eachShare runs test in parallel subtests, once for each of the two
// places a park and its probe schedule outlive a crashloop: a state file
// ("state"), and Redis ("redis").
func eachShare(t *testing.T, test func(t *testing.T, where string)) {
	for _, where := range []string{"state", "redis"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			test(t, where)
		})
	}
}

// shareArgs returns the flag that keeps the parks in where, a state file
// in dir or a new redis-server, and the command that resumes key there.
func shareArgs(t *testing.T, where, dir string) (flag, resume string) {
	t.Helper()
	if where == "redis" {
		url := redistest.Start(t).URL()
		return "--redis=" + url, "crashloop resume --redis " + url + " web"
	}
	state := filepath.Join(dir, "state.json")
	return "--state=" + state, "crashloop resume --state " + state + " web"
}

// TestAProbeFailsThenPasses: under --on-park wait with --probe-after, a
// parked program is started once as a probe when its probe is due, in
// place: the first probe fails (the program still fails), the key stays
// parked and its next probe is due twice as long after the probe started;
// the second passes (READY=1), resumes the key (agent.resumed, reason
// probe) and the program runs on, supervised, its mark gone from the
// state file. The same with the park on Redis. --healthy-after 0: only
// READY=1 makes a run healthy, so that no slow start of a failing program
// passes for a healthy probe.
func TestAProbeFailsThenPasses(t *testing.T) {
	t.Parallel()
	eachShare(t, testAProbeFailsThenPasses)
}

func testAProbeFailsThenPasses(t *testing.T, where string) {
	dir := t.TempDir()
	share, resume := shareArgs(t, where, dir)
	state, starts, running := filepath.Join(dir, "state.json"), filepath.Join(dir, "starts"), filepath.Join(dir, "running")
	c := startCL(t, append(with("--log-format=json", "--on-park=wait", share, "--key=web", "--max-respawns=0",
		"--probe-after=1s", "--healthy-after=0", "--metrics-addr=127.0.0.1:0", "--"), failsUntil(3, starts, running)...)...)
	addr := metricsAddr(t, c)

	require.Eventually(t, func() bool {
		steps, _ := probeSteps(t, c.stderr.String())
		return len(steps) >= 5
	}, patience, tick, "the park and the failed probe")
	_, got := probeSteps(t, c.stderr.String())
	// Once the failed probe is reported, 2s before the next: the next
	// probe in /status and in the mark, with one probe started.
	_, live := get(t, http.MethodGet, "http://"+addr+"/status")
	var ld struct {
		Keys []struct {
			State string
			Park  map[string]any
		}
	}
	require.NoError(t, json.Unmarshal([]byte(live), &ld))
	require.Len(t, ld.Keys, 1, live)
	assert.Equal(t, "parked", ld.Keys[0].State, live)
	assert.Equal(t, formatTime(got[4].NextProbe), ld.Keys[0].Park["next_probe"], live)
	if where == "state" {
		m := readMarks(t, state)["web"]
		require.NotNil(t, m.NextProbe, "the mark keeps the next probe")
		assert.Equal(t, 1, m.Probes)
		assert.True(t, got[4].NextProbe.Equal(*m.NextProbe), "the mark's next probe %v is the one reported %v", *m.NextProbe, got[4].NextProbe)
	}

	require.Eventually(t, func() bool { return written(running) == 1 }, patience, tick, "the passing probe's program")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		steps, _ := probeSteps(t, c.stderr.String())
		assert.Len(ct, steps, 7)
		if where == "state" {
			assert.Empty(ct, readMarks(t, state), "the mark, gone once the probe resumed the key")
		}
	}, patience, tick, "the resume")
	steps, got := probeSteps(t, c.stderr.String())
	assert.Equal(t, []string{"event:agent.startup_exhausted/respawn_budget_exhausted", "gave up", "waits for the probe",
		"probe starts", "probe failed", "probe starts", "event:agent.resumed/probe"}, steps, c.stderr.String())

	times := startTimes(t, starts)
	require.Len(t, times, 3, "the start that parked, the failed probe, the passing one")
	park, first, second := got[1].Since, got[1].NextProbe, got[4].NextProbe
	assert.True(t, park.Add(time.Second).Equal(first), "the first probe %v is --probe-after after the park %v", first, park)
	assert.Equal(t, "--on-park wait: the program stays stopped until it is resumed, or until its probe at "+
		first.UTC().Format(time.RFC3339Nano)+" (a healthy probe resumes it); resumed, it starts with a full budget: run "+resume, got[2].Msg)
	// The second probe is due 2 x 1s after the first was claimed, which
	// happened after it was due and before its program started.
	assert.False(t, times[1].Before(first), "the first probe started at %v, before it was due at %v", times[1], first)
	assert.False(t, second.Before(first.Add(2*time.Second)), "next probe %v: less than 2s after the first was due (%v)", second, first)
	assert.False(t, second.After(times[1].Add(2*time.Second)), "next probe %v: more than 2s after the first probe started (%v)", second, times[1])
	assert.False(t, times[2].Before(second), "the second probe started at %v, before it was due at %v", times[2], second)

	// Resumed: a running key in /status, ready.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		code, body := ready(ct, addr)
		assert.Equal(ct, http.StatusOK, code)
		assert.Equal(ct, "ready\n", body)
	}, patience, tick, "the resumed program to be ready")
	_, live = get(t, http.MethodGet, "http://"+addr+"/status")
	ld.Keys = nil // json reuses a slice's elements
	require.NoError(t, json.Unmarshal([]byte(live), &ld))
	require.Len(t, ld.Keys, 1, live)
	assert.Equal(t, "running", ld.Keys[0].State, live)
	assert.Nil(t, ld.Keys[0].Park, live)
	assert.False(t, c.exited())
	c.signal(t, syscall.SIGTERM)
	assert.Equal(t, 128+int(syscall.SIGTERM), c.wait(t), c.stderr.String())
	assert.Len(t, lines(t, starts), 3, "no start after the resume: the program ran until stopped")
}

// TestAProbeUnderOnParkExit: with --on-park exit, a park ends crashloop
// (86) with its first probe in the state file's mark, or on Redis; a
// crashloop started before the probe is due refuses the program (86) and
// says when it is due; one started after runs the probe: a failed probe
// ends it (86), the next probe twice as far, recorded; the next crashloop
// started after that runs the passing probe, which resumes the key and
// runs on.
func TestAProbeUnderOnParkExit(t *testing.T) {
	t.Parallel()
	eachShare(t, testAProbeUnderOnParkExit)
}

func testAProbeUnderOnParkExit(t *testing.T, where string) {
	dir := t.TempDir()
	share, _ := shareArgs(t, where, dir)
	state, starts, running := filepath.Join(dir, "state.json"), filepath.Join(dir, "starts"), filepath.Join(dir, "running")
	args := append(with("--log-format=json", share, "--key=web", "--max-respawns=0", "--probe-after=1s", "--healthy-after=0", "--"),
		failsUntil(3, starts, running)...)

	r := runCL(t, args...)
	require.Equal(t, exitParked, r.code, r.stderr)
	steps, got := probeSteps(t, r.stderr)
	require.Equal(t, []string{"event:agent.startup_exhausted/respawn_budget_exhausted", "gave up"}, steps, r.stderr)
	first := got[1].NextProbe
	assert.True(t, got[1].Since.Add(time.Second).Equal(first), "the first probe %v is --probe-after after the park %v", first, got[1].Since)
	if where == "state" {
		m := readMarks(t, state)["web"]
		require.NotNil(t, m.NextProbe)
		assert.True(t, first.Equal(*m.NextProbe))
		assert.Equal(t, 0, m.Probes)
	}

	// Before the probe is due: refused, with when it is due.
	r = runCL(t, args...)
	require.Equal(t, exitParked, r.code, r.stderr)
	require.True(t, time.Now().Before(first), "the refusal took until the probe was due: a slow machine")
	steps, got = probeSteps(t, r.stderr)
	assert.Equal(t, []string{"refused"}, steps, r.stderr)
	assert.True(t, strings.HasSuffix(got[0].Msg, "; its next probe is due at "+first.UTC().Format(time.RFC3339Nano)), got[0].Msg)
	assert.True(t, got[0].NextProbe.Equal(first))
	assert.Len(t, lines(t, starts), 1, "not started")

	// After: the probe runs, and fails.
	time.Sleep(time.Until(first))
	r = runCL(t, args...)
	require.Equal(t, exitParked, r.code, r.stderr)
	steps, got = probeSteps(t, r.stderr)
	assert.Equal(t, []string{"probe failed"}, steps, r.stderr)
	times := startTimes(t, starts)
	require.Len(t, times, 2)
	second := got[0].NextProbe
	assert.False(t, second.Before(first.Add(2*time.Second)), "next probe %v: less than 2s after the first was due (%v)", second, first)
	assert.False(t, second.After(times[1].Add(2*time.Second)), "next probe %v: more than 2s after the probe started (%v)", second, times[1])
	if where == "state" {
		m := readMarks(t, state)["web"]
		require.NotNil(t, m.NextProbe)
		assert.True(t, second.Equal(*m.NextProbe))
		assert.Equal(t, 1, m.Probes)
		assert.Equal(t, "respawn_budget_exhausted", m.Reason, "the same park")

		// status shows the next probe.
		st := runCL(t, "status", "--state", state)
		require.Equal(t, 0, st.code, st.stderr)
		assert.Contains(t, st.stdout, "\nweb: next probe due at "+second.Format(time.RFC3339)+"\n")
		st = runCL(t, "status", "--state", state, "--json")
		require.Equal(t, 0, st.code, st.stderr)
		assert.Contains(t, st.stdout, `"next_probe": "`+formatTime(second)+`"`)
	}

	// Refused again before the second probe is due.
	r = runCL(t, args...)
	require.Equal(t, exitParked, r.code, r.stderr)
	require.True(t, time.Now().Before(second), "the refusal took until the probe was due: a slow machine")
	steps, got = probeSteps(t, r.stderr)
	assert.Equal(t, []string{"refused"}, steps, r.stderr)
	assert.True(t, got[0].NextProbe.Equal(second), "%v, want %v", got[0].NextProbe, second)

	// After the second: it passes and runs on.
	time.Sleep(time.Until(second))
	c := startCL(t, args...)
	require.Eventually(t, func() bool { return written(running) == 1 }, patience, tick, "the passing probe's program")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		steps, _ := probeSteps(t, c.stderr.String())
		assert.Equal(ct, []string{"event:agent.resumed/probe"}, steps)
		if where == "state" {
			assert.Empty(ct, readMarks(t, state))
		}
	}, patience, tick, "the resume")
	if where == "redis" {
		r := runCL(t, "status", "--"+strings.TrimPrefix(share, "--"), "--json")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, `"parks": []`, "resumed for every replica")
	}
	assert.False(t, c.exited())
	c.signal(t, syscall.SIGTERM)
	assert.Equal(t, 128+int(syscall.SIGTERM), c.wait(t), c.stderr.String())
	assert.Len(t, lines(t, starts), 3)
}

// TestProbeAndSharedCauseFromConfig: probe_after and probe_max in --config
// schedule the probe as the flags do (the flag wins over the file), and a
// fleet.shared_cause without --redis is named at start: one crashloop is
// one key, and a hold needs several.
func TestProbeAndSharedCauseFromConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	config := writeFile(t, dir, "config.json", `{"probe_after": "1h", "probe_max": "4h", "fleet": {"shared_cause": {"keys": 2}}}`)
	for _, tc := range []struct {
		key   string
		flags []string
		after time.Duration
	}{{"file", nil, time.Hour}, {"flag", []string{"--probe-after=2h"}, 2 * time.Hour}} {
		state := filepath.Join(dir, tc.key+".json")
		r := runCL(t, append(with(append([]string{"--state=" + state, "--config=" + config, "--key=" + tc.key, "--max-respawns=0"}, tc.flags...)...),
			"--", helper, "exit=3")...)
		require.Equal(t, exitParked, r.code, r.stderr)
		assert.Equal(t, 1, strings.Count(r.stderr, `level=WARN msg="`+config+`: fleet.shared_cause needs --redis: one crashloop supervises one key, and a hold needs several keys failing with one cause" key=`+tc.key+"\n"), r.stderr)
		m := readMarks(t, state)[tc.key]
		require.NotNil(t, m.NextProbe, r.stderr)
		assert.True(t, m.Since.Add(tc.after).Equal(*m.NextProbe), "%s: next probe %v, parked %v", tc.key, *m.NextProbe, m.Since)
	}
}

// TestAProbeDueWhenCrashloopStarts: a crashloop with --on-park wait,
// started on a key whose probe came due while no crashloop ran, runs the
// probe at once; a healthy one resumes the key. Parks that are never
// probed (permanent_error, needs_human) are refused as before, with no
// probe named, and their program is not started.
func TestAProbeDueWhenCrashloopStarts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state, starts, running := filepath.Join(dir, "state.json"), filepath.Join(dir, "starts"), filepath.Join(dir, "running")
	args := func(onPark string) []string {
		return append(with("--log-format=json", "--state="+state, "--key=web", "--max-respawns=0", "--probe-after=1s", "--healthy-after=0",
			"--on-park="+onPark, "--"), failsUntil(2, starts, running)...)
	}
	r := runCL(t, args("exit")...)
	require.Equal(t, exitParked, r.code, r.stderr)
	m := readMarks(t, state)["web"]
	require.NotNil(t, m.NextProbe)
	time.Sleep(time.Until(*m.NextProbe))

	c := startCL(t, args("wait")...)
	require.Eventually(t, func() bool { return written(running) == 1 }, patience, tick, "the probe's program")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		steps, _ := probeSteps(t, c.stderr.String())
		assert.Equal(ct, []string{"event:agent.resumed/probe"}, steps)
		assert.Empty(ct, readMarks(t, state))
	}, patience, tick, "the resume")
	times := startTimes(t, starts)
	require.Len(t, times, 2)
	assert.False(t, times[1].Before(*m.NextProbe), "the probe started at %v, before it was due at %v", times[1], *m.NextProbe)
	c.signal(t, syscall.SIGTERM)
	assert.Equal(t, 128+int(syscall.SIGTERM), c.wait(t), c.stderr.String())

	for _, reason := range []string{"permanent_error", "needs_human"} {
		since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
		writeFile(t, dir, "state.json", `{"version": 1, "marks": {"web": {"reason": "`+reason+`", "starts": 1, "since": "`+since+`"}}}`)
		r := runCL(t, args("exit")...)
		require.Equal(t, exitParked, r.code, r.stderr)
		steps, got := probeSteps(t, r.stderr)
		require.Equal(t, []string{"refused"}, steps, r.stderr)
		assert.NotContains(t, got[0].Msg, "probe", reason)
		assert.True(t, got[0].NextProbe.IsZero(), reason)
		assert.Len(t, lines(t, starts), 2, "%s: not started", reason)
		assert.Nil(t, readMarks(t, state)["web"].NextProbe, reason)
	}
}
