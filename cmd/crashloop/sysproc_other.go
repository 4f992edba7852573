//go:build !linux

package main

import "syscall"

// childAttr has no parent-death signal off Linux; crashloop still forwards
// signals and waits for its child on every exit path it controls.
func childAttr() *syscall.SysProcAttr { return nil }
