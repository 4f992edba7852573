//go:build unix

// Command crashloop supervises any program with the crashloop library: it
// restarts the program when it fails, waits a backoff between starts, and
// stops for good (parks it) when a guard decides it is crash-looping,
// instead of restarting it all night.
//
// Usage:
//
//	crashloop [flags] -- PROGRAM [ARGS...]
//	crashloop status --state FILE | --redis URL [--json]
//	crashloop resume --state FILE | --redis URL [KEY]
//	crashloop replay [--config FILE]... HISTORY...
//	crashloop simulate [--config FILE]... [--crash-after D] [--outage D] [--json]
//	crashloop tune [--config FILE]... [--write FILE] [--json] HISTORY...
//	crashloop help [TOPIC]
//	crashloop --version
//
// Each run of the program has a process group of its own, and nothing of a
// group outlives its run: what the program leaves behind is stopped (TERM,
// then KILL after --grace) before the next start, and if crashloop itself
// is killed, the kernel (on Linux) and crashloop's keeper process kill the
// group. HUP, USR1, USR2, WINCH and QUIT are forwarded to the group; the
// first INT or TERM stops it gracefully and ends crashloop with the
// program's status, a second one kills it at once. The program gets
// NOTIFY_SOCKET, systemd's notify protocol: READY=1 marks a run healthy,
// STATUS=... is logged, and with --watchdog a program that stops sending
// WATCHDOG=1 is stopped (ABRT, then KILL) and counted as a failure. A park
// ends crashloop with status 86, or, with --on-park wait, leaves it up with
// the program stopped and --metrics-addr served until a resume starts the
// program again.
//
// Run crashloop --help for the flags and the exit statuses, and see
// docs/cli.md in the repository for the full reference.
package main

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	// crashloop's binary also plays two parts of its own (see launcher and
	// keeper), chosen by the name it is started under.
	switch filepath.Base(os.Args[0]) {
	case shimName:
		shimMain()
	case keeperName:
		os.Exit(keeperMain())
	}
	os.Exit(runCLI(os.Args[1:], os.Stdout, os.Stderr))
}

// runCLI runs crashloop with args and returns its exit status.
func runCLI(args []string, stdout, stderr io.Writer) int {
	out := &output{stderr: stderr}
	code, err := dispatch(args, stdout, out)
	if err != nil {
		var f *failure
		if errors.As(err, &f) {
			code = f.code
		} else if code == 0 {
			code = exitError
		}
		out.print(slog.LevelError, err.Error())
	}
	return code
}

// dispatch runs the subcommand that args name.
func dispatch(args []string, stdout io.Writer, out *output) (int, error) {
	if len(args) > 0 {
		switch args[0] {
		case "status":
			return 0, statusCmd(args[1:], stdout)
		case "resume":
			return 0, resumeCmd(args[1:], stdout)
		case "replay":
			return 0, replayCmd(args[1:], stdout)
		case "simulate":
			return 0, simulateCmd(args[1:], stdout)
		case "tune":
			return 0, tuneCmd(args[1:], stdout, out.stderr)
		case "plan":
			return 0, planCmd(args[1:], stdout)
		case "help":
			return 0, helpCmd(args[1:], stdout)
		}
		if !strings.HasPrefix(args[0], "-") {
			return 0, unknownCommand(args[0])
		}
	}
	return superviseCmd(args, stdout, out)
}
