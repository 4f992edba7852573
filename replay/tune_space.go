package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/crashloopguard/crashloop"
)

// The search space of Tune. Each list holds the default first, then the
// values in growing distance from it, so that of two candidates equal in
// every measure the one searched first is the nearer to the defaults.
var (
	tuneHealthyAfter = []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour}
	tuneRespawns     = []int{3, 2, 5, 1, 8, 12, 20}
	tuneWindows      = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 3 * time.Hour, 6 * time.Hour}
	tuneChains       = []*crashloop.ChainConfig{{MaxChain: 3, ResetGap: 20 * time.Minute}, nil,
		{MaxChain: 2, ResetGap: time.Hour}, {MaxChain: 5, ResetGap: time.Hour}}
	tuneGuards = []*crashloop.GuardConfig{nil, {MaxRestarts: 3, Window: time.Minute}, {MaxRestarts: 5, Window: 10 * time.Minute}}
	tuneCaps   = []int{0, 10, 5, 20}
	tuneCurves = []func(*crashloop.SupervisorConfig){
		func(c *crashloop.SupervisorConfig) {}, // the budget's linear curve, 500ms to 5s
		func(c *crashloop.SupervisorConfig) {
			c.Budget.InitialBackoff, c.Budget.MaxBackoff = time.Second, 30*time.Second
		},
		func(c *crashloop.SupervisorConfig) {
			c.Budget.InitialBackoff, c.Budget.MaxBackoff = time.Second, 5*time.Minute
			c.Backoff = crashloop.Exponential(time.Second, 2, 5*time.Minute)
		},
	}
)

// tuneDefaults returns the defaults as crashloop runs them for one key:
// without the fleet breaker.
func tuneDefaults() crashloop.SupervisorConfig {
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Fleet = nil
	return cfg
}

// valid reports whether cfg is a configuration a Supervisor takes.
func valid(cfg crashloop.SupervisorConfig) bool {
	_, err := crashloop.NewSupervisor(cfg)
	return err == nil
}

// firstGrid returns the candidates of the search's first step, and how
// many combinations were no valid configuration.
func firstGrid() (cands []Candidate, invalid int) {
	for _, ha := range tuneHealthyAfter {
		for _, n := range tuneRespawns {
			for _, w := range tuneWindows {
				for _, ch := range tuneChains {
					cfg := tuneDefaults()
					cfg.HealthyAfter, cfg.Budget.MaxRespawns, cfg.Budget.Window, cfg.Chain = ha, n, w, clonePtr(ch)
					if !valid(cfg) {
						invalid++
						continue
					}
					cands = append(cands, Candidate{Config: cfg})
				}
			}
		}
	}
	return cands, invalid
}

// secondGrid returns the candidates of the search's second step: each
// seed with each guard, hourly cap and curve but the seed itself (judged
// in the first step), and how many combinations were no valid
// configuration.
func secondGrid(seeds []crashloop.SupervisorConfig) (cands []Candidate, invalid int) {
	for _, seed := range seeds {
		for _, g := range tuneGuards {
			for _, hc := range tuneCaps {
				for i, curve := range tuneCurves {
					if g == nil && hc == 0 && i == 0 {
						continue
					}
					cfg := seed
					cfg.Chain, cfg.Guard, cfg.HourlyCap = clonePtr(seed.Chain), clonePtr(g), hc
					curve(&cfg)
					if !valid(cfg) {
						invalid++
						continue
					}
					cands = append(cands, Candidate{Config: cfg})
				}
			}
		}
	}
	return cands, invalid
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// tuneSetting is a setting Tune searches, as the config file names it.
type tuneSetting struct {
	name  string
	text  func(crashloop.SupervisorConfig) string
	reset func(*crashloop.SupervisorConfig) // to the default
}

var tuneSettings = []tuneSetting{
	{"healthy_after", func(c crashloop.SupervisorConfig) string { return c.HealthyAfter.String() },
		func(c *crashloop.SupervisorConfig) { c.HealthyAfter = tuneDefaults().HealthyAfter }},
	{"budget.max_respawns", func(c crashloop.SupervisorConfig) string { return strconv.Itoa(c.Budget.MaxRespawns) },
		func(c *crashloop.SupervisorConfig) { c.Budget.MaxRespawns = tuneDefaults().Budget.MaxRespawns }},
	{"budget.window", func(c crashloop.SupervisorConfig) string { return c.Budget.Window.String() },
		func(c *crashloop.SupervisorConfig) { c.Budget.Window = tuneDefaults().Budget.Window }},
	{"backoff", curveText, func(c *crashloop.SupervisorConfig) {
		d := tuneDefaults()
		c.Backoff, c.Budget.InitialBackoff, c.Budget.MaxBackoff = d.Backoff, d.Budget.InitialBackoff, d.Budget.MaxBackoff
	}},
	{"chain", func(c crashloop.SupervisorConfig) string {
		if c.Chain == nil {
			return "off"
		}
		return fmt.Sprintf("%d within %v", c.Chain.MaxChain, c.Chain.ResetGap)
	}, func(c *crashloop.SupervisorConfig) { c.Chain = tuneDefaults().Chain }},
	{"guard", func(c crashloop.SupervisorConfig) string {
		if c.Guard == nil {
			return "off"
		}
		return fmt.Sprintf("%d in %v", c.Guard.MaxRestarts, c.Guard.Window)
	}, func(c *crashloop.SupervisorConfig) { c.Guard = nil }},
	{"hourly_cap", func(c crashloop.SupervisorConfig) string {
		if c.HourlyCap == 0 {
			return "off"
		}
		return strconv.Itoa(c.HourlyCap)
	}, func(c *crashloop.SupervisorConfig) { c.HourlyCap = 0 }},
}

// curveText describes the restart curve of c: "linear 500ms to 5s",
// "exponential 1s x2 to 5m0s".
func curveText(c crashloop.SupervisorConfig) string {
	if c.Backoff == nil {
		return fmt.Sprintf("linear %v to %v", c.Budget.InitialBackoff, c.Budget.MaxBackoff)
	}
	var doc struct {
		Backoff struct {
			Kind, Initial, Max, Jitter string
			Factor                     float64
		}
	}
	data, err := json.Marshal(c)
	if err != nil || json.Unmarshal(data, &doc) != nil {
		return fmt.Sprintf("%T", c.Backoff)
	}
	b := doc.Backoff
	text := fmt.Sprintf("%s %s to %s", b.Kind, b.Initial, b.Max)
	if b.Kind == "exponential" {
		text = fmt.Sprintf("%s %s x%g to %s", b.Kind, b.Initial, b.Factor, b.Max)
	}
	if b.Jitter != "" && b.Jitter != "none" {
		text += ", " + b.Jitter + " jitter"
	}
	return text
}

// changed returns the settings in which c differs from the defaults.
func changed(c crashloop.SupervisorConfig) []string {
	d := tuneDefaults()
	var names []string
	for _, s := range tuneSettings {
		if s.text(c) != s.text(d) {
			names = append(names, s.name)
		}
	}
	return names
}

// sameConfig reports whether a and b are the same configuration.
func sameConfig(a, b crashloop.SupervisorConfig) bool {
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && bytes.Equal(ja, jb)
}

// effects judges the recommended policy rec with each setting in which it
// differs from the defaults put back to its default.
func (j *judge) effects(rec crashloop.SupervisorConfig) ([]SettingEffect, error) {
	d := tuneDefaults()
	var effects []SettingEffect
	var cands []Candidate
	var at []int
	for _, s := range tuneSettings {
		if s.text(rec) == s.text(d) {
			continue
		}
		e := SettingEffect{Setting: s.name, Value: s.text(rec), Default: s.text(d)}
		cfg := rec
		cfg.Chain, cfg.Guard = clonePtr(rec.Chain), clonePtr(rec.Guard)
		s.reset(&cfg)
		if _, err := crashloop.NewSupervisor(cfg); err != nil {
			e.Invalid = err.Error()
		} else {
			cands = append(cands, Candidate{Name: "without " + s.name, Config: cfg})
			at = append(at, len(effects))
		}
		effects = append(effects, e)
	}
	if len(cands) == 0 {
		return effects, nil
	}
	j.total.Add(int64(len(cands)))
	vs, err := j.judgeAll(cands)
	if err != nil {
		return nil, err
	}
	for i, v := range vs {
		effects[at[i]].Without = v
	}
	return effects, nil
}
