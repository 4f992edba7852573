//go:build linux

package main

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// setProcessName sets the name that ps, top and pgrep show for this
// process (its comm, at most 15 bytes): the keeper and the exec shim run
// crashloop's binary as /proc/self/exe, which would otherwise show as
// "exe". A failure leaves the name as it was.
func setProcessName(name string) {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return
	}
	_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(p)), 0, 0, 0)
}
