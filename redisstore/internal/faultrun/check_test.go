package faultrun

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A clean history: r1 parks k after 3 grants and announces it, r2 resumes
// it naming the park and announces the resume, and the park stood across a
// kill of the server.
func cleanRun() Run {
	ms := int64(time.Millisecond)
	recs := []Record{
		{T: 1 * ms, R: "r1", Pid: 1, Op: OpJudge, Key: "k", Now: 1 * ms},
		{T: 2 * ms, R: "r1", Pid: 1, Op: OpJudge, Key: "k", Now: 2 * ms},
		{T: 3 * ms, R: "r1", Pid: 1, Op: OpJudge, Key: "k", Now: 3 * ms},
		{T: 4 * ms, R: "r1", Pid: 1, Op: OpJudge, Key: "k", Now: 4 * ms, Park: 1, Version: 1, NewPark: true},
		{T: 4 * ms, R: "r1", Pid: 1, Op: OpClaim, Version: 1, Won: true},
		{T: 4 * ms, R: "r1", Pid: 1, Op: OpEvent, Key: "k", Kind: "agent.startup_exhausted", Version: 1},
		{T: 4 * ms, R: "r1", Pid: 1, Op: OpDecide, Key: "k", Took: int64(100 * time.Millisecond), Action: "stop"},
		{T: 5 * ms, R: "r2", Pid: 2, Op: OpNotice, Key: "k", Version: 1, Park: 1},
		{T: 9 * ms, R: "r2", Pid: 2, Op: OpResumeCall, Key: "k", Named: 1, Park: 1, Version: 2},
		{T: 9 * ms, R: "r2", Pid: 2, Op: OpClaim, Version: 2, Won: true},
		{T: 9 * ms, R: "r2", Pid: 2, Op: OpEvent, Key: "k", Kind: "agent.resumed", Version: 2},
		{T: 10 * ms, R: "r1", Pid: 1, Op: OpJudge, Key: "k", Now: 10 * ms},
	}
	faults := []Fault{
		{Kind: FaultRedisKill, Start: 6 * ms, End: 7 * ms, Before: []Park{{"k", 1}}, After: []Park{{"k", 1}}, AfterRead: 8 * ms},
		{Kind: FaultRedisStop}, {Kind: FaultLinkCut, Target: "r1"}, {Kind: FaultReplicaKill, Target: "r3"},
	}
	return Run{Records: recs, Faults: faults, Timeout: 300 * time.Millisecond, Slack: 200 * time.Millisecond, Budget: 3, Window: time.Hour}
}

func TestCheckCleanRun(t *testing.T) {
	run := cleanRun()
	// the same life winning a version again (a retry after a lost reply,
	// or its second path to the version) announces nothing more
	run.Records = append(run.Records, Record{T: 5 * time.Millisecond.Nanoseconds(), R: "r1", Pid: 1, Op: OpClaim, Version: 1, Won: true})
	rep := Check(run)
	require.Empty(t, rep.Violations)
	require.Equal(t, map[string]int{FaultRedisKill: 1, FaultRedisStop: 1, FaultLinkCut: 1, FaultReplicaKill: 1}, rep.Faults)
	require.Equal(t, 4, rep.Granted)
	require.Equal(t, 1, rep.Parks)
	require.Equal(t, 1, rep.Resumes)
	require.Equal(t, 2, rep.Announced)
	require.Equal(t, 1, rep.ParksAcrossKill)
	require.Equal(t, 100*time.Millisecond, rep.MaxDecision)
}

// Each broken history is found, with the violation that names it.
func TestCheckFindsViolations(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		name   string
		change func(*Run)
		want   []string
	}{
		{"a resume clears a newer park", func(r *Run) {
			// r1 parked k again (version 3) before r2's resume, which named park 1
			r.Records[8].Version, r.Records[9].Version, r.Records[10].Version = 4, 4, 4
			r.Records = append(r.Records, Record{T: 8 * ms, R: "r1", Pid: 1, Op: OpJudge, Key: "k", Now: 8 * ms, Park: 3, Version: 3, NewPark: true},
				Record{T: 8 * ms, R: "r1", Pid: 1, Op: OpClaim, Version: 3, Won: true},
				Record{T: 8 * ms, R: "r1", Pid: 1, Op: OpEvent, Key: "k", Kind: "agent.startup_exhausted", Version: 3})
		}, []string{`resume 4 of "k" (r2 at 9000000) named park 1, but the key's last park before it was 3: it cleared a newer park`}},
		{"announced twice", func(r *Run) {
			r.Records = append(r.Records, Record{T: 6 * ms, R: "r2", Pid: 2, Op: OpEvent, Key: "k", Kind: "agent.startup_exhausted", Version: 1})
		}, []string{`version 1 ("k") announced 2 times: r1 agent.startup_exhausted at 4000000, r2 agent.startup_exhausted at 6000000`}},
		{"won by two lives of one replica", func(r *Run) {
			r.Records = append(r.Records, Record{T: 6 * ms, R: "r1", Pid: 11, Op: OpClaim, Version: 1, Won: true})
		}, []string{`version 1 claimed and won 2 times (r1 at 4000000, r1 at 6000000)`}},
		{"never announced", func(r *Run) {
			r.Records = append(r.Records[:4], r.Records[6:]...)
		}, []string{`park 1 of "k" never announced (claims won: 0)`}},
		{"a grant past the budget", func(r *Run) {
			r.Records[3] = Record{T: 4 * ms, R: "r1", Pid: 1, Op: OpJudge, Key: "k", Now: 4 * ms}
			r.Records = append(r.Records, Record{T: 5 * ms, R: "r1", Pid: 1, Op: OpJudge, Key: "k", Now: 5 * ms, Park: 1, Version: 1, NewPark: true})
		}, []string{`r1: the server granted restart 4 of "k" within its window at 4000000: the budget is 3`}},
		{"a grant while parked", func(r *Run) {
			r.Records = append(r.Records, Record{T: 7 * ms, R: "r3", Pid: 3, Op: OpJudge, Key: "k", Now: 7 * ms})
		}, []string{`r3: the server granted a restart of "k" at 7000000 while park 1 stood`,
			`r3: the server granted restart 4 of "k" within its window at 7000000: the budget is 3`}},
		{"a park lost across a kill", func(r *Run) {
			r.Faults[0].After = nil
		}, []string{`park 1 of "k" stood before the redis kill at 6000000 and not after its restart ([]), and no resume of it was sent before the kill or cleared it before the read`}},
		{"a decision past the timeout", func(r *Run) {
			r.Records[6].Took = int64(501 * time.Millisecond)
		}, []string{`r1: a decision of "k" at 4000000 took 501ms, more than the timeout 300ms and the slack 200ms`}},
		{"a decision past the timeout, its process stalled but not enough", func(r *Run) {
			r.Records[6].Took = int64(502 * time.Millisecond)
			r.Records = append(r.Records, Record{T: 5 * ms, R: "r1", Pid: 1, Op: OpStall, Took: 1 * ms})
		}, []string{`r1: a decision of "k" at 4000000 took 502ms, more than the timeout 300ms and the slack 200ms`}},
		{"state lost", func(r *Run) {
			r.Records = append(r.Records, Record{T: 7 * ms, R: "r2", Pid: 2, Op: OpEvent, Key: "store", Kind: "store.state_lost"})
		}, []string{`r2 announced store.state_lost at 7000000: with AOF and appendfsync always the server never loses its state`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := cleanRun()
			tc.change(&run)
			require.Equal(t, tc.want, Check(run).Violations)
		})
	}
}

// A resume whose caller gave up, known only from a later refused resume
// that reports the key not parked at its version, is the resume of the
// park the call in doubt named (found by run 3 of seed 2 under -race).
func TestCheckResumeKnownFromARefusal(t *testing.T) {
	run := cleanRun()
	ms := int64(time.Millisecond)
	run.Records[8] = Record{T: 9 * ms, R: "r2", Pid: 2, Op: OpResumeCall, Key: "k", Named: 1, Err: "redisstore: resume: i/o timeout", InDoubt: true}
	run.Records[9] = Record{T: 11 * ms, R: "r3", Pid: 3, Op: OpResumeCall, Key: "k", Named: 1, Err: "changed", Changed: true, Version: 2}
	run.Records[10] = Record{T: 12 * ms, R: "r3", Pid: 3, Op: OpClaim, Version: 2, Won: true}
	run.Records = append(run.Records, Record{T: 12 * ms, R: "r3", Pid: 3, Op: OpEvent, Key: "k", Kind: "agent.resumed", Version: 2})
	rep := Check(run)
	require.Empty(t, rep.Violations)
	require.Equal(t, 4, rep.Granted)
}

// A decision over the limit whose process stood still for long enough
// (the replica's stall records overlapping it) is counted, not a violation.
func TestCheckDecisionOfAStalledProcess(t *testing.T) {
	run := cleanRun()
	ms := int64(time.Millisecond)
	run.Records[6].Took = 600 * ms
	run.Records = append(run.Records, Record{T: 100 * ms, R: "r1", Pid: 1, Op: OpStall, Took: 120 * ms},
		Record{T: 300 * ms, R: "r2", Pid: 2, Op: OpStall, Took: 500 * ms}) // another process's stall explains nothing
	rep := Check(run)
	require.Empty(t, rep.Violations)
	require.Equal(t, 1, rep.Stalled)
	require.Equal(t, 500*time.Millisecond, rep.MaxStall)
}

// A transition whose claim the server holds though no replica was answered
// won was never announced: a violation (the defect the fault run found,
// docs/faults.md: a claim whose reply was lost lost its own retry).
func TestCheckClaimWithALostReply(t *testing.T) {
	run := cleanRun()
	run.Records = append(run.Records[:4], run.Records[6:]...)
	run.Claims = map[int64]string{1: "r1"}
	rep := Check(run)
	require.Equal(t, []string{`park 1 of "k" never announced: its claim is held by r1 on the server, but no claim of it was answered won (the reply of the claim that won was lost, and its retry did not win)`}, rep.Violations)
}

// The same park, whose maker was killed while its claim (the one the server
// holds) had no answer: it could not announce, as a winner killed before
// it announced cannot; excused. A maker alive at the end, or one answered,
// is still the violation.
func TestCheckClaimHolderKilled(t *testing.T) {
	ms := int64(time.Millisecond)
	held := `park 1 of "k" never announced: its claim is held by r1/s1 on the server, but no claim of it was answered won (the reply of the claim that won was lost, and its retry did not win)`
	for _, tc := range []struct {
		name   string
		claims []Record
		kill   bool
		want   []string
	}{
		{"killed in its claim's call", nil, true, nil},
		{"killed after claims in doubt", []Record{{T: 5 * ms, R: "r1", Pid: 1, Op: OpClaim, Version: 1, Err: "i/o timeout", InDoubt: true}}, true, nil},
		{"alive", []Record{{T: 5 * ms, R: "r1", Pid: 1, Op: OpClaim, Version: 1, Err: "i/o timeout", InDoubt: true}}, false, []string{held}},
		{"killed, but answered lost", []Record{{T: 5 * ms, R: "r1", Pid: 1, Op: OpClaim, Version: 1}}, true, []string{held}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := cleanRun()
			run.Records = append(append(run.Records[:4:4], tc.claims...), run.Records[6:7]...) // r1's decide at 4ms: its last record
			run.Claims = map[int64]string{1: "r1/s1"}
			if tc.kill {
				run.Faults = append(run.Faults, Fault{Kind: FaultReplicaKill, Target: "r1", Start: 6 * ms, End: 7 * ms})
			}
			require.Equal(t, tc.want, Check(run).Violations)
		})
	}
}

// A write-back is applied at some moment of its call: a grant before the
// call ended may have come first (found by the 10-minute run of seed 7);
// a grant after it ended came while the park stood.
func TestCheckGrantDuringAWriteBack(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		grant int64
		want  []string
	}{
		{25 * ms, nil},
		{31 * ms, []string{`r3: the server granted a restart of "k" at 31000000 while park 3 stood`}},
	} {
		run := cleanRun()
		run.Records = append(run.Records,
			Record{T: 15 * ms, R: "r4", Pid: 4, Op: OpEvent, Key: "k", Kind: "agent.startup_exhausted"},
			Record{T: 20 * ms, R: "r4", Pid: 4, Op: OpRestore, Key: "k", Took: 10 * ms, Named: 2, Written: true, Version: 3, Park: 3},
			Record{T: tc.grant, R: "r3", Pid: 3, Op: OpJudge, Key: "k", Now: tc.grant})
		require.Equal(t, tc.want, Check(run).Violations, "a grant at %dms", tc.grant/ms)
	}
}

// A resume that names a write-back's park was sent after its caller learnt
// of the park, so the park was applied before the resume started, even
// when the write-back's own reply came back later: a grant after the
// resume is no grant while the park stood (found by the 10-minute run of
// seed 11). A grant between the resume's start and the write-back's end
// that the resume did not cover is still one.
func TestCheckResumeOfAWriteBackBeforeItsReply(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		resume int64 // when the resume of park 3 starts; the write-back's call is 20-30ms
		want   []string
	}{
		{27 * ms, nil}, // the write-back's reply came back after the resume began
		{31 * ms, nil},
	} {
		run := cleanRun()
		run.Records = append(run.Records,
			Record{T: 15 * ms, R: "r4", Pid: 4, Op: OpEvent, Key: "k", Kind: "agent.startup_exhausted"},
			Record{T: 20 * ms, R: "r4", Pid: 4, Op: OpRestore, Key: "k", Took: 10 * ms, Named: 2, Written: true, Version: 3, Park: 3},
			Record{T: tc.resume, R: "r2", Pid: 2, Op: OpResumeCall, Key: "k", Named: 3, Park: 3, Version: 4},
			Record{T: tc.resume, R: "r2", Pid: 2, Op: OpClaim, Version: 4, Won: true},
			Record{T: tc.resume, R: "r2", Pid: 2, Op: OpEvent, Key: "k", Kind: "agent.resumed", Version: 4},
			Record{T: max(tc.resume, 30*ms) + ms, R: "r3", Pid: 3, Op: OpJudge, Key: "k", Now: max(tc.resume, 30*ms) + ms})
		require.Equal(t, tc.want, Check(run).Violations, "a resume at %dms", tc.resume/ms)
	}
	// the old placement (the write-back at its call's end, after the
	// resume) found a grant while the park stood
	run := cleanRun()
	run.Records = append(run.Records,
		Record{T: 15 * ms, R: "r4", Pid: 4, Op: OpEvent, Key: "k", Kind: "agent.startup_exhausted"},
		Record{T: 20 * ms, R: "r4", Pid: 4, Op: OpRestore, Key: "k", Took: 10 * ms, Named: 2, Written: true, Version: 3, Park: 3},
		Record{T: 32 * ms, R: "r3", Pid: 3, Op: OpJudge, Key: "k", Now: 32 * ms})
	require.Equal(t, []string{`r3: the server granted a restart of "k" at 32000000 while park 3 stood`}, Check(run).Violations)
}

// A park that stood before a kill of the server and is gone from the parks
// read after its restart is no loss when a resume that named it, made
// after the kill, cleared it before that read: the replicas reach the
// restarted server before the driver reads it (the 10-minute run of seed
// 13: a resume of park 212 of "k2" applied 3ms after the restart, before
// the read). A resume that found no park, or that began after the read,
// does not explain it.
func TestCheckParkResumedBeforeTheReadAfterARestart(t *testing.T) {
	ms := int64(time.Millisecond)
	lost := []string{`park 1 of "k" stood before the redis kill at 6000000 and not after its restart ([]), and no resume of it was sent before the kill or cleared it before the read`}
	for _, tc := range []struct {
		name    string
		change  func(*Run)
		want    []string
		resumed int // ResumedAtRestart
	}{
		// r2's resume of park 1 begins at 9ms, after the restart (7ms)
		{"resumed before the read", func(r *Run) { r.Faults[0].AfterRead = 10 * ms }, nil, 1},
		{"the read's end not recorded (logs kept before it was)", func(r *Run) { r.Faults[0].AfterRead = 0 }, nil, 1},
		{"resumed after the read", func(r *Run) { r.Faults[0].AfterRead = 9 * ms }, lost, 0},
		{"the resume's caller gave up, the resume known from its notice", func(r *Run) {
			r.Faults[0].AfterRead = 10 * ms
			r.Records[8] = Record{T: 9 * ms, R: "r2", Pid: 2, Op: OpResumeCall, Key: "k", Named: 1, Err: "redisstore: resume: i/o timeout", InDoubt: true}
			r.Records = append(r.Records, Record{T: 9 * ms, R: "r1", Pid: 1, Op: OpNotice, Key: "k", Version: 2})
		}, nil, 1},
		{"the resume refused: the park was gone", func(r *Run) {
			r.Faults[0].AfterRead = 10 * ms
			r.Records[8] = Record{T: 9 * ms, R: "r2", Pid: 2, Op: OpResumeCall, Key: "k", Named: 1, Err: "changed", Changed: true}
			r.Records = r.Records[:9] // no resume to claim or announce, no grant after it
		}, lost, 0},
		{"the key parked again after the restart, not resumed", func(r *Run) {
			r.Faults[0].AfterRead = 10 * ms
			r.Records[8] = Record{T: 9 * ms, R: "r2", Pid: 2, Op: OpNotice, Key: "k", Version: 2, Park: 2}
			r.Records = append(r.Records[:9], Record{T: 9 * ms, R: "r2", Pid: 2, Op: OpJudge, Key: "k", Now: 9 * ms, Park: 2, Version: 2, NewPark: true},
				Record{T: 9 * ms, R: "r2", Pid: 2, Op: OpClaim, Version: 2, Won: true},
				Record{T: 9 * ms, R: "r2", Pid: 2, Op: OpEvent, Key: "k", Kind: "agent.startup_exhausted", Version: 2})
			r.Records = append(r.Records, Record{T: 9 * ms, R: "r2", Pid: 2, Op: OpResumeCall, Key: "k", Named: 1, Err: "changed", Changed: true, Version: 2, Park: 2})
		}, lost, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := cleanRun()
			run.Faults[0].After = nil
			tc.change(&run)
			rep := Check(run)
			require.Equal(t, tc.want, rep.Violations)
			require.Equal(t, tc.resumed, rep.ResumedAtRestart)
			require.Equal(t, tc.resumed, rep.ParksAcrossKill)
		})
	}
}

// A resume applied just before a kill of the server, whose reply and notice
// were lost with the server, is told of by no record; the park it cleared
// stood before the kill and not after the restart, and the grants after
// the restart are no grants while it stood (seed 1 on 1f18c16: r3's resume
// of park 48 of "k3" began 0.7ms before the kill and failed with EOF; the
// AOF's last write before the restart is its resume 59; 3 grants of "k3"
// after the restart, then park 61). The park standing after the restart
// leaves the grants violations; no resume in doubt sent before the kill
// (one that failed before it was sent, one sent after the kill) leaves
// them violations and the park lost.
func TestCheckParkResumedByACallTheKillCutOff(t *testing.T) {
	ms := int64(time.Millisecond)
	grants := []string{
		`r1: the server granted a restart of "k" at 10000000 while park 1 stood`,
		`r1: the server granted restart 4 of "k" within its window at 10000000: the budget is 3`,
		`r2: the server granted a restart of "k" at 11000000 while park 1 stood`,
		`r2: the server granted restart 5 of "k" within its window at 11000000: the budget is 3`,
		`r1: the server granted a restart of "k" at 12000000 while park 1 stood`,
		`r1: the server granted restart 6 of "k" within its window at 12000000: the budget is 3`,
	}
	lost := `park 1 of "k" stood before the redis kill at 6000000 and not after its restart ([]), and no resume of it was sent before the kill or cleared it before the read`
	cut := Record{T: 5 * ms, R: "r2", Pid: 2, Op: OpResumeCall, Key: "k", Took: 2 * ms, Named: 1, Err: "redisstore: resume: EOF", InDoubt: true}
	for _, tc := range []struct {
		name    string
		resume  Record // r2's resume of park 1
		after   []Park // the parks read after the restart
		want    []string
		resumed int // ResumedAtKill
	}{
		{"cut off by the kill", cut, nil, nil, 1},
		{"cut off, but the park stands after the restart", cut, []Park{{"k", 1}}, grants, 0},
		{"failed before it was sent", Record{T: 5 * ms, R: "r2", Pid: 2, Op: OpResumeCall, Key: "k", Named: 1, Err: "redisstore: resume: connection refused"}, nil, append(slices.Clone(grants), lost), 0},
		{"sent after the kill", Record{T: 6 * ms, R: "r2", Pid: 2, Op: OpResumeCall, Key: "k", Took: ms, Named: 1, Err: "redisstore: resume: EOF", InDoubt: true}, nil, append(slices.Clone(grants), lost), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := cleanRun()
			run.Faults[0].After = tc.after
			run.Records = append(run.Records[:8:8], tc.resume,
				Record{T: 10 * ms, R: "r1", Pid: 1, Op: OpJudge, Key: "k", Now: 10 * ms},
				Record{T: 11 * ms, R: "r2", Pid: 2, Op: OpJudge, Key: "k", Now: 11 * ms},
				Record{T: 12 * ms, R: "r1", Pid: 1, Op: OpJudge, Key: "k", Now: 12 * ms},
				Record{T: 13 * ms, R: "r2", Pid: 2, Op: OpJudge, Key: "k", Now: 13 * ms, Park: 3, Version: 3, NewPark: true},
				Record{T: 13 * ms, R: "r2", Pid: 2, Op: OpClaim, Version: 3, Won: true},
				Record{T: 13 * ms, R: "r2", Pid: 2, Op: OpEvent, Key: "k", Kind: "agent.startup_exhausted", Version: 3})
			rep := Check(run)
			require.Equal(t, tc.want, rep.Violations)
			require.Equal(t, tc.resumed, rep.ResumedAtKill)
			require.Equal(t, 6, rep.Granted)
		})
	}
}

// A resume whose process was killed in the call logs only that it was
// sent; the server applied it and another replica learnt it from a notice
// (seed 19: r4 killed 0.5ms after it sent a resume of k3). It is the
// resume of the park the call named, dated from its sending; a call that
// returned, or no call at all, is still a violation.
func TestCheckResumeWhoseCallerWasKilledInTheCall(t *testing.T) {
	ms := int64(time.Millisecond)
	sent := Record{T: 9 * ms, R: "r2", Pid: 2, Op: OpResumeSent, Key: "k", Named: 1}
	const lost = `resume 2 of "k" cleared park 1, and no resume that named park 1 was sent`
	for _, tc := range []struct {
		name     string
		recs     []Record
		violates []string
	}{
		{"killed in the call", []Record{sent}, nil},
		{"the call returned refused", []Record{sent,
			{T: 9 * ms, R: "r2", Pid: 2, Op: OpResumeCall, Key: "k", Named: 1, Err: "redisstore: resume: connection refused"}}, []string{lost}},
		{"another park named", []Record{{T: 9 * ms, R: "r2", Pid: 2, Op: OpResumeSent, Key: "k", Named: 7}}, []string{lost}},
		{"no call", nil, []string{lost}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := cleanRun()
			recs := slices.Clone(run.Records[:8])
			recs = append(recs, tc.recs...)
			recs = append(recs,
				Record{T: 10 * ms, R: "r1", Pid: 1, Op: OpNotice, Key: "k", Version: 2},
				Record{T: 10 * ms, R: "r1", Pid: 1, Op: OpJudge, Key: "k", Now: 10 * ms},
				Record{T: 11 * ms, R: "r1", Pid: 1, Op: OpClaim, Version: 2, Won: true},
				Record{T: 11 * ms, R: "r1", Pid: 1, Op: OpEvent, Key: "k", Kind: "agent.resumed", Version: 2})
			run.Records = recs
			run.Faults = append(run.Faults, Fault{Kind: FaultReplicaKill, Target: "r2", Start: 9*ms + ms/2, End: 12 * ms})
			rep := Check(run)
			for _, v := range tc.violates {
				require.Contains(t, rep.Violations, v)
			}
			if tc.violates == nil {
				require.Empty(t, rep.Violations)
				require.Equal(t, 4, rep.Granted)
			}
		})
	}
}
