package main

import (
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ignoreRaw sets sig to SIG_IGN with rt_sigaction itself: signal.Ignore
// leaves the signals the Go runtime needs (SEGV, ILL...) alone. The struct
// is the kernel's on amd64 and arm64; only the handler is set.
func ignoreRaw(sig syscall.Signal) error {
	sa := struct{ handler, flags, restorer, mask uintptr }{handler: 1} // SIG_IGN
	if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&sa)), 0, 8, 0, 0); e != 0 {
		return e
	}
	return nil
}

// block blocks sig on this thread, which stays this goroutine's: the exec
// step keeps the mask.
func block(sig syscall.Signal) error {
	runtime.LockOSThread()
	var set unix.Sigset_t
	set.Val[(sig-1)/64] = 1 << ((sig - 1) % 64)
	return unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil)
}
