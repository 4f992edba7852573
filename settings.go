package crashloop

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"time"
)

// Config files: every config type marshals to and from JSON with snake_case
// keys, in the order the config lists them, and durations written as Go
// duration strings ("60s", "500ms", "20m"). Each config describes its
// settings once, in a table of setting values: the key a file writes, how
// the value is written and read, and the rule it must follow. Marshalling,
// unmarshalling and validation all read that one table.

// setting is one named setting of a config.
type setting struct {
	name  string
	value settingValue
	rule  func() string // "" when the value follows the rule, else the rule it breaks, e.g. "> 0"
}

// settingValue is the field behind a setting.
type settingValue interface {
	get() any                                      // the value, for a ConfigError
	encode() any                                   // the value as JSON writes it
	decode(raw json.RawMessage, path string) error // reads the value; path names it in errors
}

// must returns "" when ok holds, else rule.
func must(ok bool, rule string) string {
	if ok {
		return ""
	}
	return rule
}

// checkSettings returns a *ConfigError for the first setting, in table
// order, that breaks its rule.
func checkSettings(ss []setting) error {
	for _, s := range ss {
		if s.rule == nil {
			continue
		}
		if rule := s.rule(); rule != "" {
			return &ConfigError{Field: s.name, Value: s.value.get(), Rule: rule}
		}
	}
	return nil
}

// marshalSettings writes a config as one JSON object, keys in table order.
func marshalSettings(ss []setting) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(s.name)
		v, err := json.Marshal(s.value.encode())
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// decodeSettings reads a JSON object into the settings of a config:
// omitted keys keep their values, unknown keys are refused, and keys are
// read in table order so that the first broken rule reported is the first
// in the config. path names the object in errors ("" at the top).
func decodeSettings(data []byte, path string, ss []setting) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return &ConfigError{Field: pathOr(path), Value: abbreviate(data), Rule: "a JSON object"}
	}
	var unknown []string
	for k := range raw {
		if !slices.ContainsFunc(ss, func(s setting) bool { return s.name == k }) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		if unknown[0] == "" { // name the object that holds the empty key
			return &ConfigError{Field: pathOr(path), Value: `""`, Rule: "an object without an empty key"}
		}
		return &ConfigError{Field: join(path, unknown[0]), Value: abbreviate(raw[unknown[0]]), Rule: "a known setting (unknown key)"}
	}
	for _, s := range ss {
		if v, ok := raw[s.name]; ok {
			if err := s.value.decode(v, join(path, s.name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// abbreviate returns a JSON value as text for an error, cut short: an
// error names the value, it does not repeat a whole file.
func abbreviate(raw []byte) string {
	const most = 40
	s := string(bytes.TrimSpace(raw))
	if len(s) > most {
		return s[:most] + "..."
	}
	return s
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

// isNull reports whether raw is JSON null.
func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// unmarshalScalar decodes a setting's value; null is an error, not "keep
// the value" (encoding/json's rule for scalars) nor "zero".
func unmarshalScalar(raw json.RawMessage, dst any) error {
	if isNull(raw) {
		return errors.New("null")
	}
	return json.Unmarshal(raw, dst)
}

// The kinds of setting values.

type durationValue struct{ p *time.Duration }

func (v durationValue) get() any    { return *v.p }
func (v durationValue) encode() any { return formatDuration(*v.p) }
func (v durationValue) decode(raw json.RawMessage, path string) error {
	const rule = `a duration string such as "60s" or "500ms"`
	var s string
	if err := unmarshalScalar(raw, &s); err != nil {
		return &ConfigError{Field: path, Value: abbreviate(raw), Rule: rule}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return &ConfigError{Field: path, Value: s, Rule: rule}
	}
	*v.p = d
	return nil
}

type intValue struct{ p *int }

func (v intValue) get() any    { return *v.p }
func (v intValue) encode() any { return *v.p }
func (v intValue) decode(raw json.RawMessage, path string) error {
	var f float64
	if err := unmarshalScalar(raw, &f); err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return &ConfigError{Field: path, Value: abbreviate(raw), Rule: "a whole number"}
	}
	*v.p = int(f)
	return nil
}

type floatValue struct{ p *float64 }

func (v floatValue) get() any    { return *v.p }
func (v floatValue) encode() any { return *v.p }
func (v floatValue) decode(raw json.RawMessage, path string) error {
	if err := unmarshalScalar(raw, v.p); err != nil {
		return &ConfigError{Field: path, Value: abbreviate(raw), Rule: "a number"}
	}
	return nil
}

type boolValue struct{ p *bool }

func (v boolValue) get() any    { return *v.p }
func (v boolValue) encode() any { return *v.p }
func (v boolValue) decode(raw json.RawMessage, path string) error {
	if err := unmarshalScalar(raw, v.p); err != nil {
		return &ConfigError{Field: path, Value: abbreviate(raw), Rule: "true or false"}
	}
	return nil
}

type stringValue struct{ p *string }

func (v stringValue) get() any    { return *v.p }
func (v stringValue) encode() any { return *v.p }
func (v stringValue) decode(raw json.RawMessage, path string) error {
	if err := unmarshalScalar(raw, v.p); err != nil {
		return &ConfigError{Field: path, Value: abbreviate(raw), Rule: "a string"}
	}
	return nil
}

// optionalValue is a nullable nested config (a guard that may be off): null
// turns it off, an object turns it on, its omitted keys keeping their
// current values, or taking their defaults if it was off.
type optionalValue[T any] struct {
	p     **T
	def   func() T
	table func(*T) []setting
}

func (v optionalValue[T]) get() any { return *v.p }
func (v optionalValue[T]) encode() any {
	if *v.p == nil {
		return nil
	}
	return rawSettings(v.table(*v.p))
}
func (v optionalValue[T]) decode(raw json.RawMessage, path string) error {
	if isNull(raw) {
		*v.p = nil
		return nil
	}
	c := v.def()
	if *v.p != nil {
		c = **v.p
	}
	if err := decodeSettings(raw, path, v.table(&c)); err != nil {
		return err
	}
	*v.p = &c
	return nil
}

// nestedValue is a nested config that is always present.
type nestedValue struct{ table []setting }

func (v nestedValue) get() any    { return nil }
func (v nestedValue) encode() any { return rawSettings(v.table) }
func (v nestedValue) decode(raw json.RawMessage, path string) error {
	return decodeSettings(raw, path, v.table)
}

// rawSettings marshals a table as a nested JSON value.
type rawSettings []setting

func (r rawSettings) MarshalJSON() ([]byte, error) { return marshalSettings(r) }
