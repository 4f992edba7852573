package crashloop

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strconv"
	"strings"

	"github.com/crashloopguard/crashloop/internal/errtext"
)

// ExitAction is what an ExitRule does with a run whose end it matches. Its
// zero value is ExitRestart; String returns the name a rule is written
// with: "restart", "park", "stop" or "planned".
type ExitAction int

// The actions of an ExitRule.
const (
	// ExitRestart: the failure is judged by the guards, as if no rule
	// matched (a failed start by the budget, a crash by the chain).
	ExitRestart ExitAction = iota
	// ExitPark: the key parks at once with reason "permanent_error", as
	// for Permanent(err).
	ExitPark
	// ExitStop: supervision of the key ends without a restart; the
	// Decision (and Run) carries the run's error.
	ExitStop
	// ExitPlanned: the key restarts at once and spends no budget, with
	// reason "planned", as for Restart(err).
	ExitPlanned
)

var exitActionNames = [...]string{ExitRestart: "restart", ExitPark: "park", ExitStop: "stop", ExitPlanned: "planned"}

// String returns the action's name.
func (a ExitAction) String() string {
	if a >= 0 && int(a) < len(exitActionNames) {
		return exitActionNames[a]
	}
	return "ExitAction(" + strconv.Itoa(int(a)) + ")"
}

// ExitRule is a rule of SupervisorConfig.ExitRules: when a run's error
// tells how a program ended (an *exec.ExitError, an error with an
// ExitCode() int method, or the crashloop command's failures) and Match
// matches that end, Action decides what comes next. Match is exit
// statuses from 1 to 255 ("3", "64-78", "1,2,5-9"), a signal that killed
// the program ("SIGSEGV" or "SEGV": a POSIX name, any case), or "oom": the
// kernel's OOM killer killed it (only the crashloop command tells that,
// from its cgroup). A rule is written "MATCH=ACTION", such as "78=park"
// (see ParseExitRule). The zero value is not valid: NewSupervisor rejects
// an empty Match. It is a plain value.
type ExitRule struct {
	Match  string
	Action ExitAction
}

// ParseExitRule reads a rule written "MATCH=ACTION", such as "78=park",
// "1-9,12=restart", "SIGKILL=stop" or "oom=park". A rejected rule is a
// *ConfigError with Field "exit_rules".
func ParseExitRule(s string) (ExitRule, error) {
	match, action, ok := strings.Cut(s, "=")
	if !ok {
		return ExitRule{}, &ConfigError{Field: "exit_rules", Value: s, Rule: "MATCH=ACTION, such as 78=park or SIGKILL=stop"}
	}
	r := ExitRule{Match: match, Action: -1}
	for a, name := range exitActionNames {
		if action == name {
			r.Action = ExitAction(a)
		}
	}
	if r.Action < 0 {
		return ExitRule{}, &ConfigError{Field: "exit_rules", Value: s, Rule: "an ACTION of restart, park, stop or planned"}
	}
	if rule := checkExitMatch(match); rule != "" {
		return ExitRule{}, &ConfigError{Field: "exit_rules", Value: s, Rule: rule}
	}
	return r, nil
}

// String returns the rule as ParseExitRule reads it: "MATCH=ACTION".
func (r ExitRule) String() string { return r.Match + "=" + r.Action.String() }

// MarshalText writes the rule as String does.
func (r ExitRule) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a rule as ParseExitRule does.
func (r *ExitRule) UnmarshalText(text []byte) error {
	v, err := ParseExitRule(string(text))
	if err != nil {
		return err
	}
	*r = v
	return nil
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

// codeRange reads "N" or "LO-HI".
func codeRange(part string) (lo, hi int, ok bool) {
	a, b, isRange := strings.Cut(part, "-")
	lo, err := strconv.Atoi(a)
	if err != nil || !decimalDigits(a) {
		return 0, 0, false
	}
	if !isRange {
		return lo, lo, true
	}
	hi, err = strconv.Atoi(b)
	if err != nil || !decimalDigits(b) {
		return 0, 0, false
	}
	return lo, hi, true
}

// decimalDigits reports whether s is digits only (Atoi takes a sign too).
func decimalDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
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

// matches reports whether the rule's Match matches end. A Match that
// checkExitMatch rejects matches nothing.
func (r *ExitRule) matches(end programEnd) bool {
	m := r.Match
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
// the program ended whose failure err tells of; ExitRestart when none does
// or err tells of no program.
func exitActionOf(rules []ExitRule, err error) ExitAction {
	if len(rules) == 0 || err == nil {
		return ExitRestart
	}
	end, ok := endOf(err)
	if !ok {
		return ExitRestart
	}
	for i := range rules {
		if rules[i].matches(end) {
			return rules[i].Action
		}
	}
	return ExitRestart
}

// checkExitRules returns a *ConfigError for the first rule that is not
// valid: Field "exit_rules", Value the rule.
func checkExitRules(rules []ExitRule) error {
	for _, r := range rules {
		if rule := checkExitMatch(r.Match); rule != "" {
			return &ConfigError{Field: "exit_rules", Value: r.String(), Rule: rule}
		}
		if r.Action < ExitRestart || r.Action > ExitPlanned {
			return &ConfigError{Field: "exit_rules", Value: r.String(), Rule: "an ACTION of restart, park, stop or planned"}
		}
	}
	return nil
}

// exitRulesValue is the "exit_rules" setting: a list of "MATCH=ACTION"
// strings, [] for none.
type exitRulesValue struct{ p *[]ExitRule }

func (v exitRulesValue) get() any { return *v.p }
func (v exitRulesValue) encode() any {
	out := make([]string, len(*v.p))
	for i, r := range *v.p {
		out[i] = r.String()
	}
	return out
}
func (v exitRulesValue) decode(raw json.RawMessage, path string) error {
	var list []json.RawMessage
	if err := unmarshalScalar(raw, &list); err != nil {
		return &ConfigError{Field: path, Value: abbreviate(raw), Rule: `a list of "MATCH=ACTION" strings such as ["78=park"]`}
	}
	var rules []ExitRule // nil for [], as the default
	for _, item := range list {
		var s string
		if err := unmarshalScalar(item, &s); err != nil {
			return &ConfigError{Field: path, Value: abbreviate(item), Rule: `a "MATCH=ACTION" string such as "78=park"`}
		}
		r, err := ParseExitRule(s)
		if err != nil {
			ce, _ := errors.AsType[*ConfigError](err)
			return &ConfigError{Field: path, Value: s, Rule: ce.Rule}
		}
		rules = append(rules, r)
	}
	*v.p = rules
	return nil
}
