// Command helper is the program that crashloop's tests supervise. It runs
// its arguments as steps, in order:
//
//	record=FILE    append "PID PGID" to FILE
//	env=FILE       write the environment, then PID=, PGID= and PWD=, to FILE
//	notify=MSG     send MSG ("\n" for a newline) to $NOTIFY_SOCKET
//	ping=DURATION  send WATCHDOG=1 every 10ms for DURATION
//	burst=N        send N datagrams that crashloop ignores, as fast as it can
//	signals=FILE   from now on, append "PID NAME" to FILE for every HUP, INT,
//	               QUIT, USR1, USR2, WINCH, TERM and ABRT, and survive it
//	onterm=S1,S2   from now on, run steps S1, S2... on TERM, and survive it
//	               (unless a step exits)
//	ignore=SIG     ignore SIG (TERM, ABRT...), as do processes spawned later
//	sigign=SIG     ignore SIG with rt_sigaction, even one the Go runtime
//	               keeps for itself (SEGV, ILL...) (Linux)
//	block=SIG      block SIG in the signal mask that exec keeps (Linux)
//	exec           replace the helper with the rest of the arguments
//	spawn=S1+S2    start a helper running steps S1, S2... in this process
//	               group, and go on once it waits, hangs or exits
//	touch=FILE     create FILE
//	wait=FILE      wait until FILE exists
//	kill=SIG       send SIG to itself
//	exit=N         exit with status N
//	alloc=BYTES    allocate BYTES, touch every page and keep it
//	hang           sleep until killed
//
// A SIG is a name without SIG, or a number (33). As a Go program, it exits
// with status 2 and a goroutine dump on ABRT. It is built by the tests
// (TestMain), not by go build ./...
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// recorded are the signals that the signals step records.
var recorded = []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGTERM, syscall.SIGABRT}

// signalNum returns the signal that name, such as TERM or 33, names.
func signalNum(name string) (syscall.Signal, error) {
	if sig := unix.SignalNum("SIG" + name); sig != 0 {
		return sig, nil
	}
	if n, err := strconv.Atoi(name); err == nil && n >= 1 && n <= 64 {
		return syscall.Signal(n), nil
	}
	return 0, fmt.Errorf("no signal is named %s", name)
}

// allocated keeps what the alloc step allocated.
var allocated [][]byte

// spawned is the pipe to the helper that spawned this one, nil if none.
var spawned *os.File

func main() {
	if os.Getenv("HELPER_SPAWNED") == "1" {
		spawned = os.NewFile(3, "spawned")
		os.Unsetenv("HELPER_SPAWNED")
	}
	for i, step := range os.Args[1:] {
		if step == "exec" {
			argv := os.Args[i+2:]
			err := syscall.Exec(argv[0], argv, os.Environ())
			fmt.Fprintf(os.Stderr, "helper: exec: %v\n", err)
			os.Exit(99)
		}
		name, arg, _ := strings.Cut(step, "=")
		if err := do(name, arg); err != nil {
			fmt.Fprintf(os.Stderr, "helper: %s: %v\n", step, err)
			os.Exit(99)
		}
	}
}

func do(name, arg string) error {
	switch name {
	case "record":
		return appendLine(arg, fmt.Sprintf("%d %d", os.Getpid(), syscall.Getpgrp()))
	case "env":
		wd, _ := os.Getwd()
		env := append(os.Environ(), "PID="+strconv.Itoa(os.Getpid()), "PGID="+strconv.Itoa(syscall.Getpgrp()), "PWD="+wd)
		return os.WriteFile(arg, []byte(strings.Join(env, "\n")+"\n"), 0o644)
	case "notify":
		return notify(strings.ReplaceAll(arg, `\n`, "\n"))
	case "ping":
		d, err := time.ParseDuration(arg)
		if err != nil {
			return err
		}
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if err := notify("WATCHDOG=1"); err != nil {
				return err
			}
		}
	case "burst":
		n, err := strconv.Atoi(arg)
		if err != nil {
			return err
		}
		for range n {
			if err := notify("X_FILLER=1"); err != nil {
				return err
			}
		}
	case "signals":
		c := make(chan os.Signal, 16)
		signal.Notify(c, recorded...)
		go func() {
			for s := range c {
				name := strings.TrimPrefix(unix.SignalName(s.(syscall.Signal)), "SIG")
				_ = appendLine(arg, fmt.Sprintf("%d %s", os.Getpid(), name))
			}
		}()
	case "onterm":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		go func() {
			for range c {
				for _, step := range strings.Split(arg, ",") {
					name, arg, _ := strings.Cut(step, "=")
					if err := do(name, arg); err != nil {
						fmt.Fprintf(os.Stderr, "helper: %s: %v\n", step, err)
						os.Exit(99)
					}
				}
			}
		}()
	case "ignore":
		sig, err := signalNum(arg)
		if err != nil {
			return err
		}
		signal.Ignore(sig)
	case "sigign", "block":
		sig, err := signalNum(arg)
		if err != nil {
			return err
		}
		if name == "block" {
			return block(sig)
		}
		return ignoreRaw(sig)
	case "spawn":
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		defer r.Close()
		cmd := exec.Command(os.Args[0], strings.Split(arg, "+")...)
		cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = os.Stdout, os.Stderr, []*os.File{w}
		cmd.Env = append(os.Environ(), "HELPER_SPAWNED=1")
		err = cmd.Start()
		w.Close()
		if err != nil {
			return err
		}
		_, err = io.ReadAll(r) // until it hangs or exits
		return err
	case "touch":
		return os.WriteFile(arg, nil, 0o644)
	case "wait":
		spawned.Close() // the helper that spawned this one goes on
		for {
			if _, err := os.Stat(arg); err == nil {
				return nil
			}
			time.Sleep(5 * time.Millisecond)
		}
	case "kill":
		sig, err := signalNum(arg)
		if err != nil {
			return err
		}
		return syscall.Kill(os.Getpid(), sig)
	case "exit":
		code, err := strconv.Atoi(arg)
		if err != nil {
			return err
		}
		os.Exit(code)
	case "alloc":
		n, err := strconv.Atoi(arg)
		if err != nil {
			return err
		}
		held := make([][]byte, 0, n>>20+1)
		for n > 0 { // touch every page, a MiB at a time, and keep it
			b := make([]byte, min(n, 1<<20))
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			held = append(held, b)
			n -= len(b)
		}
		allocated = held
	case "hang":
		spawned.Close() // the helper that spawned this one goes on
		for {
			time.Sleep(time.Hour)
		}
	default:
		return fmt.Errorf("unknown step")
	}
	return nil
}

func notify(msg string) error {
	conn, err := net.Dial("unixgram", os.Getenv("NOTIFY_SOCKET"))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.Write([]byte(msg))
	return err
}

func appendLine(file, line string) error {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(line + "\n")
	return err
}
