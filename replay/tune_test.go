package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/crashloopguard/crashloop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// load reads a history of one source.
func load(t testing.TB, name string, data []byte) *History {
	t.Helper()
	h, err := LoadHistory([]Source{{Name: name, R: bytes.NewReader(data)}}, 0)
	require.NoError(t, err)
	return h
}

// keysParked returns the keys a report parked or marked needs-human.
func keysParked(rep Report) []string {
	var keys []string
	for _, k := range rep.Keys {
		if k.Parks+k.NeedsHuman > 0 {
			keys = append(keys, k.Key)
		}
	}
	return keys
}

// TestTuneKnownTruth: on generated histories of known truth (real crash
// loops, slow loops, keys of a dependency that is down now and then, keys
// that crash once a day), the tuned policy parks every real crash loop,
// parks no key that recovered by itself, and spends at least ten times
// fewer restarts on the loops than a policy that never parks; the
// defaults do not (they leave loops unparked and park falsely).
func TestTuneKnownTruth(t *testing.T) {
	t.Parallel()
	for _, g := range []genConfig{
		{Seed: 2, Start: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), Span: 72 * time.Hour, Fast: 4, Slow: 2, Outage: 5, Steady: 3},
		{Seed: 3, Start: time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC), Span: 96 * time.Hour, Fast: 2, Slow: 3, Outage: 6, Steady: 4},
	} {
		data, truth := genHistory(g)
		h := load(t, "gen", data)
		res, err := Tune(h, TuneOptions{})
		require.NoError(t, err)
		require.True(t, res.Feasible)
		rec := res.Recommended
		assert.Equal(t, len(truth.Loops), res.Loops, "seed %d: one loop each", g.Seed)
		assert.Equal(t, len(truth.Loops), rec.LoopsParked, "seed %d", g.Seed)
		assert.Zero(t, rec.FalseParks, "seed %d", g.Seed)
		assert.Less(t, rec.Spent*10, res.NeverPark.Spent, "seed %d: far fewer restarts than never parking", g.Seed)

		// Replayed on its own, from the history's text, the recommended
		// policy parks exactly the loops, and its totals are the ones
		// Tune reported.
		out, err := Replay([]Source{{Name: "gen", R: bytes.NewReader(data)}}, []Candidate{{Name: "tuned", Config: rec.Config}}, Options{})
		require.NoError(t, err)
		assert.Equal(t, truth.Loops, keysParked(out.Reports[0]), "seed %d", g.Seed)
		assert.Equal(t, rec.Totals, out.Reports[0].Totals, "seed %d", g.Seed)

		def := res.Compared[0]
		assert.Equal(t, "defaults", def.Name)
		assert.Less(t, def.LoopsParked, len(truth.Loops), "seed %d: the defaults miss loops", g.Seed)
		assert.Positive(t, def.FalseParks, "seed %d: the defaults park falsely", g.Seed)
	}
}

// TestTuneDocsExample pins what docs/tune.md quotes of testdata/tune.csv.
func TestTuneDocsExample(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/tune.csv")
	require.NoError(t, err)
	h := load(t, "testdata/tune.csv", data)
	res, err := Tune(h, TuneOptions{})
	require.NoError(t, err)
	assert.Equal(t, 5334, res.Records)
	assert.Equal(t, 12, res.Keys)
	assert.Equal(t, 5, res.Loops)
	assert.Equal(t, 44, res.Recovered)
	assert.Equal(t, 2337, res.LoopFailures)
	assert.Equal(t, 1288, res.Searched)
	assert.Equal(t, 28, res.Invalid)
	want := tuneDefaults()
	want.HealthyAfter, want.Budget.MaxRespawns, want.Budget.Window = 15*time.Minute, 8, time.Hour
	assert.True(t, sameConfig(want, res.Recommended.Config), "%+v", res.Recommended.Config)
	assert.Equal(t, Verdict{Name: "tuned", Config: res.Recommended.Config, Spent: 45, LoopsParked: 5, ToParkMean: 39*time.Minute + 44*time.Second,
		ToParkMax: res.Recommended.ToParkMax, Totals: res.Recommended.Totals}, res.Recommended)
	assert.Equal(t, []string{"healthy_after", "budget.max_respawns", "budget.window"}, effectSettings(res.Effects))
	assert.Equal(t, 2, res.Effects[0].Without.FalseParks, "at 10s the slow loops' runs are healthy: their parks are false")
	assert.Equal(t, 4, res.Effects[1].Without.FalseParks, "3 respawns park the longer outages")
	assert.Equal(t, 0, res.Effects[2].Without.LoopsParked, "in 1m no loop fills 8 respawns")
	assert.Equal(t, 2, res.Compared[0].LoopsParked)
	assert.Equal(t, 2, res.Compared[0].FalseParks)
	assert.Equal(t, 1718, res.Compared[0].Spent)
	// The recommended policy with a probe: its probes fail on the loops,
	// each a restart spent; nothing else changes.
	require.Len(t, res.Compared, 2)
	p := res.Compared[1]
	assert.Equal(t, "tuned + probe_after 30s", p.Name)
	assert.Equal(t, 30*time.Second, p.Config.ProbeAfter)
	assert.Equal(t, []any{5, 906, 0, res.Recommended.ToParkMean, res.Recommended.Totals.Allowed},
		[]any{p.LoopsParked, p.Spent, p.FalseParks, p.ToParkMean, p.Totals.Allowed})
	assert.Equal(t, 861, p.Totals.Probes)
	assert.Equal(t, 0, p.Totals.ProbeResumes)
}

func effectSettings(es []SettingEffect) []string {
	var names []string
	for _, e := range es {
		names = append(names, e.Setting)
	}
	return names
}

// TestTuneFront: the front holds no verdict another one of it dominates,
// in order of false parks, restarts spent and time to park, and the
// recommended policy is on it; with more false parks allowed the
// recommendation may take one, never more.
func TestTuneFront(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/tune.csv")
	require.NoError(t, err)
	h := load(t, "h", data)
	for _, allowed := range []int{0, 4} {
		res, err := Tune(h, TuneOptions{MaxFalseParks: allowed})
		require.NoError(t, err)
		require.NotEmpty(t, res.Front)
		on := false
		for i := range res.Front {
			for k := range res.Front {
				assert.False(t, res.Front[k].dominates(&res.Front[i]), "%s dominates %s", res.Front[k].Name, res.Front[i].Name)
			}
			on = on || sameConfig(res.Front[i].Config, res.Recommended.Config)
		}
		assert.True(t, on, "the recommended policy is on the front")
		assert.True(t, slices.IsSortedFunc(res.Front, func(a, b Verdict) int { return a.FalseParks - b.FalseParks }))
		assert.LessOrEqual(t, res.Recommended.FalseParks, allowed)
		if allowed == 4 {
			assert.Equal(t, 10, res.Recommended.Spent, "4 false parks allowed: the front's cheapest")
		}
	}
}

// TestTuneIsDeterministic: the result depends on the history alone, not
// on how many workers judge it or in which order they finish.
func TestTuneIsDeterministic(t *testing.T) {
	t.Parallel()
	data, truth := genHistory(genConfig{Seed: 4, Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Span: 48 * time.Hour, Fast: 2, Slow: 1, Outage: 3, Steady: 2})
	require.NotEmpty(t, truth.Loops)
	var docs []string
	for _, workers := range []int{1, 2, 3, 7} {
		res, err := Tune(load(t, "gen", data), TuneOptions{Workers: workers, Compare: []Candidate{{Name: "wide", Config: crashloop.DefaultSupervisorConfig()}}})
		require.NoError(t, err)
		doc, err := json.Marshal(res)
		require.NoError(t, err)
		var text strings.Builder
		require.NoError(t, WriteTune(&text, res))
		docs = append(docs, string(doc)+text.String())
	}
	for _, d := range docs[1:] {
		assert.Equal(t, docs[0], d)
	}
}

// TestTuneProgress: Progress is called once per batch, with done growing
// to the total.
func TestTuneProgress(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/tune.csv")
	require.NoError(t, err)
	var calls [][2]int
	res, err := Tune(load(t, "h", data), TuneOptions{Progress: func(done, total int) { calls = append(calls, [2]int{done, total}) }})
	require.NoError(t, err)
	require.NotEmpty(t, calls)
	for i := 1; i < len(calls); i++ {
		assert.Greater(t, calls[i][0], calls[i-1][0])
		assert.LessOrEqual(t, calls[i][0], calls[i][1])
	}
	last := calls[len(calls)-1]
	assert.Equal(t, last[0], last[1])
	assert.Equal(t, res.Searched+len(res.Compared)+len(res.Effects), last[1])
}

// TestTruthOfEpisodes: a key's failures between runs of the sound run's
// length are one episode; a loop unless a sound run follows within the
// horizon of its first failure; an episode of one failure is none.
func TestTruthOfEpisodes(t *testing.T) {
	t.Parallel()
	// a: three failures, then a run of exactly 1h (sound), then a failure.
	// b: two failures, a sound run 24h after the first (exactly the
	// horizon: recovered), then a start while a run is under way (a
	// failure), a run ready to the end. c: five failures to the end, one
	// a start while a run was under way. d: one failure.
	lines := strings.Split(strings.TrimSpace(`0,a,start
1,a,exit,1
11,a,start
12,a,exit,1
22,a,start
23,a,exit,2
43,a,start
3643,a,exit,1
0,b,start
10,b,exit,1
20,b,start
30,b,exit,1
86410,b,start
90010,b,start
90011,b,ready
0,c,start
5,c,exit,1
10,c,start
15,c,exit,1
20,c,start
25,c,exit,1
30,c,start
40,c,start
45,c,exit,1
100,d,start
101,d,exit,1
200000,e,start`), "\n")
	slices.SortStableFunc(lines, func(a, b string) int { // in time order, as a history is
		ta, _, _ := strings.Cut(a, ",")
		tb, _, _ := strings.Cut(b, ",")
		na, _ := strconv.Atoi(ta)
		nb, _ := strconv.Atoi(tb)
		return na - nb
	})
	h := load(t, "h", []byte(strings.Join(lines, "\n")))
	tr := truthOf(h, 24*time.Hour, time.Hour)
	var got []string
	for _, e := range tr.episodes {
		rec := "-"
		if !e.recovered.IsZero() {
			rec = strconv.FormatInt(e.recovered.Unix(), 10)
		}
		got = append(got, fmt.Sprintf("%s %d-%d x%d recovered %s", h.keys[e.key], e.first.Unix(), e.last.Unix(), e.failures, rec))
	}
	slices.Sort(got)
	assert.Equal(t, []string{
		"a 1-23 x3 recovered 3643",
		"a 3643-3643 x1 recovered -",
		"b 10-30 x2 recovered 90010",
		"b 90010-90010 x1 recovered 90011",
		"c 5-45 x5 recovered -",
		"d 101-101 x1 recovered -",
	}, got)
	assert.Equal(t, 1, tr.recovered, "a's three failures; b's recovered at 24h+1h after its first: a loop")
	var loops []string
	for _, e := range tr.loops {
		loops = append(loops, h.keys[tr.episodes[e].key])
	}
	assert.Equal(t, []string{"c", "b"}, loops, "in the order of their first failures")
}

// TestHistoryReplaysAsReplay: a History judges as Replay judges the text
// it was read from, on the generated history and on every real export.
func TestHistoryReplaysAsReplay(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/real/*")
	require.NoError(t, err)
	files = append(files, "testdata/tune.csv", "testdata/fleet.journal.json")
	strict := tuneDefaults()
	strict.Budget.MaxRespawns, strict.Guard = 1, &crashloop.GuardConfig{MaxRestarts: 2, Window: time.Hour}
	cands := []Candidate{{Name: "defaults", Config: crashloop.DefaultSupervisorConfig()}, {Name: "strict", Config: strict}}
	for _, f := range files {
		if strings.HasSuffix(f, "README.md") {
			continue
		}
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		want, err := Replay([]Source{{Name: f, R: bytes.NewReader(data)}}, cands, Options{})
		require.NoError(t, err, f)
		h := load(t, f, data)
		got, err := h.Replay(cands, Options{})
		require.NoError(t, err, f)
		for i := range want.Reports {
			want.Reports[i].Log = LogCheck{}
		}
		assert.Equal(t, want.Reports, got, f)
		assert.Equal(t, want.Sources, h.Sources, f)
	}
}

// TestTuneRealExports: tune runs on every real export of the corpus, and
// finds what a person reads in each (testdata/real/README.md): a real
// crash loop in bootkube's restarts (status 127, five seconds apart), in
// each container a liveness probe kills three times, in the k3s add-on
// and in the minikube containers that fail to start; none elsewhere.
func TestTuneRealExports(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/real/*")
	require.NoError(t, err)
	want := map[string]string{
		"docker-pre-1.22-2015.jsonl":           "2 records, 0 loops: the defaults",
		"docker-stop-deck-chores-2019.jsonl":   "7 records, 0 loops: the defaults",
		"journald-239-bootkube.json-pretty":    "4 records, 1 loops: budget.max_respawns 1; 1 parked, 0 false",
		"journald-fedora-deactivated.json":     "1 records, 0 loops: the defaults",
		"kube-event-exporter-probe-2022.jsonl": "7 records, 1 loops: healthy_after 1h0m0s, budget.max_respawns 1, budget.window 5m0s; 1 parked, 0 false",
		"kube-pod-openshift-ci-2021.json":      "6 records, 0 loops: the defaults",
		// the crash loop of a k3s add-on (status 1, restarted in back-off)
		"kube-events-k3s-kube-system-2025.json":    "15 records, 1 loops: budget.max_respawns 1; 1 parked, 0 false",
		"kube-events-k3s-support-bundle-2025.json": "15 records, 1 loops: budget.max_respawns 1; 1 parked, 0 false",
		// init-demo's nginx and init-demo2's install failing to start
		"kube-events-minikube-failed-starts-2023.json": "14 records, 2 loops: budget.max_respawns 1; 2 parked, 0 false",
		// the second failing-liveness-pod, killed by its probe three times
		"kube-events-minikube-image-pull-deleted-pod-2023.json": "13 records, 1 loops: healthy_after 30s, budget.max_respawns 1; 1 parked, 0 false",
		// a Job's one start; the pulls that fail are no runs
		"kube-events-minikube-image-pull-oom-job-2023.json": "1 records, 0 loops: the defaults",
		// pods show each container's last end only: the restarts kubelet
		// counted before it are not runs the history shows
		"kube-pods-k3s-kube-system-2025.json":         "10 records, 0 loops: the defaults",
		"kube-pods-k3s-support-bundle-2025.json":      "5 records, 0 loops: the defaults",
		"kube-pods-minikube-crashloop-2023.json":      "2 records, 0 loops: the defaults",
		"kube-pods-minikube-default-2021.json":        "11 records, 0 loops: the defaults",
		"kube-pods-minikube-init-crashloop-2023.json": "2 records, 0 loops: the defaults",
		"kube-pods-minikube-kube-system-2021.json":    "30 records, 0 loops: the defaults",
		"kube-pods-minikube-oomkilled-2023.json":      "2 records, 0 loops: the defaults",
	}
	var seen []string
	for _, f := range files {
		if strings.HasSuffix(f, "README.md") {
			continue
		}
		seen = append(seen, filepath.Base(f))
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		res, err := Tune(load(t, f, data), TuneOptions{})
		require.NoError(t, err, f)
		assert.True(t, res.Feasible, f)
		got := fmt.Sprintf("%d records, %d loops: %s", res.Records, res.Loops, settingsText(res.Recommended))
		if res.Loops > 0 {
			got += fmt.Sprintf("; %d parked, %d false", res.Recommended.LoopsParked, res.Recommended.FalseParks)
		}
		assert.Equal(t, want[filepath.Base(f)], got, f)
		var text strings.Builder
		require.NoError(t, WriteTune(&text, res), f)
		assert.Contains(t, text.String(), "Recommended (tuned): ", f)
	}
	assert.ElementsMatch(t, slices.Collect(maps.Keys(want)), seen, "every export, and only those")
}

// TestLoadHistoryBounds: a record takes 32 bytes; a history longer than
// the limit is refused with ErrHistoryTooLong, after it was read; one
// with no record with ErrNoHistory.
func TestLoadHistoryBounds(t *testing.T) {
	t.Parallel()
	assert.Equal(t, uintptr(32), unsafe.Sizeof(histRecord{}))
	var b strings.Builder
	for i := range 11 {
		b.WriteString(strings.Replace("T,k,start\n", "T", time.Unix(int64(1714557600+i), 0).UTC().Format(time.RFC3339), 1))
	}
	_, err := loadHistory([]Source{{Name: "h", R: strings.NewReader(b.String())}}, 0, 10)
	require.ErrorIs(t, err, ErrHistoryTooLong)
	assert.EqualError(t, err, "replay: history too long to keep in memory: 11 records, more than the 10 kept; judge a shorter span of it")
	h, err := loadHistory([]Source{{Name: "h", R: strings.NewReader(b.String())}}, 0, 11)
	require.NoError(t, err)
	assert.Equal(t, 11, h.Len())
	_, err = LoadHistory([]Source{{Name: "h", R: strings.NewReader("time,key,event,code\n")}}, 0)
	assert.True(t, errors.Is(err, ErrNoHistory), "%v", err)
	_, err = Tune(&History{}, TuneOptions{})
	assert.ErrorIs(t, err, ErrNoHistory)
	_, err = Tune(h, TuneOptions{MaxFalseParks: -1})
	assert.EqualError(t, err, "replay: max false parks -1: must be >= 0")
}

// big is a generated history of about 50,000 records.
var big = genConfig{Seed: 5, Start: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), Span: 72 * time.Hour, Fast: 28, Slow: 12, Outage: 30, Steady: 30}

// TestTune50000RecordsUnderAMinute: a history of 50,000 records and more
// is tuned in under a minute on two workers (without the race detector,
// which slows it tenfold), and its truth holds.
func TestTune50000RecordsUnderAMinute(t *testing.T) {
	t.Parallel()
	data, truth := genHistory(big)
	start := time.Now()
	h := load(t, "big", data)
	read := time.Since(start)
	require.GreaterOrEqual(t, h.Len(), 50_000)
	res, err := Tune(h, TuneOptions{Workers: 2})
	require.NoError(t, err)
	took := time.Since(start)
	t.Logf("%d records of %d keys: read in %v, tuned in %v (%d policies and %d more judged)", h.Len(), h.Keys(), read, took, res.Searched,
		len(res.Compared)+len(res.Effects))
	if !raceOn {
		assert.Less(t, took, time.Minute)
	}
	assert.Equal(t, len(truth.Loops), res.Recommended.LoopsParked)
	assert.Zero(t, res.Recommended.FalseParks)
}

// TestTuneBatchBoundsMemory: a batch keeps state for at most 65,536 keys
// and candidates, and for one candidate at least.
func TestTuneBatchBoundsMemory(t *testing.T) {
	t.Parallel()
	for keys, want := range map[int]int{0: 16, 1: 16, 4096: 16, 4097: 15, 10_000: 6, 65_536: 1, 1_000_000: 1} {
		assert.Equal(t, want, batchOf(keys), "%d keys", keys)
	}
}
