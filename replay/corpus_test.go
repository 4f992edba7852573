package replay_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/replay"
)

// The tests of this file read the real exports of testdata/real (see its
// README for where each comes from) and assert what a person reads in
// each.

// readFile reads every record of a file of testdata/real.
func readFile(t *testing.T, name string) ([]replay.Record, *replay.Reader) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "real", name))
	require.NoError(t, err)
	return readAll(t, string(data), replay.FormatAuto)
}

// replayFile replays a file of testdata/real under crashloop's defaults
// without the fleet breaker (as the command runs) and returns the report.
func replayFile(t *testing.T, name string) replay.Report {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "real", name))
	require.NoError(t, err)
	defer f.Close()
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Fleet = nil
	res, err := replay.Replay([]replay.Source{{Name: name, R: f}}, []replay.Candidate{{Config: cfg}}, replay.Options{})
	require.NoError(t, err)
	require.Len(t, res.Reports, 1)
	return res.Reports[0]
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// journald-239-bootkube.json-pretty: journalctl -o json-pretty of systemd
// 239 (RHCOS, OpenShift 4.6): bootkube.service runs a script whose command
// does not exist, twice; each run's "Main process exited, code=exited,
// status=127" and "Failed with result 'exit-code'" carry no MESSAGE_ID.
// A person reads two runs, each a failure of status 127, restarted after
// RestartSec=5s.
func TestRealJournald239(t *testing.T) {
	t.Parallel()
	recs, r := readFile(t, "journald-239-bootkube.json-pretty")
	assert.Equal(t, replay.FormatJournald, r.Format())
	k := "bootkube.service"
	assert.Equal(t, []replay.Record{
		{Time: time.UnixMicro(1604690191246777).UTC(), Key: k, Event: replay.Start, Line: 1},
		{Time: time.UnixMicro(1604690191334135).UTC(), Key: k, Event: replay.Exit, Code: 127, Failed: true, Cause: "exited with status 127", Line: 60},
		{Time: time.UnixMicro(1604690196496733).UTC(), Key: k, Event: replay.Start, Line: 217},
		{Time: time.UnixMicro(1604690196582103).UTC(), Key: k, Event: replay.Exit, Code: 127, Failed: true, Cause: "exited with status 127", Line: 250},
	}, recs)
	n, _ := r.Malformed()
	assert.Equal(t, 0, n)

	rep := replayFile(t, "journald-239-bootkube.json-pretty")
	assert.Equal(t, 2, rep.Totals.Runs)
	assert.Equal(t, 2, rep.Totals.Failures)
	assert.Equal(t, 1, rep.Totals.Restarts)
}

// journald-fedora-deactivated.json: one journalctl -o json line of systemd
// on Fedora: "setroubleshootd.service: Deactivated successfully." (MESSAGE_ID
// 7ad2d189f7e94e70a38c781354912448). A person reads a clean end.
func TestRealJournaldDeactivated(t *testing.T) {
	t.Parallel()
	recs, r := readFile(t, "journald-fedora-deactivated.json")
	assert.Equal(t, replay.FormatJournald, r.Format())
	assert.Equal(t, []replay.Record{
		{Time: time.UnixMicro(1782840698615019).UTC(), Key: "setroubleshootd.service", Event: replay.Exit, Code: 0, Cause: "deactivated successfully", Line: 1},
	}, recs)
	rep := replayFile(t, "journald-fedora-deactivated.json")
	assert.Equal(t, 0, rep.Totals.Failures)
}

// docker-stop-deck-chores-2019.jsonl: docker events of a compose project
// (Docker of 2019, compose 1.24): sojus_beep_1 started, stopped with
// docker stop (kill 15, kill 9, die 137, stop) and started again;
// sojus_beep_2 started, paused, unpaused, stopped, started and stopped.
// A person reads no failure: three operator stops, and no restart by
// Docker.
func TestRealDockerStop(t *testing.T) {
	t.Parallel()
	recs, r := readFile(t, "docker-stop-deck-chores-2019.jsonl")
	assert.Equal(t, replay.FormatDocker, r.Format())
	b1, b2 := "sojus_beep_1", "sojus_beep_2"
	stop := "stopped (docker stop or kill: signal 15,9), killed by signal KILL"
	assert.Equal(t, []replay.Record{
		{Time: time.Unix(0, 1570389774281112036).UTC(), Key: b2, Event: replay.Start, Line: 8},
		{Time: time.Unix(0, 1570389775295646849).UTC(), Key: b1, Event: replay.Start, Line: 9},
		{Time: time.Unix(0, 1570390062934670641).UTC(), Key: b1, Event: replay.Stop, Code: 137, Cause: stop, Line: 14},
		{Time: time.Unix(0, 1570390068099869246).UTC(), Key: b1, Event: replay.Start, Line: 18},
		{Time: time.Unix(0, 1570390083231182852).UTC(), Key: b2, Event: replay.Stop, Code: 137, Cause: stop, Line: 21},
		{Time: time.Unix(0, 1570390099189413545).UTC(), Key: b2, Event: replay.Start, Line: 26},
		{Time: time.Unix(0, 1570390113684421742).UTC(), Key: b2, Event: replay.Stop, Code: 137, Cause: stop, Line: 29},
	}, recs)

	rep := replayFile(t, "docker-stop-deck-chores-2019.jsonl")
	assert.Equal(t, 0, rep.Totals.Failures)
	assert.Equal(t, 3, rep.Totals.Stops)
	assert.Equal(t, 0, rep.Totals.Restarts, "a start after docker stop is the operator's")
	assert.Equal(t, 0, rep.Totals.Allowed)
}

// docker-pre-1.22-2015.jsonl: two events of a daemon of May 2015 (API
// before 1.22: status, id, from, time; a die with no exit status). A
// person reads container 81cde361ec7b dying and starting again.
func TestRealDockerPre122(t *testing.T) {
	t.Parallel()
	recs, r := readFile(t, "docker-pre-1.22-2015.jsonl")
	assert.Equal(t, replay.FormatDocker, r.Format())
	at := time.Unix(1431403163, 0).UTC()
	assert.Equal(t, []replay.Record{
		{Time: at, Key: "81cde361ec7b", Event: replay.Exit, Code: -1, Failed: true, Cause: "died (the event says no exit status)", Line: 1},
		{Time: at, Key: "81cde361ec7b", Event: replay.Start, Line: 2},
	}, recs)
}

// kube-event-exporter-probe-2022.jsonl: kubernetes-event-exporter v0.11's
// stdout (kubectl logs of its pod, Docker Desktop, May 2022), whole: two
// klog lines, then 23 updates of four Events, one a line, each repeating
// its event with count one higher (Unhealthy 1 to 11, Killing 1 to 3,
// Pulled, Created and Started 2 to 4). The container app-target fails its
// liveness probe three times and kubelet restarts it each time (kubectl
// get pods: RESTARTS 3). A person reads four runs, three ended by probe
// kills; the klog lines are not events. A record's Line is the item (the
// JSON object, from 1): the file's line less the two klog lines.
func TestRealKubeEventExporter(t *testing.T) {
	t.Parallel()
	recs, r := readFile(t, "kube-event-exporter-probe-2022.jsonl")
	assert.Equal(t, replay.FormatKubernetes, r.Format())
	k := "probes/app-target-6664868868-b84vm/app-target"
	kill := "killed: failed its probe"
	assert.Equal(t, []replay.Record{
		{Time: utc("2022-05-19T18:56:32Z"), Key: k, Event: replay.Start, Line: 7},
		{Time: utc("2022-05-19T19:35:31Z"), Key: k, Event: replay.Exit, Code: 137, Failed: true, Cause: kill, Line: 4},
		{Time: utc("2022-05-19T19:36:01Z"), Key: k, Event: replay.Start, Line: 7},
		{Time: utc("2022-05-19T19:36:41Z"), Key: k, Event: replay.Exit, Code: 137, Failed: true, Cause: kill, Line: 11},
		{Time: utc("2022-05-19T19:37:11Z"), Key: k, Event: replay.Start, Line: 14},
		{Time: utc("2022-05-19T19:37:51Z"), Key: k, Event: replay.Exit, Code: 137, Failed: true, Cause: kill, Line: 18},
		{Time: utc("2022-05-19T19:38:21Z"), Key: k, Event: replay.Start, Line: 21},
	}, recs)
	n, errs := r.Malformed()
	assert.Equal(t, 2, n, "the exporter's two klog lines")
	require.Len(t, errs, 2)
	for i, e := range errs {
		assert.Equal(t, i+1, e.Line)
		assert.Equal(t, "unknown format: not journalctl -o json, kubectl -o json, docker events, crashloop's JSON log, CSV (time,key,event,code) or JSON lines", e.Err.Error())
	}

	rep := replayFile(t, "kube-event-exporter-probe-2022.jsonl")
	assert.Equal(t, 1, rep.Totals.Keys)
	assert.Equal(t, 4, rep.Totals.Runs)
	assert.Equal(t, 3, rep.Totals.Failures)
	assert.Equal(t, 3, rep.Totals.Restarts)
	assert.Equal(t, 0, rep.Totals.InferredTimes, "every occurrence is a copy's lastTimestamp")
}

// kube-pod-openshift-ci-2021.json: kubectl get pod NAME -o json of an
// OpenShift CI pod (cri-o, March 2021; spec cut out), from a test of a
// debugging branch of openshift/kubernetes: two init containers that
// completed, then two containers running. A person reads four runs of
// four containers: two clean ends, two under way, no restart.
func TestRealKubePod(t *testing.T) {
	t.Parallel()
	recs, r := readFile(t, "kube-pod-openshift-ci-2021.json")
	assert.Equal(t, replay.FormatKubernetes, r.Format())
	p := "ci-op-nf6n8qpj/launch-osd-create-create/"
	assert.Equal(t, []replay.Record{
		{Time: utc("2021-03-10T17:47:16Z"), Key: p + "place-entrypoint", Event: replay.Start, Line: 1},
		{Time: utc("2021-03-10T17:47:16Z"), Key: p + "place-entrypoint", Event: replay.Exit, Cause: "Completed, exited with status 0", Line: 1},
		{Time: utc("2021-03-10T17:47:17Z"), Key: p + "cp-entrypoint-wrapper", Event: replay.Start, Line: 1},
		{Time: utc("2021-03-10T17:47:17Z"), Key: p + "cp-entrypoint-wrapper", Event: replay.Exit, Cause: "Completed, exited with status 0", Line: 1},
		{Time: utc("2021-03-10T17:47:24Z"), Key: p + "test", Event: replay.Start, Line: 1},
		{Time: utc("2021-03-10T17:47:25Z"), Key: p + "sidecar", Event: replay.Start, Line: 1},
	}, recs)
	n, _ := r.Malformed()
	assert.Equal(t, 0, n)
	rep := replayFile(t, "kube-pod-openshift-ci-2021.json")
	assert.Equal(t, 4, rep.Totals.Keys)
	assert.Equal(t, 4, rep.Totals.Runs)
	assert.Equal(t, 0, rep.Totals.Failures)
	assert.Equal(t, 0, rep.Totals.Restarts)
	assert.Equal(t, 0, rep.Totals.RestartsUnseen, "every restartCount is 0")
}

// The same exporter's log with one of its klog lines moved between two
// events, as kubectl logs shows an exporter whose client is throttled
// mid-stream (its README warns that other lines mix in): the klog line is
// reported at its file line and skipped, and every event after it is read.
// Before, the reading stopped at it: 2 runs instead of 4.
func TestKlogLineAmidAnExporterStream(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "real", "kube-event-exporter-probe-2022.jsonl"))
	require.NoError(t, err)
	lines := strings.SplitAfter(string(data), "\n")
	require.True(t, strings.HasPrefix(lines[1], "I0519 "), "line 2 is a klog line")
	moved := strings.Join(slices.Concat(lines[:1], lines[2:12], lines[1:2], lines[12:]), "")
	recs, r := readAll(t, moved, replay.FormatAuto)
	runs := 0
	for _, rec := range recs {
		if rec.Event == replay.Start {
			runs++
		}
	}
	assert.Equal(t, 4, runs)
	assert.Len(t, recs, 7)
	n, errs := r.Malformed()
	require.Equal(t, 2, n)
	assert.Equal(t, 1, errs[0].Line)
	assert.Equal(t, 12, errs[1].Line, "the moved klog line, at its line in the file")
	assert.ErrorContains(t, errs[1].Err, "a klog line")
}
