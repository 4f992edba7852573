//go:build !linux

package main

import (
	"errors"
	"syscall"
)

// ignoreRaw and block are Linux's (see sig_linux.go).
func ignoreRaw(syscall.Signal) error { return errors.New("sigign is Linux only") }
func block(syscall.Signal) error     { return errors.New("block is Linux only") }
