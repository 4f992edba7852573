package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sigState is the signal state crashloop was started with, which the
// program gets too, as under tini: the signals ignored and the signal mask,
// as bit masks (bit N-1 for signal N, as /proc/PID/status shows them).
//
// Before main runs, the Go runtime replaces the disposition of most
// signals with its own handler, and unblocks on every thread the signals
// it needs, keeping what it replaced to itself; glibc's first
// pthread_create replaces the disposition of signal 33. With cgo, a C
// constructor reads the whole state before either (inherit_cgo_linux.go).
// Without cgo (CGO_ENABLED=0), only what the runtime left can be seen, in
// /proc/self/status: the ignored HUP, INT, TSTP, TTIN, TTOU, CONT and
// signals 32 and 34, and the blocked signals other than HUP, INT, QUIT,
// ILL, TRAP, ABRT, BUS, FPE, SEGV, TERM, STKFLT, CHLD, PROF, URG, SYS and
// signals 32 to 34: an ignored PIPE or a blocked TERM, say, then reach the
// program as defaults.
type sigState struct{ ignored, blocked uint64 }

// readSigState returns the signal state the process started with (see
// sigState), before crashloop changes it: the constructor's when it ran,
// what the Go runtime left otherwise. That is read from this thread's
// status, locked to it: /proc/self/status shows the main thread's mask,
// which is every signal while the runtime clones a thread there (the
// runtime blocks them around clone), so a read that raced a new thread
// handed the program almost every signal blocked.
func readSigState() sigState {
	if st, ok := startSigState(); ok {
		return st
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var st sigState
	st.ignored, _ = statusMask("/proc/thread-self/status", "SigIgn")
	st.blocked, _ = statusMask("/proc/thread-self/status", "SigBlk")
	return st
}

// statusMask reads a signal mask, such as SigBlk, from a /proc status file.
func statusMask(file, field string) (uint64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", file, field)
}

// String encodes the state for the shim: "IGNORED,BLOCKED" in hex.
func (st sigState) String() string { return fmt.Sprintf("%x,%x", st.ignored, st.blocked) }

// parseSigState decodes String's form.
func parseSigState(v string) (sigState, error) {
	ign, blk, ok := strings.Cut(v, ",")
	i, err1 := strconv.ParseUint(ign, 16, 64)
	b, err2 := strconv.ParseUint(blk, 16, 64)
	if !ok || err1 != nil || err2 != nil {
		return sigState{}, fmt.Errorf("bad signal state %q", v)
	}
	return sigState{ignored: i, blocked: b}, nil
}

// restore gives the calling thread, which it locks to the goroutine for
// the exec that follows, the signal state st: the signals ignored, and the
// mask, whatever the Go runtime does with those signals meanwhile.
func (st sigState) restore() error {
	runtime.LockOSThread()
	for sig := 1; sig <= 64; sig++ {
		if st.ignored&(1<<(sig-1)) != 0 {
			if err := ignoreSignal(sig); err != nil {
				return fmt.Errorf("ignore %s: %w", unix.SignalName(syscall.Signal(sig)), err)
			}
		}
	}
	set := sigset(st.blocked)
	return unix.PthreadSigmask(unix.SIG_SETMASK, &set, nil)
}

// ignoreSignal sets sig to SIG_IGN with rt_sigaction itself: signal.Ignore
// leaves alone the signals the Go runtime keeps for itself (SEGV, ILL,
// 32 to 34...), and libc's sigaction its own. The runtime is not told,
// which is of no matter to the shim, which execs next. The kernel's struct
// sigaction starts with the handler, but on MIPS, where the flags come
// first and there are 128 signals; the flags and the mask stay zero.
func ignoreSignal(sig int) error {
	var act [8]uintptr // larger than the kernel's struct on every architecture
	handler, setsize := 0, 8
	if strings.HasPrefix(runtime.GOARCH, "mips") {
		handler, setsize = 1, 16
	}
	act[handler] = 1 // SIG_IGN
	if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, uintptr(setsize), 0, 0); e != 0 {
		return e
	}
	return nil
}

// sigset returns the signal set of mask (bit N-1 for signal N; Linux has
// 64 signals), whatever the width of the set's words on this machine.
func sigset(mask uint64) unix.Sigset_t {
	var set unix.Sigset_t
	const bits = uint(unsafe.Sizeof(set.Val[0]) * 8)
	for n := range uint(64) {
		if mask&(1<<n) != 0 {
			set.Val[n/bits] |= 1 << (n % bits)
		}
	}
	return set
}

// terminal is the terminal crashloop runs in the foreground of: each run's
// process group is given it, so that an interactive program can read it,
// and crashloop takes it back between runs.
type terminal struct {
	fd   int
	pgrp int // crashloop's own process group
}

// foregroundTerminal returns crashloop's terminal when its standard input
// is one and crashloop's process group is its foreground group; nil
// otherwise.
func foregroundTerminal() *terminal {
	fg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	if err != nil || fg != unix.Getpgrp() {
		return nil
	}
	return &terminal{fd: 0, pgrp: fg}
}

// give makes pgid the terminal's foreground process group. Doing so from
// the background would stop crashloop with SIGTTOU: the signal is blocked
// meanwhile on the calling thread, which makes the kernel allow it.
func (t *terminal) give(pgid int) error {
	if t == nil {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.Sigset_t
	ttou := sigset(1 << (unix.SIGTTOU - 1))
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &ttou, &old); err != nil {
		return err
	}
	err := unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, pgid)
	if e := unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil); err == nil {
		err = e
	}
	return err
}

// takeBack makes crashloop's group the foreground group again.
func (t *terminal) takeBack() error {
	if t == nil {
		return nil
	}
	return t.give(t.pgrp)
}
