package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/crashloopguard/crashloop"
)

// Candidate is a configuration to replay history under. It is a plain
// value; a zero Config is not valid (NewReplayer rejects it), use
// crashloop.DefaultSupervisorConfig().
type Candidate struct {
	Name   string // the column's name; "" becomes "config N" (from 1)
	Config crashloop.SupervisorConfig
}

// Options tunes a replay. The zero value is the defaults.
type Options struct {
	// Horizon is how long after a park a healthy run in the history makes
	// the park false: the program recovered on its own, without an
	// operator. Default (0): 24h; < 0 is an error.
	Horizon time.Duration
	// Reorder is how far out of time order records of one history may be
	// and still be put in order (journald's clock stepping back, keys
	// interleaved out of order). A record later than that is judged at the
	// latest time already judged, and counted as late. Default (0): 1m;
	// < 0 is an error.
	Reorder time.Duration
	// PermanentCodes are exit statuses that park at once
	// (crashloop.Permanent), like crashloop's --permanent-exit-codes.
	// Default none.
	PermanentCodes []int
	// OnDecision, when set, is called with every decision of every
	// candidate, in time order.
	OnDecision func(Decided)
	// Timeline, when set, collects what WriteSVG draws.
	Timeline *Timeline
	// totalsOnly leaves Report.Keys empty (Tune reads the totals alone).
	totalsOnly bool
}

// Decided is one decision of a candidate during a replay. It is a plain
// value.
type Decided struct {
	Candidate int       // the candidate's index
	Key       string    // the key
	Time      time.Time // when the run ended (the decision's time)
	Run       crashloop.RunResult
	Decision  crashloop.Decision
	Event     string  // the dotted name of the event that announced the decision ("" for a clean exit's stop)
	Logged    *Logged // crashloop's own log: the decision the log recorded; nil otherwise
	// Probe reports that the run judged was a probe of the key's park
	// (probe_after): Decision is the park's, or, once the probe was
	// healthy and resumed the key, the judgment of its run.
	Probe bool
}

// Replayer feeds records through a Supervisor per candidate and measures
// what each would have done. It keeps state per key, never per record.
// Feed it records in time order (Replay does). A Replayer is not safe for
// concurrent use; its zero value is not usable: create one with
// NewReplayer.
type Replayer struct {
	opts    Options
	cands   []*candidate
	keys    map[string]*keyState
	now     time.Time
	first   time.Time
	records int
	late    int
	done    bool
}

// candidate is a Candidate under replay.
type candidate struct {
	Candidate
	sup      *crashloop.Supervisor
	perm     map[int]bool
	event    crashloop.Event // the last non-fleet event the Supervisor announced
	trips    []Trip
	cooldown time.Duration
	check    LogCheck
	holds    []CauseHold
	resumed  string // the key the last decision's probe resumed ("": none)
}

// keyState is what a Replayer knows of one key.
type keyState struct {
	open     bool      // a run is under way
	start    time.Time // its start
	ready    time.Time // when it proved ready; zero: not yet
	lastExit time.Time // when the last run ended; zero: none yet
	resumed  bool      // an operator resumed the key since the history began
	runs     int
	failures int
	restarts int // starts after a run of the key ended
	stops    int // runs an operator stopped
	counted  int // the restarts kubelet counted (restartCount), the most any record said
	inferred int // records whose time was inferred
	pol      []polState
}

// polState is what one candidate did with one key.
type polState struct {
	parked       bool
	parkAt       time.Time
	reason       string
	streak       time.Time // the first failure since the last healthy run; zero: none
	toPark       time.Duration
	parks        int
	needsHuman   int
	allowed      int
	spared       int
	held         int
	wait         time.Duration // the wait of the last restart the candidate allowed
	pending      bool          // a restart allowed and not yet started in the history
	holding      bool          // that restart is held by the fleet breaker
	extra        time.Duration
	delayed      int
	falsePark    bool
	falseParks   int
	recoveredAt  time.Time
	resumedSince bool // an operator resumed the key since the candidate parked it
	probing      bool // the run under way is a probe of the park (probe_after)
	probes       int  // probes of a park the candidate made
	probeResumes int  // parks a healthy probe ended
}

// NewReplayer returns a Replayer for the candidates (one at least), or an
// error naming the candidate and the setting it rejects.
func NewReplayer(cands []Candidate, opts Options) (*Replayer, error) {
	if len(cands) == 0 {
		return nil, errors.New("replay: no candidate configuration")
	}
	if opts.Horizon < 0 {
		return nil, fmt.Errorf("replay: horizon %v: must be >= 0", opts.Horizon)
	}
	if opts.Reorder < 0 {
		return nil, fmt.Errorf("replay: reorder %v: must be >= 0", opts.Reorder)
	}
	if opts.Horizon == 0 {
		opts.Horizon = 24 * time.Hour
	}
	if opts.Reorder == 0 {
		opts.Reorder = time.Minute
	}
	p := &Replayer{opts: opts, keys: make(map[string]*keyState)}
	for i, c := range cands {
		if c.Name == "" {
			c.Name = fmt.Sprintf("config %d", i+1)
		}
		cd := &candidate{Candidate: c, perm: make(map[int]bool)}
		for _, code := range opts.PermanentCodes {
			cd.perm[code] = true
		}
		if c.Config.Fleet != nil {
			cd.cooldown = c.Config.Fleet.Cooldown
		}
		sup, err := crashloop.NewSupervisor(c.Config, crashloop.WithEventHandler(crashloop.EventHandlerFunc(cd.handle)))
		if err != nil {
			return nil, fmt.Errorf("replay: %s: %w", c.Name, err)
		}
		cd.sup = sup
		p.cands = append(p.cands, cd)
	}
	return p, nil
}

// handle keeps what the candidate's Supervisor announces.
func (c *candidate) handle(ev crashloop.Event) {
	switch ev.Kind {
	case crashloop.EventFleetTripped:
		c.trips = append(c.trips, Trip{At: ev.Time, Until: ev.Time.Add(c.cooldown), Reason: ev.Reason})
	case crashloop.EventFleetRearmed:
	case crashloop.EventFleetCauseHeld:
		c.holds = append(c.holds, CauseHold{At: ev.Time, Cause: ev.Cause, Keys: ev.Attempts})
	case crashloop.EventFleetCauseReleased:
		for i := len(c.holds) - 1; i >= 0; i-- {
			if h := &c.holds[i]; h.Cause == ev.Cause && h.Until.IsZero() {
				h.Until, h.Released = ev.Time, ev.Attempts
				break
			}
		}
	case crashloop.EventResumed:
		if ev.Reason == crashloop.ReasonProbe {
			c.resumed = ev.Key
		}
		c.event = ev
	default:
		c.event = ev
	}
}

// Feed judges one record. Records must come in time order: one earlier
// than a record fed before is judged at that record's time (the clock
// stepped back) and counted as late. Feed after Finish does nothing.
func (p *Replayer) Feed(rec Record) {
	if p.done || rec.Key == "" {
		return
	}
	if rec.Time.Before(p.now) {
		rec.Time = p.now
		p.late++
	}
	p.now = rec.Time
	if p.records == 0 {
		p.first = rec.Time
	}
	p.records++
	k := p.keys[rec.Key]
	if k == nil {
		k = &keyState{pol: make([]polState, len(p.cands))}
		p.keys[rec.Key] = k
	}
	k.counted = max(k.counted, rec.Counted)
	if rec.Inferred {
		k.inferred++
	}
	switch rec.Event {
	case Start:
		if k.open { // a start with the last run under way: it ended, unseen, as it restarted
			p.exit(rec.Key, k, Record{Time: rec.Time, Key: rec.Key, Event: Exit, Code: -1, Failed: true, Cause: "restarted before its end was seen"})
		}
		p.start(rec.Key, k, rec.Time)
	case Exit:
		p.exit(rec.Key, k, rec)
	case Stop:
		// An operator ended the run: no failure, no decision; the next
		// start is the operator's, not a restart.
		k.stops++
		k.open, k.ready, k.lastExit = false, time.Time{}, time.Time{}
		for i := range k.pol {
			k.pol[i].pending, k.pol[i].holding = false, false
		}
	case Ready:
		if k.open && k.ready.IsZero() {
			k.ready = rec.Time
		}
	case Resume:
		k.resumed = true
		for i, c := range p.cands {
			ps := &k.pol[i]
			if ps.parked {
				_ = c.sup.ResumeAt(noWait, rec.Key, rec.Time)
				if p.opts.Timeline != nil {
					p.opts.Timeline.resume(i, rec.Key, rec.Time)
				}
				ps.parked, ps.resumedSince, ps.streak, ps.probing = false, true, time.Time{}, false
			}
		}
	}
}

// start begins a run of key at t.
func (p *Replayer) start(key string, k *keyState, t time.Time) {
	restart := !k.lastExit.IsZero()
	k.open, k.start, k.ready = true, t, time.Time{}
	if p.opts.Timeline != nil {
		p.opts.Timeline.start(key, t)
	}
	k.runs++
	if !restart {
		return
	}
	k.restarts++
	gap := t.Sub(k.lastExit)
	for i, c := range p.cands {
		ps := &k.pol[i]
		switch {
		case ps.parked && c.Config.ProbeAfter > 0 && c.sup.ProceedAt(noWait, key, t).Action == crashloop.ActionRestart:
			// The probe was due: the history's next start is the probe.
			ps.probing = true
			ps.probes++
		case ps.parked:
			ps.spared++
		case ps.pending && ps.holding:
			wait := max(ps.wait-gap, 0)
			if d := c.sup.ProceedAt(noWait, key, t); d.Action == crashloop.ActionHold {
				wait = max(wait, d.Wait)
			}
			if wait > 0 {
				ps.extra += wait
				ps.delayed++
			}
		case ps.pending && ps.wait > gap:
			ps.extra += ps.wait - gap
			ps.delayed++
		}
		ps.pending, ps.holding = false, false
	}
}

// exit ends the run of key with rec.
func (p *Replayer) exit(key string, k *keyState, rec Record) {
	r := crashloop.RunResult{Ready: !k.ready.IsZero()}
	if k.open {
		r.Started = k.start
	}
	if rec.Failed {
		k.failures++
		if p.opts.Timeline != nil {
			p.opts.Timeline.fail(key, rec.Time, rec.Code, rec.Cause)
		}
	}
	for i, c := range p.cands {
		ps := &k.pol[i]
		healthy, at := c.healthy(k, rec.Time)
		probe := ps.parked && ps.probing
		ps.probing = false
		if ps.parked && !probe {
			if healthy && !ps.falsePark && !ps.resumedSince && at.Sub(ps.parkAt) <= p.opts.Horizon {
				ps.falsePark, ps.recoveredAt = true, at
				ps.falseParks++
			}
			continue
		}
		if healthy {
			ps.streak = time.Time{}
		}
		if rec.Failed && ps.streak.IsZero() {
			ps.streak = rec.Time
		}
		r.Err = c.errOf(rec)
		c.event, c.resumed = crashloop.Event{}, ""
		d := c.sup.DecideAt(noWait, key, r, rec.Time)
		ev := ""
		if c.event.Kind != 0 {
			ev = c.event.Kind.String()
		}
		failedProbe := probe && c.resumed != key // the key stays parked until the next probe
		if probe && !failedProbe {               // a healthy probe resumed the key, then its run was judged
			ps.parked, ps.streak = false, time.Time{}
			ps.probeResumes++
			if p.opts.Timeline != nil {
				p.opts.Timeline.resume(i, key, rec.Time)
			}
		}
		switch action := d.Action; {
		case failedProbe:
		case action == crashloop.ActionRestart, action == crashloop.ActionHold:
			ps.allowed++
			ps.pending, ps.holding, ps.wait = true, d.Action == crashloop.ActionHold, d.Wait
			if ps.holding {
				ps.held++
			}
		case action == crashloop.ActionStop:
			var pe *crashloop.ParkedError
			if errors.As(d.Err, &pe) {
				ps.parked, ps.parkAt, ps.reason, ps.falsePark, ps.resumedSince = true, rec.Time, pe.Reason, false, false
				if pe.Reason == crashloop.ReasonNeedsHuman {
					ps.needsHuman++
				} else {
					ps.parks++
				}
				if p.opts.Timeline != nil {
					p.opts.Timeline.park(i, key, rec.Time, pe.Reason)
				}
				if !ps.streak.IsZero() {
					ps.toPark = rec.Time.Sub(ps.streak)
				}
			}
		}
		if rec.Logged != nil {
			c.check.compare(key, rec, d, ev)
		}
		if p.opts.OnDecision != nil {
			p.opts.OnDecision(Decided{Candidate: i, Key: key, Time: rec.Time, Run: r, Decision: d, Event: ev, Logged: rec.Logged, Probe: probe})
		}
	}
	k.open, k.ready, k.lastExit = false, time.Time{}, rec.Time
}

// healthy reports whether the run of k that ends (or is still under way)
// at end was healthy by c's rules, and from when.
func (c *candidate) healthy(k *keyState, end time.Time) (bool, time.Time) {
	if !k.open {
		return false, time.Time{}
	}
	ha := c.Config.HealthyAfter
	byTime := ha > 0 && end.Sub(k.start) >= ha
	switch {
	case !k.ready.IsZero() && (!byTime || k.ready.Before(k.start.Add(ha))):
		return true, k.ready
	case byTime:
		return true, k.start.Add(ha)
	}
	return false, time.Time{}
}

// exitError is the failure a replayed run returns. Its ExitCode is the
// record's status (128+N for signal N; -1 unknown), so that the
// configuration's exit rules match it by status; a rule by signal name
// matches no replayed run.
type exitError struct {
	cause string
	code  int
}

func (e *exitError) Error() string { return e.cause }

// ExitCode returns the run's status as the history tells it, -1 unknown.
func (e *exitError) ExitCode() int { return e.code }

// errOf is the error a run that ended with rec returns to c's Supervisor.
func (c *candidate) errOf(rec Record) error {
	if !rec.Failed {
		return nil
	}
	cause := rec.Cause
	if cause == "" {
		cause = "failed"
	}
	err := error(&exitError{cause: cause, code: rec.Code})
	if rec.Permanent || (rec.Code >= 0 && c.perm[rec.Code]) {
		return crashloop.Permanent(err)
	}
	return err
}

// Finish ends the replay at the last record's time (a run still under
// way then is judged healthy or not as it stood) and returns one Report
// per candidate, in their order.
func (p *Replayer) Finish() []Report {
	p.done = true
	reports := make([]Report, len(p.cands))
	keys := make([]string, 0, len(p.keys))
	for key := range p.keys {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for i, c := range p.cands {
		rep := Report{Name: c.Name, Config: c.Config, First: p.first, Last: p.now, Records: p.records, Late: p.late, Log: c.check}
		var toPark []time.Duration
		for _, key := range keys {
			k := p.keys[key]
			ps := &k.pol[i]
			if healthy, _ := c.healthy(k, p.now); ps.parked && ps.probing && healthy {
				ps.parked, ps.probing = false, false // the probe under way is healthy: it resumes the key
				ps.probeResumes++
			}
			if ps.parked && k.open && !ps.falsePark && !ps.resumedSince {
				if healthy, at := c.healthy(k, p.now); healthy && at.Sub(ps.parkAt) <= p.opts.Horizon {
					ps.falsePark, ps.recoveredAt = true, at
					ps.falseParks++
				}
			}
			kr := KeyReport{Key: key, Runs: k.runs, Failures: k.failures, Restarts: k.restarts, Allowed: ps.allowed, Spared: ps.spared,
				Held: ps.held, ExtraDelay: ps.extra, Delayed: ps.delayed, Parks: ps.parks, NeedsHuman: ps.needsHuman, FalseParks: ps.falseParks,
				Stops: k.stops, RestartsCounted: k.counted, RestartsUnseen: max(k.counted-k.restarts, 0), InferredTimes: k.inferred,
				Probes: ps.probes, ProbeResumes: ps.probeResumes}
			if ps.parks+ps.needsHuman > 0 {
				kr.ParkedAt, kr.Reason, kr.ToPark, kr.RecoveredAt = ps.parkAt, ps.reason, ps.toPark, ps.recoveredAt
				kr.StillParked = ps.parked
				toPark = append(toPark, ps.toPark)
			}
			if !p.opts.totalsOnly {
				rep.Keys = append(rep.Keys, kr)
			}
			rep.Totals.add(kr)
		}
		for _, t := range c.trips {
			until := t.Until
			if until.After(p.now) {
				until = p.now
			}
			if until.After(t.At) {
				rep.Totals.FleetHeld += until.Sub(t.At)
			}
		}
		rep.Totals.FleetTrips = len(c.trips)
		rep.Trips = c.trips
		rep.Totals.CauseHolds = len(c.holds)
		rep.CauseHolds = c.holds
		if len(toPark) > 0 {
			slices.Sort(toPark)
			rep.Totals.ToParkMedian = toPark[len(toPark)/2]
			rep.Totals.ToParkMax = toPark[len(toPark)-1]
		}
		reports[i] = rep
	}
	return reports
}

// Trip is a trip of the fleet breaker during a replay. It is a plain value.
type Trip struct {
	At     time.Time // when it tripped
	Until  time.Time // when its cooldown ended (it re-arms then)
	Reason string    // the trip's reason code, as EventFleetTripped says it: crashloop.ReasonFleetRestartRate or crashloop.ReasonFleetFailingFraction
}

// CauseHold is a hold on a shared cause during a replay
// (fleet.shared_cause). It is a plain value.
type CauseHold struct {
	Cause    string    // the normalized cause
	At       time.Time // when it began
	Keys     int       // the keys failing with it then
	Until    time.Time // when a healthy probe released it; zero: held to the end of the history
	Released int       // the keys released then
}

// Measures are what a candidate would have done over a history, or with
// one key. It is a plain value.
type Measures struct {
	Keys     int // keys in the history
	Runs     int // runs (starts) in the history
	Failures int // runs that failed
	Restarts int // restarts in the history: starts after a run of the key ended
	// Allowed counts the restarts the candidate would have allowed: its
	// decisions to restart (or hold, then restart).
	Allowed int
	// Spared counts the restarts of the history the candidate would not
	// have made: starts while it had the key parked.
	Spared     int
	Held       int // restarts the fleet breaker would have held
	Parks      int // parks (budget, guard, hourly cap, permanent)
	NeedsHuman int // escalations of the chain
	// ParkedKeys counts the keys the candidate parked or marked
	// needs-human at least once.
	ParkedKeys int
	// FalseParks counts parks after which the history shows the key
	// running healthy (Ready, or for HealthyAfter) within the horizon,
	// with no operator's resume in between.
	FalseParks int
	// ToParkMedian and ToParkMax are the median and the longest time from
	// the first failure after a healthy run to the park, over the parked
	// keys (their last park).
	ToParkMedian, ToParkMax time.Duration
	// ExtraDelay is how much later the candidate's backoffs (and holds)
	// would have restarted than the history did, summed over the Delayed
	// restarts whose wait was longer than the history's gap.
	ExtraDelay time.Duration
	Delayed    int
	FleetTrips int           // trips of the fleet breaker
	FleetHeld  time.Duration // how long it would have held restarts, all trips together
	// Stops counts the runs an operator stopped (systemctl stop, docker
	// stop, a deleted pod): no failures, and no restarts after them.
	Stops int `json:"stops,omitempty"`
	// RestartsUnseen counts the restarts kubelet counted (a Pod's
	// restartCount) beyond those the history shows: what it cannot show.
	RestartsUnseen int `json:"restarts_unseen,omitempty"`
	// InferredTimes counts the records whose time is inferred: the
	// occurrences of aggregated Kubernetes events.
	InferredTimes int `json:"inferred_times,omitempty"`
	// Probes counts the probes of a park the candidate would have made
	// (probe_after): a start of the history while the key was parked and
	// its probe was due; ProbeResumes the parks a probe's healthy run
	// ended (not false parks: the candidate recovered on its own).
	Probes       int `json:"probes,omitempty"`
	ProbeResumes int `json:"probe_resumes,omitempty"`
	// CauseHolds counts the holds on a shared cause (fleet.shared_cause).
	CauseHolds int `json:"cause_holds,omitempty"`
}

func (m *Measures) add(k KeyReport) {
	m.Keys++
	m.Runs += k.Runs
	m.Failures += k.Failures
	m.Restarts += k.Restarts
	m.Allowed += k.Allowed
	m.Spared += k.Spared
	m.Held += k.Held
	m.Parks += k.Parks
	m.NeedsHuman += k.NeedsHuman
	if k.Parks+k.NeedsHuman > 0 {
		m.ParkedKeys++
	}
	m.FalseParks += k.FalseParks
	m.ExtraDelay += k.ExtraDelay
	m.Delayed += k.Delayed
	m.Stops += k.Stops
	m.RestartsUnseen += k.RestartsUnseen
	m.InferredTimes += k.InferredTimes
	m.Probes += k.Probes
	m.ProbeResumes += k.ProbeResumes
}

// KeyReport is what a candidate would have done with one key. It is a
// plain value.
type KeyReport struct {
	Key        string
	Runs       int
	Failures   int
	Restarts   int
	Allowed    int
	Spared     int
	Held       int
	Parks      int
	NeedsHuman int
	FalseParks int
	ExtraDelay time.Duration
	Delayed    int
	// ParkedAt, Reason and ToPark are those of the last park; zero if the
	// key was never parked. StillParked: at the end of the history.
	ParkedAt    time.Time
	Reason      string
	ToPark      time.Duration
	StillParked bool
	// RecoveredAt is when the key ran healthy again after the last park,
	// on its own, within the horizon (a false park); zero if it did not.
	RecoveredAt time.Time
	// Stops counts the runs an operator stopped.
	Stops int `json:"stops,omitempty"`
	// RestartsCounted is the restarts kubelet counted for the container
	// (restartCount), the most a Pod of the history said; 0 if none did.
	RestartsCounted int `json:"restarts_counted,omitempty"`
	// RestartsUnseen is RestartsCounted beyond the restarts the history
	// shows: restarts that happened and cannot be replayed.
	RestartsUnseen int `json:"restarts_unseen,omitempty"`
	// InferredTimes counts the key's records whose time is inferred.
	InferredTimes int `json:"inferred_times,omitempty"`
	// Probes and ProbeResumes are the key's probes of a park, and the
	// parks they ended.
	Probes       int `json:"probes,omitempty"`
	ProbeResumes int `json:"probe_resumes,omitempty"`
}

// Report is what one candidate would have done over a history. It is a
// plain value.
type Report struct {
	Name    string
	Config  crashloop.SupervisorConfig
	First   time.Time // the first record's time
	Last    time.Time // the last record's time
	Records int       // records judged
	Late    int       // records out of order beyond the reorder window
	Totals  Measures
	Keys    []KeyReport // by key
	Trips   []Trip
	// CauseHolds are the holds on a shared cause, in the order they began.
	CauseHolds []CauseHold
	// Log compares the candidate's decisions with those crashloop's own
	// log recorded (FormatCrashloop only).
	Log LogCheck
}

// LogCheck compares a candidate's decisions with the ones crashloop's own
// log recorded. It is a plain value; zero when the history recorded none.
type LogCheck struct {
	Matched    int
	Mismatched int
	// Mismatches holds the first few mismatches (at most 10).
	Mismatches []Mismatch
}

// Mismatch is a decision of a candidate that differs from the one
// crashloop's own log recorded for the same run's end. It is a plain
// value.
type Mismatch struct {
	Line     int       // the log's line
	Key      string    // the key
	Time     time.Time // the decision's time
	Logged   Logged    // what the log recorded
	Replayed Logged    // what the candidate decided
}

// compare checks d (announced as ev) against the decision rec.Logged.
func (l *LogCheck) compare(key string, rec Record, d crashloop.Decision, ev string) {
	lg := rec.Logged
	ok := ev == lg.Event && d.Action.String() == lg.Action
	if ok && lg.Action != "stop" {
		ok = d.Wait == lg.Wait
	}
	if ok && lg.Action == "stop" { // the log's reason is the park's code
		var pe *crashloop.ParkedError
		ok = errors.As(d.Err, &pe) && pe.Reason == lg.Reason
	}
	if ok {
		l.Matched++
		return
	}
	l.Mismatched++
	if len(l.Mismatches) < 10 {
		replayed := Logged{Event: ev, Action: d.Action.String(), Wait: d.Wait}
		if pe := (*crashloop.ParkedError)(nil); errors.As(d.Err, &pe) {
			replayed.Reason = pe.Reason
		}
		l.Mismatches = append(l.Mismatches, Mismatch{Line: rec.Line, Key: key, Time: rec.Time, Logged: *lg, Replayed: replayed})
	}
}

// noWait is the context of every call on a replay's Supervisors: they keep
// their state in memory, so no call waits and none can be cancelled.
var noWait = context.Background()
