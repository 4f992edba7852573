package crashloop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"
)

// Config files: every config type marshals to and from JSON with snake_case
// keys and durations written as Go duration strings ("60s", "500ms", "20m").
// Unknown keys and bad values are *ConfigError values naming the field path.

// backoffSpec is the JSON form of a curve of this package:
//
//	{"kind": "exponential", "initial": "1s", "factor": 2, "max": "5m", "jitter": "full"}
//
// kind is "linear" (the default) or "exponential"; jitter is "none" (the
// default), "full", "equal" or "decorrelated" (which needs kind exponential
// and ignores factor). An omitted initial or max takes the budget's.
type backoffSpec struct {
	Kind    string
	Initial time.Duration
	Factor  float64
	Max     time.Duration
	Jitter  string
}

func (sp backoffSpec) MarshalJSON() ([]byte, error) {
	m := map[string]any{"kind": sp.Kind, "initial": formatDuration(sp.Initial), "max": formatDuration(sp.Max)}
	if sp.Kind == "exponential" && sp.Jitter != "decorrelated" {
		m["factor"] = sp.Factor
	}
	if sp.Jitter != "" {
		m["jitter"] = sp.Jitter
	}
	return json.Marshal(m)
}

// build turns a spec into a curve; budget fills an omitted initial or max.
func (sp backoffSpec) build(budget BudgetConfig, src RandSource) (Backoff, error) {
	if sp.Initial < 0 {
		sp.Initial = budget.InitialBackoff
	}
	if sp.Max < 0 {
		sp.Max = budget.MaxBackoff
	}
	var b Backoff
	switch sp.Kind {
	case "", "linear":
		if sp.Jitter == "decorrelated" {
			return nil, &ConfigError{Field: "jitter", Value: sp.Jitter, Rule: `"decorrelated" only with kind "exponential"`}
		}
		b = Linear(sp.Initial, sp.Max)
	case "exponential":
		if sp.Factor == 0 {
			sp.Factor = 2
		}
		b = Exponential(sp.Initial, sp.Factor, sp.Max)
	default:
		return nil, &ConfigError{Field: "kind", Value: sp.Kind, Rule: `"linear" or "exponential"`}
	}
	switch sp.Jitter {
	case "", "none":
	case "full":
		b = FullJitter(b, src)
	case "equal":
		b = EqualJitter(b, src)
	case "decorrelated":
		b = DecorrelatedJitter(sp.Initial, sp.Max, src)
	default:
		return nil, &ConfigError{Field: "jitter", Value: sp.Jitter, Rule: `"none", "full", "equal" or "decorrelated"`}
	}
	return b, nil
}

// fieldDecoder decodes one JSON value; path is the field's dotted path.
type fieldDecoder func(raw json.RawMessage, path string) error

// decodeObject decodes a JSON object key by key, rejecting unknown keys.
// Keys are decoded in the order of known (the config's order), so the first
// broken rule reported is the first in the config.
func decodeObject(data []byte, path string, known []string, fields map[string]fieldDecoder) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return &ConfigError{Field: pathOr(path), Value: string(data), Rule: "a JSON object"}
	}
	unknown := make([]string, 0)
	for k := range raw {
		if fields[k] == nil {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		if unknown[0] == "" { // name the object that holds the empty key
			return &ConfigError{Field: pathOr(path), Value: `""`, Rule: "an object without an empty key"}
		}
		return &ConfigError{Field: join(path, unknown[0]), Value: string(raw[unknown[0]]), Rule: "a known setting (unknown key)"}
	}
	for _, k := range known {
		if v, ok := raw[k]; ok {
			if err := fields[k](v, join(path, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func pathOr(path string) string {
	if path == "" {
		return "config"
	}
	return path
}

// unmarshalScalar decodes a setting's value; null is an error, not "keep
// the value" (encoding/json's rule for scalars) nor "zero".
func unmarshalScalar(raw json.RawMessage, dst any) error {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return errNullSetting
	}
	return json.Unmarshal(raw, dst)
}

var errNullSetting = errors.New("null")

func durationField(dst *time.Duration) fieldDecoder {
	return func(raw json.RawMessage, path string) error {
		var s string
		if err := unmarshalScalar(raw, &s); err != nil {
			return &ConfigError{Field: path, Value: string(raw), Rule: `a duration string such as "60s" or "500ms"`}
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return &ConfigError{Field: path, Value: s, Rule: `a duration string such as "60s" or "500ms"`}
		}
		*dst = d
		return nil
	}
}

func intField(dst *int) fieldDecoder {
	return func(raw json.RawMessage, path string) error {
		var f float64
		if err := unmarshalScalar(raw, &f); err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return &ConfigError{Field: path, Value: string(raw), Rule: "a whole number"}
		}
		*dst = int(f)
		return nil
	}
}

func floatField(dst *float64) fieldDecoder {
	return func(raw json.RawMessage, path string) error {
		if err := unmarshalScalar(raw, dst); err != nil {
			return &ConfigError{Field: path, Value: string(raw), Rule: "a number"}
		}
		return nil
	}
}

func boolField(dst *bool) fieldDecoder {
	return func(raw json.RawMessage, path string) error {
		if err := unmarshalScalar(raw, dst); err != nil {
			return &ConfigError{Field: path, Value: string(raw), Rule: "true or false"}
		}
		return nil
	}
}

func stringField(dst *string) fieldDecoder {
	return func(raw json.RawMessage, path string) error {
		if err := unmarshalScalar(raw, dst); err != nil {
			return &ConfigError{Field: path, Value: string(raw), Rule: "a string"}
		}
		return nil
	}
}

// MarshalJSON writes the budget with durations as strings.
func (c BudgetConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"max_respawns": c.MaxRespawns, "window": formatDuration(c.Window),
		"initial_backoff": formatDuration(c.InitialBackoff), "max_backoff": formatDuration(c.MaxBackoff)})
}

// UnmarshalJSON reads a budget; omitted keys keep their current values
// (unmarshal into DefaultBudgetConfig() for defaults).
func (c *BudgetConfig) UnmarshalJSON(data []byte) error { return c.decode(data, "") }

func (c *BudgetConfig) decode(data []byte, path string) error {
	return decodeObject(data, path, []string{"max_respawns", "window", "initial_backoff", "max_backoff"}, map[string]fieldDecoder{
		"max_respawns": intField(&c.MaxRespawns), "window": durationField(&c.Window),
		"initial_backoff": durationField(&c.InitialBackoff), "max_backoff": durationField(&c.MaxBackoff)})
}

// MarshalJSON writes the chain settings with durations as strings.
func (c ChainConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"max_chain": c.MaxChain, "reset_gap": formatDuration(c.ResetGap)})
}

// UnmarshalJSON reads chain settings; omitted keys keep their values.
func (c *ChainConfig) UnmarshalJSON(data []byte) error { return c.decode(data, "") }

func (c *ChainConfig) decode(data []byte, path string) error {
	return decodeObject(data, path, []string{"max_chain", "reset_gap"}, map[string]fieldDecoder{
		"max_chain": intField(&c.MaxChain), "reset_gap": durationField(&c.ResetGap)})
}

// MarshalJSON writes the guard settings with durations as strings.
func (c GuardConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"max_restarts": c.MaxRestarts, "window": formatDuration(c.Window)})
}

// UnmarshalJSON reads guard settings; omitted keys keep their values.
func (c *GuardConfig) UnmarshalJSON(data []byte) error { return c.decode(data, "") }

func (c *GuardConfig) decode(data []byte, path string) error {
	return decodeObject(data, path, []string{"max_restarts", "window"}, map[string]fieldDecoder{
		"max_restarts": intField(&c.MaxRestarts), "window": durationField(&c.Window)})
}

// MarshalJSON writes the fleet settings with durations as strings.
func (c FleetConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"restarts_per_hour": c.RestartsPerHour, "failing_fraction": c.FailingFraction,
		"min_failing": c.MinFailing, "cooldown": formatDuration(c.Cooldown)})
}

// UnmarshalJSON reads fleet settings; omitted keys keep their values.
func (c *FleetConfig) UnmarshalJSON(data []byte) error { return c.decode(data, "") }

func (c *FleetConfig) decode(data []byte, path string) error {
	return decodeObject(data, path, []string{"restarts_per_hour", "failing_fraction", "min_failing", "cooldown"}, map[string]fieldDecoder{
		"restarts_per_hour": intField(&c.RestartsPerHour), "failing_fraction": floatField(&c.FailingFraction),
		"min_failing": intField(&c.MinFailing), "cooldown": durationField(&c.Cooldown)})
}

// decodeBackoff reads a backoff object into a curve.
func decodeBackoff(raw json.RawMessage, path string, budget BudgetConfig) (Backoff, error) {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	sp := backoffSpec{Initial: -1, Max: -1}
	err := decodeObject(raw, path, []string{"kind", "initial", "factor", "max", "jitter"}, map[string]fieldDecoder{
		"kind": stringField(&sp.Kind), "initial": durationField(&sp.Initial), "factor": floatField(&sp.Factor),
		"max": durationField(&sp.Max), "jitter": stringField(&sp.Jitter)})
	if err != nil {
		return nil, err
	}
	b, err := sp.build(budget, nil)
	if err != nil {
		return nil, prefixed(path, err)
	}
	return b, nil
}

// optional decodes a nullable nested config: null turns it off.
func optional[T any](dst **T, def func() T, decode func(*T, []byte, string) error) fieldDecoder {
	return func(raw json.RawMessage, path string) error {
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			*dst = nil
			return nil
		}
		v := def()
		if *dst != nil {
			v = **dst
		}
		if err := decode(&v, raw, path); err != nil {
			return err
		}
		*dst = &v
		return nil
	}
}

// MarshalJSON writes the supervisor's configuration as a config file holds
// it: snake_case keys, durations as strings, null for a guard that is off
// and for the default curve. A Backoff that is not one of this package's
// curves has no JSON form: MarshalJSON returns an error for it.
func (c SupervisorConfig) MarshalJSON() ([]byte, error) {
	var backoff any
	if c.Backoff != nil {
		cv, ok := c.Backoff.(curve)
		if !ok || cv.spec().Kind == "custom" { // a curve of the caller's, perhaps jittered
			return nil, fmt.Errorf("crashloop: backoff %T has no JSON form", c.Backoff)
		}
		backoff = cv.spec()
	}
	return json.Marshal(struct {
		Budget             BudgetConfig `json:"budget"`
		HealthyAfter       string       `json:"healthy_after"`
		Backoff            any          `json:"backoff"`
		Chain              *ChainConfig `json:"chain"`
		Fleet              *FleetConfig `json:"fleet"`
		Guard              *GuardConfig `json:"guard"`
		HourlyCap          int          `json:"hourly_cap"`
		RestartOnCleanExit bool         `json:"restart_on_clean_exit"`
	}{c.Budget, formatDuration(c.HealthyAfter), backoff, c.Chain, c.Fleet, c.Guard, c.HourlyCap, c.RestartOnCleanExit})
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
	var backoffRaw json.RawMessage
	err := decodeObject(data, "", []string{"budget", "healthy_after", "backoff", "chain", "fleet", "guard", "hourly_cap", "restart_on_clean_exit"},
		map[string]fieldDecoder{
			"budget":        func(raw json.RawMessage, path string) error { return c.Budget.decode(raw, path) },
			"healthy_after": durationField(&c.HealthyAfter),
			"backoff": func(raw json.RawMessage, path string) error {
				backoffRaw = raw
				return nil
			},
			"chain":                 optional(&c.Chain, DefaultChainConfig, (*ChainConfig).decode),
			"fleet":                 optional(&c.Fleet, DefaultFleetConfig, (*FleetConfig).decode),
			"guard":                 optional(&c.Guard, DefaultGuardConfig, (*GuardConfig).decode),
			"hourly_cap":            intField(&c.HourlyCap),
			"restart_on_clean_exit": boolField(&c.RestartOnCleanExit),
		})
	if err != nil {
		return err
	}
	if backoffRaw != nil { // after the budget, whose backoffs it may inherit
		b, err := decodeBackoff(backoffRaw, "backoff", c.Budget)
		if err != nil {
			return err
		}
		c.Backoff = b
	}
	return nil
}
