//go:build unix

package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// shimName is the argv[0] under which crashloop's binary runs as the exec
// shim: the first process of every run, which becomes the program.
const shimName = "crashloop-exec"

// launcher starts the program of each run in a process group of its own.
//
// It does not execute the program directly but crashloop's own binary as a
// shim, in the new group: the shim waits until crashloop has told the keeper
// about the group, so not even a program that forks at once can escape the
// keeper; it sets WATCHDOG_PID to its own pid, which the program keeps; it
// looks the program up with the program's PATH and in its --chdir folder;
// it restores the signal state crashloop started with (sigState), which
// its own Go runtime changed; and it replaces itself with the program.
// When crashloop runs in the foreground of a terminal, the group is given
// the terminal before the program starts. When the program cannot be
// executed, the shim reports why over a pipe that a successful exec closes.
type launcher struct {
	reaper *reaper
	keeper *keeper
	self   string // runs crashloop's binary
	log    *slog.Logger
	key    string
	sigs   sigState  // the program's signal state
	term   *terminal // nil: crashloop is not in the foreground of a terminal
	// tailLines and tailBytes bound the stderr tail of each run; either
	// 0: the program gets crashloop's stderr itself, and no tail is kept.
	tailLines, tailBytes int
}

// start starts argv with env in dir. It returns a *failure with status 127
// or 126 when the program cannot be found or executed; the group has ended
// by then. The program's stderr goes through a copy that keeps its tail
// (the group's stderr) unless the tail is off.
func (l *launcher) start(argv, env []string, dir string) (*group, error) {
	var stderr *stderrCopy
	errFd := uintptr(2)
	if l.tailLines > 0 && l.tailBytes > 0 {
		var err error
		if stderr, err = copyStderr(os.Stderr, l.tailLines, l.tailBytes); err != nil {
			return nil, err
		}
		defer stderr.w.Close() // the program has its own copy once started
		errFd = stderr.w.Fd()
	}
	goR, goW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer goW.Close()
	reportR, reportW, err := os.Pipe()
	if err != nil {
		goR.Close()
		return nil, err
	}
	defer reportR.Close()
	attr := &syscall.ProcAttr{Dir: dir, Env: env, Files: []uintptr{0, 1, errFd, goR.Fd(), reportW.Fd()}, Sys: leaderAttr()}
	pid, exited, err := l.reaper.start(l.self, append([]string{shimName, l.sigs.String()}, argv...), attr)
	goR.Close()
	reportW.Close()
	if err != nil {
		return nil, err
	}
	g := &group{pgid: pid, exited: exited, log: l.log, key: l.key, stderr: stderr}
	l.keeper.add(pid)
	if err := l.term.give(pid); err != nil {
		l.log.Warn("cannot give the terminal to the program's process group: "+err.Error(), "key", l.key, "pid", pid)
	}
	_, _ = goW.Write([]byte{1}) // fails only if the shim was killed: its exit tells
	goW.Close()
	report, _ := io.ReadAll(reportR) // ends when the shim execs or exits
	if len(report) == 0 {
		return g, nil
	}
	<-g.exited // the shim was alone in its group: the group has ended
	l.takeTerminal()
	l.keeper.remove(pid)
	code, msg, _ := strings.Cut(string(report), " ")
	if code == strconv.Itoa(exitNotFound) {
		return nil, fail(exitNotFound, "%s", msg)
	}
	return nil, fail(exitCannotExec, "%s", msg)
}

// takeTerminal makes crashloop's group the terminal's foreground group
// again, once a run's program has exited.
func (l *launcher) takeTerminal() {
	if err := l.term.takeBack(); err != nil {
		l.log.Warn("cannot take the terminal back from the program's process group: "+err.Error(), "key", l.key)
	}
}

// end tells the keeper that the group has ended.
func (l *launcher) end(g *group) { l.keeper.remove(g.pgid) }

// shimMain is the shim (see launcher). Its arguments are the signal state
// to restore (sigState.String) and the program's argv; file 3 delivers one
// byte once the group is registered, file 4 takes the report of a failed
// exec.
func shimMain() {
	setProcessName("crashloop") // until it execs the program, whose name it then takes
	var b [1]byte
	if n, _ := os.NewFile(3, "go").Read(b[:]); n != 1 {
		os.Exit(exitError) // crashloop is gone
	}
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	if _, ok := os.LookupEnv("WATCHDOG_USEC"); ok {
		os.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	}
	sigs, err := parseSigState(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.NewFile(4, "report"), "%d %v", exitError, err)
		os.Exit(exitError)
	}
	code, msg := execute(os.Args[2:], sigs)
	fmt.Fprintf(os.NewFile(4, "report"), "%d %s", code, msg)
	os.Exit(code)
}

// execute replaces the process with argv, as a shell runs a command, with
// the signal state sigs; it returns only when that fails, with the shell's
// status and message.
func execute(argv []string, sigs sigState) (int, string) {
	path := argv[0]
	if !strings.Contains(path, "/") {
		found, err := exec.LookPath(path)
		if err != nil && !errors.Is(err, exec.ErrDot) {
			return exitNotFound, path + ": command not found"
		}
		path = found
	}
	if err := sigs.restore(); err != nil {
		return exitError, "restore the signal state: " + err.Error()
	}
	err := syscall.Exec(path, argv, os.Environ())
	if errors.Is(err, syscall.ENOENT) {
		return exitNotFound, argv[0] + ": " + err.Error()
	}
	return exitCannotExec, argv[0] + ": " + err.Error()
}
