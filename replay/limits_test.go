package replay_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/replay"
)

// The tests of this file hold claims of docs/replay.md that no other test
// holds: the limits on a line and on the malformed lines kept, systemd's
// clean signals, and an operator's resume in crashloop's own log.

// TestLineLongerThan16MiBIsMalformed: a line longer than 16 MiB is
// malformed, named by its number, and the lines after it are read; so is a
// json-pretty entry longer than that, named by its first line, and the
// rest of its lines are not read as more malformed lines.
func TestLineLongerThan16MiBIsMalformed(t *testing.T) {
	t.Parallel()
	long := `{"MESSAGE":"` + strings.Repeat("x", 16<<20) + `"}`
	history := journal(started, "a.service", 0, "") + "\n" + long + "\n" + journal(exited, "a.service", time.Second, `"EXIT_CODE":"exited","EXIT_STATUS":"1"`) + "\n"
	recs, r := readAll(t, history, replay.FormatAuto)
	assert.Equal(t, []replay.Record{
		{Time: at(0), Key: "a.service", Event: replay.Start, Line: 1},
		{Time: at(time.Second), Key: "a.service", Event: replay.Exit, Code: 1, Failed: true, Cause: "exited with status 1", Line: 3},
	}, recs)
	assert.Equal(t, []string{"1", "h:2: line longer than 16777216 bytes"}, malformed(r))

	pretty := "{\n\t\"__REALTIME_TIMESTAMP\" : \"1\",\n" + strings.Repeat("\t\"MESSAGE\" : \""+strings.Repeat("y", 1<<20)+"\",\n", 17) + "}\n" +
		"{\n\t\"__REALTIME_TIMESTAMP\" : \"" + fmt.Sprint(at(2*time.Second).UnixMicro()) + "\",\n\t\"MESSAGE_ID\" : \"" + started + "\",\n\t\"UNIT\" : \"b.service\"\n}\n"
	recs, r = readAll(t, pretty, replay.FormatAuto)
	assert.Equal(t, replay.FormatJournald, r.Format())
	assert.Equal(t, []replay.Record{{Time: at(2 * time.Second), Key: "b.service", Event: replay.Start, Line: 21}}, recs)
	assert.Equal(t, []string{"1", "h:1: entry longer than 16777216 bytes"}, malformed(r))
}

// TestMalformedLinesKeepTheFirst20: every malformed line is counted; the
// first 20 are kept to name.
func TestMalformedLinesKeepTheFirst20(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("1714557600,a,start\n")
	for range 25 {
		b.WriteString("1714557601,a,explode\n")
	}
	recs, r := readAll(t, b.String(), replay.FormatCSV)
	assert.Len(t, recs, 1)
	n, errs := r.Malformed()
	assert.Equal(t, 25, n)
	assert.Len(t, errs, 20)
	assert.Equal(t, `h:2: event "explode": not start, exit, ready, resume or stop`, errs[0].Error())
	assert.Equal(t, `h:21: event "explode": not start, exit, ready, resume or stop`, errs[19].Error())
}

// TestJournaldCleanSignals: an exit is a failure unless it exited 0 or was
// killed by one of systemd's clean signals (HUP, INT, TERM, PIPE); a core
// dump is a failure whatever the signal.
func TestJournaldCleanSignals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		code, status string
		exit         int
		failed       bool
		cause        string
	}{
		{"exited", "0", 0, false, "exited with status 0"},
		{"exited", "2", 2, true, "exited with status 2"},
		{"killed", "HUP", 129, false, "killed by signal HUP"},
		{"killed", "INT", 130, false, "killed by signal INT"},
		{"killed", "PIPE", 141, false, "killed by signal PIPE"},
		{"killed", "TERM", 143, false, "killed by signal TERM"},
		{"killed", "KILL", 137, true, "killed by signal KILL"},
		{"killed", "USR1", 138, true, "killed by signal USR1"},
		{"dumped", "QUIT", 131, true, "killed by signal QUIT (core dumped)"},
	} {
		history := journal(started, "a.service", 0, "") + "\n" +
			journal(exited, "a.service", time.Second, fmt.Sprintf(`"EXIT_CODE":%q,"EXIT_STATUS":%q`, c.code, c.status)) + "\n"
		recs, r := readAll(t, history, replay.FormatJournald)
		assert.Equal(t, []string{"0"}, malformed(r))
		if assert.Len(t, recs, 2, c.status) {
			assert.Equal(t, replay.Record{Time: at(time.Second), Key: "a.service", Event: replay.Exit, Code: c.exit, Failed: c.failed, Cause: c.cause, Line: 2}, recs[1])
		}
	}
}

// TestCrashloopLogResumed: an operator's resume in crashloop's own log
// (agent.resumed) lifts the key's park: a replay does not count the next
// start as spared.
func TestCrashloopLogResumed(t *testing.T) {
	t.Parallel()
	lines := []string{
		clLog(time.Second, "ERROR", `session "w" parked (permanent_error)`,
			`,"event":"agent.startup_exhausted","key":"w","reason":"permanent_error","last_error":"crashloop: permanent failure: ./w exited with status 3"`),
		clLog(60*time.Second, "INFO", `resumed "w"`, `,"event":"agent.resumed","key":"w"`),
		clLog(70*time.Second, "WARN", `session "w" failed; respawn 1/3 in 500ms`,
			`,"event":"agent.respawn_scheduled","key":"w","attempts":1,"limit":3,"window":"1m","backoff":"500ms","last_error":"./w exited with status 1"`),
	}
	history := strings.Join(lines, "\n") + "\n"
	recs, r := readAll(t, history, replay.FormatAuto)
	assert.Equal(t, []string{"0"}, malformed(r))
	var got []string
	for _, rec := range recs {
		got = append(got, fmt.Sprintf("%s %v", rec.Time.Sub(t0), rec.Event))
	}
	assert.Equal(t, []string{"1s start", "1s exit", "1m0s resume", "1m10s start", "1m10s exit"}, got)

	res, err := replay.Replay([]replay.Source{{Name: "h", R: strings.NewReader(history)}},
		[]replay.Candidate{{Config: crashloop.DefaultSupervisorConfig()}}, replay.Options{})
	require.NoError(t, err)
	tot := res.Reports[0].Totals
	assert.Equal(t, 1, tot.Parks, "the permanent exit parks")
	assert.Equal(t, 0, tot.Spared, "the start after the resume is the operator's")
}

// TestKubernetesPodInstances: a second pod of a name (another
// metadata.uid, as a StatefulSet's pod made again) is another key,
// "(pod UID8)" after the first's.
func TestKubernetesPodInstances(t *testing.T) {
	t.Parallel()
	pod := func(uid, started string) string {
		return `{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"db","name":"pg-0","uid":"` + uid + `"},"status":{"containerStatuses":[` +
			`{"name":"pg","restartCount":0,"state":{"running":{"startedAt":"` + started + `"}},"lastState":{}}]}}` + "\n"
	}
	recs, r := readAll(t, pod("0f1e2d3c-aaaa-bbbb-cccc-000000000001", "2024-05-01T10:00:00Z")+
		pod("9b2d7c11-aaaa-bbbb-cccc-000000000002", "2024-05-01T10:05:00Z"), replay.FormatAuto)
	assert.Equal(t, []string{"0"}, malformed(r))
	assert.Equal(t, []replay.Record{
		{Time: at(0), Key: "db/pg-0/pg", Event: replay.Start, Line: 1},
		{Time: at(5 * time.Minute), Key: "db/pg-0/pg (pod 9b2d7c11)", Event: replay.Start, Line: 2},
	}, recs)
}
