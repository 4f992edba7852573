package replay_test

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/replay"
)

// Replay a history under two candidates: the defaults park the key after
// its fourth failed start; a budget of ten lets it run on.
func ExampleReplay() {
	history := `time,key,event,code
2024-05-01T10:00:00Z,api,start
2024-05-01T10:00:01Z,api,exit,1
2024-05-01T10:00:02Z,api,start
2024-05-01T10:00:03Z,api,exit,1
2024-05-01T10:00:04Z,api,start
2024-05-01T10:00:05Z,api,exit,1
2024-05-01T10:00:06Z,api,start
2024-05-01T10:00:07Z,api,exit,1
2024-05-01T10:00:08Z,api,start
2024-05-01T10:30:00Z,api,exit,0
`
	wide := crashloop.DefaultSupervisorConfig()
	wide.Budget.MaxRespawns = 10
	res, err := replay.Replay([]replay.Source{{Name: "history.csv", R: strings.NewReader(history)}},
		[]replay.Candidate{{Name: "defaults", Config: crashloop.DefaultSupervisorConfig()}, {Name: "wide", Config: wide}},
		replay.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range res.Reports {
		t := r.Totals
		fmt.Printf("%s: allowed %d, spared %d, parks %d, false parks %d\n", r.Name, t.Allowed, t.Spared, t.Parks, t.FalseParks)
	}
	// Output:
	// defaults: allowed 3, spared 1, parks 1, false parks 1
	// wide: allowed 4, spared 0, parks 0, false parks 0
}

// Read the records of a docker events history one at a time.
func ExampleNewReader() {
	events := `{"Type":"container","Action":"start","Actor":{"ID":"1f","Attributes":{"name":"web"}},"timeNano":1714557600000000000}
{"Type":"container","Action":"die","Actor":{"ID":"1f","Attributes":{"name":"web","exitCode":"137"}},"timeNano":1714557601500000000}
`
	r := replay.NewReader(strings.NewReader(events), "events", replay.FormatAuto)
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		fmt.Println(r.Format(), rec.Time.Format(time.RFC3339Nano), rec.Key, rec.Event, rec.Code, rec.Failed)
	}
	// Output:
	// docker 2024-05-01T10:00:00Z web start 0 false
	// docker 2024-05-01T10:00:01.5Z web exit 137 true
}

// Simulate a program that crashes 10s after every start, under the
// defaults and under kubelet's policy.
func ExampleSimulate() {
	defaults, _ := replay.CandidatePolicy(replay.Candidate{Name: "crashloop", Config: crashloop.DefaultSupervisorConfig()})
	for _, p := range []replay.Policy{defaults, replay.ReferencePolicies()[0]} {
		sim, _ := replay.Simulate(p, replay.Program{CrashAfter: 10 * time.Second}, time.Hour)
		fmt.Printf("%s: %d restarts in 30m, gave up: %v\n", p.Name, sim.Restarts(30*time.Minute), sim.GaveUp)
	}
	// Output:
	// crashloop: 3 restarts in 30m, gave up: true
	// kubelet: 10 restarts in 30m, gave up: false
}

// The table of docs/policies.md, for the reference policies alone.
func ExampleWriteKEPTable() {
	_ = replay.WriteKEPTable(os.Stdout, replay.SimulateKEP(replay.ReferencePolicies()[:2]))
	// Output:
	// | policy | restarts, 10s crasher, first 5m | first 30m | gives up on it after | extra delay after a 30s outage | 5m outage | 1h outage |
	// |---|---:|---:|---:|---:|---:|---:|
	// | kubelet | 5 | 10 | never | 0s | 10s | 10s |
	// | KEP-4603 | 9 | 30 | never | 1s | 3s | 3s |
}

// Draw a replay's timeline as SVG.
func ExampleTimeline_WriteSVG() {
	tl := replay.NewTimeline()
	res, _ := replay.Replay([]replay.Source{{R: strings.NewReader("1714557600,a,start\n1714557601,a,exit,1\n")}},
		[]replay.Candidate{{Config: crashloop.DefaultSupervisorConfig()}}, replay.Options{Timeline: tl})
	var b strings.Builder
	_ = tl.WriteSVG(&b, res.Reports, 40)
	fmt.Println(strings.HasPrefix(b.String(), "<svg "), strings.Contains(b.String(), "(1s), 1 key</text>"))
	// Output: true true
}
