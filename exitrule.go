package crashloop

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strconv"
	"strings"

	"github.com/crashloopguard/crashloop/internal/errtext"
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
		broken = checkExitMatch(match)
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

// exitMatchRule is the rule a Match must follow.
const exitMatchRule = `a MATCH of exit statuses from 1 to 255 (3, 64-78, 1,2,5-9), a signal (SIGSEGV or SEGV) or oom`

// checkExitMatch returns "" for a valid Match, else the rule it breaks.
func checkExitMatch(m string) string {
	switch {
	case m == "":
		return exitMatchRule
	case strings.EqualFold(m, "oom"):
		return ""
	case isSignalMatch(m):
		if !knownSignal(trimSig(m)) {
			return "a MATCH naming a POSIX signal such as SIGKILL, SIGSEGV or SEGV"
		}
		return ""
	}
	for rest := m; rest != ""; {
		var part string
		part, rest, _ = strings.Cut(rest, ",")
		lo, hi, ok := codeRange(part)
		if !ok || lo < 1 || hi > 255 || lo > hi {
			return exitMatchRule
		}
	}
	if strings.HasSuffix(m, ",") {
		return exitMatchRule
	}
	return ""
}

// isSignalMatch reports whether m names a signal (it starts with a letter
// and is not "oom").
func isSignalMatch(m string) bool {
	c := m[0] | 0x20
	return c >= 'a' && c <= 'z' && !strings.EqualFold(m, "oom")
}

// trimSig returns a signal's name without its SIG prefix, any case.
func trimSig(m string) string {
	if len(m) > 3 && strings.EqualFold(m[:3], "SIG") {
		return m[3:]
	}
	return m
}

// codeRange reads "N" or "LO-HI" (digits only: no sign).
func codeRange(part string) (lo, hi int, ok bool) {
	a, b, isRange := strings.Cut(part, "-")
	if !isRange {
		b = a
	}
	l, err1 := strconv.ParseUint(a, 10, 8)
	h, err2 := strconv.ParseUint(b, 10, 8)
	return int(l), int(h), err1 == nil && err2 == nil
}

// posixSignals are the signal names a rule may match, without SIG.
var posixSignals = []string{"HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV", "USR2",
	"PIPE", "ALRM", "TERM", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "URG", "XCPU", "XFSZ", "VTALRM", "PROF",
	"WINCH", "IO", "SYS"}

func knownSignal(name string) bool {
	for _, s := range posixSignals {
		if strings.EqualFold(s, name) {
			return true
		}
	}
	return false
}

// programEnd is how a program ended, as an error tells it.
type programEnd struct {
	code   int    // the exit status; -1 if a signal killed it
	signal string // the signal's name without SIG, such as "KILL"; "" if it exited
	oom    bool   // the kernel's OOM killer killed it
}

// exitCoder is an error that tells a program's exit status, as
// *exec.ExitError does (-1 for a program a signal killed).
type exitCoder interface {
	error
	ExitCode() int
}

// endOf returns how the program ended whose failure err tells of.
func endOf(err error) (programEnd, bool) {
	if x, ok := errtext.ExitOf(err); ok {
		if x.Stopped { // the supervisor's doing, not the program's
			return programEnd{}, false
		}
		end := programEnd{code: -1, signal: x.Signal, oom: x.OOMKilled}
		if x.ExitCode != nil {
			end.code = *x.ExitCode
		}
		return end, true
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok && ee.ProcessState != nil {
		return programEnd{code: ee.ExitCode(), signal: signalOf(ee.ProcessState)}, true
	}
	if ec, ok := errors.AsType[exitCoder](err); ok {
		return programEnd{code: ec.ExitCode()}, true
	}
	return programEnd{}, false
}

// exitMatches reports whether MATCH m matches end. A MATCH that
// checkExitMatch rejects matches nothing.
func exitMatches(m string, end programEnd) bool {
	switch {
	case m == "":
		return false
	case strings.EqualFold(m, "oom"):
		return end.oom
	case isSignalMatch(m):
		return end.signal != "" && strings.EqualFold(trimSig(m), end.signal)
	case end.code < 1:
		return false
	}
	for rest := m; rest != ""; {
		var part string
		part, rest, _ = strings.Cut(rest, ",")
		if lo, hi, ok := codeRange(part); ok && lo <= end.code && end.code <= hi {
			return true
		}
	}
	return false
}

// exitActionOf returns the action of the first of rules that matches how
// the program ended whose failure err tells of; exitRestart when none does
// or err tells of no program. It allocates nothing.
func exitActionOf(rules []ExitRule, err error) exitAction {
	if len(rules) == 0 || err == nil {
		return exitRestart
	}
	end, ok := endOf(err)
	if !ok {
		return exitRestart
	}
	for _, r := range rules {
		// checked by NewSupervisor: a MATCH exitMatches cannot read matches nothing
		if m, action, broken := r.split(); broken == "" && exitMatches(m, end) {
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
