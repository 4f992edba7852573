package settings

import (
	"encoding/json"
	"math"
	"time"
)

// The kinds of setting values. Each constructor returns the setting name
// of the field at p, checked by rule (nil: no rule).

// Duration is a time.Duration written as a duration string.
func Duration(name string, p *time.Duration, rule func() string) Setting {
	return Setting{name, durationValue{p}, rule}
}

// Int is a whole number.
func Int(name string, p *int, rule func() string) Setting { return Setting{name, intValue{p}, rule} }

// Float is a number.
func Float(name string, p *float64, rule func() string) Setting {
	return Setting{name, floatValue{p}, rule}
}

// Bool is true or false.
func Bool(name string, p *bool, rule func() string) Setting { return Setting{name, boolValue{p}, rule} }

// String is a string.
func String(name string, p *string, rule func() string) Setting {
	return Setting{name, stringValue{p}, rule}
}

// Nested is a nested config that is always present.
func Nested(name string, table []Setting) Setting { return Setting{name, nestedValue{table}, nil} }

// Optional is a nullable nested config (a guard that may be off): null
// turns it off, an object turns it on, its omitted keys keeping their
// current values, or taking def's if it was off.
func Optional[T any](name string, p **T, def func() T, table func(*T) []Setting) Setting {
	return Setting{name, optionalValue[T]{p, def, table}, nil}
}

type durationValue struct{ p *time.Duration }

func (v durationValue) Get() any    { return *v.p }
func (v durationValue) Encode() any { return FormatDuration(*v.p) }
func (v durationValue) Decode(raw json.RawMessage, path string) error {
	const rule = `a duration string such as "60s" or "500ms"`
	var s string
	if err := Scalar(raw, &s); err != nil {
		return &Error{Field: path, Value: Abbreviate(raw), Rule: rule}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return &Error{Field: path, Value: s, Rule: rule}
	}
	*v.p = d
	return nil
}

type intValue struct{ p *int }

func (v intValue) Get() any    { return *v.p }
func (v intValue) Encode() any { return *v.p }
func (v intValue) Decode(raw json.RawMessage, path string) error {
	var f float64
	if err := Scalar(raw, &f); err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return &Error{Field: path, Value: Abbreviate(raw), Rule: "a whole number"}
	}
	*v.p = int(f)
	return nil
}

type floatValue struct{ p *float64 }

func (v floatValue) Get() any    { return *v.p }
func (v floatValue) Encode() any { return *v.p }
func (v floatValue) Decode(raw json.RawMessage, path string) error {
	if err := Scalar(raw, v.p); err != nil {
		return &Error{Field: path, Value: Abbreviate(raw), Rule: "a number"}
	}
	return nil
}

type boolValue struct{ p *bool }

func (v boolValue) Get() any    { return *v.p }
func (v boolValue) Encode() any { return *v.p }
func (v boolValue) Decode(raw json.RawMessage, path string) error {
	if err := Scalar(raw, v.p); err != nil {
		return &Error{Field: path, Value: Abbreviate(raw), Rule: "true or false"}
	}
	return nil
}

type stringValue struct{ p *string }

func (v stringValue) Get() any    { return *v.p }
func (v stringValue) Encode() any { return *v.p }
func (v stringValue) Decode(raw json.RawMessage, path string) error {
	if err := Scalar(raw, v.p); err != nil {
		return &Error{Field: path, Value: Abbreviate(raw), Rule: "a string"}
	}
	return nil
}

type optionalValue[T any] struct {
	p     **T
	def   func() T
	table func(*T) []Setting
}

func (v optionalValue[T]) Get() any { return *v.p }
func (v optionalValue[T]) Encode() any {
	if *v.p == nil {
		return nil
	}
	return rawSettings(v.table(*v.p))
}
func (v optionalValue[T]) Decode(raw json.RawMessage, path string) error {
	if IsNull(raw) {
		*v.p = nil
		return nil
	}
	c := v.def()
	if *v.p != nil {
		c = **v.p
	}
	if err := Decode(raw, path, v.table(&c)); err != nil {
		return err
	}
	*v.p = &c
	return nil
}

type nestedValue struct{ table []Setting }

func (v nestedValue) Get() any    { return nil }
func (v nestedValue) Encode() any { return rawSettings(v.table) }
func (v nestedValue) Decode(raw json.RawMessage, path string) error {
	return Decode(raw, path, v.table)
}

// rawSettings marshals a table as a nested JSON value.
type rawSettings []Setting

func (r rawSettings) MarshalJSON() ([]byte, error) { return Marshal(r) }
