package replay_test

import (
	"testing"

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
	recs, r := readFile(t, name)
	assert.Equal(t, replay.FormatKubernetes, r.Format())
	n, _ := r.Malformed()
	assert.Equal(t, 0, n)
	ns := "message-container-creating-failed-mount/"
	live := ns + "failing-liveness-pod/my-container (pod c6e243c6)"
	probe := "killed: failed its probe"
	deleted := "stopped (the pod was deleted)"
	assert.Equal(t, []replay.Record{
		{Time: utc("2023-07-10T05:16:33Z"), Key: ns + "failing-liveness-pod/my-container", Event: replay.Start, Line: 21},
		{Time: utc("2023-07-10T05:24:18Z"), Key: live, Event: replay.Start, Line: 27},
		{Time: utc("2023-07-10T05:24:35Z"), Key: live, Event: replay.Exit, Code: 137, Failed: true, Cause: probe, Line: 29},
		{Time: utc("2023-07-10T05:24:51.333333333Z"), Key: live, Event: replay.Start, Line: 27, Inferred: true},
		{Time: utc("2023-07-10T05:25:08.333333333Z"), Key: live, Event: replay.Exit, Code: 137, Failed: true, Cause: probe, Line: 29, Inferred: true},
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
	recs, r := readFile(t, name)
	assert.Equal(t, replay.FormatKubernetes, r.Format())
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
	// three between at kubelet's doubling spacing; the images were pulled
	// at 03:31:44, :47, 03:32:02, :25 and 03:33:15.
	want := []string{"03:31:44.000", "03:31:50.066", "03:32:02.200", "03:32:26.466", "03:33:15.000"}
	assert.Equal(t, want, starts)
	assert.Equal(t, want, exits)
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
			assert.Equal(t, utc("2023-07-11T03:32:26.466666666Z"), k.ParkedAt)
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
	recs, r := readFile(t, name)
	assert.Equal(t, replay.FormatKubernetes, r.Format())
	assert.Equal(t, []replay.Record{
		{Time: utc("2023-07-11T04:43:25Z"), Key: "message-image-pull-fail/oom-kill-job3-gbb89/memory-eater", Event: replay.Start, Line: 13},
	}, recs)
	rep := replayFile(t, name)
	assert.Equal(t, 0, rep.Totals.Failures)
	assert.Equal(t, 1, rep.Totals.Runs)
}

// kube-pods-minikube-crashloop-2023.json: kubectl get pods -o json of the
// same cluster: init-demo's nginx waiting in CrashLoopBackOff ("back-off
// 1m20s restarting failed container"), restartCount 4, its last attempt
// ended ContainerCannotRun with status 127. A person reads one run seen,
// a failure of status 127, and four restarts before it that the export
// cannot show.
func TestRealKubePodCrashLoop(t *testing.T) {
	t.Parallel()
	name := "kube-pods-minikube-crashloop-2023.json"
	recs, _ := readFile(t, name)
	k := "message-pod-crashloop-backoff/init-demo/nginx"
	assert.Equal(t, []replay.Record{
		{Time: utc("2023-07-11T03:33:15Z"), Key: k, Event: replay.Start, Line: 1, Counted: 4},
		{Time: utc("2023-07-11T03:33:15Z"), Key: k, Event: replay.Exit, Code: 127, Failed: true, Cause: "ContainerCannotRun, exited with status 127", Line: 1, Counted: 4},
	}, recs)
	rep := replayFile(t, name)
	assert.Equal(t, map[string]keyRow{k: {Runs: 1, Failures: 1, Counted: 4, Unseen: 4}}, keyRows(rep))
	assert.Equal(t, 4, rep.Totals.RestartsUnseen)
}

// kube-pods-minikube-init-crashloop-2023.json: an init container that
// cannot run (ContainerCannotRun, status 127; restartCount 1; waiting in
// RunContainerError) and the pod's container waiting for it
// (PodInitializing). A person reads one failure seen, one restart not.
func TestRealKubePodInitCrashLoop(t *testing.T) {
	t.Parallel()
	name := "kube-pods-minikube-init-crashloop-2023.json"
	recs, _ := readFile(t, name)
	k := "message-pod-init-crashloop-backoff/init-demo2/install"
	assert.Equal(t, []replay.Record{
		{Time: utc("2023-07-11T04:01:16Z"), Key: k, Event: replay.Start, Line: 1, Counted: 1},
		{Time: utc("2023-07-11T04:01:16Z"), Key: k, Event: replay.Exit, Code: 127, Failed: true, Cause: "ContainerCannotRun, exited with status 127", Line: 1, Counted: 1},
	}, recs)
	rep := replayFile(t, name)
	assert.Equal(t, map[string]keyRow{k: {Runs: 1, Failures: 1, Counted: 1, Unseen: 1}}, keyRows(rep))
}

// kube-pods-minikube-oomkilled-2023.json: a Job's pod whose container was
// OOMKilled (exit 137) in the second it started; restartCount 0. A person
// reads one run, a failure, killed by SIGKILL for memory.
func TestRealKubePodOOMKilled(t *testing.T) {
	t.Parallel()
	name := "kube-pods-minikube-oomkilled-2023.json"
	recs, _ := readFile(t, name)
	k := "message-oomkill-pod/oom-kill-job3-gbb89/memory-eater"
	assert.Equal(t, []replay.Record{
		{Time: utc("2023-07-11T04:43:25Z"), Key: k, Event: replay.Start, Line: 1},
		{Time: utc("2023-07-11T04:43:25Z"), Key: k, Event: replay.Exit, Code: 137, Failed: true, Cause: "OOMKilled, killed by signal KILL", Line: 1},
	}, recs)
	rep := replayFile(t, name)
	assert.Equal(t, map[string]keyRow{k: {Runs: 1, Failures: 1}}, keyRows(rep))
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
	recs, r := readFile(t, name)
	assert.Equal(t, replay.FormatKubernetes, r.Format())
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
	_, r := readFile(t, name)
	assert.Equal(t, replay.FormatKubernetes, r.Format())
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
