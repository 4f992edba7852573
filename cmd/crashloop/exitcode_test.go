//go:build linux

package main

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestExitStatus: a wait status becomes the status a shell reports and its
// description; a signal is named as kill -l names it, or by its number when
// it has no name. (The wait statuses are built as Linux encodes them: the
// exit status in bits 8-15, or the signal in bits 0-6.)
func TestExitStatus(t *testing.T) {
	cases := []struct {
		ws   syscall.WaitStatus
		code int
		desc string
	}{
		{0, 0, "exited with status 0"},
		{1 << 8, 1, "exited with status 1"},
		{255 << 8, 255, "exited with status 255"},
		{syscall.WaitStatus(syscall.SIGTERM), 143, "killed by signal TERM"},
		{syscall.WaitStatus(syscall.SIGKILL), 137, "killed by signal KILL"},
		{syscall.WaitStatus(syscall.SIGABRT), 134, "killed by signal ABRT"},
		{syscall.WaitStatus(syscall.SIGIO), 157, "killed by signal IO"},
		{syscall.WaitStatus(syscall.SIGSYS), 159, "killed by signal SYS"},
		{16, 144, "killed by signal STKFLT"},
		{30, 158, "killed by signal PWR"},
		{34, 162, "killed by signal 34"}, // SIGRTMIN: no name
		{64, 192, "killed by signal 64"},
	}
	for _, tc := range cases {
		code, desc := exitStatus(tc.ws)
		assert.Equal(t, tc.code, code, "status of %#x", int(tc.ws))
		assert.Equal(t, tc.desc, desc, "description of %#x", int(tc.ws))
	}
}
