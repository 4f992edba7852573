package faultrun

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// The kinds of fault the driver injects.
const (
	FaultRedisStop   = "redis_stop"   // SIGSTOP of redis-server, SIGCONT at End
	FaultRedisKill   = "redis_kill"   // SIGKILL of redis-server, restarted on the same port and AOF file at End
	FaultLinkCut     = "link_cut"     // every packet of one replica's link dropped (link down) until End
	FaultReplicaKill = "replica_kill" // SIGKILL of one replica, restarted at End
)

// FaultKinds lists every kind of fault; a run must inject each.
var FaultKinds = []string{FaultRedisStop, FaultRedisKill, FaultLinkCut, FaultReplicaKill}

// Fault is one fault the driver injected. It is a plain value.
type Fault struct {
	Kind   string `json:"kind"`
	Target string `json:"target,omitempty"` // the replica, for link_cut and replica_kill
	Start  int64  `json:"start"`            // Unix nanoseconds
	End    int64  `json:"end"`              // when it was healed (or the process restarted)
	// Before and After are the parks standing just before a redis_kill
	// and just after its restart; AfterRead is when the read of After
	// ended (Unix nanoseconds; 0 in logs kept before it was recorded).
	// The replicas reach the server as soon as it takes connections, so
	// After may already show their first steps after the restart.
	Before    []Park `json:"before,omitempty"`
	After     []Park `json:"after,omitempty"`
	AfterRead int64  `json:"after_read,omitempty"`
}

// Park is a parked key and its park's version.
type Park struct {
	Key     string `json:"key"`
	Version int64  `json:"version"`
}

// Run is everything Check reads: the replicas' records, the faults, and
// the server's state once the replicas stopped. It is a plain value.
type Run struct {
	Records []Record
	Faults  []Fault
	Final   []Park           // the parks standing at the end
	Claims  map[int64]string // each claim key standing at the end: version -> replica
	Timeout time.Duration    // the store's timeout
	Slack   time.Duration    // what a decision may take beyond Timeout
	Budget  int              // the budget's MaxRespawns
	Window  time.Duration    // the budget's window
}

// Report is what Check found. It is a plain value.
type Report struct {
	Faults           map[string]int // injected, by kind
	Decisions        int
	Granted          int // restarts the server granted
	Alone            int // decisions made alone (the judge step failed)
	Parks            int // parks made by a judge step
	WriteBacks       int // parks written back
	Resumes          int // resumes applied
	Refused          int // resumes refused (ChangedError)
	Announced        int // park and resume events announced after a won claim
	MaxDecision      time.Duration
	MaxDecisionOf    string // the replica, key and time of the longest decision
	MaxResume        time.Duration
	MaxStall         time.Duration  // the longest time a replica's process was not scheduled
	Stalled          int            // decisions over the limit whose process stood still long enough to explain it
	Excused          map[string]int // transitions not announced, by the rule of docs/faults.md that allows it
	Unverifiable     int            // resumes whose cleared park no replica saw made
	KillsWithParks   int            // redis_kill faults with parks standing before them
	ParksAcrossKill  int            // parks that stood before a redis_kill and after its restart
	ResumedAtRestart int            // of those, parks resumed after the restart, before the parks were read again
	ResumedAtKill    int            // parks gone after a redis_kill, cleared by a resume in doubt sent before it that no record tells of
	Violations       []string
}

func (rep *Report) violate(format string, args ...any) {
	rep.Violations = append(rep.Violations, fmt.Sprintf(format, args...))
}

// String is the report's summary line.
func (rep Report) String() string {
	var f []string
	for _, k := range FaultKinds {
		f = append(f, fmt.Sprintf("%s=%d", k, rep.Faults[k]))
	}
	var ex []string
	for _, k := range slices.Sorted(maps.Keys(rep.Excused)) {
		ex = append(ex, fmt.Sprintf("%s=%d", k, rep.Excused[k]))
	}
	return fmt.Sprintf("faults: %s; decisions %d (granted by the server %d, alone %d), parks %d, write-backs %d, resumes %d (refused %d), announced %d, excused [%s], unverifiable resumes %d, parks across a redis kill %d (in %d kills; %d of them resumed before they were read again), parks resumed by a call the kill cut off %d; max decision %v (%s; %d over the limit while their process stood still, at most %v), max resume %v; violations %d",
		strings.Join(f, " "), rep.Decisions, rep.Granted, rep.Alone, rep.Parks, rep.WriteBacks, rep.Resumes, rep.Refused,
		rep.Announced, strings.Join(ex, " "), rep.Unverifiable, rep.ParksAcrossKill, rep.KillsWithParks, rep.ResumedAtRestart, rep.ResumedAtKill,
		rep.MaxDecision, rep.MaxDecisionOf, rep.Stalled, rep.MaxStall, rep.MaxResume, len(rep.Violations))
}

// transition is a transition of a key, as the records tell of it.
type transition struct {
	key  string
	kind string // "park" (a judge step's or a write-back's), "resume", "forget"
	// judged: made by a judge step (a replica's reply said so); written: a
	// write-back; neither: learnt from a notice or a lookup only.
	judged, written bool
	at              int64 // the server's time of a judged park; the call's end of a write-back, its start of a resume
	call            *Record
}

// claimGrace is how long after a replica learns a transition it claims it
// (crashloop's claimGrace), with a margin.
const claimGrace = 2 * time.Second

// Check asserts the invariants of docs/faults.md over a run.
func Check(run Run) Report {
	rep := Report{Faults: map[string]int{}, Excused: map[string]int{}}
	for _, f := range run.Faults {
		rep.Faults[f.Kind]++
	}
	recs := slices.Clone(run.Records)
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].T < recs[j].T })
	doubtful := doubtfulResumes(recs)

	// Every transition, by version: a version names one transition of one
	// key, in every record that tells of it.
	ts := map[int64]*transition{}
	note := func(v int64, key, kind string, r *Record) *transition {
		t := ts[v]
		if t == nil {
			t = &transition{key: key, kind: kind}
			ts[v] = t
		} else if t.key != key || t.kind != kind {
			rep.violate("version %d is a %s of %q in one record and a %s of %q in another (%s of %s at %d): a version names one transition",
				v, t.kind, t.key, kind, key, r.Op, r.R, r.T)
		}
		return t
	}
	// A key as it stands (a lookup, a refused resume) tells of its last
	// transition: its park, or, not parked at a version, a resume (the
	// run forgets nothing).
	noteStanding := func(r *Record) {
		switch {
		case r.Park != 0:
			note(r.Park, r.Key, "park", r)
		case r.Version != 0:
			note(r.Version, r.Key, "resume", r)
		}
	}
	for i := range recs {
		r := &recs[i]
		switch r.Op {
		case OpJudge:
			if r.Err == "" && r.Park != 0 {
				t := note(r.Park, r.Key, "park", r)
				if r.NewPark {
					t.judged, t.at, t.call = true, r.Now, r
				}
			}
		case OpRestore:
			if r.Err == "" && r.Written {
				// applied at some moment of the call, unknown: at its end
				// is the latest, which counts no grant made before it as
				// made while it stood
				t := note(r.Version, r.Key, "park", r)
				t.written, t.at, t.call = true, r.T+r.Took, r
			}
		case OpResumeCall:
			if r.Err == "" {
				t := note(r.Version, r.Key, "resume", r)
				t.at, t.call = r.T, r
			} else if r.Changed {
				noteStanding(r)
			}
		case OpNotice:
			switch {
			case r.Park != 0:
				note(r.Park, r.Key, "park", r)
			case r.Forgotten:
				note(r.Version, r.Key, "forget", r)
			default:
				note(r.Version, r.Key, "resume", r)
			}
		case OpLookup:
			if r.Err == "" {
				noteStanding(r)
			}
		case OpDecide:
			rep.Decisions++
			if d := time.Duration(r.Took); d > rep.MaxDecision {
				rep.MaxDecision, rep.MaxDecisionOf = d, fmt.Sprintf("%s %s at %d", r.R, r.Key, r.T)
			}
			if limit := run.Timeout + run.Slack; time.Duration(r.Took) > limit && time.Duration(r.Took)-stalled(recs, r) <= limit {
				rep.Stalled++
			} else if time.Duration(r.Took) > limit {
				rep.violate("%s: a decision of %q at %d took %v, more than the timeout %v and the slack %v", r.R, r.Key, r.T, time.Duration(r.Took), run.Timeout, run.Slack)
			}
			// r.Park is not noted: a park decided alone carries the version
			// of the key's last transition its replica knew, not its own
		case OpResume:
			rep.MaxResume = max(rep.MaxResume, time.Duration(r.Took))
		case OpStall:
			rep.MaxStall = max(rep.MaxStall, time.Duration(r.Took))
		}
	}
	versions := slices.Sorted(maps.Keys(ts))
	for _, v := range versions {
		t := ts[v]
		switch {
		case t.judged:
			rep.Parks++
		case t.written:
			rep.WriteBacks++
		case t.kind == "resume" && t.call != nil:
			rep.Resumes++
		}
	}
	for i := range recs {
		if recs[i].Op == OpResumeCall && recs[i].Changed {
			rep.Refused++
		}
	}

	// A resume clears only the park it named: the park a resume cleared
	// is the key's last park before it, and some resume call named it.
	parkBefore := func(key string, v int64) int64 {
		var p int64
		for _, u := range versions {
			if u >= v {
				break
			}
			if t := ts[u]; t.key == key && t.kind == "park" {
				p = u
			} else if t.key == key {
				p = 0
			}
		}
		return p
	}
	resumedAt := map[int64]int64{} // resume version -> the start of the call that made it
	for _, v := range versions {
		t := ts[v]
		if t.kind != "resume" {
			continue
		}
		p := parkBefore(t.key, v)
		if t.call != nil {
			if t.call.Park != t.call.Named {
				rep.violate("resume %d of %q (%s at %d) named park %d and cleared park %d", v, t.key, t.call.R, t.call.T, t.call.Named, t.call.Park)
			}
			if p != 0 && p != t.call.Named {
				rep.violate("resume %d of %q (%s at %d) named park %d, but the key's last park before it was %d: it cleared a newer park", v, t.key, t.call.R, t.call.T, t.call.Named, p)
			}
			resumedAt[v] = t.at
			continue
		}
		if p == 0 {
			rep.Unverifiable++
			continue
		}
		// learnt from a notice only: its caller gave up on it, or died in
		// it; one of those calls must have named the park it cleared
		i := slices.IndexFunc(doubtful, func(r Record) bool { return r.Key == t.key && r.Named == p })
		if i < 0 {
			rep.violate("resume %d of %q cleared park %d, and no resume that named park %d was sent", v, t.key, p, p)
			continue
		}
		resumedAt[v] = doubtful[i].T
	}

	// A write-back's park is placed at the end of its call, the latest it
	// can have been applied; but a resume that named it was sent once its
	// caller had learnt of it from a reply, so it was applied before that
	// resume started (seed 11: a write-back's reply came back after the
	// resume of its park, learnt from another replica's write-back, began).
	for v, at := range resumedAt {
		named := ts[v].call
		if named == nil {
			continue
		}
		if p := ts[named.Named]; p != nil && p.written && p.key == ts[v].key && p.at > at {
			p.at = at
		}
	}

	// Each park a judge step made and each resume is announced exactly
	// once; a write-back's park by nobody (its writer announced it when it
	// decided it alone).
	won := map[int64][]*Record{}
	announced := map[int64][]*Record{}
	aloneParks := map[int][]*Record{} // pid -> its parks decided alone, announced without a claim
	for i := range recs {
		r := &recs[i]
		switch {
		case r.Op == OpClaim && r.Won:
			// A Store that claims again what it holds wins again
			// (docs/redis.md, Announcing): the wins of one process's life
			// are one; two lives, or two processes, winning one version
			// is the violation.
			if !slices.ContainsFunc(won[r.Version], func(w *Record) bool { return w.Pid == r.Pid }) {
				won[r.Version] = append(won[r.Version], r)
			}
		case r.Op == OpEvent && (isPark(r.Kind) || r.Kind == "agent.resumed") && r.Version != 0:
			announced[r.Version] = append(announced[r.Version], r)
			rep.Announced++
		case r.Op == OpEvent && isPark(r.Kind):
			aloneParks[r.Pid] = append(aloneParks[r.Pid], r)
		case r.Op == OpEvent && r.Kind == "store.state_lost":
			rep.violate("%s announced store.state_lost at %d: with AOF and appendfsync always the server never loses its state", r.R, r.T)
		}
	}
	for v, rs := range won {
		if len(rs) > 1 {
			rep.violate("version %d claimed and won %d times (%s at %d, %s at %d)", v, len(rs), rs[0].R, rs[0].T, rs[1].R, rs[1].T)
		}
	}
	for v, rs := range announced {
		if len(rs) > 1 {
			rep.violate("version %d (%q) announced %d times: %s %s at %d, %s %s at %d", v, rs[0].Key, len(rs), rs[0].R, rs[0].Kind, rs[0].T, rs[1].R, rs[1].Kind, rs[1].T)
		}
		if t := ts[v]; t == nil || (t.kind == "resume") != (rs[0].Kind == "agent.resumed") || t.key != rs[0].Key {
			rep.violate("%s announced %s of %q as version %d, which is not such a transition", rs[0].R, rs[0].Kind, rs[0].Key, v)
		}
	}
	kills := map[string][]Fault{}
	for _, f := range run.Faults {
		if f.Kind == FaultReplicaKill {
			kills[f.Target] = append(kills[f.Target], f)
		}
	}
	killedWithin := func(replica string, from int64, d time.Duration) bool {
		for _, f := range kills[replica] {
			if f.Start >= from && f.Start <= from+int64(d) {
				return true
			}
		}
		return false
	}
	for _, v := range versions {
		t := ts[v]
		switch {
		case t.written:
			if n := len(announced[v]); n != 0 {
				rep.violate("write-back %d of %q announced %d times: its writer announced it when it parked the key alone", v, t.key, n)
			}
			if !slices.ContainsFunc(aloneParks[t.call.Pid], func(e *Record) bool { return e.Key == t.key && e.T <= t.call.T }) {
				rep.violate("%s wrote back park %d of %q at %d without having announced a park of it decided alone", t.call.R, v, t.key, t.call.T)
			}
			continue
		case t.kind == "resume" || t.judged:
		default:
			continue // a park no replica's reply told of: a judge step whose reply was lost, or a write-back's
		}
		if len(announced[v]) == 1 {
			continue
		}
		if len(announced[v]) > 1 {
			continue // reported above
		}
		ws := won[v]
		switch {
		case len(ws) == 1 && t.kind == "park" && slices.ContainsFunc(aloneParks[ws[0].Pid], func(e *Record) bool { return e.Key == t.key && e.T <= ws[0].T }):
			// docs/redis.md, Announcing: a replica that decided a park alone
			// and learns the server's own park of the key claims it and
			// announces nothing (it announced its own)
			rep.Excused["adopted over a park decided alone"]++
		case len(ws) == 1 && killedWithin(ws[0].R, ws[0].T, claimGrace):
			rep.Excused["claim winner killed before it announced"]++
		case len(ws) == 0 && run.Claims[v] != "" && holderKilled(recs, v, run.Claims[v], kills):
			// as a winner killed before it announced: the claim the server
			// applied was its, and it died before any of its claims of v
			// was answered (docs/faults.md)
			rep.Excused["claim holder killed before its claim was answered"]++
		case len(ws) == 0 && run.Claims[v] != "":
			rep.violate("%s %d of %q never announced: its claim is held by %s on the server, but no claim of it was answered won (the reply of the claim that won was lost, and its retry did not win)", t.kind, v, t.key, run.Claims[v])
		case len(ws) == 0 && learnersKilled(recs, v, t, killedWithin):
			rep.Excused["every replica that learnt it killed before it claimed"]++
		default:
			rep.violate("%s %d of %q never announced (claims won: %d)", t.kind, v, t.key, len(ws))
		}
	}

	// Budgets: while a key is not parked, the server grants at most Budget
	// restarts of it in any Window since its last resume, and none while
	// it is parked.
	type step struct {
		at    int64
		kind  int // 0 grant, 1 park, 2 resume (a grant at the same time sorts first)
		v     int64
		cause *Record
	}
	steps := map[string][]step{}
	for i := range recs {
		r := &recs[i]
		if r.Op == OpJudge && r.Err == "" && r.Park == 0 && !r.Held {
			steps[r.Key] = append(steps[r.Key], step{at: r.Now, kind: 0, cause: r})
			rep.Granted++
		}
		if r.Op == OpJudge && r.Err != "" {
			rep.Alone++
		}
	}
	for _, v := range versions {
		t := ts[v]
		switch {
		case t.judged || t.written:
			steps[t.key] = append(steps[t.key], step{at: t.at, kind: 1, v: v})
		case t.kind == "resume" && resumedAt[v] != 0:
			steps[t.key] = append(steps[t.key], step{at: resumedAt[v], kind: 2, v: v})
		}
	}
	// A resume applied just before a kill of the server, its reply and
	// its notice lost with the server, is told of by no record (seed 1:
	// resume 59 of "k3", the last write of the AOF before the kill, sent
	// by a call that failed with EOF). Its park stood before the kill and
	// not after the restart, no known resume cleared it, and a resume that
	// named it was sent before the kill by a call in doubt: that resume
	// cleared it (invariant 5), dated as a resume is from its call's start
	// (of the first such call: the earliest it can have been applied).
	for _, f := range run.Faults {
		if f.Kind != FaultRedisKill {
			continue
		}
		for _, p := range f.Before {
			if slices.Contains(f.After, p) || resumedKnown(ts, versions, p) {
				continue
			}
			i := slices.IndexFunc(doubtful, func(r Record) bool {
				return r.Key == p.Key && r.Named == p.Version && r.T < f.Start
			})
			if i >= 0 {
				steps[p.Key] = append(steps[p.Key], step{at: doubtful[i].T, kind: 2})
				rep.ResumedAtKill++
			}
		}
	}
	for key, ss := range steps {
		sort.SliceStable(ss, func(i, j int) bool {
			if ss[i].at != ss[j].at {
				return ss[i].at < ss[j].at
			}
			return ss[i].kind < ss[j].kind
		})
		var parked int64
		var grants []int64
		for _, s := range ss {
			switch s.kind {
			case 1:
				parked = s.v
			case 2:
				parked, grants = 0, nil
			case 0:
				if parked != 0 {
					rep.violate("%s: the server granted a restart of %q at %d while park %d stood", s.cause.R, key, s.at, parked)
				}
				grants = append(grants, s.at)
				n := 0
				for _, g := range grants {
					if g > s.at-int64(run.Window) {
						n++
					}
				}
				if n > run.Budget {
					rep.violate("%s: the server granted restart %d of %q within its window at %d: the budget is %d", s.cause.R, n, key, s.at, run.Budget)
				}
			}
		}
	}

	// A park survives a kill of the server: every park that stood before
	// a redis_kill stands after its restart, unless a resume of it was
	// sent before the kill, or a resume cleared it after the restart,
	// before the parks were read again (seed 13: a replica's resume
	// reached the restarted server before the driver's read). Such a
	// resume found the park standing on the restarted server; it is the
	// key's transition right after the park (the resume checks above hold
	// it named the park), made by a call that started after the kill.
	resumedAfterRestart := func(p Park, f Fault) bool {
		for _, v := range versions {
			if t := ts[v]; v > p.Version && t.key == p.Key {
				// the key's next transition after p: a resume of p, made
				// after the kill and (when the run recorded it) before the read
				at, ok := resumedAt[v]
				return t.kind == "resume" && ok && parkBefore(p.Key, v) == p.Version &&
					at > f.Start && (f.AfterRead == 0 || at < f.AfterRead)
			}
		}
		return false
	}
	for _, f := range run.Faults {
		if f.Kind != FaultRedisKill || len(f.Before) == 0 {
			continue
		}
		rep.KillsWithParks++
		for _, p := range f.Before {
			if slices.Contains(f.After, p) {
				rep.ParksAcrossKill++
				continue
			}
			// a resume refused, or never sent, cleared nothing
			names := func(r Record) bool { return r.Key == p.Key && r.Named == p.Version && r.T < f.Start }
			resumed := slices.ContainsFunc(doubtful, names) || slices.ContainsFunc(recs, func(r Record) bool {
				return r.Op == OpResumeCall && r.Err == "" && names(r)
			})
			if !resumed && resumedAfterRestart(p, f) {
				rep.ParksAcrossKill++
				rep.ResumedAtRestart++
				continue
			}
			if !resumed {
				rep.violate("park %d of %q stood before the redis kill at %d and not after its restart (%v), and no resume of it was sent before the kill or cleared it before the read", p.Version, p.Key, f.Start, f.After)
			}
		}
	}
	// The parks that stand at the end are each its key's last transition.
	for _, p := range run.Final {
		for _, v := range versions {
			if v > p.Version && ts[v].key == p.Key {
				rep.violate("park %d of %q stands at the end, yet version %d (%s) of the key came after it", p.Version, p.Key, v, ts[v].kind)
				break
			}
		}
	}
	return rep
}

// resumedKnown reports whether the key's next transition after the park
// p that a record tells of is a resume (p's, as the checks of resumes
// hold).
func resumedKnown(ts map[int64]*transition, versions []int64, p Park) bool {
	for _, v := range versions {
		if t := ts[v]; v > p.Version && t.key == p.Key {
			return t.kind == "resume"
		}
	}
	return false
}

// learnersKilled reports whether every replica whose records tell of the
// transition v was killed within claimGrace of learning it.
// holderKilled reports whether a process of the replica whose Store holds
// the claim of v (holder, "REPLICA/STORE") knew v (its step made it, or it
// learnt or claimed it), was answered none of its claims of v (each
// failed in doubt, or its call never returned), and was killed: the
// process whose claim the server applied died before it could learn that
// it won.
func holderKilled(recs []Record, v int64, holder string, kills map[string][]Fault) bool {
	replica, _, _ := strings.Cut(holder, "/")
	knew := map[int]int64{} // pid -> when it first knew v
	answered := map[int]bool{}
	last := map[int]int64{} // pid -> its last record
	for _, r := range recs {
		if r.R != replica {
			continue
		}
		last[r.Pid] = max(last[r.Pid], r.T)
		if r.Version != v {
			continue
		}
		if at, ok := knew[r.Pid]; !ok || r.T < at {
			knew[r.Pid] = r.T
		}
		if r.Op == OpClaim && r.Err == "" {
			answered[r.Pid] = true
		}
	}
	for pid, at := range knew {
		if answered[pid] {
			continue
		}
		for _, f := range kills[replica] {
			if f.Start >= at && last[pid] <= f.End {
				return true
			}
		}
	}
	return false
}

func learnersKilled(recs []Record, v int64, t *transition, killedWithin func(string, int64, time.Duration) bool) bool {
	first := map[string]int64{}
	for _, r := range recs {
		if r.Key != t.key || (r.Version != v && r.Park != v) {
			continue
		}
		if _, ok := first[r.R]; !ok {
			first[r.R] = r.T
		}
	}
	if len(first) == 0 {
		return false
	}
	for r, at := range first {
		if !killedWithin(r, at, claimGrace) {
			return false
		}
	}
	return true
}

func isPark(kind string) bool {
	return kind == "agent.startup_exhausted" || kind == "rescue.needs_human" || kind == "channel.crash_loop_tripped"
}

// stalled returns how long the process of the decision d stood still
// (its stall records) while d waited.
func stalled(recs []Record, d *Record) time.Duration {
	var sum int64
	end := d.T + d.Took
	for _, r := range recs {
		if r.Op != OpStall || r.Pid != d.Pid {
			continue
		}
		lo, hi := max(r.T, d.T), min(r.T+r.Took, end)
		if hi > lo {
			sum += hi - lo
		}
	}
	return time.Duration(sum)
}

// doubtfulResumes returns the resume calls that may have been applied
// without their caller knowing, in log order: those that failed in doubt,
// and those sent whose process was killed in the call, which logged no
// OpResumeCall (seed 19: a replica killed 0.5ms after it sent a resume
// the server applied).
func doubtfulResumes(recs []Record) []Record {
	type call struct {
		r, key      string
		pid         int
		named, sent int64
	}
	returned := map[call]bool{}
	for _, r := range recs {
		if r.Op == OpResumeCall {
			returned[call{r.R, r.Key, r.Pid, r.Named, r.T}] = true
		}
	}
	var out []Record
	for _, r := range recs {
		if r.Op == OpResumeCall && r.InDoubt || r.Op == OpResumeSent && !returned[call{r.R, r.Key, r.Pid, r.Named, r.T}] {
			out = append(out, r)
		}
	}
	return out
}
