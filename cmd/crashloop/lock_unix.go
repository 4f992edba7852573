//go:build unix

package main

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock on path (created if missing)
// and returns its release. The lock is released by the kernel if the
// process dies, so a crashed crashloop never wedges the state file.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
