package replay

import (
	"encoding/json"

	"github.com/crashloopguard/crashloop"
)

// The JSON form of Tuned follows crashloop's one schema for JSON
// (docs/schema/tune.json in the repository).

type tunedJSON struct {
	Sources       []sourceJSON  `json:"sources"`
	Records       int           `json:"records"`
	Keys          int           `json:"keys"`
	First         *jsonTime     `json:"first,omitempty"`
	Last          *jsonTime     `json:"last,omitempty"`
	Horizon       jsonDuration  `json:"horizon"`
	SoundRun      jsonDuration  `json:"sound_run"`
	MaxFalseParks int           `json:"max_false_parks"`
	Loops         int           `json:"loops"`
	LoopKeys      int           `json:"loop_keys"`
	LoopFailures  int           `json:"loop_failures"`
	Recovered     int           `json:"recovered"`
	Searched      int           `json:"searched"`
	Invalid       int           `json:"invalid"`
	Recommended   verdictJSON   `json:"recommended"`
	Feasible      bool          `json:"feasible"`
	Effects       []effectJSON  `json:"effects"`
	Front         []verdictJSON `json:"front"`
	Compared      []verdictJSON `json:"compared"`
	NeverPark     verdictJSON   `json:"never_park"`
}

type verdictJSON struct {
	Name        string                      `json:"name"`
	Config      *crashloop.SupervisorConfig `json:"config,omitempty"`
	LoopsParked int                         `json:"loops_parked"`
	Spent       int                         `json:"restarts_spent"`
	ToParkMean  *jsonDuration               `json:"to_park_mean,omitempty"`
	ToParkMax   *jsonDuration               `json:"to_park_max,omitempty"`
	FalseParks  int                         `json:"false_parks"`
	Totals      *measuresJSON               `json:"totals,omitempty"`
}

type effectJSON struct {
	Setting string       `json:"setting"`
	Value   string       `json:"value"`
	Default string       `json:"default"`
	Without *verdictJSON `json:"without,omitempty"`
	Invalid string       `json:"invalid,omitempty"`
}

// verdictOf returns v in its JSON form; the mean and longest time to park
// only when the history has a real crash loop, the configuration and the
// replay's totals only for a policy judged (not for the policy that
// never parks).
func verdictOf(v Verdict, loops int, judged bool) verdictJSON {
	j := verdictJSON{Name: v.Name, LoopsParked: v.LoopsParked, Spent: v.Spent, FalseParks: v.FalseParks}
	if loops > 0 {
		mean, mx := durationOf(v.ToParkMean), durationOf(v.ToParkMax)
		j.ToParkMean, j.ToParkMax = &mean, &mx
	}
	if judged {
		cfg, m := v.Config, measuresOf(v.Totals)
		j.Config, j.Totals = &cfg, &m
	}
	return j
}

// MarshalJSON writes t in crashloop's one schema for JSON
// (docs/schema/tune.json).
func (t Tuned) MarshalJSON() ([]byte, error) {
	doc := tunedJSON{Sources: sourcesOf(t.Sources), Records: t.Records, Keys: t.Keys, First: timeOf(t.First), Last: timeOf(t.Last),
		Horizon: durationOf(t.Horizon), SoundRun: durationOf(t.SoundRun), MaxFalseParks: t.MaxFalseParks, Loops: t.Loops,
		LoopKeys: t.LoopKeys, LoopFailures: t.LoopFailures, Recovered: t.Recovered, Searched: t.Searched, Invalid: t.Invalid,
		Recommended: verdictOf(t.Recommended, t.Loops, true), Feasible: t.Feasible, Effects: []effectJSON{}, Front: []verdictJSON{},
		Compared: []verdictJSON{}, NeverPark: verdictOf(t.NeverPark, t.Loops, false)}
	for _, e := range t.Effects {
		ej := effectJSON{Setting: e.Setting, Value: e.Value, Default: e.Default, Invalid: e.Invalid}
		if e.Invalid == "" {
			w := verdictOf(e.Without, t.Loops, true)
			ej.Without = &w
		}
		doc.Effects = append(doc.Effects, ej)
	}
	for _, v := range t.Front {
		doc.Front = append(doc.Front, verdictOf(v, t.Loops, true))
	}
	for _, v := range t.Compared {
		doc.Compared = append(doc.Compared, verdictOf(v, t.Loops, true))
	}
	return json.Marshal(doc)
}
