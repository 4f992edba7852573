//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
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
	for _, name := range overridden {
		if !s.isSet(name) {
			continue
		}
		switch name {
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
		case "chain-gap": // before chain-max, which may turn the chain off
			c := chainOf(cfg)
			c.ResetGap = s.chainGap
			cfg.Chain = &c
		case "chain-max":
			if s.chainMax == 0 {
				cfg.Chain = nil
				continue
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
		case "probe-after":
			cfg.ProbeAfter = s.probeAfter
		case "probe-max":
			cfg.ProbeMax = s.probeMax
		}
	}
	if s.isSet("probe-max") && cfg.ProbeAfter == 0 {
		return cfg, usagef("--probe-max: needs --probe-after (or probe_after in --config): probes are off")
	}
	if s.isSet("on-exit") || s.isSet("permanent-exit-codes") { // the rules of the flags replace the file's
		cfg.ExitRules = s.exitRules
	}
	// A curve of the file has its own initial and max waits: the flags
	// that set the budget's replace those too, as they would without it.
	curveWaits := cfg.Backoff != nil && (s.isSet("initial-backoff") || s.isSet("max-backoff"))
	if s.isSet("backoff") || s.isSet("jitter") || curveWaits {
		if err := s.overrideCurve(&cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// overridden are the flags that replace a setting of --config, in the
// order they apply.
var overridden = []string{"max-respawns", "window", "initial-backoff", "max-backoff", "healthy-after",
	"chain-gap", "chain-max", "guard", "hourly-cap", "restart", "probe-after", "probe-max"}

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
	data, err := readLimited(s.config, maxConfigSize)
	if err != nil {
		return usagef("--config %s: %v", s.config, err)
	}
	if err := json.Unmarshal(data, new(any)); err != nil {
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
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers keep their text, for inFile and max_chain
	s.configDoc = nil
	if err := dec.Decode(&s.configDoc); err != nil {
		return usagef("%s: %v", s.config, err)
	}
	if path := duplicateKey(data); path != "" {
		return usagef("%s: %s: appears twice (the second would silently win)", s.config, path)
	}
	// "max_chain": 0 turns the chain off, as --chain-max 0 does. The
	// chain's other settings are checked all the same.
	chainOff := false
	top, _ := s.configDoc.(map[string]any)
	if chain, ok := top["chain"].(map[string]any); ok {
		if n, ok := chain["max_chain"].(json.Number); ok && n == "0" {
			chainOff = true
			doc := maps.Clone(top)
			c := maps.Clone(chain)
			c["max_chain"] = json.Number("1")
			doc["chain"] = c
			if data, err = json.Marshal(doc); err != nil {
				return err
			}
		}
	}
	if data, err = s.takeTailConfig(data); err != nil {
		return err
	}
	if err := cfg.UnmarshalJSON(data); err != nil {
		return s.explain(err)
	}
	if chainOff {
		cfg.Chain = nil
	}
	return nil
}

// duplicateKey returns the path ("budget.window") of the first key that
// an object of data, a valid JSON document, holds twice; "" if none does.
func duplicateKey(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	var walk func(path string) string
	walk = func(path string) string {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return ""
				}
				k, _ := kt.(string)
				p := k
				if path != "" {
					p = path + "." + k
				}
				if seen[k] {
					return p
				}
				seen[k] = true
				if dup := walk(p); dup != "" {
					return dup
				}
			}
			_, _ = dec.Token()
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if dup := walk(fmt.Sprintf("%s[%d]", path, i)); dup != "" {
					return dup
				}
			}
			_, _ = dec.Token()
		}
		return ""
	}
	return walk("")
}

// takeTailConfig applies the "stderr_tail" object of the --config
// document data ({"lines": N, "bytes": N}, both optional), field by field
// where no flag sets the bound, and returns the document without it, for
// the library, whose configuration has no such setting. A value a flag
// overrides is checked all the same.
func (s *settings) takeTailConfig(data []byte) ([]byte, error) {
	var doc map[string]json.RawMessage
	if json.Unmarshal(data, &doc) != nil || doc["stderr_tail"] == nil {
		return data, nil // the library names what is wrong with a document that is no object
	}
	var tail map[string]json.RawMessage
	if err := json.Unmarshal(doc["stderr_tail"], &tail); err != nil || tail == nil {
		return nil, usagef(`%s: stderr_tail: must be an object such as {"lines": 20, "bytes": 4096}%s`, s.config, shortValue(string(doc["stderr_tail"])))
	}
	for _, k := range slices.Sorted(maps.Keys(tail)) {
		if k != "lines" && k != "bytes" {
			return nil, usagef("%s: stderr_tail.%s: unknown setting (stderr_tail has lines and bytes)", s.config, k)
		}
	}
	fields := []struct {
		name, flag string
		max        int
		p          *int
	}{{"lines", "stderr-tail-lines", math.MaxInt, &s.tailLines}, {"bytes", "stderr-tail-bytes", maxTailBytes, &s.tailBytes}}
	for _, f := range fields {
		raw, ok := tail[f.name]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(string(raw))
		switch {
		case err != nil || !decimal.Match(raw):
			return nil, usagef("%s: stderr_tail.%s: must be a whole number%s", s.config, f.name, shortValue(string(raw)))
		case n < 0 || n > f.max:
			rule := "must be >= 0 (0: off)"
			if f.max != math.MaxInt {
				rule = fmt.Sprintf("must be from 0 (off) to %d", f.max)
			}
			return nil, usagef("%s: stderr_tail.%s: %s (got %d)", s.config, f.name, rule, n)
		}
		if !s.isSet(f.flag) {
			*f.p = n
		}
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
	if _, ok := spec["initial"]; ok && s.isSet("initial-backoff") {
		spec["initial"] = s.initialBackoff.String()
	}
	if _, ok := spec["max"]; ok && s.isSet("max-backoff") {
		spec["max"] = s.maxBackoff.String()
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

// isSet reports whether the flag name was given.
func (s *settings) isSet(name string) bool { return s.fs.isSet(name) }

// fieldFlags maps the settings of a SupervisorConfig (as a *ConfigError
// names them) to the flag that sets them, and the part of the flag's value
// that holds them, if it is not all of it.
var fieldFlags = map[string]struct{ flag, part string }{
	"budget.max_respawns":    {"max-respawns", ""},
	"budget.window":          {"window", ""},
	"budget.initial_backoff": {"initial-backoff", ""},
	"budget.max_backoff":     {"max-backoff", ""},
	"backoff.kind":           {"backoff", ""},
	"backoff.initial":        {"initial-backoff", ""},
	"backoff.max":            {"max-backoff", ""},
	"backoff.jitter":         {"jitter", ""},
	"healthy_after":          {"healthy-after", ""},
	"chain.max_chain":        {"chain-max", ""},
	"chain.reset_gap":        {"chain-gap", ""},
	"guard.max_restarts":     {"guard", "N "},
	"guard.window":           {"guard", "DURATION "},
	"hourly_cap":             {"hourly-cap", ""},
	"probe_after":            {"probe-after", ""},
	"probe_max":              {"probe-max", ""},
}

// ruleFlags rewrites the settings that the library's rules name, in a
// line about a flag, as the flags that set them: "--max-backoff: must be
// >= --initial-backoff (2s)", not ">= initial_backoff".
var ruleFlags = strings.NewReplacer(
	"initial_backoff", "--initial-backoff",
	">= initial (", ">= --initial-backoff (",
	`kind "exponential"`, "--backoff=exponential",
	"probe_after", "--probe-after",
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
	if ce.Rule == "a whole number" && decimal.MatchString(fmt.Sprint(ce.Value)) { // valid, but past an int
		rule = fmt.Sprintf("%v is out of range", ce.Value)
		ce = &crashloop.ConfigError{Field: ce.Field, Rule: ce.Rule}
	}
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
	if v == nil {
		return ""
	}
	text := fmt.Sprint(v)
	if utf8.RuneCountInString(text) > 40 || strings.ContainsAny(text, "\n\r") {
		return ""
	}
	return " (got " + text + ")"
}

// warnSharedCause says that the fleet's hold on a shared cause, which
// --config may set, holds nothing without --redis: one crashloop
// supervises one key, and a hold needs the failures of several keys.
func (s *settings) warnSharedCause(cfg crashloop.SupervisorConfig, log *slog.Logger, key string) {
	if s.redis.url == "" && cfg.Fleet != nil && cfg.Fleet.SharedCause != nil {
		log.Warn(s.config+": fleet.shared_cause needs --redis: one crashloop supervises one key, and a hold needs several keys failing with one cause", "key", key)
	}
}
