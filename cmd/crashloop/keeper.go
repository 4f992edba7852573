//go:build unix

package main

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
)

// keeperName is the argv[0] under which crashloop's binary runs as its
// keeper (see keeper).
const keeperName = "crashloop-keeper"

// keeper is crashloop's line to its keeper: a second, small process, in a
// process group of its own, that cleans up after crashloop if crashloop is
// killed, even by SIGKILL, when crashloop cannot. crashloop tells it each
// group it starts ("+PGID") before the program runs, and each group it has
// seen end ("-PGID"), over a pipe. When the pipe closes (crashloop exited,
// however it died), the keeper sends KILL to every group still listed,
// removes the notify socket's folder, and exits.
type keeper struct {
	log    *slog.Logger
	exited <-chan syscall.WaitStatus

	mu     sync.Mutex
	w      *os.File
	broken bool // a write failed: the keeper is gone (said once)
}

// startKeeper starts the keeper; notifyDir is the folder it removes.
func startKeeper(r *reaper, self, notifyDir string, log *slog.Logger) (*keeper, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		pw.Close()
		return nil, err
	}
	defer null.Close()
	attr := &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{pr.Fd(), null.Fd(), null.Fd()}, Sys: &syscall.SysProcAttr{Setpgid: true}}
	_, exited, err := r.start(self, []string{keeperName, notifyDir}, attr)
	if err != nil {
		pw.Close()
		return nil, fmt.Errorf("start the keeper process: %w", err)
	}
	return &keeper{log: log, exited: exited, w: pw}, nil
}

// add lists a group that is about to run.
func (k *keeper) add(pgid int) { k.send('+', pgid) }

// remove unlists a group that has ended.
func (k *keeper) remove(pgid int) { k.send('-', pgid) }

func (k *keeper) send(op byte, pgid int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, err := fmt.Fprintf(k.w, "%c%d\n", op, pgid); err != nil && !k.broken {
		k.broken = true
		k.log.Warn("the keeper process is gone: if crashloop is killed, processes of the program's group may be left running", "error", err.Error())
	}
}

// close lets the keeper exit, with nothing listed, and waits for it.
func (k *keeper) close() {
	k.w.Close()
	<-k.exited
}

// keeperMain is the keeper process: it reads the list of live groups until
// crashloop closes the pipe, then kills what is still listed.
func keeperMain() int {
	setProcessName("crashloop")
	// The keeper ends when crashloop does, not when a terminal or a service
	// manager signals crashloop's group or session.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH)
	live := map[int]bool{}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		line := in.Text()
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 { // never kill(-1), every process
			continue
		}
		if line[0] == '+' {
			live[pgid] = true
		} else {
			delete(live, pgid)
		}
	}
	// One KILL reaches every process of a group at once, including one
	// being forked while it is sent.
	for pgid := range live {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	if len(os.Args) > 1 && os.Args[1] != "" {
		_ = os.RemoveAll(os.Args[1])
	}
	return 0
}
