//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/crashloopguard/crashloop"
)

// configuration builds the supervisor's configuration: the defaults, then
// --config, then the flags that were set. It is not validated yet:
// NewSupervisor does that, and explain names what it rejects.
func (s *settings) configuration() (crashloop.SupervisorConfig, error) {
	cfg := crashloop.DefaultSupervisorConfig()
	if s.config != "" {
		if err := s.readConfig(&cfg); err != nil {
			return cfg, err
		}
	}
	s.fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "max-respawns":
			cfg.Budget.MaxRespawns = s.maxRespawns
		case "window":
			cfg.Budget.Window = s.window
		case "initial-backoff":
			cfg.Budget.InitialBackoff = s.initialBackoff
		case "max-backoff":
			cfg.Budget.MaxBackoff = s.maxBackoff
		case "healthy-after":
			cfg.HealthyAfter = s.healthyAfter
		case "chain-gap": // visited before chain-max, which may turn the chain off
			c := chainOf(cfg)
			c.ResetGap = s.chainGap
			cfg.Chain = &c
		case "chain-max":
			if s.chainMax == 0 {
				cfg.Chain = nil
				return
			}
			c := chainOf(cfg)
			c.MaxChain = s.chainMax
			cfg.Chain = &c
		case "guard":
			cfg.Guard, _ = parseGuard(s.guard) // checked by settings.check
		case "hourly-cap":
			cfg.HourlyCap = s.hourlyCap
		case "restart":
			cfg.RestartOnCleanExit = s.restart == "always"
		}
	})
	if s.isSet("backoff") || s.isSet("jitter") {
		if err := s.overrideCurve(&cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// chainOf returns the chain settings in force, or the defaults if it is off.
func chainOf(cfg crashloop.SupervisorConfig) crashloop.ChainConfig {
	if cfg.Chain != nil {
		return *cfg.Chain
	}
	return crashloop.DefaultChainConfig()
}

// readConfig reads --config over cfg. A JSON syntax error names the file,
// line and column; a rejected setting names the file and the setting. No
// error prints more of the file than the one value at fault.
func (s *settings) readConfig(cfg *crashloop.SupervisorConfig) error {
	data, err := os.ReadFile(s.config)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return usagef("--config %s: %v", s.config, err)
	}
	if err := json.Unmarshal(data, &s.configDoc); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			offset := se.Offset - 1 // the byte at fault
			if se.Error() == "unexpected end of JSON input" {
				offset = int64(len(data)) // no byte: the end
			}
			line, col := position(data, offset)
			return usagef("%s:%d:%d: %v", s.config, line, col, se)
		}
		return usagef("%s: %v", s.config, err)
	}
	if data, err = s.takeTailConfig(data); err != nil {
		return err
	}
	if err := cfg.UnmarshalJSON(data); err != nil {
		return s.explain(err)
	}
	return nil
}

// tailConfig is the "stderr_tail" object of --config: the bounds of the
// stderr tail, as --stderr-tail-lines and --stderr-tail-bytes set them.
type tailConfig struct {
	Lines *int `json:"lines"`
	Bytes *int `json:"bytes"`
}

// takeTailConfig applies the "stderr_tail" object of the --config
// document data, where no flag sets the bound, and returns the document
// without it, for the library, whose configuration has no such setting.
func (s *settings) takeTailConfig(data []byte) ([]byte, error) {
	var doc map[string]json.RawMessage
	if json.Unmarshal(data, &doc) != nil || doc["stderr_tail"] == nil {
		return data, nil // the library names what is wrong with a document that is no object
	}
	var tc tailConfig
	dec := json.NewDecoder(bytes.NewReader(doc["stderr_tail"]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tc); err != nil {
		return nil, usagef("%s: stderr_tail: %v (want {\"lines\": N, \"bytes\": N})", s.config, err)
	}
	switch {
	case tc.Lines != nil && *tc.Lines < 0:
		return nil, usagef("%s: stderr_tail.lines: must be >= 0 (0: off) (got %d)", s.config, *tc.Lines)
	case tc.Bytes != nil && (*tc.Bytes < 0 || *tc.Bytes > maxTailBytes):
		return nil, usagef("%s: stderr_tail.bytes: must be from 0 (off) to %d (got %d)", s.config, maxTailBytes, *tc.Bytes)
	}
	if tc.Lines != nil && !s.isSet("stderr-tail-lines") {
		s.tailLines = *tc.Lines
	}
	if tc.Bytes != nil && !s.isSet("stderr-tail-bytes") {
		s.tailBytes = *tc.Bytes
	}
	delete(doc, "stderr_tail")
	return json.Marshal(doc)
}

// position returns the line and column (counted in characters, from 1) of
// the byte at offset in data.
func position(data []byte, offset int64) (line, col int) {
	before := data[:min(max(offset, 0), int64(len(data)))]
	start := strings.LastIndexByte(string(before), '\n') + 1
	return strings.Count(string(before), "\n") + 1, utf8.RuneCount(before[start:]) + 1
}

// overrideCurve applies --backoff and --jitter, whichever was set, to the
// curve in force (from --config or the default), keeping its other
// settings: --jitter alone does not turn an exponential curve linear. It
// goes through the configuration's JSON form, the one place that knows how
// a curve is written.
func (s *settings) overrideCurve(cfg *crashloop.SupervisorConfig) error {
	data, err := cfg.MarshalJSON()
	if err != nil {
		return err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	spec := map[string]any{}
	if raw := doc["backoff"]; raw != nil && string(raw) != "null" {
		if err := json.Unmarshal(raw, &spec); err != nil {
			return err
		}
	}
	if s.isSet("backoff") {
		spec["kind"] = s.backoff
		if s.backoff == "linear" {
			delete(spec, "factor")
		}
	}
	if s.isSet("jitter") {
		spec["jitter"] = s.jitter
	}
	if doc["backoff"], err = json.Marshal(spec); err != nil {
		return err
	}
	if data, err = json.Marshal(doc); err != nil {
		return err
	}
	next := crashloop.DefaultSupervisorConfig()
	if err := next.UnmarshalJSON(data); err != nil {
		return s.explain(err)
	}
	*cfg = next
	return nil
}

func (s *settings) isSet(name string) bool {
	set := false
	s.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// fieldFlags maps the settings of a SupervisorConfig (as a *ConfigError
// names them) to the flag that sets them, and the part of the flag's value
// that holds them, if it is not all of it.
var fieldFlags = map[string]struct{ flag, part string }{
	"budget.max_respawns":    {"max-respawns", ""},
	"budget.window":          {"window", ""},
	"budget.initial_backoff": {"initial-backoff", ""},
	"budget.max_backoff":     {"max-backoff", ""},
	"backoff.kind":           {"backoff", ""},
	"backoff.jitter":         {"jitter", ""},
	"healthy_after":          {"healthy-after", ""},
	"chain.max_chain":        {"chain-max", ""},
	"chain.reset_gap":        {"chain-gap", ""},
	"guard.max_restarts":     {"guard", "N "},
	"guard.window":           {"guard", "DURATION "},
	"hourly_cap":             {"hourly-cap", ""},
}

// ruleFlags rewrites the settings that the library's rules name, in a
// line about a flag, as the flags that set them: "--max-backoff: must be
// >= --initial-backoff (2s)", not ">= initial_backoff".
var ruleFlags = strings.NewReplacer(
	"initial_backoff", "--initial-backoff",
	`kind "exponential"`, "--backoff=exponential",
)

// explain turns the library's rejection of a setting into one line that
// names where the user wrote it: the flag, if one set it ("--window: must
// be > 0"); else the config file and the setting's path in it; else the
// flag whose default is at fault (a whole-config rule, such as a window
// too short for the backoffs that flags set).
func (s *settings) explain(err error) error {
	var ce *crashloop.ConfigError
	if !errors.As(err, &ce) {
		return usagef("%s", strings.TrimPrefix(err.Error(), "crashloop: "))
	}
	rule := "must be " + ce.Rule
	ff, hasFlag := fieldFlags[ce.Field]
	switch {
	case hasFlag && s.isSet(ff.flag):
		return usagef("--%s: %s%s", ff.flag, ff.part, ruleFlags.Replace(rule))
	case s.config != "" && (s.inFile(ce.Field) || !hasFlag):
		if ce.Field == "config" { // the file is not a JSON object: its value is the whole file
			return usagef("%s: %s", s.config, rule)
		}
		return usagef("%s: %s: %s%s", s.config, ce.Field, rule, shortValue(ce.Value))
	case hasFlag:
		return usagef("--%s (default %s): %s%s", ff.flag, s.fs.Lookup(ff.flag).DefValue, ff.part, ruleFlags.Replace(rule))
	}
	return usagef("%s: %s", ce.Field, rule)
}

// inFile reports whether the config file sets the setting at path, such as
// "budget.window".
func (s *settings) inFile(path string) bool {
	node := s.configDoc
	for _, key := range strings.Split(path, ".") {
		obj, ok := node.(map[string]any)
		if !ok {
			return false
		}
		if node, ok = obj[key]; !ok {
			return false
		}
	}
	return true
}

// shortValue returns " (got VALUE)" for a rejected value short enough to
// quote on one line, and "" for a longer one (a whole object, say).
func shortValue(v any) string {
	text := fmt.Sprint(v)
	if utf8.RuneCountInString(text) > 40 || strings.ContainsAny(text, "\n\r") {
		return ""
	}
	return " (got " + text + ")"
}
