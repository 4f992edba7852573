package crashloop

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/crashloopguard/crashloop/internal/settings"
)

// SupervisorConfig configures a Supervisor. Start from
// DefaultSupervisorConfig; the zero value is not valid. A nil optional
// guard is off. Its JSON form names each field's config key in quotes,
// with durations as strings.
type SupervisorConfig struct {
	// Budget judges failed starts: runs that fail before they were healthy.
	// Always on ("budget"). Default DefaultBudgetConfig().
	Budget BudgetConfig
	// HealthyAfter is how long a run must last to be a healthy start; Ready
	// makes it healthy at once, and 0 leaves that to Ready alone. A healthy
	// run's failure is a rescue, judged by the chain ("healthy_after").
	// Default 10s; >= 0.
	HealthyAfter time.Duration
	// Backoff is the curve of waits between restarts ("backoff"). Default
	// (nil): Linear(Budget.InitialBackoff, Budget.MaxBackoff). A curve of
	// this package too slow to ever fill the budget is rejected.
	Backoff Backoff
	// Chain judges failures after a healthy run, the slow loop ("chain").
	// Default 3 within 20m; nil turns it off.
	Chain *ChainConfig
	// Fleet is the breaker over every key ("fleet"). Default 40 an hour,
	// 0.5 failing, 120s cooldown; nil turns it off.
	Fleet *FleetConfig
	// Guard allows Guard.MaxRestarts restarts of a key in its window,
	// whatever judged them, and parks it on the next ("guard"). Default nil
	// (off); the usual setting is DefaultGuardConfig().
	Guard *GuardConfig
	// HourlyCap allows this many restarts of a key in a rolling hour and
	// parks it on the next ("hourly_cap"). Default 0 (off); >= 0.
	HourlyCap int
	// RestartOnCleanExit restarts fn when it returns nil: a planned restart
	// after a healthy run, a failed start before ("restart_on_clean_exit").
	// Default false: a nil return ends supervision.
	RestartOnCleanExit bool
	// ExitRules decide, first match wins, what a failure that tells how a
	// program ended does; Permanent and Restart keep their mark
	// ("exit_rules"). Default nil.
	ExitRules []ExitRule
	// ProbeAfter > 0 gives a park (not ReasonPermanent's or ReasonNeedsHuman's)
	// a probe start ProbeAfter after it, then 2x, 4x... up to ProbeMax
	// ("probe_after"); a healthy probe (HealthyAfter, Ready) resumes the
	// key. Default 0: a park waits for an operator.
	ProbeAfter time.Duration
	ProbeMax   time.Duration // the longest interval ("probe_max"); default 0: 16 x ProbeAfter, else >= it
}

// DefaultSupervisorConfig returns the defaults: budget 3 respawns in 60s
// with backoff 500ms linear to 5s, HealthyAfter 10s, chain 3 within 20m,
// fleet 40 an hour / 0.5 / 120s, fast guard and hourly cap off, a clean
// exit ends supervision.
func DefaultSupervisorConfig() SupervisorConfig {
	chain, fleet := DefaultChainConfig(), DefaultFleetConfig()
	return SupervisorConfig{Budget: DefaultBudgetConfig(), HealthyAfter: 10 * time.Second, Chain: &chain, Fleet: &fleet}
}

// curveOf returns the effective restart curve.
func (c SupervisorConfig) curveOf() Backoff {
	if c.Backoff != nil {
		return c.Backoff
	}
	return Linear(c.Budget.InitialBackoff, c.Budget.MaxBackoff)
}

func (c *SupervisorConfig) settings() []settings.Setting {
	return []settings.Setting{
		settings.Nested("budget", c.Budget.settings()),
		settings.Duration("healthy_after", &c.HealthyAfter, nil),
		settings.Of("backoff", backoffValue{c}, nil),
		settings.Optional("chain", &c.Chain, DefaultChainConfig, (*ChainConfig).settings),
		settings.Optional("fleet", &c.Fleet, DefaultFleetConfig, (*FleetConfig).settings),
		settings.Optional("guard", &c.Guard, DefaultGuardConfig, (*GuardConfig).settings),
		settings.Int("hourly_cap", &c.HourlyCap, nil),
		settings.Bool("restart_on_clean_exit", &c.RestartOnCleanExit, nil),
		settings.Of("exit_rules", exitRulesValue{&c.ExitRules}, nil),
		settings.Duration("probe_after", &c.ProbeAfter, nil),
		settings.Duration("probe_max", &c.ProbeMax, nil),
	}
}

// validate checks the settings in the order the config lists them, then
// that the budget can park with the curve in force.
func (c SupervisorConfig) validate() error {
	if err := checkSettings(c.Budget.settings()); err != nil {
		return prefixed("budget", err)
	}
	if c.HealthyAfter < 0 {
		return &ConfigError{Field: "healthy_after", Value: c.HealthyAfter, Rule: ">= 0"}
	}
	if cv, ok := c.Backoff.(curve); ok {
		if err := cv.validate(); err != nil {
			return prefixed("backoff", err)
		}
	}
	for _, part := range []struct {
		name string
		ss   []settings.Setting
	}{{"chain", settingsOrNil(c.Chain, (*ChainConfig).settings)}, {"fleet", settingsOrNil(c.Fleet, (*FleetConfig).settings)},
		{"guard", settingsOrNil(c.Guard, (*GuardConfig).settings)}} {
		if err := checkSettings(part.ss); err != nil {
			return prefixed(part.name, err)
		}
	}
	if c.HourlyCap < 0 {
		return &ConfigError{Field: "hourly_cap", Value: c.HourlyCap, Rule: ">= 0 (0: off)"}
	}
	if err := checkExitRules(c.ExitRules); err != nil {
		return err
	}
	if c.Fleet != nil && c.Fleet.SharedCause != nil {
		sc := c.Fleet.SharedCause.withDefaults()
		if err := checkSettings(sc.settings()); err != nil {
			return prefixed("fleet.shared_cause", err)
		}
		if c.HealthyAfter > 0 && sc.ProbeEvery <= c.HealthyAfter { // else each probe is replaced before it can prove healthy
			return &ConfigError{Field: "fleet.shared_cause.probe_every", Value: sc.ProbeEvery, Rule: "> healthy_after"}
		}
	}
	if c.ProbeAfter < 0 {
		return &ConfigError{Field: "probe_after", Value: c.ProbeAfter, Rule: ">= 0 (0: off)"}
	}
	if c.ProbeMax != 0 && c.ProbeMax < c.ProbeAfter {
		return &ConfigError{Field: "probe_max", Value: c.ProbeMax, Rule: ">= probe_after (0: 16 x probe_after)"}
	}

	if sum, ok := worstSum(c.curveOf(), c.Budget.MaxRespawns); ok {
		return checkCanPark("budget.window", c.Budget.Window, c.Budget.MaxRespawns, sum)
	}
	return nil
}

func settingsOrNil[T any](p *T, table func(*T) []settings.Setting) []settings.Setting {
	if p == nil {
		return nil
	}
	return table(p)
}

// backoffValue is the "backoff" setting: a curve of this package in its
// JSON form, null for the default curve.
type backoffValue struct{ c *SupervisorConfig }

func (v backoffValue) Get() any { return v.c.Backoff }
func (v backoffValue) Encode() any {
	if v.c.Backoff == nil {
		return nil
	}
	cv, ok := v.c.Backoff.(curve)
	if !ok || cv.spec().Kind == "custom" { // a curve of the caller's, perhaps jittered
		return unmarshalable{fmt.Errorf("crashloop: backoff %T has no JSON form", v.c.Backoff)}
	}
	return cv.spec()
}
func (v backoffValue) Decode(raw json.RawMessage, path string) error {
	b, err := decodeBackoff(raw, path, v.c.Budget.InitialBackoff, v.c.Budget.MaxBackoff)
	if err != nil {
		return err
	}
	v.c.Backoff = b
	return nil
}

// unmarshalable is a value whose JSON form is an error.
type unmarshalable struct{ err error }

func (u unmarshalable) MarshalJSON() ([]byte, error) { return nil, u.err }

// MarshalJSON writes the supervisor's configuration as a config file holds
// it: the config keys named on each field, in that order, durations as
// strings, null for a guard that is off and for the default curve. A
// Backoff that is not one of this package's curves has no JSON form:
// MarshalJSON returns an error for it.
func (c SupervisorConfig) MarshalJSON() ([]byte, error) {
	b, err := settings.Marshal(c.settings())
	if err != nil {
		var je *json.MarshalerError
		if errors.As(err, &je) {
			return nil, je.Unwrap()
		}
	}
	return b, err
}

// UnmarshalJSON reads a supervisor configuration. Omitted keys keep their
// current values, so unmarshal into DefaultSupervisorConfig() to start from
// the defaults; null turns an optional guard off, an object turns it on
// (its omitted keys keep their current values, or take their defaults if the
// guard was off). "backoff" is {"kind": "linear" (default) or
// "exponential", "initial", "factor" (default 2), "max", "jitter": "none"
// (default), "full", "equal" or "decorrelated" (exponential only)}, whose
// omitted initial and max take the budget's; null means the default curve.
// Unknown keys and bad values are *ConfigError values naming the field path,
// e.g. "guard.window". The result is not validated: NewSupervisor does that.
func (c *SupervisorConfig) UnmarshalJSON(data []byte) error {
	return decodeSettings(data, "", c.settings())
}

// clone returns c with its optional guards copied, so that no pointer is
// shared with the caller.
func (c SupervisorConfig) clone() SupervisorConfig {
	c.Chain, c.Fleet, c.Guard = clonePtr(c.Chain), clonePtr(c.Fleet), clonePtr(c.Guard)
	if c.Fleet != nil {
		c.Fleet.SharedCause = clonePtr(c.Fleet.SharedCause)
	}
	c.ExitRules = slices.Clone(c.ExitRules)
	return c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
