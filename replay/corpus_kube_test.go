package replay_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crashloopguard/crashloop/replay"
)

// The tests of this file read the real Kubernetes exports of
// testdata/real (kubectl get events and get pods of minikube clusters, as
// troubleshoot.sh and kubescape keep them as fixtures; see the README) and
// assert what a person reads in each: the keys, runs, failures, operator
// stops, parks under the defaults, and the restarts kubelet counted that
// the history does not show.

// keyRow is what a person reads of one key in a replay's report.
type keyRow struct {
	Runs, Failures, Restarts, Stops, Parks int
	Counted, Unseen, Inferred              int
}

// readKube reads every record of a Kubernetes export of testdata/real,
// which must be read as Kubernetes with no malformed item.
func readKube(t *testing.T, name string) []replay.Record {
	t.Helper()
	recs, r := readFile(t, name)
	assert.Equal(t, replay.FormatKubernetes, r.Format(), name)
	n, errs := r.Malformed()
	assert.Equal(t, 0, n, "%s: %v", name, errs)
	return recs
}

// recordsOf returns the records of key.
func recordsOf(recs []replay.Record, key string) []replay.Record {
	var out []replay.Record
	for _, rec := range recs {
		if rec.Key == key {
			out = append(out, rec)
		}
	}
	return out
}

// keyRows is the report's keys as keyRows, by key.
func keyRows(rep replay.Report) map[string]keyRow {
	rows := make(map[string]keyRow, len(rep.Keys))
	for _, k := range rep.Keys {
		rows[k.Key] = keyRow{Runs: k.Runs, Failures: k.Failures, Restarts: k.Restarts, Stops: k.Stops, Parks: k.Parks,
			Counted: k.RestartsCounted, Unseen: k.RestartsUnseen, Inferred: k.InferredTimes}
	}
	return rows
}

// kube-events-minikube-image-pull-deleted-pod-2023.json: kubectl get
// events -o json of a minikube namespace (July 2023). A person reads:
// three pods of a deployment whose image does not exist (pulls fail, each
// as "Failed to pull image", "Error: ErrImagePull", "Error:
// ImagePullBackOff", and "Back-off pulling image"): no container ever
// ran; failing-liveness-pod created twice (two uids): the first ran with
// its probe failing 60 times and no kill in the events, the second was
// killed for its failed liveness probe three times ("will be restarted")
// and started three times; crashpod's two pods and testpod deleted
// ("Stopping container"): stops, not failures; init-demo2's init
// container in back-off for five hours ("Back-off restarting failed
// container", 1464 times) with no start in the events, so no run.
func TestRealKubeEventsImagePullAndDeletedPods(t *testing.T) {
	t.Parallel()
	name := "kube-events-minikube-image-pull-deleted-pod-2023.json"
	recs := readKube(t, name)
	ns := "message-container-creating-failed-mount/"
	live := ns + "failing-liveness-pod/my-container (pod c6e243c6)"
	probe := "killed: failed its probe"
	deleted := "stopped (the pod was deleted)"
	assert.Equal(t, []replay.Record{
		{Time: utc("2023-07-10T05:16:33Z"), Key: ns + "failing-liveness-pod/my-container", Event: replay.Start, Line: 21},
		{Time: utc("2023-07-10T05:24:18Z"), Key: live, Event: replay.Start, Line: 27},
		{Time: utc("2023-07-10T05:24:35Z"), Key: live, Event: replay.Exit, Code: 137, Failed: true, Cause: probe, Line: 29},
		// Inferred: kubelet restarted at once after the first kill; the image
		// pulled before the second start says 05:25:08, and each kill came
		// 17s after its start (05:25:25).
		{Time: utc("2023-07-10T05:25:03Z"), Key: live, Event: replay.Start, Line: 27, Inferred: true},
		{Time: utc("2023-07-10T05:25:20Z"), Key: live, Event: replay.Exit, Code: 137, Failed: true, Cause: probe, Line: 29, Inferred: true},
		{Time: utc("2023-07-10T05:25:58Z"), Key: live, Event: replay.Start, Line: 27},
		{Time: utc("2023-07-10T05:26:15Z"), Key: live, Event: replay.Exit, Code: 137, Failed: true, Cause: probe, Line: 29},
		{Time: utc("2023-07-10T05:31:45Z"), Key: ns + "crashpod-f9b59484-7828f/crashpod", Event: replay.Start, Line: 5},
		{Time: utc("2023-07-10T05:33:59Z"), Key: ns + "crashpod-f9b59484-7828f/crashpod", Event: replay.Stop, Code: -1, Cause: deleted, Line: 6},
		{Time: utc("2023-07-10T05:34:02Z"), Key: ns + "crashpod-f9b59484-fpzht/crashpod", Event: replay.Start, Line: 11},
		{Time: utc("2023-07-10T05:34:07Z"), Key: ns + "crashpod-f9b59484-fpzht/crashpod", Event: replay.Stop, Code: -1, Cause: deleted, Line: 12},
		{Time: utc("2023-07-10T05:34:17Z"), Key: ns + "testpod/testpod", Event: replay.Start, Line: 73},
		{Time: utc("2023-07-10T05:34:51Z"), Key: ns + "testpod/testpod", Event: replay.Stop, Code: -1, Cause: deleted, Line: 74},
	}, recs)

	rep := replayFile(t, name)
	assert.Equal(t, map[string]keyRow{
		ns + "failing-liveness-pod/my-container": {Runs: 1},
		live:                                     {Runs: 3, Failures: 3, Restarts: 2, Inferred: 2},
		ns + "crashpod-f9b59484-7828f/crashpod":  {Runs: 1, Stops: 1},
		ns + "crashpod-f9b59484-fpzht/crashpod":  {Runs: 1, Stops: 1},
		ns + "testpod/testpod":                   {Runs: 1, Stops: 1},
	}, keyRows(rep))
	assert.Equal(t, 3, rep.Totals.Failures)
	assert.Equal(t, 3, rep.Totals.Stops)
	assert.Equal(t, 0, rep.Totals.Parks, "three probe kills in 100s: the defaults allow three restarts a minute")
}

// kube-events-minikube-failed-starts-2023.json: kubectl get events -o json
// (minikube, July 2023). A person reads: init-demo's nginx container
// created and failing to start five times from 03:31:44 to 03:33:15
// ("Error: failed to start container", the image pulled before each
// attempt), then kubelet backing off (111 "Back-off restarting failed
// container" to 03:56:47); init-demo2's init container failing to start
// twice. No container ever ran; every attempt is a failure of unknown
// status. Under the defaults (3 restarts a minute) nginx is parked at its
// fourth failure.
func TestRealKubeEventsFailedStarts(t *testing.T) {
	t.Parallel()
	name := "kube-events-minikube-failed-starts-2023.json"
	recs := readKube(t, name)
	ng := "message-pod-init-crashloop-backoff/init-demo/nginx"
	in := "message-pod-init-crashloop-backoff/init-demo2/install"
	var starts, exits []string
	for _, rec := range recs {
		if rec.Key != ng {
			continue
		}
		at := rec.Time.Format("15:04:05.000")
		if rec.Event == replay.Start {
			starts = append(starts, at)
			continue
		}
		exits = append(exits, at)
		assert.Equal(t, replay.Record{Time: rec.Time, Key: ng, Event: replay.Exit, Code: -1, Failed: true, Cause: "failed to start", Line: 5, Inferred: rec.Inferred}, rec)
	}
	// The first and the last at the event's first and last times, the
	// three between as kubelet spaces restarts (at once, then 10s and 20s
	// of back-off, and 5.25s more in each gap); the images were pulled
	// before each attempt, at 03:31:44, :47, 03:32:02, :25 and 03:33:15:
	// each inferred time is within 5s of its pull.
	want := []string{"03:31:44.000", "03:31:49.250", "03:32:04.500", "03:32:29.750", "03:33:15.000"}
	assert.Equal(t, want, starts)
	assert.Equal(t, want, exits)
	for i, pulled := range []string{"03:31:47", "03:32:02", "03:32:25"} {
		p, err := time.Parse("15:04:05", pulled)
		require.NoError(t, err)
		s, err := time.Parse("15:04:05.000", starts[i+1])
		require.NoError(t, err)
		assert.InDelta(t, 0, s.Sub(p).Seconds(), 5, "attempt %d", i+2)
	}
	assert.Equal(t, []replay.Record{
		{Time: utc("2023-07-11T04:01:16Z"), Key: in, Event: replay.Start, Line: 14},
		{Time: utc("2023-07-11T04:01:16Z"), Key: in, Event: replay.Exit, Code: -1, Failed: true, Cause: "failed to start", Line: 14},
		{Time: utc("2023-07-11T04:01:17Z"), Key: in, Event: replay.Start, Line: 14},
		{Time: utc("2023-07-11T04:01:17Z"), Key: in, Event: replay.Exit, Code: -1, Failed: true, Cause: "failed to start", Line: 14},
	}, recs[10:])

	rep := replayFile(t, name)
	assert.Equal(t, map[string]keyRow{
		ng: {Runs: 5, Failures: 5, Restarts: 4, Parks: 1, Inferred: 6},
		in: {Runs: 2, Failures: 2, Restarts: 1},
	}, keyRows(rep))
	require.Len(t, rep.Keys, 2)
	for _, k := range rep.Keys {
		if k.Key == ng {
			assert.Equal(t, "respawn_budget_exhausted", k.Reason)
			assert.Equal(t, utc("2023-07-11T03:32:29.75Z"), k.ParkedAt)
			assert.True(t, k.StillParked)
		}
	}
	assert.Equal(t, 1, rep.Totals.Spared, "the fifth attempt, at 03:33:15, while parked")
}

// kube-events-minikube-image-pull-oom-job-2023.json: kubectl get events -o
// json (minikube, July 2023). A person reads: a deployment whose image
// cannot be pulled (no run), a Job's container started at 04:43:25 and the
// Job failing at once ("BackoffLimitExceeded"; the Pod says OOMKilled,
// the events do not), and a pod that cannot be scheduled. One run, under
// way as far as the events tell.
func TestRealKubeEventsImagePullAndJob(t *testing.T) {
	t.Parallel()
	name := "kube-events-minikube-image-pull-oom-job-2023.json"
	recs := readKube(t, name)
	assert.Equal(t, []replay.Record{
		{Time: utc("2023-07-11T04:43:25Z"), Key: "message-image-pull-fail/oom-kill-job3-gbb89/memory-eater", Event: replay.Start, Line: 13},
	}, recs)
	rep := replayFile(t, name)
	assert.Equal(t, 0, rep.Totals.Failures)
	assert.Equal(t, 1, rep.Totals.Runs)
}

// TestRealKubePodsOfCrashedContainers reads Pods whose container's last
// run failed; a person reads that run, its status, and the restarts
// before it that kubelet counted and the export cannot show:
//
//   - kube-pods-minikube-crashloop-2023.json (kubectl get pods -o json,
//     minikube, July 2023): init-demo's nginx waiting in CrashLoopBackOff
//     ("back-off 1m20s restarting failed container"), restartCount 4, its
//     last attempt ContainerCannotRun, status 127.
//   - kube-pods-minikube-init-crashloop-2023.json: an init container that
//     cannot run (ContainerCannotRun, 127; restartCount 1, waiting in
//     RunContainerError), the pod's container waiting for it
//     (PodInitializing, no run).
//   - kube-pods-minikube-oomkilled-2023.json: a Job's container OOMKilled
//     (137) in the second it started; restartCount 0.
//   - kube-pods-k3s-support-bundle-2025.json (k3s v1.33.4, September
//     2025): backend-api's api-server waiting in CrashLoopBackOff
//     ("back-off 2m40s": kubelet's after its 5th restart), restartCount 5,
//     its last run Error with status 1 in the second it started; three
//     containers running.
func TestRealKubePodsOfCrashedContainers(t *testing.T) {
	t.Parallel()
	running := keyRow{Runs: 1}
	for _, c := range []struct {
		file, key, at, cause string
		code, counted        int
		others               map[string]keyRow
	}{
		{"kube-pods-minikube-crashloop-2023.json", "message-pod-crashloop-backoff/init-demo/nginx", "2023-07-11T03:33:15Z",
			"ContainerCannotRun, exited with status 127", 127, 4, nil},
		{"kube-pods-minikube-init-crashloop-2023.json", "message-pod-init-crashloop-backoff/init-demo2/install", "2023-07-11T04:01:16Z",
			"ContainerCannotRun, exited with status 127", 127, 1, nil},
		{"kube-pods-minikube-oomkilled-2023.json", "message-oomkill-pod/oom-kill-job3-gbb89/memory-eater", "2023-07-11T04:43:25Z",
			"OOMKilled, killed by signal KILL", 137, 0, nil},
		{"kube-pods-k3s-support-bundle-2025.json", "default/backend-api-75fb46b7bd-xtkrh/api-server", "2025-09-11T20:53:27Z",
			"Error, exited with status 1", 1, 5, map[string]keyRow{
				"default/cpu-intensive-app-7bcfc5d944-9479r/cpu-burner": running,
				"default/memory-hungry-app-59c695fbfb-4vnq4/memory-hog": running,
				"default/memory-hungry-app-59c695fbfb-xsvn8/memory-hog": running,
			}},
	} {
		recs := readKube(t, c.file)
		assert.Equal(t, []replay.Record{
			{Time: utc(c.at), Key: c.key, Event: replay.Start, Line: 1, Counted: c.counted},
			{Time: utc(c.at), Key: c.key, Event: replay.Exit, Code: c.code, Failed: true, Cause: c.cause, Line: 1, Counted: c.counted},
		}, recordsOf(recs, c.key), c.file)
		want := map[string]keyRow{c.key: {Runs: 1, Failures: 1, Counted: c.counted, Unseen: c.counted}}
		for k, row := range c.others {
			want[k] = row
		}
		rep := replayFile(t, c.file)
		assert.Equal(t, want, keyRows(rep), c.file)
		assert.Equal(t, c.counted, rep.Totals.RestartsUnseen, c.file)
	}
}

// kube-pods-minikube-default-2021.json: kubectl get pods -o json of the
// default namespace of a one-node cluster in a VirtualBox VM (April 2021,
// docker): three pods whose
// containers all ended within six seconds on the evening of 04-11 (the VM
// shut down: nginx and nginx-external Completed with 0, pause with
// Error 2) and run again since the next morning; each has restartCount 3,
// and the init container of nginx-deployment restartCount 11 (it runs
// again at each restart of the pod). A person reads one failure (pause's
// status 2), three restarts seen, and 17 restarts kubelet counted that
// the export does not show (2+2+2+11).
func TestRealKubePodsMinikubeDefault(t *testing.T) {
	t.Parallel()
	name := "kube-pods-minikube-default-2021.json"
	recs := readKube(t, name)
	assert.Len(t, recs, 11)
	rep := replayFile(t, name)
	d := "default/"
	assert.Equal(t, map[string]keyRow{
		d + "nginx-deployment-dd485bc9-bfgnh/ca-init-container": {Runs: 1, Counted: 11, Unseen: 11},
		d + "nginx-deployment-dd485bc9-bfgnh/nginx":             {Runs: 2, Restarts: 1, Counted: 3, Unseen: 2},
		d + "nginx-external-666b749977-qmkbp/nginx-external":    {Runs: 2, Restarts: 1, Counted: 3, Unseen: 2},
		d + "privileged/pause":                                  {Runs: 2, Failures: 1, Restarts: 1, Counted: 3, Unseen: 2},
	}, keyRows(rep))
	assert.Equal(t, 17, rep.Totals.RestartsUnseen)
	for _, rec := range recs {
		if rec.Key == d+"privileged/pause" && rec.Event == replay.Exit {
			assert.Equal(t, replay.Record{Time: utc("2021-04-11T17:58:51Z"), Key: rec.Key, Event: replay.Exit, Code: 2, Failed: true,
				Cause: "Error, exited with status 2", Line: 3, Counted: 3}, rec)
		}
	}
}

// kube-pods-minikube-kube-system-2021.json: kubectl get pods -o json of
// kube-system of minikube in a VM (April 2021, docker), indented: ten control-plane and
// addon pods, all run again at 08:12 after ending at 08:11 (the VM
// restarted), with restartCounts from 5 to 84. A person reads ten runs
// ended and ten under way; eight ends are failures (status 2 for seven,
// 137 for kube-addon-manager), etcd's and kube-apiserver's are Completed
// (0); 511 restarts kubelet counted are not in the export.
func TestRealKubePodsMinikubeKubeSystem(t *testing.T) {
	t.Parallel()
	name := "kube-pods-minikube-kube-system-2021.json"
	readKube(t, name)
	rep := replayFile(t, name)
	s := "kube-system/"
	assert.Equal(t, map[string]keyRow{
		s + "coredns-569467d7c-4f4sz/coredns":                            {Runs: 2, Failures: 1, Restarts: 1, Counted: 26, Unseen: 25},
		s + "coredns-569467d7c-6q4mq/coredns":                            {Runs: 2, Failures: 1, Restarts: 1, Counted: 25, Unseen: 24},
		s + "etcd-minikube/etcd":                                         {Runs: 2, Restarts: 1, Counted: 64, Unseen: 63},
		s + "kube-addon-manager-minikube/kube-addon-manager":             {Runs: 2, Failures: 1, Restarts: 1, Counted: 63, Unseen: 62},
		s + "kube-apiserver-minikube/kube-apiserver":                     {Runs: 2, Restarts: 1, Counted: 74, Unseen: 73},
		s + "kube-controller-manager-minikube/kube-controller-manager":   {Runs: 2, Failures: 1, Restarts: 1, Counted: 84, Unseen: 83},
		s + "kube-proxy-6p8h4/kube-proxy":                                {Runs: 2, Failures: 1, Restarts: 1, Counted: 5, Unseen: 4},
		s + "kube-scheduler-minikube/kube-scheduler":                     {Runs: 2, Failures: 1, Restarts: 1, Counted: 84, Unseen: 83},
		s + "kubernetes-dashboard-679fb79dd5-8gbz9/kubernetes-dashboard": {Runs: 2, Failures: 1, Restarts: 1, Counted: 15, Unseen: 14},
		s + "storage-provisioner/storage-provisioner":                    {Runs: 2, Failures: 1, Restarts: 1, Counted: 81, Unseen: 80},
	}, keyRows(rep))
	assert.Equal(t, 8, rep.Totals.Failures)
	assert.Equal(t, 511, rep.Totals.RestartsUnseen)
	assert.Equal(t, 0, rep.Totals.Parks)
}

// kube-events-k3s-support-bundle-2025.json: the events of the default
// namespace in a troubleshoot.sh support bundle of k3s v1.33.4 (September
// 2025). A person reads: backend-api's container api-server started six
// times from 20:50:20 to 20:53:27 (the image pulled before each start, at
// 20:50:20, :22, :40, 20:51:13, 20:51:56 and 20:53:27: kubelet restarted it
// at once, then after 10s, 20s, 40s and 80s of back-off), failing each
// time ("Back-off restarting failed container", 25 times: kubelet's, at
// its syncs, not one per restart); three other containers started once.
// Under the defaults (3 restarts a minute) api-server is parked at its
// 4th failure.
func TestRealKubeEventsK3sCrashLoop(t *testing.T) {
	t.Parallel()
	name := "kube-events-k3s-support-bundle-2025.json"
	recs := readKube(t, name) // 25 back-offs in 3m30s are kubelet's syncs, no count to cut
	k := "default/backend-api-75fb46b7bd-xtkrh/api-server"
	var starts []time.Time
	for _, rec := range recordsOf(recs, k) {
		if rec.Event == replay.Start {
			starts = append(starts, rec.Time)
		}
	}
	require.Len(t, starts, 6)
	assert.Equal(t, utc("2025-09-11T20:50:20Z"), starts[0])
	assert.Equal(t, utc("2025-09-11T20:53:27Z"), starts[5])
	for i, pulled := range []string{"20:50:22", "20:50:40", "20:51:13", "20:51:56"} {
		assert.InDelta(t, 0, starts[i+1].Sub(utc("2025-09-11T"+pulled+"Z")).Seconds(), 6,
			"start %d: inferred within 6s of its image pull", i+2)
	}

	rep := replayFile(t, name)
	assert.Equal(t, map[string]keyRow{
		k: {Runs: 6, Failures: 6, Restarts: 5, Parks: 1, Inferred: 9},
		"default/cpu-intensive-app-7bcfc5d944-9479r/cpu-burner": {Runs: 1},
		"default/memory-hungry-app-59c695fbfb-4vnq4/memory-hog": {Runs: 1},
		"default/memory-hungry-app-59c695fbfb-xsvn8/memory-hog": {Runs: 1},
	}, keyRows(rep))
	assert.Equal(t, 2, rep.Totals.Spared)
}

// kube-events-k3s-kube-system-2025.json: kube-system's events of the same
// bundle: k3s's start. A person reads: the Job helm-install-traefik's
// container started three times from 20:40:06 to 20:40:23 (restarted at
// once, then after a back-off, "Back-off restarting failed container" at
// 20:40:11), its first two runs failed; coredns's and metrics-server's
// first pods replaced by new ones the second they started ("Stopping
// container": stops); the other containers started once.
func TestRealKubeEventsK3sKubeSystem(t *testing.T) {
	t.Parallel()
	name := "kube-events-k3s-kube-system-2025.json"
	recs := readKube(t, name) // three starts in 17s: at once, then after 10s of back-off
	h := "kube-system/helm-install-traefik-vdfpr/helm"
	assert.Equal(t, []replay.Record{
		{Time: utc("2025-09-11T20:40:06Z"), Key: h, Event: replay.Start, Line: 52},
		{Time: utc("2025-09-11T20:40:09.5Z"), Key: h, Event: replay.Start, Line: 52, Inferred: true},
		{Time: utc("2025-09-11T20:40:11Z"), Key: h, Event: replay.Exit, Code: -1, Failed: true, Cause: "back-off after a failed run", Line: 54},
		{Time: utc("2025-09-11T20:40:23Z"), Key: h, Event: replay.Start, Line: 52},
	}, recordsOf(recs, h))
	rep := replayFile(t, name)
	s := "kube-system/"
	assert.Equal(t, map[string]keyRow{
		s + "coredns-5688667fd4-v5z66/coredns":    {Runs: 1, Stops: 1},
		s + "coredns-64fd4b4794-p72lf/coredns":    {Runs: 1},
		s + "helm-install-traefik-crd-dshw8/helm": {Runs: 1},
		h: {Runs: 3, Failures: 2, Restarts: 2, Inferred: 1},
		s + "local-path-provisioner-774c6665dc-n8q8g/local-path-provisioner": {Runs: 1},
		s + "metrics-server-6f4c6675d5-98986/metrics-server":                 {Runs: 1, Stops: 1},
		s + "metrics-server-7bfffcd44-vjjg6/metrics-server":                  {Runs: 1},
		s + "svclb-traefik-9ce4920b-v8m6k/lb-tcp-443":                        {Runs: 1},
		s + "svclb-traefik-9ce4920b-v8m6k/lb-tcp-80":                         {Runs: 1},
		s + "traefik-c98fdf6fb-6jpj2/traefik":                                {Runs: 1},
	}, keyRows(rep))
}

// kube-pods-k3s-kube-system-2025.json: kube-system's pods of the same
// bundle: the two helm-install Jobs' containers Completed (status 0), the
// second after restartCount 2; the rest running. A person reads no
// failure, two restarts not shown.
func TestRealKubePodsK3sKubeSystem(t *testing.T) {
	t.Parallel()
	name := "kube-pods-k3s-kube-system-2025.json"
	rep := replayFile(t, name)
	assert.Equal(t, 8, rep.Totals.Keys)
	assert.Equal(t, 8, rep.Totals.Runs)
	assert.Equal(t, 0, rep.Totals.Failures)
	assert.Equal(t, keyRow{Runs: 1, Counted: 2, Unseen: 2}, keyRows(rep)["kube-system/helm-install-traefik-vdfpr/helm"])
	assert.Equal(t, 2, rep.Totals.RestartsUnseen)
}

// TestRealKubeEventsAsEventsK8sIO: kubectl get events.events.k8s.io -o
// json of the same clusters: the API server serves every Event in both
// groups, converting core/v1's names to events.k8s.io/v1's (involvedObject
// to regarding, message to note, count to deprecatedCount,
// firstTimestamp and lastTimestamp to deprecatedFirstTimestamp and
// deprecatedLastTimestamp, source to deprecatedSource,
// reportingComponent to reportingController). The real exports so
// converted read as the same records.
func TestRealKubeEventsAsEventsK8sIO(t *testing.T) {
	t.Parallel()
	rename := map[string]string{"involvedObject": "regarding", "message": "note", "count": "deprecatedCount",
		"firstTimestamp": "deprecatedFirstTimestamp", "lastTimestamp": "deprecatedLastTimestamp", "source": "deprecatedSource",
		"reportingComponent": "reportingController"}
	for _, name := range []string{"kube-events-k3s-support-bundle-2025.json", "kube-events-k3s-kube-system-2025.json",
		"kube-events-minikube-image-pull-deleted-pod-2023.json", "kube-events-minikube-failed-starts-2023.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "real", name))
		require.NoError(t, err)
		var list struct {
			Items []map[string]json.RawMessage `json:"items"`
		}
		require.NoError(t, json.Unmarshal(b, &list))
		for _, it := range list.Items {
			for from, to := range rename {
				if v, ok := it[from]; ok {
					it[to] = v
					delete(it, from)
				}
			}
			it["apiVersion"] = json.RawMessage(`"events.k8s.io/v1"`)
		}
		converted, err := json.Marshal(map[string]any{"apiVersion": "events.k8s.io/v1", "kind": "EventList", "items": list.Items})
		require.NoError(t, err)

		r := replay.NewReader(bytes.NewReader(converted), name, replay.FormatAuto)
		var got []replay.Record
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			got = append(got, rec)
		}
		n, _ := r.Malformed()
		assert.Equal(t, 0, n, name)
		assert.Equal(t, replay.FormatKubernetes, r.Format(), name)
		want := readKube(t, name)
		for i := range want {
			want[i].Line = 0
		}
		for i := range got {
			got[i].Line = 0 // the converted list is one line
		}
		assert.Equal(t, want, got, name)
	}
}

// TestEventsK8sIOSeries: an Event of events.k8s.io/v1's own recorders
// (no deprecated fields) happened series.count times from eventTime to
// series.lastObservedTime.
func TestEventsK8sIOSeries(t *testing.T) {
	t.Parallel()
	doc := `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"p.1","namespace":"a","uid":"e1"},` +
		`"eventTime":"2024-05-01T10:00:00.000000Z","series":{"count":3,"lastObservedTime":"2024-05-01T10:01:00.000000Z"},` +
		`"reportingController":"kubelet","reportingInstance":"node-1","action":"Started","reason":"Started",` +
		`"regarding":{"kind":"Pod","namespace":"a","name":"p","uid":"u1","fieldPath":"spec.containers{c}"},` +
		`"note":"Started container c","type":"Normal"}`
	r := replay.NewReader(strings.NewReader(doc), "h", replay.FormatAuto)
	var got []string
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got = append(got, fmt.Sprintf("%s %v %v", rec.Time.Format("15:04:05"), rec.Event, rec.Inferred))
	}
	// kubelet's back-offs (none, then 10s) and 25s more in each gap.
	assert.Equal(t, []string{"10:00:00 start false", "10:00:25 start true", "10:01:00 start false"}, got)
}
