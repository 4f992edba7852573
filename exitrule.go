package crashloop

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/crashloopguard/crashloop/internal/exitmatch"
	"github.com/crashloopguard/crashloop/internal/settings"
)

// ExitRule is a rule of SupervisorConfig.ExitRules, "MATCH=ACTION" as the
// command's --on-exit takes it, such as "78=park". MATCH is exit statuses
// from 1 to 255 ("3", "64-78", "1,2,5-9"), a signal ("SIGSEGV" or "SEGV")
// or "oom"; ACTION is restart (the guards judge it), park (reason
// "permanent_error"), stop (supervision ends with the run's error) or
// planned (a restart at once, no budget spent). docs/supervisor.md tells
// which errors tell how a program ended.
type ExitRule string

// Check returns nil for a valid rule, else a *ConfigError whose Field is
// "exit_rules" and whose Value is the rule.
func (r ExitRule) Check() error {
	if _, _, rule := r.parse(); rule != "" {
		return &ConfigError{Field: "exit_rules", Value: string(r), Rule: rule}
	}
	return nil
}

// exitAction is what an ExitRule does with a run whose end it matches.
type exitAction int

const (
	exitRestart exitAction = iota
	exitPark
	exitStop
	exitPlanned
)

var exitActionNames = [...]string{exitRestart: "restart", exitPark: "park", exitStop: "stop", exitPlanned: "planned"}

// parse splits r into its MATCH and its action, or returns the rule r
// breaks.
func (r ExitRule) parse() (match string, action exitAction, broken string) {
	match, action, broken = r.split()
	if broken == "" {
		broken = exitmatch.Check(match)
	}
	return match, action, broken
}

// split cuts r into its MATCH, unchecked, and its action.
func (r ExitRule) split() (match string, action exitAction, broken string) {
	match, name, ok := strings.Cut(string(r), "=")
	if !ok {
		return "", 0, "MATCH=ACTION, such as 78=park or SIGKILL=stop"
	}
	for a, n := range exitActionNames {
		if name == n {
			return match, exitAction(a), ""
		}
	}
	return "", 0, "an ACTION of restart, park, stop or planned"
}

// exitActionOf returns the action of the first of rules that matches how
// the program ended whose failure err tells of; exitRestart when none does
// or err tells of no program. It allocates nothing.
func exitActionOf(rules []ExitRule, err error) exitAction {
	if len(rules) == 0 || err == nil {
		return exitRestart
	}
	end, ok := exitmatch.EndOf(err)
	if !ok {
		return exitRestart
	}
	for _, r := range rules {
		// checked by NewSupervisor: a MATCH Check rejects matches nothing
		if m, action, broken := r.split(); broken == "" && exitmatch.Matches(m, end) {
			return action
		}
	}
	return exitRestart
}

// checkExitRules returns the *ConfigError of the first rule that is not
// valid.
func checkExitRules(rules []ExitRule) error {
	for _, r := range rules {
		if err := r.Check(); err != nil {
			return err
		}
	}
	return nil
}

// exitRulesValue is the "exit_rules" setting: a list of "MATCH=ACTION"
// strings, [] for none.
type exitRulesValue struct{ p *[]ExitRule }

func (v exitRulesValue) Get() any { return *v.p }
func (v exitRulesValue) Encode() any {
	out := make([]string, len(*v.p))
	for i, r := range *v.p {
		out[i] = string(r)
	}
	return out
}
func (v exitRulesValue) Decode(raw json.RawMessage, path string) error {
	var list []json.RawMessage
	if err := settings.Scalar(raw, &list); err != nil {
		return &ConfigError{Field: path, Value: settings.Abbreviate(raw), Rule: `a list of "MATCH=ACTION" strings such as ["78=park"]`}
	}
	var rules []ExitRule // nil for [], as the default
	for _, item := range list {
		var s string
		if err := settings.Scalar(item, &s); err != nil {
			return &ConfigError{Field: path, Value: settings.Abbreviate(item), Rule: `a "MATCH=ACTION" string such as "78=park"`}
		}
		r := ExitRule(s)
		if err := r.Check(); err != nil {
			ce, _ := errors.AsType[*ConfigError](err)
			return &ConfigError{Field: path, Value: s, Rule: ce.Rule}
		}
		rules = append(rules, r)
	}
	*v.p = rules
	return nil
}
