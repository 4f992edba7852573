//go:build unix

package main

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockFile takes an exclusive flock on path, creating the file if needed,
// and waits for it. The kernel releases it if crashloop dies, so a killed
// crashloop never wedges the file.
func lockFile(path string) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := flock(f, unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// tryLockPID takes an exclusive flock on path, creating the file if needed,
// without waiting, and writes crashloop's pid in it. When another process
// holds the lock it returns that process's pid, as the file says (0 if it
// says none yet), and no release.
func tryLockPID(path string) (release func(), holder int, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, err
	}
	if err := flock(f, unix.LOCK_EX|unix.LOCK_NB); err == unix.EWOULDBLOCK {
		data := make([]byte, 32)
		n, _ := f.ReadAt(data, 0)
		f.Close()
		pid, _ := strconv.Atoi(strings.TrimSpace(string(data[:n])))
		return nil, pid, nil
	} else if err != nil {
		f.Close()
		return nil, 0, err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, 0, err
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, 0, err
	}
	return func() { f.Close() }, 0, nil
}

// flock calls flock(2) on f, again when a signal interrupts it.
func flock(f *os.File, how int) error {
	for {
		if err := unix.Flock(int(f.Fd()), how); err != unix.EINTR {
			return err
		}
	}
}
