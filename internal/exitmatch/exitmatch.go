// Package exitmatch reads the MATCH of an exit rule ("3", "64-78",
// "1,2,5-9", "SIGSEGV" or "SEGV", "oom") and tells whether a program's end
// matches it.
package exitmatch

import (
	"errors"
	"os/exec"
	"strconv"
	"strings"

	"github.com/crashloopguard/crashloop/internal/errtext"
)

// Rule is the rule a MATCH must follow.
const Rule = `a MATCH of exit statuses from 1 to 255 (3, 64-78, 1,2,5-9), a signal (SIGSEGV or SEGV) or oom`

// Check returns "" for a valid MATCH m, else the rule it breaks.
func Check(m string) string {
	switch {
	case m == "":
		return Rule
	case strings.EqualFold(m, "oom"):
		return ""
	case isSignal(m):
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
			return Rule
		}
	}
	if strings.HasSuffix(m, ",") {
		return Rule
	}
	return ""
}

// isSignal reports whether m names a signal (it starts with a letter and
// is not "oom").
func isSignal(m string) bool {
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

// End is how a program ended, as an error tells it.
type End struct {
	Code   int    // the exit status; -1 if a signal killed it
	Signal string // the signal's name without SIG, such as "KILL"; "" if it exited
	OOM    bool   // the kernel's OOM killer killed it
}

// exitCoder is an error that tells a program's exit status, as
// *exec.ExitError does (-1 for a program a signal killed).
type exitCoder interface {
	error
	ExitCode() int
}

// EndOf returns how the program ended whose failure err tells of.
func EndOf(err error) (End, bool) {
	if x, ok := errtext.ExitOf(err); ok {
		if x.Stopped { // the supervisor's doing, not the program's
			return End{}, false
		}
		end := End{Code: -1, Signal: x.Signal, OOM: x.OOMKilled}
		if x.ExitCode != nil {
			end.Code = *x.ExitCode
		}
		return end, true
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok && ee.ProcessState != nil {
		return End{Code: ee.ExitCode(), Signal: signalOf(ee.ProcessState)}, true
	}
	if ec, ok := errors.AsType[exitCoder](err); ok {
		return End{Code: ec.ExitCode()}, true
	}
	return End{}, false
}

// Matches reports whether MATCH m matches end. A MATCH that Check rejects
// matches nothing.
func Matches(m string, end End) bool {
	switch {
	case m == "":
		return false
	case strings.EqualFold(m, "oom"):
		return end.OOM
	case isSignal(m):
		return end.Signal != "" && strings.EqualFold(trimSig(m), end.Signal)
	case end.Code < 1:
		return false
	}
	for rest := m; rest != ""; {
		var part string
		part, rest, _ = strings.Cut(rest, ",")
		if lo, hi, ok := codeRange(part); ok && lo <= end.Code && end.Code <= hi {
			return true
		}
	}
	return false
}
