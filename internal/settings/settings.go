// Package settings is the table behind every config file of crashloop: a
// config describes each of its settings once (the key a file writes, how
// the value is written and read, and the rule it must follow), and
// marshalling, unmarshalling and validation all read that one table. Keys
// are snake_case, in the order the config lists them; durations are Go
// duration strings ("60s", "500ms", "20m").
package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Error is a setting that breaks its rule. The root package turns it into
// its ConfigError.
type Error struct {
	Field string // the setting as a file names it, e.g. "fleet.cooldown"
	Value any
	Rule  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s = %v: must be %s", e.Field, e.Value, e.Rule) }

// Setting is one named setting of a config.
type Setting struct {
	Name  string
	Value Value
	Rule  func() string // "" when the value follows the rule, else the rule it breaks, e.g. "> 0"
}

// Value is the field behind a setting.
type Value interface {
	Get() any                                      // the value, for an Error
	Encode() any                                   // the value as JSON writes it
	Decode(raw json.RawMessage, path string) error // reads the value; path names it in errors
}

// Of returns the setting name of v, checked by rule (nil: no rule).
func Of(name string, v Value, rule func() string) Setting { return Setting{name, v, rule} }

// Must returns "" when ok holds, else rule.
func Must(ok bool, rule string) string {
	if ok {
		return ""
	}
	return rule
}

// Check returns an *Error for the first setting, in table order, that
// breaks its rule.
func Check(ss []Setting) error {
	for _, s := range ss {
		if s.Rule == nil {
			continue
		}
		if rule := s.Rule(); rule != "" {
			return &Error{Field: s.Name, Value: s.Value.Get(), Rule: rule}
		}
	}
	return nil
}

// Marshal writes a config as one JSON object, keys in table order.
func Marshal(ss []Setting) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(s.Name)
		v, err := json.Marshal(s.Value.Encode())
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

// Decode reads a JSON object into the settings of a config: omitted keys
// keep their values, unknown keys are refused, and keys are read in table
// order so that the first broken rule reported is the first in the config.
// path names the object in errors ("" at the top).
func Decode(data []byte, path string, ss []Setting) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return &Error{Field: pathOr(path), Value: Abbreviate(data), Rule: "a JSON object"}
	}
	var unknown []string
	for k := range raw {
		if !slices.ContainsFunc(ss, func(s Setting) bool { return s.Name == k }) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		if unknown[0] == "" { // name the object that holds the empty key
			return &Error{Field: pathOr(path), Value: `""`, Rule: "an object without an empty key"}
		}
		return &Error{Field: join(path, unknown[0]), Value: Abbreviate(raw[unknown[0]]), Rule: "a known setting (unknown key)"}
	}
	for _, s := range ss {
		if v, ok := raw[s.Name]; ok {
			if err := s.Value.Decode(v, join(path, s.Name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Abbreviate returns a JSON value as text for an error, cut short: an
// error names the value, it does not repeat a whole file.
func Abbreviate(raw []byte) string {
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

// IsNull reports whether raw is JSON null.
func IsNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// Scalar decodes a setting's value; null is an error, not "keep the value"
// (encoding/json's rule for scalars) nor "zero".
func Scalar(raw json.RawMessage, dst any) error {
	if IsNull(raw) {
		return errors.New("null")
	}
	return json.Unmarshal(raw, dst)
}

// FormatDuration writes d the way an operator writes it in a config file or
// reads it in a log line: "500ms", "60s", "20m", "1h". Durations that are not
// a whole number of such units fall back to time.Duration.String.
func FormatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0 && d >= 10*time.Minute:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d%time.Millisecond == 0 && d < time.Second:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	}
	return d.String()
}
