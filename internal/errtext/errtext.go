// Package errtext is the text of the errors of the library and of its
// nested modules: an error restored from the text it was kept as, which
// still matches its sentinel, a failure's cause (its text with numbers,
// addresses and ids normalized), and counted nouns in messages. It imports
// nothing of the library, so that the library itself can use it.
package errtext

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// Restore returns an error restored from text, the Text of an error that
// was kept or sent as text (a snapshot, a shared ledger's record): its
// Error is the error's and, when sentinel is not nil, errors.Is(err,
// sentinel) holds, as it did for the error the text came from. When the
// text kept an Exit, the error is an Exiter that returns it; otherwise, with
// a nil sentinel, it is errors.New(text). It keeps no state and is safe for
// concurrent use; the error it returns is immutable.
func Restore(text string, sentinel error) error {
	if msg, x := splitExit(text); x != nil {
		return &restoredExit{text: msg, sentinel: sentinel, exit: *x}
	}
	if sentinel == nil {
		return errors.New(text)
	}
	return &restored{text: text, sentinel: sentinel}
}

// restored is an error restored from its text that still matches its
// sentinel.
type restored struct {
	text     string
	sentinel error
}

func (e *restored) Error() string        { return e.text }
func (e *restored) Is(target error) bool { return target == e.sentinel }

// Plural writes n and noun, adding an s unless n is 1: "1 respawn", "3
// respawns", "0 starts". It is safe for concurrent use.
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// Exit is how a program ended, kept with the text of the failure that
// tells of it: its exit status, or the signal that killed it, and the last
// lines it wrote on stderr. Its JSON form has the fields exit_code, signal,
// stderr_tail and oom_killed, each omitted when unknown (or false). It is a plain value.
type Exit struct {
	ExitCode   *int   `json:"exit_code,omitempty"`   // the exit status of a program that exited; nil if a signal killed it
	Signal     string `json:"signal,omitempty"`      // the signal that killed it, such as "KILL"; "" if it exited
	StderrTail string `json:"stderr_tail,omitempty"` // the last lines it wrote on stderr, bounded
	OOMKilled  bool   `json:"oom_killed,omitempty"`  // the kernel's OOM killer killed it (Signal is "KILL")
	// Stopped reports that its supervisor stopped it (a watchdog, a failed
	// health check), so that exit rules do not judge it. Text does not
	// keep it.
	Stopped bool `json:"-"`
}

// Exiter is an error that tells how a program ended.
type Exiter interface {
	error
	ProgramExit() Exit
}

// exitMark separates the text of a failure from its Exit in the text Text
// keeps. The Exit follows it as JSON, which holds no NUL byte.
const exitMark = "\x00"

// Text returns the text that keeps err: its Error, followed, when err
// wraps an Exiter, by a NUL byte and the Exit as JSON, which Restore reads
// back. It returns "" for a nil err.
func Text(err error) string {
	if err == nil {
		return ""
	}
	text := err.Error()
	x, ok := errors.AsType[Exiter](err) // allocation-free for an error that is none
	if !ok {
		return text
	}
	data, jerr := json.Marshal(x.ProgramExit())
	if jerr != nil || string(data) == "{}" {
		return text
	}
	return text + exitMark + string(data)
}

// ExitOf returns how the program ended whose failure err tells of, if err
// wraps an Exiter (one of its own or one that Restore restored).
func ExitOf(err error) (Exit, bool) {
	x, ok := errors.AsType[Exiter](err)
	if !ok {
		return Exit{}, false
	}
	return x.ProgramExit(), true
}

// splitExit splits a text that Text wrote into the failure's text and its
// Exit, if it has one.
func splitExit(text string) (string, *Exit) {
	i := strings.LastIndex(text, exitMark)
	if i < 0 || !strings.HasPrefix(text[i+1:], "{") {
		return text, nil
	}
	var x Exit
	if json.Unmarshal([]byte(text[i+1:]), &x) != nil {
		return text, nil
	}
	return text[:i], &x
}

// restoredExit is an error restored from a text that kept an Exit.
type restoredExit struct {
	text     string
	sentinel error // nil: none
	exit     Exit
}

func (e *restoredExit) Error() string        { return e.text }
func (e *restoredExit) Is(target error) bool { return e.sentinel != nil && target == e.sentinel }
func (e *restoredExit) ProgramExit() Exit    { return e.exit }
