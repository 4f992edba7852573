package replay_test

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crashloopguard/crashloop/replay"
)

// t0 is 2024-05-01T10:00:00Z, the start of every test history.
var t0 = time.Unix(1714557600, 0).UTC()

// at is t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// readAll reads every record of history.
func readAll(t *testing.T, history string, f replay.Format) ([]replay.Record, *replay.Reader) {
	t.Helper()
	r := replay.NewReader(strings.NewReader(history), "h", f)
	var recs []replay.Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs, r
		}
		require.NoError(t, err)
		recs = append(recs, rec)
	}
}

// malformed returns the reader's malformed lines as "LINE: ERR".
func malformed(r *replay.Reader) []string {
	n, errs := r.Malformed()
	out := []string{fmt.Sprint(n)}
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// journal returns a journalctl -o json line of systemd's message id about
// unit at t0+d with the extra fields.
func journal(id, unit string, d time.Duration, extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return fmt.Sprintf(`{"__CURSOR":"s=1;i=%d","__REALTIME_TIMESTAMP":"%d","_PID":"1","MESSAGE_ID":"%s","UNIT":"%s","MESSAGE":"..."%s}`,
		d, at(d).UnixMicro(), id, unit, extra)
}

const (
	started  = "39f53479d3a045ac8e11786248231fbf"
	exited   = "98e322203f7a4ed290d09fe03c09fe15"
	failed   = "d9b373ed55a64feb8242e02dbe79a49c"
	schedule = "5eb03494b6584870a536b337290809b3"
)

func TestJournald(t *testing.T) {
	t.Parallel()
	lines := []string{
		journal(started, "api.service", 0, ""),
		`{"__REALTIME_TIMESTAMP":"1714557600500000","_SYSTEMD_UNIT":"api.service","MESSAGE":"listening"}`, // the unit's own output
		journal(exited, "api.service", time.Second, `"EXIT_CODE":"exited","EXIT_STATUS":"1"`),
		journal(failed, "api.service", time.Second, `"UNIT_RESULT":"exit-code"`),
		journal(schedule, "api.service", 2*time.Second, `"N_RESTARTS":"1"`),
		journal(started, "api.service", 2*time.Second, ""),
		journal(exited, "api.service", 3*time.Second, `"EXIT_CODE":"dumped","EXIT_STATUS":"SEGV"`),
		journal(started, "api.service", 4*time.Second, ""),
		journal(exited, "api.service", 5*time.Second, `"EXIT_CODE":"killed","EXIT_STATUS":"TERM"`), // a clean signal for systemd
		journal(started, "api.service", 6*time.Second, ""),
		journal(failed, "api.service", 7*time.Second, `"UNIT_RESULT":"watchdog"`),        // no process exit: the result ends the run
		journal(failed, "api.service", 8*time.Second, `"UNIT_RESULT":"start-limit-hit"`), // no run under way: nothing
		strings.Replace(journal(started, "x", 9*time.Second, ""), `"UNIT":"x"`, `"USER_UNIT":"sync.service"`, 1),
		journal(exited, "api.service", 10*time.Second, `"EXIT_CODE":"exited","EXIT_STATUS":[50]`), // bytes: "2"
		journal(started, "api.service", 11*time.Second, "")[:60],                                  // truncated
		`{"__REALTIME_TIMESTAMP":"soon","MESSAGE_ID":"` + started + `","UNIT":"b.service"}`,
		journal(exited, "api.service", 12*time.Second, `"EXIT_CODE":"exploded","EXIT_STATUS":"1"`),
		`not json`,
	}
	recs, r := readAll(t, strings.Join(lines, "\n")+"\n", replay.FormatAuto)
	assert.Equal(t, replay.FormatJournald, r.Format())
	k := "api.service"
	assert.Equal(t, []replay.Record{
		{Time: at(0), Key: k, Event: replay.Start, Line: 1},
		{Time: at(time.Second), Key: k, Event: replay.Exit, Code: 1, Failed: true, Cause: "exited with status 1", Line: 3},
		{Time: at(2 * time.Second), Key: k, Event: replay.Start, Line: 6},
		{Time: at(3 * time.Second), Key: k, Event: replay.Exit, Code: 139, Failed: true, Cause: "killed by signal SEGV (core dumped)", Line: 7},
		{Time: at(4 * time.Second), Key: k, Event: replay.Start, Line: 8},
		{Time: at(5 * time.Second), Key: k, Event: replay.Exit, Code: 143, Cause: "killed by signal TERM", Line: 9},
		{Time: at(6 * time.Second), Key: k, Event: replay.Start, Line: 10},
		{Time: at(7 * time.Second), Key: k, Event: replay.Exit, Code: -1, Failed: true, Cause: "watchdog", Line: 11},
		{Time: at(9 * time.Second), Key: "sync.service (user ?)", Event: replay.Start, Line: 13},
		{Time: at(10 * time.Second), Key: k, Event: replay.Exit, Code: 2, Failed: true, Cause: "exited with status 2", Line: 14},
	}, recs)
	assert.Equal(t, []string{"4",
		"h:15: not a JSON object (journalctl -o json writes one per line)",
		`h:16: __REALTIME_TIMESTAMP "soon": not microseconds since the epoch`,
		`h:17: EXIT_CODE "exploded": not exited, killed or dumped`,
		"h:18: not a JSON object (journalctl -o json writes one per line)",
	}, malformed(r))
	assert.Equal(t, 18, r.Lines())
}

func TestDocker(t *testing.T) {
	t.Parallel()
	ev := func(action, name string, d time.Duration, attrs string) string {
		return fmt.Sprintf(`{"status":"%s","id":"abc","from":"img","Type":"container","Action":"%s","Actor":{"ID":"abc","Attributes":{"image":"img","name":"%s"%s}},"scope":"local","time":%d,"timeNano":%d}`,
			action, action, name, attrs, at(d).Unix(), at(d).UnixNano())
	}
	lines := []string{
		ev("start", "web", 0, ""),
		ev("die", "web", time.Second, `,"exitCode":"3"`),
		`{"Type":"network","Action":"connect","Actor":{"ID":"n","Attributes":{"name":"bridge"}},"timeNano":1714557601000000000}`,
		ev("start", "web", 1500*time.Millisecond, ""),
		ev("oom", "web", 2*time.Second, ""),
		ev("kill", "web", 2*time.Second, `,"signal":"9"`),
		ev("die", "web", 2*time.Second, `,"exitCode":"137"`),
		ev("start", "db", 3*time.Second, ""),
		ev("kill", "db", 4*time.Second, `,"signal":"15"`),
		ev("die", "db", 4*time.Second, `,"exitCode":"0"`),
		ev("die", "db", 5*time.Second, ""),
		ev("start", "web", 6*time.Second, "")[:50],
	}
	recs, r := readAll(t, strings.Join(lines, "\n"), replay.FormatAuto)
	assert.Equal(t, replay.FormatDocker, r.Format())
	assert.Equal(t, []replay.Record{
		{Time: at(0), Key: "web", Event: replay.Start, Line: 1},
		{Time: at(time.Second), Key: "web", Event: replay.Exit, Code: 3, Failed: true, Cause: "exited with status 3", Line: 2},
		{Time: at(1500 * time.Millisecond), Key: "web", Event: replay.Start, Line: 4},
		{Time: at(2 * time.Second), Key: "web", Event: replay.Exit, Code: 137, Failed: true, Cause: "oom, killed by signal KILL", Line: 7},
		{Time: at(3 * time.Second), Key: "db", Event: replay.Start, Line: 8},
		{Time: at(4 * time.Second), Key: "db", Event: replay.Stop, Code: 0, Cause: "stopped (docker stop or kill: signal 15), exited with status 0", Line: 10},
	}, recs)
	assert.Equal(t, []string{"2",
		`h:11: die without Actor.Attributes.exitCode`,
		"h:12: unexpected end of JSON input",
	}, malformed(r))
}

func TestPlainCSVAndJSONLines(t *testing.T) {
	t.Parallel()
	csv := "time,key,event,code\n" +
		"2024-05-01T10:00:00Z,a,start\n" +
		"2024-05-01T10:00:01.5Z,a,exit,1\n" +
		"1714557602,a,start,\n" +
		"1714557602.25,a,ready\n" +
		"1714557603,\"b,c\",exit\n" +
		"1714557604,a,resume\n" +
		"yesterday,a,start\n" +
		"1714557605,a,begin\n" +
		"1714557605,a,exit,999\n" +
		"1714557605,a,start,1\n" +
		"1714557605,a\n"
	recs, r := readAll(t, csv, replay.FormatAuto)
	assert.Equal(t, replay.FormatCSV, r.Format())
	want := []replay.Record{
		{Time: at(0), Key: "a", Event: replay.Start, Line: 2},
		{Time: at(1500 * time.Millisecond), Key: "a", Event: replay.Exit, Code: 1, Failed: true, Cause: "exited with status 1", Line: 3},
		{Time: at(2 * time.Second), Key: "a", Event: replay.Start, Line: 4},
		{Time: at(2250 * time.Millisecond), Key: "a", Event: replay.Ready, Line: 5},
		{Time: at(3 * time.Second), Key: "b,c", Event: replay.Exit, Code: -1, Failed: true, Cause: "exited with unknown status", Line: 6},
		{Time: at(4 * time.Second), Key: "a", Event: replay.Resume, Line: 7},
	}
	assert.Equal(t, want, recs)
	assert.Equal(t, []string{"5",
		`h:8: time "yesterday": neither RFC 3339 nor Unix seconds`,
		`h:9: event "begin": not start, exit, ready, resume or stop`,
		`h:10: code "999": not an exit status 0-255`,
		`h:11: code "1" on a start: only an exit has a code`,
		`h:12: 2 fields, want time,key,event[,code]`,
	}, malformed(r))

	jsonl := `{"time":"2024-05-01T10:00:00Z","key":"a","event":"start"}
{"time":"2024-05-01T10:00:01.5Z","key":"a","event":"exit","code":1}
{"time":1714557602,"key":"a","event":"start"}
{"time":1714557602.25,"key":"a","event":"ready"}
{"time":1714557603,"key":"b,c","event":"exit"}
{"time":"2024-05-01T10:00:04Z","key":"a","event":"resume"}
{"time":true,"key":"a","event":"start"}
{"key":"a","event":"start"}
{"time":1714557605,"key":"","event":"start"}
{"time":1714557605,"key":"a","event":"st`
	recs, r = readAll(t, jsonl, replay.FormatAuto)
	assert.Equal(t, replay.FormatJSONLines, r.Format())
	for i := range want {
		want[i].Line--
	}
	assert.Equal(t, want, recs)
	assert.Equal(t, []string{"4",
		"h:7: time true: neither RFC 3339 text nor Unix seconds",
		"h:8: no time",
		"h:9: empty key",
		"h:10: unexpected end of JSON input",
	}, malformed(r))
}

// clLog returns a line of crashloop's JSON log at t0+d.
func clLog(d time.Duration, level, msg, attrs string) string {
	return fmt.Sprintf(`{"time":"%s","level":"%s","msg":%q%s}`, at(d).Format("2006-01-02T15:04:05.000Z07:00"), level, msg, attrs)
}

func TestCrashloopLog(t *testing.T) {
	t.Parallel()
	lines := []string{
		clLog(time.Second, "WARN", `session "w" failed; respawn 1/3 in 500ms`,
			`,"event":"agent.respawn_scheduled","key":"w","attempts":1,"limit":3,"window":"1m","backoff":"500ms","last_error":"./w exited with status 1"`),
		clLog(2*time.Second, "INFO", "the program is ready (READY=1)", `,"key":"w","pid":42`),
		clLog(20*time.Second, "WARN", `session "w" crashed after a healthy run; restart 2 in 500ms`,
			`,"event":"agent.restart_scheduled","key":"w","reason":"crashed","attempts":2,"backoff":"500ms","last_error":"./w killed by signal SEGV"`),
		clLog(21*time.Second, "WARN", `session "w" failed; respawn 1/3 held by the fleet breaker for 2m`,
			`,"event":"agent.respawn_scheduled","key":"w","attempts":1,"limit":3,"backoff":"2m","held":true,"last_error":"./w exited with status 2"`),
		clLog(150*time.Second, "ERROR", `session "w" parked (permanent_error)`,
			`,"event":"agent.startup_exhausted","key":"w","reason":"permanent_error","last_error":"crashloop: permanent failure: ./w exited with status 3"`),
		clLog(151*time.Second, "ERROR", "giving up on w: permanent_error after 4 starts", `,"key":"w","reason":"permanent_error"`),
		clLog(160*time.Second, "ERROR", "fleet crash-loop breaker TRIPPED: 2/2 keys failing; holding restarts (2/2 failing, 3 restarts in the hour); backing off for 2m",
			`,"event":"fleet.breaker_tripped","key":"fleet","reason":"fleet_failing_fraction","attempts":3,"failing":2,"total":2`),
		// a later crashloop, after an operator's resume: a first run, judged healthy
		clLog(3600*time.Second, "ERROR", `"w" crash-loop: gave up after 3 reactive rescues; marked needs-human until an operator resumes it`,
			`,"event":"rescue.needs_human","key":"w","reason":"needs_human","attempts":3,"last_error":"./w exited with status 1"`),
		clLog(3601*time.Second, "WARN", "x", `,"event":"agent.respawn_scheduled","key":"w","backoff":"soon"`),
		`{"time":"2024-05-01T10:00:00Z","level":"INFO","msg":"cut`,
	}
	recs, r := readAll(t, strings.Join(lines, "\n")+"\n", replay.FormatAuto)
	assert.Equal(t, replay.FormatCrashloop, r.Format())
	assert.Equal(t, []replay.Record{
		{Time: at(time.Second), Key: "w", Event: replay.Start, Line: 1},
		{Time: at(time.Second), Key: "w", Event: replay.Exit, Code: 1, Failed: true, Cause: "./w exited with status 1", Line: 1,
			Logged: &replay.Logged{Event: "agent.respawn_scheduled", Action: "restart", Wait: 500 * time.Millisecond}},
		{Time: at(1500 * time.Millisecond), Key: "w", Event: replay.Start, Line: 2},
		{Time: at(2 * time.Second), Key: "w", Event: replay.Ready, Line: 2},
		{Time: at(20 * time.Second), Key: "w", Event: replay.Exit, Code: 139, Failed: true, Cause: "./w killed by signal SEGV", Line: 3,
			Logged: &replay.Logged{Event: "agent.restart_scheduled", Action: "restart", Wait: 500 * time.Millisecond}},
		{Time: at(20500 * time.Millisecond), Key: "w", Event: replay.Start, Line: 4},
		{Time: at(21 * time.Second), Key: "w", Event: replay.Exit, Code: 2, Failed: true, Cause: "./w exited with status 2", Line: 4,
			Logged: &replay.Logged{Event: "agent.respawn_scheduled", Action: "hold", Wait: 2 * time.Minute}},
		{Time: at(141 * time.Second), Key: "w", Event: replay.Start, Line: 5},
		{Time: at(150 * time.Second), Key: "w", Event: replay.Exit, Code: 3, Failed: true, Permanent: true,
			Cause: "crashloop: permanent failure: ./w exited with status 3", Line: 5,
			Logged: &replay.Logged{Event: "agent.startup_exhausted", Action: "stop", Reason: "permanent_error"}},
		{Time: at(3600 * time.Second), Key: "w", Event: replay.Resume, Line: 8},
		{Time: at(3600 * time.Second), Key: "w", Event: replay.Start, Line: 8},
		{Time: at(3600 * time.Second), Key: "w", Event: replay.Ready, Line: 8},
		{Time: at(3600 * time.Second), Key: "w", Event: replay.Exit, Code: 1, Failed: true, Cause: "./w exited with status 1", Line: 8,
			Logged: &replay.Logged{Event: "rescue.needs_human", Action: "stop", Reason: "needs_human"}},
	}, recs)
	assert.Equal(t, []string{"2",
		`h:9: backoff "soon": time: invalid duration "soon"`,
		"h:10: unexpected end of JSON input",
	}, malformed(r))
}

func TestKubernetesEvents(t *testing.T) {
	t.Parallel()
	ts := func(d time.Duration) string { return at(d).Format(time.RFC3339) }
	ev := func(reason, field, uid, msg string, first, last time.Duration, count int) string {
		return fmt.Sprintf(`{"apiVersion":"v1","kind":"Event","involvedObject":{"kind":"Pod","namespace":"shop","name":"api-7d9","uid":"%s","fieldPath":"%s"},
  "reason":"%s","message":"%s","firstTimestamp":"%s","lastTimestamp":"%s","count":%d,"type":"Normal"}`, uid, field, reason, msg, ts(first), ts(last), count)
	}
	c, u1, u2 := "spec.containers{app}", "6f1c0a4e-0000-4000-8000-000000000001", "9b2d7c11-0000-4000-8000-000000000002"
	doc := `{
  "apiVersion": "v1",
  "items": [
  ` + strings.Join([]string{
		ev("BackOff", c, u1, "Back-off restarting failed container app in pod api-7d9", 15*time.Second, 40*time.Second, 2), // out of order: kubectl lists by name
		ev("Started", c, u1, "Started container app", 0, 30*time.Second, 2),
		ev("Pulled", c, u1, "Container image already present on machine", 0, 0, 1),
		ev("Failed", "spec.containers{init}", u1, "Error: failed to create containerd task: exec: no such file", 50*time.Second, 50*time.Second, 1),
		ev("Killing", c, u1, "Container app failed liveness probe, will be restarted", 60*time.Second, 60*time.Second, 1),
		`{"kind":"Event","involvedObject":{"namespace":"shop"},"reason":"Started","count":1}`,
		`{"kind":"Event","reason":"Started","count":"many"}`,
		`{"kind":"Status"}`,
		ev("Started", c, u1, "Started container app", 45*time.Second, 45*time.Second, 1),
		// An image that cannot be pulled: three Failed events, no run.
		ev("Failed", "spec.containers{web}", u1, `Failed to pull image \"web:9\": not found`, 70*time.Second, 90*time.Second, 3),
		ev("Failed", "spec.containers{web}", u1, "Error: ErrImagePull", 70*time.Second, 90*time.Second, 3),
		ev("Failed", "spec.containers{web}", u1, "Error: ImagePullBackOff", 71*time.Second, 95*time.Second, 4),
		ev("BackOff", "spec.containers{web}", u1, `Back-off pulling image \"web:9\"`, 71*time.Second, 95*time.Second, 4),
		// A second pod of the same name: another instance, stopped by its deletion.
		ev("Started", c, u2, "Started container app", 100*time.Second, 100*time.Second, 1),
		ev("Killing", c, u2, "Stopping container app", 110*time.Second, 110*time.Second, 1),
	}, ",\n  ") + `
  ],
  "kind": "List",
  "metadata": {"resourceVersion": ""}
}
`
	recs, r := readAll(t, doc, replay.FormatAuto)
	assert.Equal(t, replay.FormatKubernetes, r.Format())
	k, k2 := "shop/api-7d9/app", "shop/api-7d9/app (pod 9b2d7c11)"
	assert.Equal(t, []replay.Record{
		{Time: at(0), Key: k, Event: replay.Start, Line: 2},
		{Time: at(15 * time.Second), Key: k, Event: replay.Exit, Code: -1, Failed: true, Cause: "back-off after a failed run", Line: 1},
		{Time: at(30 * time.Second), Key: k, Event: replay.Start, Line: 2},
		{Time: at(40 * time.Second), Key: k, Event: replay.Exit, Code: -1, Failed: true, Cause: "back-off after a failed run", Line: 1},
		{Time: at(45 * time.Second), Key: k, Event: replay.Start, Line: 9},
		{Time: at(50 * time.Second), Key: "shop/api-7d9/init", Event: replay.Start, Line: 4},
		{Time: at(50 * time.Second), Key: "shop/api-7d9/init", Event: replay.Exit, Code: -1, Failed: true, Cause: "failed to start", Line: 4},
		{Time: at(60 * time.Second), Key: k, Event: replay.Exit, Code: 137, Failed: true, Cause: "killed: failed its probe", Line: 5},
		{Time: at(100 * time.Second), Key: k2, Event: replay.Start, Line: 14},
		{Time: at(110 * time.Second), Key: k2, Event: replay.Stop, Code: -1, Cause: "stopped (the pod was deleted)", Line: 15},
	}, recs)
	assert.Equal(t, []string{"3",
		"h:6: item 6: involvedObject without a name",
		"h:7: item 7: json: cannot unmarshal string into Go struct field kubeItem.count of type float64",
		"h:8: item 8: neither an Event (involvedObject, regarding) nor a Pod (status)",
	}, malformed(r))

	// A list cut short: the items before the cut are read.
	recs, r = readAll(t, doc[:strings.Index(doc, `"Pulled"`)], replay.FormatAuto)
	assert.Len(t, recs, 4)
	assert.Equal(t, []string{"1", "h:3: item 3: unexpected EOF (the rest is not read)"}, malformed(r))
}

func TestKubernetesPods(t *testing.T) {
	t.Parallel()
	doc := `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"shop","name":"api-7d9"},
"status":{"containerStatuses":[{"name":"app","restartCount":7,
  "state":{"running":{"startedAt":"2024-05-01T10:05:00Z"}},
  "lastState":{"terminated":{"exitCode":1,"reason":"Error","startedAt":"2024-05-01T10:04:00Z","finishedAt":"2024-05-01T10:04:30Z"}}},
 {"name":"side","restartCount":0,"state":{"terminated":{"exitCode":0,"reason":"Completed","startedAt":"2024-05-01T10:00:00Z","finishedAt":"2024-05-01T10:01:00Z"}},"lastState":{}}]}},
{"kind":"Pod","metadata":{"name":"x"},"status":{"containerStatuses":[{"name":"c","state":{"terminated":{"exitCode":2}}}]}}]}`
	recs, r := readAll(t, doc, replay.FormatAuto)
	assert.Equal(t, replay.FormatKubernetes, r.Format())
	assert.Equal(t, []replay.Record{
		{Time: at(0), Key: "shop/api-7d9/side", Event: replay.Start, Line: 1},
		{Time: at(time.Minute), Key: "shop/api-7d9/side", Event: replay.Exit, Code: 0, Cause: "Completed, exited with status 0", Line: 1},
		{Time: at(4 * time.Minute), Key: "shop/api-7d9/app", Event: replay.Start, Line: 1, Counted: 7},
		{Time: at(4*time.Minute + 30*time.Second), Key: "shop/api-7d9/app", Event: replay.Exit, Code: 1, Failed: true,
			Cause: "Error, exited with status 1", Line: 1, Counted: 7},
		{Time: at(5 * time.Minute), Key: "shop/api-7d9/app", Event: replay.Start, Line: 1, Counted: 7},
	}, recs)
	assert.Equal(t, []string{"1", "h:2: item 2: container c: terminated without startedAt or finishedAt"}, malformed(r))
}

func TestNothingReadable(t *testing.T) {
	t.Parallel()
	r := replay.NewReader(strings.NewReader("[1,2]\n\n<html>\n"), "junk", replay.FormatJournald)
	_, err := r.Next()
	require.ErrorIs(t, err, replay.ErrNoHistory)
	assert.Equal(t, "replay: no record could be read from junk: 2 malformed lines, the first: junk:1: not a JSON object (journalctl -o json writes one per line)", err.Error())

	r = replay.NewReader(strings.NewReader(""), "empty", replay.FormatAuto)
	_, err = r.Next()
	assert.Equal(t, io.EOF, err, "an empty history is no error: it has nothing to replay")

	_, err = replay.ParseFormat("syslog")
	assert.EqualError(t, err, `replay: unknown format "syslog" (auto, journald, kubernetes, docker, crashloop, csv or jsonl)`)
	f, err := replay.ParseFormat("docker")
	require.NoError(t, err)
	assert.Equal(t, replay.FormatDocker, f)
}
