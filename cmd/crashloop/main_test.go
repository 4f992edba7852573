//go:build unix

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The tests run the built command against real programs. TestMain builds
// crashloop (with the race detector when the tests have it) and the helper
// program of testdata/helper once, into a temporary folder.
var (
	binary string // crashloop
	helper string // testdata/helper
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "crashloop-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil { // TestStatus runs crashloop as another user
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binary, helper = filepath.Join(dir, "crashloop"), filepath.Join(dir, "helper")
	race := []string{}
	if raceEnabled {
		race = []string{"-race"}
	}
	for _, b := range [][]string{append(append([]string{"build"}, race...), "-o", binary, "."), {"build", "-o", helper, "./testdata/helper"}} {
		cmd := exec.Command("go", b...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "go", strings.Join(b, " "), err)
			return 1
		}
	}
	unignoreInherited()
	return m.Run()
}

// unignoreInherited makes the signals that the test binary was started
// with ignored and that Go keeps ignored (HUP under nohup, INT in a
// background job) caught by it instead, so that the processes the tests
// start get them at their defaults, as from a terminal: the tests of the
// signal state a program gets (TestTheProgramGetsTheSignalStateCrashloopGot)
// compare it exactly. The handler drops them, as ignoring them did.
func unignoreInherited() {
	sink := make(chan os.Signal, 1)
	for _, sig := range []os.Signal{syscall.SIGHUP, syscall.SIGINT} {
		if signal.Ignored(sig) {
			signal.Notify(sink, sig)
		}
	}
}

// fast are flags with millisecond backoffs: the tests assert counts and
// statuses, not durations.
var fast = []string{"--initial-backoff=1ms", "--max-backoff=3ms", "--window=10s", "--healthy-after=10s", "--grace=2s"}

// with returns fast followed by args.
func with(args ...string) []string { return append(append([]string(nil), fast...), args...) }

// command returns crashloop with args. A data race in crashloop ends it at
// once (exit status 66, "DATA RACE" on stderr), and it exits without the
// race detector's pause of a second. Should a process crashloop left behind
// hold its stdout or stderr open, Wait returns all the same.
func command(args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "GORACE=halt_on_error=1 atexit_sleep_ms=0")
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

type result struct {
	code           int
	stdout, stderr string
}

// runCL runs crashloop to completion.
func runCL(t *testing.T, args ...string) result {
	t.Helper()
	return runCmd(t, command(args...))
}

func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{code, out.String(), errb.String()}
}

// buffer is a bytes.Buffer safe for a writing process and a reading test.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// bg is a crashloop running in the background.
type bg struct {
	cmd    *exec.Cmd
	stdout *buffer
	stderr *buffer
	done   chan struct{}
	code   int
}

// startCL starts crashloop; the test's cleanup kills it if it still runs.
func startCL(t *testing.T, args ...string) *bg {
	t.Helper()
	c := &bg{cmd: command(args...), stdout: &buffer{}, stderr: &buffer{}, done: make(chan struct{})}
	c.cmd.Stdout, c.cmd.Stderr = c.stdout, c.stderr
	require.NoError(t, c.cmd.Start())
	go func() {
		defer close(c.done)
		err := c.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			c.code = ee.ExitCode()
		}
	}()
	t.Cleanup(func() {
		if !c.exited() {
			_ = c.cmd.Process.Signal(syscall.SIGKILL)
			<-c.done
		}
	})
	return c
}

func (c *bg) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *bg) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(sig))
}

// wait waits for crashloop to exit and returns its status.
func (c *bg) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-c.done:
		return c.code
	case <-time.After(patience):
		t.Fatalf("crashloop did not exit within %v; stderr:\n%s", patience, c.stderr.String())
		return 0
	}
}

// patience bounds every wait for a condition: far longer than any of them
// takes, so that a slow machine never fails a test.
const patience = 30 * time.Second

// tick is how often require.Eventually and EventuallyWithT check a
// condition that only a poll can see (a file another process writes, the
// process table).
const tick = 2 * time.Millisecond

// tb is what the helpers need of a test: a *testing.T, or the
// *assert.CollectT of a condition that require.EventuallyWithT checks.
type tb interface {
	require.TestingT
	Helper()
}

// lines returns the lines of file, none if it does not exist.
func lines(t tb, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// exists reports whether file exists.
func exists(file string) bool {
	_, err := os.Stat(file)
	return err == nil
}

// records returns the pids and process groups that "record=FILE" steps
// wrote.
func records(t *testing.T, file string) (pids, pgids []int) {
	t.Helper()
	for _, l := range lines(t, file) {
		var pid, pgid int
		_, err := fmt.Sscan(l, &pid, &pgid)
		require.NoError(t, err, l)
		pids, pgids = append(pids, pid), append(pgids, pgid)
	}
	return pids, pgids
}

// proc is a line of the process table.
type proc struct {
	pid, ppid, pgid int
	state           byte // R, S, D, Z...
	cmdline         string
}

// procs reads the process table from /proc.
func procs(t tb) []proc {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var ps []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil { // it has exited meanwhile
			continue
		}
		// "PID (COMM) STATE PPID PGRP ...", where COMM may hold anything.
		rest := string(stat[bytes.LastIndexByte(stat, ')')+2:])
		f := strings.Fields(rest)
		ppid, _ := strconv.Atoi(f[1])
		pgid, _ := strconv.Atoi(f[2])
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		ps = append(ps, proc{pid: pid, ppid: ppid, pgid: pgid, state: f[0][0], cmdline: strings.ReplaceAll(string(cmdline), "\x00", " ")})
	}
	return ps
}

// alive returns the processes of process group pgid that have not exited
// (zombies have: they only wait for their parent to read their status).
func alive(t tb, pgid int) []proc {
	t.Helper()
	var in []proc
	for _, p := range procs(t) {
		if p.pgid == pgid && p.state != 'Z' && p.state != 'X' {
			in = append(in, p)
		}
	}
	return in
}

// recordFile returns a file in dir for the helper's record steps. When the
// test ends, what is left of the process groups recorded in it is killed:
// nothing, unless the test failed.
func recordFile(t *testing.T, dir string) string {
	t.Helper()
	file := filepath.Join(dir, "pids")
	t.Cleanup(func() {
		if !t.Failed() { // the groups have ended; their ids may be another's now
			return
		}
		_, pgids := records(t, file)
		for _, pgid := range pgids {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	})
	return file
}
