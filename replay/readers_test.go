package replay_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/replay"
)

const (
	stopping    = "de5b426a63be47a7b6ac3eaac82e2f6f"
	stopped     = "9d1aaa27d60140bd96365438aad20286"
	deactivated = "7ad2d189f7e94e70a38c781354912448"
)

// TestJournaldStopsTargetsAndUsers: systemctl stop is a stop, and the exit
// logged after it is not judged; a clean end is "Deactivated
// successfully"; targets, mounts and sockets share Started's MESSAGE_ID
// and are no runs; a user unit's key names its user.
func TestJournaldStopsTargetsAndUsers(t *testing.T) {
	t.Parallel()
	user := func(id, unit, uid string, d time.Duration) string {
		return strings.Replace(journal(id, "x", d, `"_UID":"`+uid+`"`), `"UNIT":"x"`, `"USER_UNIT":"`+unit+`"`, 1)
	}
	lines := []string{
		journal(started, "multi-user.target", 0, ""), // "Reached target"
		journal(started, "home.mount", 0, ""),
		journal(started, "dbus.socket", 0, ""),
		journal(started, "api.service", time.Second, ""),
		journal(stopping, "api.service", 2*time.Second, ""),
		journal(exited, "api.service", 3*time.Second, `"EXIT_CODE":"killed","EXIT_STATUS":"9"`), // after the stop: not judged
		journal(deactivated, "api.service", 3*time.Second, ""),
		journal(stopped, "api.service", 3*time.Second, ""),
		journal(started, "api.service", 4*time.Second, ""),
		journal(deactivated, "api.service", 5*time.Second, ""),
		user(started, "sync.service", "1000", 6*time.Second),
		user(started, "sync.service", "1001", 6*time.Second),
		user(exited, "sync.service", "1000", 7*time.Second) + "",
	}
	lines[len(lines)-1] = strings.Replace(lines[len(lines)-1], `"MESSAGE":"..."`, `"MESSAGE":"...","EXIT_CODE":"exited","EXIT_STATUS":"1"`, 1)
	recs, r := readAll(t, strings.Join(lines, "\n"), replay.FormatAuto)
	assert.Equal(t, replay.FormatJournald, r.Format())
	k := "api.service"
	assert.Equal(t, []replay.Record{
		{Time: at(time.Second), Key: k, Event: replay.Start, Line: 4},
		{Time: at(2 * time.Second), Key: k, Event: replay.Stop, Cause: "stopped (systemctl stop or restart)", Line: 5},
		{Time: at(4 * time.Second), Key: k, Event: replay.Start, Line: 9},
		{Time: at(5 * time.Second), Key: k, Event: replay.Exit, Cause: "deactivated successfully", Line: 10},
		{Time: at(6 * time.Second), Key: "sync.service (user 1000)", Event: replay.Start, Line: 11},
		{Time: at(6 * time.Second), Key: "sync.service (user 1001)", Event: replay.Start, Line: 12},
		{Time: at(7 * time.Second), Key: "sync.service (user 1000)", Event: replay.Exit, Code: 1, Failed: true, Cause: "exited with status 1", Line: 13},
	}, recs)
	n, _ := r.Malformed()
	assert.Equal(t, 0, n)
}

// TestJournald239Lines: systemd before 240 logs a process exit and a
// unit's failure without MESSAGE_ID; a failure with no process exit before
// it reads its result from the message.
func TestJournald239Lines(t *testing.T) {
	t.Parallel()
	old := func(fn, unit string, d time.Duration, extra string) string {
		return fmt.Sprintf(`{"__REALTIME_TIMESTAMP":"%d","UNIT":"%s","CODE_FUNC":"%s"%s}`, at(d).UnixMicro(), unit, fn, extra)
	}
	lines := []string{
		journal(started, "a.service", 0, ""),
		old("service_sigchld_event", "a.service", time.Second, `,"MESSAGE":"a.service: Main process exited, code=exited, status=127/n/a","EXIT_CODE":"exited","EXIT_STATUS":"127"`),
		old("service_enter_dead", "a.service", time.Second, `,"MESSAGE":"a.service: Failed with result 'exit-code'."`),
		journal(started, "a.service", 2*time.Second, ""),
		old("service_enter_dead", "a.service", 3*time.Second, `,"MESSAGE":"a.service: Failed with result 'timeout'."`),
		old("service_dispatch_timer", "a.service", 4*time.Second, `,"MESSAGE":"a.service: Service RestartSec=5s expired, scheduling restart."`),
	}
	recs, _ := readAll(t, strings.Join(lines, "\n"), replay.FormatAuto)
	assert.Equal(t, []replay.Record{
		{Time: at(0), Key: "a.service", Event: replay.Start, Line: 1},
		{Time: at(time.Second), Key: "a.service", Event: replay.Exit, Code: 127, Failed: true, Cause: "exited with status 127", Line: 2},
		{Time: at(2 * time.Second), Key: "a.service", Event: replay.Start, Line: 4},
		{Time: at(3 * time.Second), Key: "a.service", Event: replay.Exit, Code: -1, Failed: true, Cause: "timeout", Line: 5},
	}, recs)
}

// TestDockerInstancesAndNoise: a name reused by a new container is a key
// of its own; exec and health events are no runs.
func TestDockerInstancesAndNoise(t *testing.T) {
	t.Parallel()
	ev := func(action, id string, d time.Duration, attrs string) string {
		return fmt.Sprintf(`{"Type":"container","Action":"%s","Actor":{"ID":"%s","Attributes":{"name":"web"%s}},"timeNano":%d}`,
			action, id, attrs, at(d).UnixNano())
	}
	a, b := "aaaaaaaaaaaa1111", "bbbbbbbbbbbb2222"
	lines := []string{
		ev("start", a, 0, ""),
		ev("exec_start: sh -c true", a, time.Second, ""),
		ev("health_status: unhealthy", a, time.Second, ""),
		ev("die", a, 2*time.Second, `,"exitCode":"1"`),
		ev("start", b, 3*time.Second, ""),
		ev("die", b, 4*time.Second, `,"exitCode":"2"`),
	}
	recs, _ := readAll(t, strings.Join(lines, "\n"), replay.FormatAuto)
	assert.Equal(t, []replay.Record{
		{Time: at(0), Key: "web", Event: replay.Start, Line: 1},
		{Time: at(2 * time.Second), Key: "web", Event: replay.Exit, Code: 1, Failed: true, Cause: "exited with status 1", Line: 4},
		{Time: at(3 * time.Second), Key: "web (bbbbbbbbbbbb)", Event: replay.Start, Line: 5},
		{Time: at(4 * time.Second), Key: "web (bbbbbbbbbbbb)", Event: replay.Exit, Code: 2, Failed: true, Cause: "exited with status 2", Line: 6},
	}, recs)
}

// TestForcedFormatSaysWhy: a format forced on a history that has lines
// and no record names the file, its lines and the format.
func TestForcedFormatSaysWhy(t *testing.T) {
	t.Parallel()
	h := `{"Type":"network","Action":"connect","Actor":{"ID":"n"},"timeNano":1714557601000000000}` + "\n"
	_, err := replay.Replay([]replay.Source{{Name: "events.json", R: strings.NewReader(h), Format: replay.FormatDocker}},
		[]replay.Candidate{{Config: crashloop.DefaultSupervisorConfig()}}, replay.Options{})
	require.ErrorIs(t, err, replay.ErrNoHistory)
	assert.EqualError(t, err, "replay: no record could be read: events.json: 1 lines read as docker, none of them a start or an end of a run")
}

// TestPlainStop: the plain forms' stop is an operator's stop: no failure,
// and the next start is no restart.
func TestPlainStop(t *testing.T) {
	t.Parallel()
	res, got := decisions(t, "1714557600,a,start\n1714557601,a,stop\n1714557602,a,start\n1714557603,a,exit,1\n",
		[]replay.Candidate{{Config: crashloop.DefaultSupervisorConfig()}}, replay.Options{})
	assert.Equal(t, []string{"a 3s restart 500ms agent.respawn_scheduled"}, got[0])
	tot := res.Reports[0].Totals
	assert.Equal(t, 2, tot.Runs)
	assert.Equal(t, 1, tot.Failures)
	assert.Equal(t, 0, tot.Restarts)
	assert.Equal(t, 1, tot.Stops)
}

// TestKubernetesOccurrenceLimits: an aggregated event stands for 10,000
// occurrences at most, and a history keeps 500,000 to sort; beyond, a
// malformed line says so.
func TestKubernetesOccurrenceLimits(t *testing.T) {
	t.Parallel()
	ev := func(i, count int) string {
		return fmt.Sprintf(`{"kind":"Event","involvedObject":{"namespace":"a","name":"p%d","fieldPath":"spec.containers{c}"},`+
			`"reason":"Started","message":"Started container c","firstTimestamp":"2024-05-01T10:00:00Z",`+
			`"lastTimestamp":"2024-06-01T10:00:00Z","count":%d}`, i, count)
	}
	recs, r := readAll(t, ev(0, 20000), replay.FormatAuto)
	assert.Len(t, recs, 10_000)
	assert.Equal(t, []string{"1", "h:1: item 1: count 20000 over 31d: more than kubelet can make in that span; 10000 occurrences replayed"}, malformed(r))

	var items []string
	for i := range 51 {
		items = append(items, ev(i, 10000))
	}
	recs, r = readAll(t, `{"kind":"List","items":[`+strings.Join(items, ",\n")+"]}\n", replay.FormatAuto)
	assert.Len(t, recs, 500_000)
	assert.Equal(t, []string{"1", "h:51: item 51: more than 500000 occurrences of events: the rest are not replayed"}, malformed(r))
}

// TestReportSaysWhatTheHistoryCannotShow: a Pod's restartCount beyond the
// restarts seen, and the records at inferred times, are in the report and
// its table.
func TestReportSaysWhatTheHistoryCannotShow(t *testing.T) {
	t.Parallel()
	pod := `{"kind":"Pod","metadata":{"namespace":"shop","name":"api","uid":"u1"},"status":{"containerStatuses":[{"name":"app","restartCount":756,
"state":{"running":{"startedAt":"2024-05-01T10:05:00Z"}},
"lastState":{"terminated":{"exitCode":1,"reason":"Error","startedAt":"2024-05-01T10:04:00Z","finishedAt":"2024-05-01T10:04:30Z"}}}]}}
{"kind":"Event","involvedObject":{"namespace":"shop","name":"web","fieldPath":"spec.containers{w}"},"reason":"Started","message":"Started container w",
"firstTimestamp":"2024-05-01T10:00:00Z","lastTimestamp":"2024-05-01T10:02:30Z","count":5}
`
	res, err := replay.Replay([]replay.Source{{Name: "h", R: strings.NewReader(pod)}},
		[]replay.Candidate{{Name: "defaults", Config: crashloop.DefaultSupervisorConfig()}}, replay.Options{})
	require.NoError(t, err)
	rep := res.Reports[0]
	require.Len(t, rep.Keys, 2)
	assert.Equal(t, "shop/api/app", rep.Keys[0].Key)
	assert.Equal(t, 756, rep.Keys[0].RestartsCounted)
	assert.Equal(t, 755, rep.Keys[0].RestartsUnseen, "one restart seen: the run under way")
	assert.Equal(t, 3, rep.Keys[1].InferredTimes, "5 starts over 150s: the 3 between the first and the last")
	assert.Equal(t, 755, rep.Totals.RestartsUnseen)
	assert.Equal(t, 3, rep.Totals.InferredTimes)
	js, err := json.Marshal(rep.Keys[0])
	require.NoError(t, err)
	assert.Contains(t, string(js), `"restarts_counted":756,"restarts_unseen":755`)
	js, err = json.Marshal(rep.Keys[1])
	require.NoError(t, err)
	assert.Contains(t, string(js), `"inferred_times":3`)
	assert.NotContains(t, string(js), "restarts_unseen", "absent, omitted")
	var b strings.Builder
	require.NoError(t, replay.WriteTable(&b, res, nil, 0))
	assert.Contains(t, b.String(), "\nrestarts kubelet counted, not in the history   755\n")
	assert.Contains(t, b.String(), "\nrecords at inferred times (aggregated events)  3\n")
}

// TestJournaldOneshotAndInvocations: a run is one INVOCATION_ID: "Starting"
// begins it and "Started" of the same invocation is no second start; a
// timer's oneshot logs "Finished" (Started's MESSAGE_ID) after its end,
// which is no new run either. Three firings, the second failing, are three
// runs and one failure, not a crash loop.
func TestJournaldOneshotAndInvocations(t *testing.T) {
	t.Parallel()
	const starting = "7d4958e842da4a758f6c1cdc7b36dcc5"
	inv := func(i string) string { return `"INVOCATION_ID":"` + strings.Repeat(i, 32) + `"` }
	lines := []string{
		journal(starting, "web.service", 0, inv("a")),
		journal(started, "web.service", 0, inv("a")),
		journal(starting, "backup.service", time.Minute, inv("1")),
		journal(deactivated, "backup.service", 2*time.Minute, inv("1")),
		journal(started, "backup.service", 2*time.Minute, inv("1")), // "Finished"
		journal(starting, "backup.service", time.Hour, inv("2")),
		journal(exited, "backup.service", time.Hour+time.Minute, inv("2")+`,"EXIT_CODE":"exited","EXIT_STATUS":"1"`),
		journal(failed, "backup.service", time.Hour+time.Minute, inv("2")+`,"UNIT_RESULT":"exit-code"`),
		journal(starting, "backup.service", 2*time.Hour, inv("3")),
		journal(deactivated, "backup.service", 2*time.Hour+time.Minute, inv("3")),
		journal(started, "backup.service", 2*time.Hour+time.Minute, inv("3")),
	}
	recs, _ := readAll(t, strings.Join(lines, "\n"), replay.FormatAuto)
	b := "backup.service"
	assert.Equal(t, []replay.Record{
		{Time: at(0), Key: "web.service", Event: replay.Start, Line: 1},
		{Time: at(time.Minute), Key: b, Event: replay.Start, Line: 3},
		{Time: at(2 * time.Minute), Key: b, Event: replay.Exit, Cause: "deactivated successfully", Line: 4},
		{Time: at(time.Hour), Key: b, Event: replay.Start, Line: 6},
		{Time: at(time.Hour + time.Minute), Key: b, Event: replay.Exit, Code: 1, Failed: true, Cause: "exited with status 1", Line: 7},
		{Time: at(2 * time.Hour), Key: b, Event: replay.Start, Line: 9},
		{Time: at(2*time.Hour + time.Minute), Key: b, Event: replay.Exit, Cause: "deactivated successfully", Line: 10},
	}, recs)
}
