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

// history is a CSV history: key a fails four starts in a row, fails twice
// more, then runs healthy (ready at 6.5s) until 600s; b's start is listed
// 10s out of order (put back in order), c's 597s out of order (late).
const history = `time,key,event,code
1714557600,a,start
1714557601,a,exit,1
1714557601.2,a,start
1714557602,a,exit,1
1714557602.5,a,start
1714557603,a,exit,1
1714557603.5,a,start
1714557604,a,exit,1
1714557604.5,a,start
1714557605,a,exit,1
1714557606,a,start
1714557606.5,a,ready
1714558200,a,exit,1
1714558190,b,start
1714557603,c,start
`

// decisions replays history under the candidates and returns each
// candidate's decisions, one line each.
func decisions(t *testing.T, history string, cands []replay.Candidate, opts replay.Options) (*replay.Result, [][]string) {
	t.Helper()
	out := make([][]string, len(cands))
	opts.OnDecision = func(d replay.Decided) {
		out[d.Candidate] = append(out[d.Candidate], fmt.Sprintf("%s %v %s %v %s", d.Key, d.Time.Sub(t0), d.Decision.Action, d.Decision.Wait, d.Event))
	}
	res, err := replay.Replay([]replay.Source{{Name: "h", R: strings.NewReader(history)}}, cands, opts)
	require.NoError(t, err)
	return res, out
}

func TestReplayMeasures(t *testing.T) {
	t.Parallel()
	def := crashloop.DefaultSupervisorConfig()
	wide := crashloop.DefaultSupervisorConfig()
	wide.Budget.MaxRespawns = 10
	res, got := decisions(t, history, []replay.Candidate{{Config: def}, {Name: "wide", Config: wide}}, replay.Options{})

	assert.Equal(t, []replay.SourceResult{{Name: "h", Format: replay.FormatCSV, Lines: 16, Records: 15}}, res.Sources)
	assert.Equal(t, []string{
		"a 1s restart 500ms agent.respawn_scheduled",
		"a 2s restart 1s agent.respawn_scheduled",
		"a 3s restart 1.5s agent.respawn_scheduled",
		"a 4s stop 0s agent.startup_exhausted",
	}, got[0])
	assert.Equal(t, []string{
		"a 1s restart 500ms agent.respawn_scheduled",
		"a 2s restart 1s agent.respawn_scheduled",
		"a 3s restart 1.5s agent.respawn_scheduled",
		"a 4s restart 2s agent.respawn_scheduled",
		"a 5s restart 2.5s agent.respawn_scheduled",
		"a 10m0s restart 500ms agent.restart_scheduled",
	}, got[1])

	require.Len(t, res.Reports, 2)
	r := res.Reports[0]
	assert.Equal(t, "config 1", r.Name)
	assert.Equal(t, at(0), r.First)
	assert.Equal(t, at(10*time.Minute), r.Last)
	assert.Equal(t, 15, r.Records)
	assert.Equal(t, 1, r.Late, "c's start, 597s out of order")
	assert.Equal(t, replay.Measures{Keys: 3, Runs: 8, Failures: 6, Restarts: 5, Allowed: 3, Spared: 2, Parks: 1, ParkedKeys: 1,
		FalseParks: 1, ToParkMedian: 3 * time.Second, ToParkMax: 3 * time.Second, ExtraDelay: 1800 * time.Millisecond, Delayed: 3}, r.Totals)
	assert.Equal(t, replay.KeyReport{Key: "a", Runs: 6, Failures: 6, Restarts: 5, Allowed: 3, Spared: 2, Parks: 1, FalseParks: 1,
		ExtraDelay: 1800 * time.Millisecond, Delayed: 3, ParkedAt: at(4 * time.Second), Reason: "respawn_budget_exhausted",
		ToPark: 3 * time.Second, StillParked: true, RecoveredAt: at(6500 * time.Millisecond)}, r.Keys[0])
	assert.Equal(t, []replay.KeyReport{{Key: "b", Runs: 1}, {Key: "c", Runs: 1}}, r.Keys[1:])

	w := res.Reports[1]
	assert.Equal(t, "wide", w.Name)
	assert.Equal(t, replay.Measures{Keys: 3, Runs: 8, Failures: 6, Restarts: 5, Allowed: 6,
		ExtraDelay: 4800 * time.Millisecond, Delayed: 5}, w.Totals)
}

// TestReplayHorizonAndResume: a healthy run after the horizon, or after an
// operator's resume, makes no false park.
func TestReplayHorizonAndResume(t *testing.T) {
	t.Parallel()
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Budget.MaxRespawns = 0                         // the first failure parks
	h := "1714557600,a,start\n1714557601,a,exit,1\n" + // parked at 1s
		"1714557700,a,start\n" + // 99s later: healthy from 110s (HealthyAfter 10s) until the end
		"1714557800,b,start\n1714557801,b,exit,1\n" +
		"1714557802,b,resume\n1714557803,b,start\n1714557900,b,exit,0\n"
	for _, c := range []struct {
		horizon time.Duration
		false   int
	}{{109 * time.Second, 1}, {108 * time.Second, 0}} {
		res, got := decisions(t, h, []replay.Candidate{{Config: cfg}}, replay.Options{Horizon: c.horizon})
		assert.Equal(t, []string{"a 1s stop 0s agent.startup_exhausted", "b 3m21s stop 0s agent.startup_exhausted", "b 5m0s stop 0s "}, got[0])
		tot := res.Reports[0].Totals
		assert.Equal(t, c.false, tot.FalseParks, "a ran healthy 109s after its park (from 10s into its run); b was resumed")
		assert.Equal(t, 2, tot.Parks)
		assert.Equal(t, 1, tot.Spared, "a's start after its park; b's came after the resume")
	}
}

// TestReplayerJudgesRecordsBuiltByHand: NewReplayer, Feed and Finish judge
// records built by hand, in time order, as Replay judges the same history
// read from a file.
func TestReplayerJudgesRecordsBuiltByHand(t *testing.T) {
	t.Parallel()
	cands := []replay.Candidate{{Name: "defaults", Config: crashloop.DefaultSupervisorConfig()}}
	var csv strings.Builder
	p, err := replay.NewReplayer(cands, replay.Options{})
	require.NoError(t, err)
	for i := range 5 { // five crashes a second apart: the defaults park at the 4th
		s, e := at(time.Duration(i)*time.Second), at(time.Duration(i)*time.Second+500*time.Millisecond)
		p.Feed(replay.Record{Time: s, Key: "a", Event: replay.Start})
		p.Feed(replay.Record{Time: e, Key: "a", Event: replay.Exit, Code: 1, Failed: true})
		fmt.Fprintf(&csv, "%d,a,start\n%d.5,a,exit,1\n", s.Unix(), s.Unix())
	}
	byHand := p.Finish()
	res, err := replay.Replay([]replay.Source{{Name: "h", R: strings.NewReader(csv.String())}}, cands, replay.Options{})
	require.NoError(t, err)
	require.Len(t, byHand, 1)
	assert.Equal(t, res.Reports[0].Totals, byHand[0].Totals)
	assert.Equal(t, 1, byHand[0].Totals.Parks)
	assert.Equal(t, 1, byHand[0].Totals.Spared)
}

// TestReplayExitRules: a configuration's exit rules judge the replayed
// runs by the status the history tells: a park rule parks on the first
// run that exits 78 (reason permanent_error), a planned rule restarts at
// once and spends no budget; a rule by signal name matches no replayed
// run (the history tells 128+N, not the signal's name).
func TestReplayExitRules(t *testing.T) {
	t.Parallel()
	h := `1714557600,k,start
1714557601,k,exit,3
1714557601,k,start
1714557602,k,exit,78
1714557603,k,start
1714557604,k,exit,137
`
	park := crashloop.DefaultSupervisorConfig()
	park.ExitRules = []crashloop.ExitRule{"78=park"}
	planned := crashloop.DefaultSupervisorConfig()
	planned.ExitRules = []crashloop.ExitRule{"3,78=planned", "SIGKILL=park"}
	_, got := decisions(t, h, []replay.Candidate{{Config: park}, {Config: planned}}, replay.Options{})
	assert.Equal(t, []string{
		"k 1s restart 500ms agent.respawn_scheduled",
		"k 2s stop 0s agent.startup_exhausted",
	}, got[0])
	assert.Equal(t, []string{
		"k 1s restart 0s agent.restart_scheduled",
		"k 2s restart 0s agent.restart_scheduled",
		"k 4s restart 500ms agent.respawn_scheduled",
	}, got[1])
}

// probeHistory is a CSV history: key a fails four starts in a row (the
// defaults park it at 4s, the 4th failed start), then the system that
// wrote the history kept starting it: at 10s, 40s and 70s it fails again,
// at 110s it runs ready until it crashes at 700s.
const probeHistory = `time,key,event,code
1714557600,a,start
1714557601,a,exit,1
1714557601.2,a,start
1714557602,a,exit,1
1714557602.5,a,start
1714557603,a,exit,1
1714557603.5,a,start
1714557604,a,exit,1
1714557610,a,start
1714557611,a,exit,1
1714557640,a,start
1714557641,a,exit,1
1714557670,a,start
1714557671,a,exit,1
1714557710,a,start
1714557711,a,ready
1714558300,a,exit,1
`

// TestReplayProbe: with probe_after 30s the park at 4s is probed by the
// history's first start once the probe is due (34s): the start at 40s;
// it fails, and the next probe is due 60s after it (100s): the start at
// 70s is spared, the one at 110s is the probe that runs ready, and its
// end at 700s resumes the key (agent.resumed, reason probe) before it is
// judged: a crash after a healthy run, restarted. Without the probe the
// park lasts: every later start is spared, and the healthy run makes it
// a false park.
func TestReplayProbe(t *testing.T) {
	t.Parallel()
	def := crashloop.DefaultSupervisorConfig()
	probe := def
	probe.ProbeAfter = 30 * time.Second
	res, got := decisions(t, probeHistory, []replay.Candidate{{Name: "defaults", Config: def}, {Name: "probe", Config: probe}}, replay.Options{})
	assert.Equal(t, []string{
		"a 1s restart 500ms agent.respawn_scheduled",
		"a 2s restart 1s agent.respawn_scheduled",
		"a 3s restart 1.5s agent.respawn_scheduled",
		"a 4s stop 0s agent.startup_exhausted",
	}, got[0])
	assert.Equal(t, []string{
		"a 1s restart 500ms agent.respawn_scheduled",
		"a 2s restart 1s agent.respawn_scheduled",
		"a 3s restart 1.5s agent.respawn_scheduled",
		"a 4s stop 30s agent.startup_exhausted",
		"a 41s stop 59s ",
		"a 11m40s restart 500ms agent.restart_scheduled",
	}, got[1])
	d, p := res.Reports[0].Totals, res.Reports[1].Totals
	assert.Equal(t, []int{1, 4, 1, 0, 0}, []int{d.Parks, d.Spared, d.FalseParks, d.Probes, d.ProbeResumes}, "defaults")
	assert.Equal(t, []int{1, 2, 0, 2, 1}, []int{p.Parks, p.Spared, p.FalseParks, p.Probes, p.ProbeResumes}, "probe")
	assert.False(t, res.Reports[1].Keys[0].StillParked)
	assert.True(t, res.Reports[0].Keys[0].StillParked)
}

// holdHistory is a CSV history: four keys fail their start at 1s, with
// one status (so one cause: "exited with status N"), and again at 2s;
// at 31s all four start and run ready, until a clean exit at 700s.
const holdHistory = `time,key,event,code
1714557600,a,start
1714557600,b,start
1714557600,c,start
1714557600,d,start
1714557601,a,exit,1
1714557601,b,exit,1
1714557601,c,exit,1
1714557601,d,exit,1
1714557601.5,a,start
1714557601.5,b,start
1714557601.5,c,start
1714557601.5,d,start
1714557602,a,exit,1
1714557602,b,exit,1
1714557602,c,exit,1
1714557602,d,exit,1
1714557631,a,start
1714557631,b,start
1714557631,c,start
1714557631,d,start
1714557632,a,ready
1714557632,b,ready
1714557632,c,ready
1714557632,d,ready
1714558300,a,exit,0
1714558300,b,exit,0
1714558300,c,exit,0
1714558300,d,exit,0
`

// TestReplayHold: under the hold on a shared cause (at its defaults: 3
// keys within 1m) the third failure with one cause begins the hold (c at
// 1s), and every later failure with it is held (6 held, none parks, no
// budget spent past a and b's first respawns). The history starts all
// four at 31s: a, the first to ask once the probe is due, is the probe,
// the others wait on it (the extra delay), and a's healthy run releases
// the other three at the replay's next decision (a's end at 700s: a
// replay asks the candidate only when the history has a record).
func TestReplayHold(t *testing.T) {
	t.Parallel()
	def := crashloop.DefaultSupervisorConfig()
	hold := crashloop.DefaultSupervisorConfig()
	f := *hold.Fleet
	f.SharedCause = &crashloop.SharedCauseConfig{}
	hold.Fleet = &f
	res, got := decisions(t, holdHistory, []replay.Candidate{{Name: "defaults", Config: def}, {Name: "hold", Config: hold}}, replay.Options{})
	assert.Equal(t, []string{
		"a 1s restart 500ms agent.respawn_scheduled", "b 1s restart 500ms agent.respawn_scheduled",
		"c 1s hold 30s agent.restart_scheduled", "d 1s hold 30s agent.restart_scheduled",
		"a 2s hold 29s agent.restart_scheduled", "b 2s hold 29s agent.restart_scheduled",
		"c 2s hold 29s agent.restart_scheduled", "d 2s hold 29s agent.restart_scheduled",
		"a 11m40s stop 0s ", "b 11m40s stop 0s ", "c 11m40s stop 0s ", "d 11m40s stop 0s ",
	}, got[1])
	h := res.Reports[1]
	assert.Equal(t, []replay.CauseHold{{Cause: "exited with status N", At: t0.Add(time.Second), Keys: 3, Until: t0.Add(700 * time.Second), Released: 3}}, h.CauseHolds)
	assert.Equal(t, []int{1, 6, 0, 5}, []int{h.Totals.CauseHolds, h.Totals.Held, h.Totals.Parks, h.Totals.Delayed})
	assert.Equal(t, 89*time.Second, h.Totals.ExtraDelay, "c and d, held at 1s, started at 1.5s: 29.5s each; b, c and d wait 10s at 31s on a's probe")
	assert.Empty(t, res.Reports[0].CauseHolds)
	assert.Equal(t, 0, res.Reports[0].Totals.Held)
}
