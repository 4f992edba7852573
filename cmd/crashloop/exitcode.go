//go:build unix

package main

import (
	"fmt"
	"go/doc/comment"
	"io"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Exit statuses of crashloop itself; exitStatuses says when each is used.
// Otherwise crashloop exits with the status of the program that ended
// supervision, as a shell does.
const (
	exitError      = 1
	exitUsage      = 2
	exitRunning    = 75 // EX_TEMPFAIL
	exitParked     = 86
	exitCannotExec = 126
	exitNotFound   = 127
)

// programsStatus stands in exitStatuses for the status of the program.
const programsStatus = -1

// exitStatuses is the one list of crashloop's exit statuses and when each
// is used, in the order they are shown: --help prints it (printExitStatuses),
// and the table of docs/cli.md is this list row for row, which a test
// checks. In when, backticks quote what the user types, as in Markdown.
var exitStatuses = []struct {
	code int
	when string
}{
	{programsStatus, "the program ended supervision: it exited 0 (without `--restart=always`), an `--on-exit` stop rule matched its end, or crashloop was stopped by INT or TERM; 128+N when signal N killed it (143 for TERM, 137 for KILL)"},
	{0, "with `--on-park wait`, crashloop was stopped by INT or TERM while the program was parked (the park stays in `--state` or on Redis)"},
	{exitError, "an error of crashloop itself (a park it could not record in `--state`, a missing state file for `status` or `resume`, resume of a key that is not parked, an address it cannot bind…)"},
	{exitUsage, "bad usage, flags or configuration (an unknown command, an empty, padded or out-of-range value, a malformed config or state file, a missing `--state` folder)"},
	{exitRunning, "another crashloop supervises this `--key` with this `--state` (`EX_TEMPFAIL`: try again once it has ended)"},
	{exitParked, "a guard gave up, or `--state` or `--redis` says the program is parked"},
	{exitCannotExec, "the program was found but cannot be executed (permission denied, a folder, a bad format)"},
	{exitNotFound, "the program cannot be found"},
}

// exitStatusName returns how the exit statuses are listed: "the program's"
// for programsStatus, otherwise the number.
func exitStatusName(code int) string {
	if code == programsStatus {
		return "the program's"
	}
	return strconv.Itoa(code)
}

// printExitStatuses writes exitStatuses for --help: each status, then when
// it is used, without the backticks, wrapped by go/doc/comment's printer in
// a column of its own (a status too wide for its column gets a line).
func printExitStatuses(w io.Writer) {
	const indent = "       "
	fmt.Fprintln(w, "Exit status:")
	var p comment.Parser
	pr := &comment.Printer{TextPrefix: indent, TextWidth: 70}
	for _, st := range exitStatuses {
		when := string(pr.Text(p.Parse(strings.ReplaceAll(st.when, "`", ""))))
		if name := "  " + exitStatusName(st.code); len(name) < len(indent)-1 {
			when = name + when[len(name):]
		} else {
			when = name + "\n" + when
		}
		fmt.Fprint(w, when)
	}
}

// failure ends crashloop with code after printing msg as one line.
type failure struct {
	code int
	msg  string
}

func (f *failure) Error() string { return f.msg }

// fail returns a *failure with code and a formatted message.
func fail(code int, format string, args ...any) error {
	return &failure{code: code, msg: fmt.Sprintf(format, args...)}
}

// usagef returns bad input: one line and exit status 2.
func usagef(format string, args ...any) error { return fail(exitUsage, format, args...) }

// exitStatus turns the wait status of a process into the status a shell
// reports (128+N for signal N) and a description such as "exited with
// status 1" or "killed by signal TERM".
func exitStatus(ws syscall.WaitStatus) (int, string) {
	if ws.Signaled() {
		return 128 + int(ws.Signal()), "killed by signal " + signalName(ws.Signal())
	}
	return ws.ExitStatus(), "exited with status " + strconv.Itoa(ws.ExitStatus())
}

// signalName returns the short name of sig that kill -l prints, such as
// "TERM", or its number when it has none (a real-time signal).
func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return strings.TrimPrefix(name, "SIG")
	}
	return strconv.Itoa(int(sig))
}
