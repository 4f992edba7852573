package replay

import (
	"encoding/json"
	"time"

	"github.com/crashloopguard/crashloop"
)

// The JSON form of a Result follows crashloop's one schema for JSON
// (docs/schema/replay.json in the repository): snake_case names, durations
// as Go duration strings, times as RFC 3339 in UTC with nine fractional
// digits, absent values left out, and codes (event names, actions, reason
// codes) where a person would read a sentence.

// timeLayout is RFC 3339 with nine fractional digits.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// jsonTime is a time that marshals as timeLayout in UTC, and is left out
// (with omitempty, as a nil pointer) when zero.
type jsonTime string

func timeOf(t time.Time) *jsonTime {
	if t.IsZero() {
		return nil
	}
	s := jsonTime(t.UTC().Format(timeLayout))
	return &s
}

// jsonDuration is a duration as a Go duration string.
type jsonDuration string

func durationOf(d time.Duration) jsonDuration { return jsonDuration(d.String()) }

type resultJSON struct {
	Sources []sourceJSON `json:"sources"`
	Reports []reportJSON `json:"reports"`
}

type sourceJSON struct {
	Name      string `json:"name"`
	Format    string `json:"format"`
	Lines     int    `json:"lines"`
	Records   int    `json:"records"`
	Malformed int    `json:"malformed"`
	// OtherLines counts the lines of another writer interleaved with the
	// records (a program's stderr in crashloop's own log).
	OtherLines int             `json:"other_lines,omitempty"`
	Errors     []lineErrorJSON `json:"errors,omitempty"`
}

type lineErrorJSON struct {
	Line  int    `json:"line"`
	Error string `json:"error"`
}

type reportJSON struct {
	Name    string                     `json:"name"`
	Config  crashloop.SupervisorConfig `json:"config"`
	First   *jsonTime                  `json:"first,omitempty"`
	Last    *jsonTime                  `json:"last,omitempty"`
	Records int                        `json:"records"`
	Late    int                        `json:"late"`
	Totals  measuresJSON               `json:"totals"`
	Keys    []keyJSON                  `json:"keys"`
	Trips   []tripJSON                 `json:"trips,omitempty"`
	Causes  []causeHoldJSON            `json:"cause_holds,omitempty"`
	Log     *logCheckJSON              `json:"log,omitempty"`
}

type measuresJSON struct {
	Keys         int           `json:"keys"`
	Runs         int           `json:"runs"`
	Failures     int           `json:"failures"`
	Restarts     int           `json:"restarts"`
	Allowed      int           `json:"allowed"`
	Spared       int           `json:"spared"`
	Held         int           `json:"held"`
	Parks        int           `json:"parks"`
	NeedsHuman   int           `json:"needs_human"`
	ParkedKeys   int           `json:"parked_keys"`
	FalseParks   int           `json:"false_parks"`
	ToParkMedian *jsonDuration `json:"to_park_median,omitempty"`
	ToParkMax    *jsonDuration `json:"to_park_max,omitempty"`
	ExtraDelay   jsonDuration  `json:"extra_delay"`
	Delayed      int           `json:"delayed"`
	FleetTrips   int           `json:"fleet_trips"`
	FleetHeld    jsonDuration  `json:"fleet_held"`
	// What the history cannot show: runs an operator stopped, restarts
	// kubelet counted beyond the runs seen, records whose time is
	// inferred.
	Stops          int `json:"stops,omitempty"`
	RestartsUnseen int `json:"restarts_unseen,omitempty"`
	InferredTimes  int `json:"inferred_times,omitempty"`
	// What probe_after and fleet.shared_cause did, when they did.
	Probes       int `json:"probes,omitempty"`
	ProbeResumes int `json:"probe_resumes,omitempty"`
	CauseHolds   int `json:"cause_holds,omitempty"`
}

type keyJSON struct {
	Key        string        `json:"key"`
	Runs       int           `json:"runs"`
	Failures   int           `json:"failures"`
	Restarts   int           `json:"restarts"`
	Allowed    int           `json:"allowed"`
	Spared     int           `json:"spared"`
	Held       int           `json:"held"`
	Parks      int           `json:"parks"`
	NeedsHuman int           `json:"needs_human"`
	FalseParks int           `json:"false_parks"`
	ExtraDelay jsonDuration  `json:"extra_delay"`
	Delayed    int           `json:"delayed"`
	LastPark   *lastParkJSON `json:"last_park,omitempty"`
	// What the history cannot show, as in measuresJSON; RestartsCounted is
	// the restarts kubelet counted for the container.
	Stops           int `json:"stops,omitempty"`
	RestartsCounted int `json:"restarts_counted,omitempty"`
	RestartsUnseen  int `json:"restarts_unseen,omitempty"`
	InferredTimes   int `json:"inferred_times,omitempty"`
	Probes          int `json:"probes,omitempty"`
	ProbeResumes    int `json:"probe_resumes,omitempty"`
}

// lastParkJSON is the last park of a key in a replay: its reason code,
// when, how long after the first failure, whether it lasted to the end of
// the history, and when the key ran healthy again on its own (a false
// park).
type lastParkJSON struct {
	Reason      string       `json:"reason"`
	Since       *jsonTime    `json:"since"`
	ToPark      jsonDuration `json:"to_park"`
	StillParked bool         `json:"still_parked"`
	RecoveredAt *jsonTime    `json:"recovered_at,omitempty"`
}

// causeHoldJSON is a hold on a shared cause: the cause, when it began
// and with how many keys, and when a probe released it and how many keys
// (absent: held to the end of the history).
type causeHoldJSON struct {
	Cause    string    `json:"cause"`
	At       *jsonTime `json:"at"`
	Keys     int       `json:"keys"`
	Until    *jsonTime `json:"until,omitempty"`
	Released int       `json:"released,omitempty"`
}

type tripJSON struct {
	At     *jsonTime `json:"at"`
	Until  *jsonTime `json:"until"`
	Reason string    `json:"reason"`
}

type logCheckJSON struct {
	Matched    int            `json:"matched"`
	Mismatched int            `json:"mismatched"`
	Mismatches []mismatchJSON `json:"mismatches,omitempty"`
}

type mismatchJSON struct {
	Line     int          `json:"line"`
	Key      string       `json:"key"`
	Time     *jsonTime    `json:"time"`
	Logged   decisionJSON `json:"logged"`
	Replayed decisionJSON `json:"replayed"`
}

// decisionJSON is a decision: the event that announced it ("" for none),
// the action, the wait of a restart or hold, the reason code of a stop.
type decisionJSON struct {
	Event  string        `json:"event,omitempty"`
	Action string        `json:"action"`
	Wait   *jsonDuration `json:"wait,omitempty"`
	Reason string        `json:"reason,omitempty"`
}

func decisionOf(l Logged) decisionJSON {
	d := decisionJSON{Event: l.Event, Action: l.Action, Reason: l.Reason}
	if l.Action != "stop" {
		w := durationOf(l.Wait)
		d.Wait = &w
	}
	return d
}

func measuresOf(m Measures) measuresJSON {
	j := measuresJSON{Keys: m.Keys, Runs: m.Runs, Failures: m.Failures, Restarts: m.Restarts, Allowed: m.Allowed, Spared: m.Spared,
		Held: m.Held, Parks: m.Parks, NeedsHuman: m.NeedsHuman, ParkedKeys: m.ParkedKeys, FalseParks: m.FalseParks,
		ExtraDelay: durationOf(m.ExtraDelay), Delayed: m.Delayed, FleetTrips: m.FleetTrips, FleetHeld: durationOf(m.FleetHeld),
		Stops: m.Stops, RestartsUnseen: m.RestartsUnseen, InferredTimes: m.InferredTimes,
		Probes: m.Probes, ProbeResumes: m.ProbeResumes, CauseHolds: m.CauseHolds}
	if m.ParkedKeys > 0 {
		med, mx := durationOf(m.ToParkMedian), durationOf(m.ToParkMax)
		j.ToParkMedian, j.ToParkMax = &med, &mx
	}
	return j
}

// MarshalJSON writes the Result in crashloop's one schema for JSON
// (docs/schema/replay.json).
func (r Result) MarshalJSON() ([]byte, error) {
	doc := resultJSON{Reports: []reportJSON{}}
	doc.Sources = sourcesOf(r.Sources)
	for _, rep := range r.Reports {
		rj := reportJSON{Name: rep.Name, Config: rep.Config, First: timeOf(rep.First), Last: timeOf(rep.Last), Records: rep.Records,
			Late: rep.Late, Totals: measuresOf(rep.Totals), Keys: []keyJSON{}}
		for _, k := range rep.Keys {
			kj := keyJSON{Key: k.Key, Runs: k.Runs, Failures: k.Failures, Restarts: k.Restarts, Allowed: k.Allowed, Spared: k.Spared,
				Held: k.Held, Parks: k.Parks, NeedsHuman: k.NeedsHuman, FalseParks: k.FalseParks, ExtraDelay: durationOf(k.ExtraDelay), Delayed: k.Delayed,
				Stops: k.Stops, RestartsCounted: k.RestartsCounted, RestartsUnseen: k.RestartsUnseen, InferredTimes: k.InferredTimes,
				Probes: k.Probes, ProbeResumes: k.ProbeResumes}
			if k.Parks+k.NeedsHuman > 0 {
				kj.LastPark = &lastParkJSON{Reason: k.Reason, Since: timeOf(k.ParkedAt), ToPark: durationOf(k.ToPark), StillParked: k.StillParked,
					RecoveredAt: timeOf(k.RecoveredAt)}
			}
			rj.Keys = append(rj.Keys, kj)
		}
		for _, t := range rep.Trips {
			rj.Trips = append(rj.Trips, tripJSON{At: timeOf(t.At), Until: timeOf(t.Until), Reason: t.Reason})
		}
		for _, h := range rep.CauseHolds {
			rj.Causes = append(rj.Causes, causeHoldJSON{Cause: h.Cause, At: timeOf(h.At), Keys: h.Keys, Until: timeOf(h.Until), Released: h.Released})
		}
		if rep.Log.Matched+rep.Log.Mismatched > 0 {
			lj := &logCheckJSON{Matched: rep.Log.Matched, Mismatched: rep.Log.Mismatched}
			for _, m := range rep.Log.Mismatches {
				lj.Mismatches = append(lj.Mismatches, mismatchJSON{Line: m.Line, Key: m.Key, Time: timeOf(m.Time),
					Logged: decisionOf(m.Logged), Replayed: decisionOf(m.Replayed)})
			}
			rj.Log = lj
		}
		doc.Reports = append(doc.Reports, rj)
	}
	return json.Marshal(doc)
}

// sourcesOf returns what was read from each source in its JSON form.
func sourcesOf(sources []SourceResult) []sourceJSON {
	out := []sourceJSON{}
	for _, s := range sources {
		sj := sourceJSON{Name: s.Name, Format: s.Format.String(), Lines: s.Lines, Records: s.Records, Malformed: s.Malformed,
			OtherLines: s.Other}
		for _, e := range s.Errors {
			sj.Errors = append(sj.Errors, lineErrorJSON{Line: e.Line, Error: e.Err.Error()})
		}
		out = append(out, sj)
	}
	return out
}
